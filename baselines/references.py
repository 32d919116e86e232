"""Clairvoyant references and a lower bound: what the policies are measured against.

Each reference is named for what it knows, and none is a deployable policy:

* ``BestFixedSet`` knows the whole episode in hindsight (future power and jitter) and plays the
  one site set that reaches the target first when requested every round.
* ``BeamPlanner`` knows the same and searches per-round plans with a beam: the best plan it
  finds that changes sets as power moves. It starts from the complete episodes of PowerTrip,
  MyopicOptimal and the best fixed set, so it is never slower than any of them.
* ``lower_bound_h`` (``powertrip_env.baselines.lower_bound``) is no policy at all: a relaxation
  of the time to accuracy that no policy can beat, whatever it knows.
* On the carbon tasks the objective is the carbon cost: ``baselines/carbon_references.py``
  holds the same searches scored on it, and ``baselines/carbon_bound.py`` its bound.

The gap between ``BestFixedSet`` and ``BeamPlanner`` is a scenario's *sequential headroom*: how
much a policy can gain by changing sets during an episode rather than choosing one set well.
Near 1, the scenario is a one-shot subset choice (``powertrip_env.harness.reports.headroom``).

They read the future through ``env.unwrapped.clairvoyant()`` (``powertrip_env.clairvoyant``),
which plays candidate plans as a batch of episodes on the true trace with the episode's own
jitter, so an episode's references cost a few hundred batched rounds, and through
``play_on_copy``, which plays a deployable policy on a copy of the episode.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.baselines.base import MAX_EXHAUSTIVE_SITES, Policy, subset_matrix
from powertrip_env.baselines.policies import (
    MyopicOptimal,
    PowerTrip,
)  # the plans BeamPlanner starts from
from powertrip_env.units import h_to_s, s_to_h
from powertrip_env.view import DecisionView


@dataclass
class Rollout:
    """Outcome of running plans to the end of the episode: per plan, TTA and its rounds."""

    tta_h: np.ndarray  # (M,) elapsed hours at success, the time budget on failure
    success: np.ndarray  # (M,) bool
    rounds: np.ndarray  # (M,) rounds played


def rollout_fixed(env: Any, masks: np.ndarray) -> Rollout:
    """Play each of the (M, N) ``masks`` every round from the env's current state to the end.

    Clairvoyant: uses the true power trace and the episode's own jitter, so a plan's outcome
    here is exactly what the env would report for it.
    """
    out = env.clairvoyant().simulate(masks)
    return Rollout(out.tta_h, out.success, out.state.rounds)


@dataclass(frozen=True)
class PolicyRun:
    """A complete plan: the set requested in each round to the episode's end, and its outcome."""

    name: str  # who made it: a policy's name, or "BestFixedSet"
    masks: np.ndarray  # (R, N) bool, one row per round played from where the run started
    tta_h: float  # as the env reports it: elapsed hours at success, the time budget on failure
    success: bool
    carbon_kg: float = float("nan")  # the episode's grid carbon (NaN: not played to the end)


def _time_cost(params: Any, out: Any) -> np.ndarray:
    """The time objective of plans played to the end: TTA (h), inf for a plan that fails."""
    return np.where(out.success, out.tta_h, np.inf)


def play_on_copy(env: Any, policy: Policy) -> PolicyRun:
    """CLAIRVOYANT: ``policy`` played from the episode's current state to its end, on a copy.

    The copy is ``env.unwrapped.fork()``: same state, jitter and power trace, so it runs exactly
    the rounds the episode would run if ``policy`` played it, and its masks, replayed in the
    episode, reproduce its time to accuracy; the episode itself is unchanged.

    Only the copy's stepping looks ahead; the policy sees what it always sees, the copy's
    ``decision_view`` and ``predict_round`` (and its observation and info after each round;
    before the first round, ``None`` and ``{}``: the policies played here read the env, as
    ``Policy`` asks). ``policy`` is reset on the copy and left bound to it.
    """
    twin = env.unwrapped.fork()
    policy.reset(twin)
    obs: Any = None
    info: dict[str, Any] = {}
    masks = []
    while True:
        mask = np.asarray(policy.act(obs, info))
        masks.append(mask != 0)
        obs, _, terminated, truncated, info = twin.step(mask)
        if terminated or truncated:
            return PolicyRun(
                policy.name,
                np.array(masks),
                float(info["tta_h"]),
                bool(terminated),
                float(info.get("carbon_kg", float("nan"))),
            )


def best_fixed_set(env: Any) -> PolicyRun:
    """The fixed set that reaches the target first from the env's current state, as a plan.

    Every candidate (``fixed_set_candidates``) is played to the end on the true trace with the
    episode's jitter; ties go to fewer sites, then the lower candidate index. The plan repeats
    the set for every round its episode lasts.
    """
    masks = fixed_set_candidates(env)
    out = rollout_fixed(env, masks)
    best = int(np.lexsort((np.arange(masks.shape[0]), masks.sum(axis=1), out.tta_h))[0])
    mask, tta, success, rounds = masks[best], out.tta_h[best], out.success[best], out.rounds[best]
    if env.n_sites > MAX_EXHAUSTIVE_SITES:  # not every set was tried: climb from the best
        mask, tta, success, rounds = _climb_fixed_set(env, mask, tta, success, rounds)
    rounds = max(int(rounds) - env.decision_view().rounds, 1)
    plan = np.repeat(mask[None, :], rounds, axis=0)
    return PolicyRun("BestFixedSet", plan, float(tta), bool(success))


def _climb_fixed_set(
    env: Any, mask: np.ndarray, tta: float, success: bool, rounds: int, steps: int = 50
) -> tuple[np.ndarray, float, bool, int]:
    """The fixed set improved by adding, removing or swapping one site while that is strictly
    faster (above 16 sites, where the candidates are rankings' prefixes, not every set)."""
    n = mask.shape[0]
    for _ in range(steps):
        inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
        flips = np.repeat(mask[None, :], n, axis=0)
        flips[np.arange(n), np.arange(n)] ^= True
        swaps = np.repeat(mask[None, :], inside.size * outside.size, axis=0)
        rows = np.arange(swaps.shape[0])
        swaps[rows, np.repeat(inside, outside.size)] = False
        swaps[rows, np.tile(outside, inside.size)] = True
        near = np.concatenate([flips, swaps])
        near = near[near.any(axis=1)]
        out = rollout_fixed(env, near)
        i = int(np.lexsort((np.arange(near.shape[0]), near.sum(axis=1), out.tta_h))[0])
        if not out.tta_h[i] < tta:
            break
        mask, tta, success, rounds = near[i], out.tta_h[i], out.success[i], out.rounds[i]
    return mask, float(tta), bool(success), int(rounds)


def fixed_set_candidates(env: Any) -> np.ndarray:
    """Every non-empty site set for N ≤ 16; otherwise prefixes of rankings by static speed."""
    n = env.n_sites
    if n <= MAX_EXHAUSTIVE_SITES:
        return subset_matrix(n).copy()
    p = env.clairvoyant().params  # the whole trace's mean rates
    mean_rate = p.rate[: p.trace_rows].mean(axis=0)
    scores = (mean_rate, p.gpu_count * p.gpu_rate, -p.rtt_s, mean_rate / np.maximum(p.rtt_s, 1e-4))
    masks = []
    for score in scores:
        order = np.argsort(-score, kind="stable")
        prefix = np.zeros((n, n), dtype=bool)
        prefix[:, order] = np.tri(n, dtype=bool)
        masks.append(prefix)
    return np.unique(np.concatenate(masks), axis=0)


class BestFixedSet(Policy):
    """CLAIRVOYANT REFERENCE: the one set that is best for the whole episode, in hindsight.

    At reset it plays every candidate set (all 2^N − 1 for N ≤ 16, else prefixes of several
    rankings, then a climb by adding, removing or swapping one site) through the rest of the
    episode on the true trace with the episode's own jitter,
    and then requests the set that reached the target first (ties: fewer sites, then the lower
    set index). Unavailable sites of the set sit out as the env drops them, and rejoin when
    powered again. Its TTA is the best any policy could get without ever changing its request.
    """

    name = "BestFixedSet"

    def __init__(self) -> None:
        super().__init__()
        self.mask = np.zeros(0, dtype=np.int8)

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.mask = self.best(self.env).masks[0].astype(np.int8)

    @staticmethod
    def best(env: Any) -> PolicyRun:
        return best_fixed_set(env)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        return self.mask.copy()


# --------------------------------------------------------------------------- beam search


class BeamPlanner(Policy):
    """CLAIRVOYANT REFERENCE: beam search over per-round site sets, in hindsight.

    At reset it plans the whole episode on the true trace with the episode's own jitter, then
    plays the plan round by round (so the env reproduces the planned trajectory exactly).

    * Beam: ``width`` partial plans, all after the same number of rounds.
    * Children of a partial plan, for the next round: keep the set that completed the last
      round; add or remove any one available site; and the ``top_k`` sets of available sites
      with the highest predicted progress per second (``predict_round`` from that plan's
      state; every subset for N ≤ 16, else prefixes of rankings).
    * Score of a child: play its set for ``lookahead`` rounds (true trace, as a fixed set) and
      extrapolate the time to the target at the progress rate of those rounds. The lookahead is
      what lets a plan pay a join now for the rounds after it.
    * The ``width`` best-scoring children survive, at most one per set of joined sites, so the
      beam keeps different commitments alive. A child that reaches the target is a complete
      plan; the search stops when no live plan can beat the best complete one.
    * It starts with complete plans (``starting_plans``): the episodes of ``PowerTrip``, of
      ``MyopicOptimal`` (N ≤ 16), each played to the end on a copy of the episode
      (``play_on_copy``: same state, same jitter, the true trace; the policy itself sees only
      what it always sees), and of the best fixed set (``BestFixedSet``). The best of them is
      the plan to beat, and the search replaces it only by a strictly faster one. A beam keeps
      a few partial plans and can drop, at some round, the one that would have grown into a
      policy's episode: without these starts it was at times slower than MyopicOptimal (in 7
      of 30 test episodes of an earlier PowerTrip-v0, by up to 5%). As the env replays a plan
      exactly, the planner's time to accuracy in an episode is at most each of theirs in the
      same episode (same seed, same jitter setting), so the ratio to ``BestFixedSet`` is the
      scenario's sequential headroom and the one to ``MyopicOptimal`` what looking ahead adds
      to the best one-round choice, neither ever below 1. ``starts`` holds their times,
      ``source`` the name of the plan played ("beam" when the search found a faster one).
    * The scores trade time for progress at the pace of the best starting plan.

    Defaults: width 8, lookahead 8 rounds, top_k 16. It is a strong reference, not an exact
    optimum; ``lower_bound_h`` bounds how far from the optimum it can be.
    """

    name = "BeamPlanner"

    def __init__(
        self,
        width: int = 8,
        lookahead: int = 8,
        top_k: int = 16,
        starts: Sequence[Policy] | Callable[[DecisionView], Sequence[Policy]] = (),
    ) -> None:
        super().__init__()
        if min(width, lookahead, top_k) < 1:
            raise ValueError(
                f"BeamPlanner: width={width}, lookahead={lookahead} and top_k={top_k} must all "
                "be >= 1"
            )
        self.width, self.lookahead, self.top_k = width, lookahead, top_k
        # more deployable policies whose episodes the search starts from (or what picks them
        # from the episode's view at reset); the same instances every episode, so a policy with
        # its own generator (RandomK) plays here exactly the episode it plays when evaluated in
        # the same order
        self.extra_starts = starts if callable(starts) else list(starts)
        self.plan: list[np.ndarray] = []
        self.planned_tta_h = float("nan")
        self.starts: dict[str, float] = {}  # TTA (h) of each starting plan
        self.source = ""  # which plan is played: a starting plan's name, or "beam"

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.plan, self.planned_tta_h = self.search()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        r = self.env.decision_view().rounds - self._first_round
        if r < len(self.plan):
            return self.plan[r].astype(np.int8)
        return self.plan[-1].astype(np.int8) if self.plan else self.env.available().astype(np.int8)

    def starting_plans(self) -> list[PolicyRun]:
        """The complete plans the search must beat, from the env's current state.

        PowerTrip's and (N ≤ 16) MyopicOptimal's episodes, each played by a fresh policy on a
        copy of the episode, those of the ``starts`` given (a track names them: the registry's
        ``make_policy(..., starts=...)``), and the best fixed set's.
        """
        starts: list[Policy] = [PowerTrip()]
        if self.env.n_sites <= MAX_EXHAUSTIVE_SITES:
            starts.append(MyopicOptimal())
        extra = self.extra_starts
        if callable(extra):
            extra = extra(self.env.decision_view())
        starts += [p for p in extra if p.name not in {"PowerTrip", "MyopicOptimal"}]
        return [*(play_on_copy(self.env, policy) for policy in starts), best_fixed_set(self.env)]

    def search(self) -> tuple[list[np.ndarray], float]:
        """The best plan found from the env's current state, and its TTA in hours."""
        env = self.env
        future = env.clairvoyant()
        p = future.params
        self._first_round = int(future.state.rounds[0])
        need = future.progress_needed

        runs = self.starting_plans()
        self.starts = {run.name: run.tta_h for run in runs}
        first = min(runs, key=lambda run: run.tta_h)  # ties: the earlier in the list
        best_tta, best_plan, self.source = first.tta_h, list(first.masks), first.name

        # The exchange rate between time and progress when scoring: the best start's pace.
        rate = need / h_to_s(best_tta) if best_tta > 0.0 else need / float(future.state.budget_s[0])
        beam = future.state
        plans: list[list[np.ndarray]] = [[]]
        for _ in range(p.max_rounds - self._first_round):
            if beam.batch == 0:
                break
            parents, masks = self._children(future, beam, plans)
            child = future.simulate(masks, beam.take(parents), rounds=1)
            child_state = child.state
            elapsed_h = s_to_h(child_state.time_s - child_state.start_s)
            won = child.success
            if won.any():
                i = int(np.argmin(np.where(won, elapsed_h, np.inf)))
                if elapsed_h[i] < best_tta:
                    best_tta, best_plan = float(elapsed_h[i]), [*plans[parents[i]], masks[i]]
                    self.source = "beam"
            alive = np.flatnonzero(~child.ended & (elapsed_h < best_tta))
            if alive.size == 0:
                break
            score = self._score(future, child_state.take(alive), masks[alive], need, rate)
            keep = _best_distinct(score, child_state.prev_selected[alive], self.width)
            chosen = alive[keep]
            beam = child_state.take(chosen)
            plans = [[*plans[parents[i]], masks[i]] for i in chosen]
        return best_plan, best_tta

    def _children(
        self, future: Any, beam: Any, plans: list[list[np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(parent index, mask) of every child of every plan in the beam, deduplicated."""
        n = self.env.n_sites
        avail = future.available(beam)
        parents, masks = [], []
        for b in range(beam.batch):
            idx = np.flatnonzero(avail[b])
            if idx.size == 0:
                parents.append(b)
                masks.append(np.zeros(n, dtype=bool))
                continue
            keep = beam.prev_selected[b] & avail[b]
            options = [keep[None, :]]
            toggles = np.repeat(keep[None, :], idx.size, axis=0)
            toggles[np.arange(idx.size), idx] ^= True
            options.append(toggles)
            subsets = _subsets_of(idx, n)
            eff = future.predict_round(beam.take(np.array([b])), subsets[None]).efficiency[0]
            options.append(subsets[np.argsort(-eff, kind="stable")[: self.top_k]])
            cands = np.unique(np.concatenate(options), axis=0)
            cands = cands[cands.any(axis=1)]
            parents.extend([b] * cands.shape[0])
            masks.append(cands)
        return np.asarray(parents, dtype=np.intp), np.concatenate(
            [m if m.ndim == 2 else m[None, :] for m in masks]
        )

    def _score(
        self, future: Any, state: Any, masks: np.ndarray, need: float, rate: float
    ) -> np.ndarray:
        """Estimated TTA (s) of each child: its set for ``lookahead`` rounds, then ``rate``."""
        ahead = future.simulate(masks, state, rounds=self.lookahead)
        end = ahead.state
        projected = end.time_s + np.maximum(need - end.progress, 0.0) / rate
        return np.where(ahead.success, end.time_s, projected) - end.start_s


class Optimiser(BeamPlanner):
    """CLAIRVOYANT REFERENCE: the best plan found, improved by local search until no move helps.

    It starts where ``BeamPlanner`` ends (the beam over per-round sets, started from the
    complete episodes of the deployable policies it is given and the best fixed set), then
    repeats, at most ``iterations`` times: every *move* of the plan is played to the end on the
    true trace with the episode's jitter, as one batch, and the fastest replaces the plan if it
    is strictly faster. The moves, on the plan's runs of one set (segments):

    * each change of set happens 1, 2 or 4 rounds earlier or later;
    * each site is added to, or removed from, one segment.

    The search joins the two things a beam is bad at: when to pay a join (the beam scores a
    child over a short lookahead) and whether a site is worth keeping through a whole segment.
    Every plan it keeps is one the env replays exactly, so its time to accuracy is feasible and
    at most the beam's, and so at most every starting policy's in the same episode.
    ``improved_h`` holds what the local search took off.
    """

    name = "Optimiser"

    def __init__(self, *args: Any, iterations: int = 40, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if iterations < 0:
            raise ValueError(f"Optimiser: iterations={iterations} must be >= 0")
        self.iterations = iterations
        self.improved_h = 0.0

    def search(self) -> tuple[list[np.ndarray], float]:
        plan, tta = super().search()
        beam_tta = tta
        if plan:
            best, tta = improve_plan(self.env, np.asarray(plan, dtype=bool), tta, self.iterations)
            if tta < beam_tta:
                plan, self.source = list(best), "local search"
        self.improved_h = beam_tta - tta
        return plan, tta


def improve_plan(
    env: Any,
    plan: np.ndarray,
    tta_h: float,
    iterations: int = 40,
    cost: Callable[[Any, Any], np.ndarray] = _time_cost,
    moves: Callable[[np.ndarray], np.ndarray | Sequence[np.ndarray]] | None = None,
    suffix: bool = False,
) -> tuple[np.ndarray, float]:
    """CLAIRVOYANT: ``plan`` (R, N), whose TTA from the env's current state is ``tta_h``,
    improved by the moves of ``Optimiser`` while one is strictly faster; (plan, its TTA).

    ``cost(params, trajectory)`` scores the moves played to the end, lower better (default: the
    TTA, inf on failure); with another, ``tta_h`` is the plan's value of it
    (``carbon_references.CarbonOptimiser`` passes the carbon cost). ``moves(plan)`` gives the
    neighbours tried each iteration, as one (M, R, N) array or plans of any lengths (default:
    ``plan_moves``; the carbon optimiser adds ``carbon_moves``, which idle). With ``suffix``,
    each move is played from the plan's state at the first round it changes (the same rounds,
    so the same outcome, in about half the work)."""
    future = env.clairvoyant()
    rounds_left = future.params.max_rounds - int(future.state.rounds[0])
    generate = plan_moves if moves is None else moves
    for _ in range(iterations):
        if suffix:
            found = _best_move_from_states(future, plan, generate(plan), cost)
            if found is None:
                break
            move, value, played = found
        else:
            batch = pad_plans(generate(plan), plan.shape[0], rounds_left)
            if batch.shape[0] == 0:
                break
            out = future.simulate(batch)
            tta = cost(future.params, out)
            i = int(np.argmin(tta))
            move, value = batch[i], float(tta[i])
            played = int(out.state.rounds[i]) - int(future.state.rounds[0])
        if not value < tta_h - 1e-12:
            break
        plan, tta_h = move[:played], value
    return plan, tta_h


def _best_move_from_states(
    future: Any,
    plan: np.ndarray,
    moves: np.ndarray | Sequence[np.ndarray],
    cost: Callable[[Any, Any], np.ndarray],
) -> tuple[np.ndarray, float, int] | None:
    """The cheapest of ``moves`` (ties: the first), each played from ``plan``'s state before
    the first round where it differs from ``plan``: (the move padded with its last set, its
    cost, the rounds it played from the episode's current state); None without moves."""
    moves = list(moves)
    if not moves:
        return None
    r = plan.shape[0]
    first = np.empty(len(moves), dtype=np.intp)
    for j, m in enumerate(moves):
        k = min(m.shape[0], r)
        differ = np.flatnonzero((m[:k] != plan[:k]).any(axis=1))
        first[j] = min(differ[0] if differ.size else k, r - 1)
    states = [future.state.data]  # the plan's state before each round it plays
    now = future.state
    for row in range(int(first.max())):
        now = future.simulate(plan[row][None, None], now, rounds=1).state
        states.append(now.data)
    start = type(future.state)(np.concatenate(states)[first])
    tails = [m[p:] for m, p in zip(moves, first, strict=True)]
    batch = pad_plans(tails, r, np.iinfo(np.int32).max)
    out = future.simulate(batch, start)
    value = cost(future.params, out)
    i = int(np.argmin(value))
    played = int(out.state.rounds[i]) - int(future.state.rounds[0])
    return np.concatenate([moves[i][: first[i]], batch[i]]), float(value[i]), played


def pad_plans(
    plans: np.ndarray | Sequence[np.ndarray], rounds: int, rounds_left: int
) -> np.ndarray:
    """(M, T, N): ``plans`` (of any lengths) each played on past its end with its last set, so
    a move that makes the episode longer than ``rounds`` (the plan it came from) has room:
    T is the longest plan plus a quarter of ``rounds`` (at least 16 rounds), at most
    ``rounds_left`` unless a plan is longer."""
    if isinstance(plans, np.ndarray):
        plans = list(plans) if plans.shape[0] else []
    if not plans:
        return np.zeros((0, rounds, 0), dtype=bool)
    longest = max(p.shape[0] for p in plans)
    total = max(longest, min(longest + max(rounds // 4, 16), rounds_left))
    out = np.empty((len(plans), total, plans[0].shape[1]), dtype=bool)
    for j, p in enumerate(plans):
        out[j, : p.shape[0]] = p
        out[j, p.shape[0] :] = p[-1]
    return out


def plan_moves(plan: np.ndarray) -> np.ndarray:
    """(M, R, N) bool: every move of ``Optimiser`` applied to ``plan`` (R, N), deduplicated."""
    r = plan.shape[0]
    change = np.flatnonzero((plan[1:] != plan[:-1]).any(axis=1)) + 1  # rounds a new set starts
    bounds = np.concatenate([[0], change, [r]])
    moves = []
    for b in change:
        for d in (1, 2, 4):
            earlier = plan.copy()
            earlier[max(b - d, 0) : b] = plan[b]
            later = plan.copy()
            later[b : min(b + d, r)] = plan[b - 1]
            moves += [earlier, later]
    for a, e in itertools.pairwise(bounds):
        for i in range(plan.shape[1]):
            toggled = plan.copy()
            toggled[a:e, i] = ~plan[a, i]
            if toggled[a].any():
                moves.append(toggled)
    if not moves:
        return np.zeros((0, *plan.shape), dtype=bool)
    stack = np.stack(moves)
    keep = ~(stack == plan[None]).all(axis=(1, 2))
    return np.unique(stack[keep], axis=0)


IDLE_LENGTHS = (1, 4, 12, 36)
"""The idle runs ``carbon_moves`` inserts, in rounds (an idle round lasts one trace row)."""


def carbon_moves(plan: np.ndarray, lengths: Sequence[int] = IDLE_LENGTHS) -> list[np.ndarray]:
    """Plans (of several lengths) that wait: ``plan`` (R, N) with idle rounds (all False) put
    in or taken out, for an objective that prices when a round is played (the carbon cost),
    not only how long the episode lasts. For each k of ``lengths``:

    * k idle rounds inserted before round p, the rest played k rounds later: p at the start,
      at each change of set and every R/32 rounds between (training shifted to later hours);
    * the k rounds from p replaced by idle rounds, the rest played after them (a dirty
      stretch skipped, the work made up at the end);
    * k rounds taken out of each run of idle rounds, or the whole run (training shifted to
      earlier hours), and the run moved k rounds earlier or later.

    Every row of a move is a set a plan may request (an idle row is all False); the caller
    pads them to one length and plays them to the end (``improve_plan``)."""
    r, n = plan.shape
    idle = ~plan.any(axis=1)
    change = np.flatnonzero((plan[1:] != plan[:-1]).any(axis=1)) + 1
    step = max(r // 32, 1)
    at = np.unique(np.concatenate([[0], change, np.arange(step, r, step)]))
    gap = np.zeros((max(lengths), n), dtype=bool)
    out: list[np.ndarray] = []
    for p in at:
        for k in lengths:
            out.append(np.concatenate([plan[:p], gap[:k], plan[p:]]))
            if p + k < r and not idle[p : p + k].all():
                out.append(np.concatenate([plan[:p], gap[:k], plan[p + k :]]))
    runs = _runs(idle)
    for a, e in runs:
        out.append(np.concatenate([plan[:a], plan[e:]]))
        for k in lengths:
            if k < e - a:
                out.append(np.concatenate([plan[:a], plan[a + k :]]))
            # the run moved: k rounds earlier (the k before it played after) or later
            if a - k >= 0:
                out.append(np.concatenate([plan[: a - k], plan[a:e], plan[a - k : a], plan[e:]]))
            if e + k <= r:
                out.append(np.concatenate([plan[:a], plan[e : e + k], plan[a:e], plan[e + k :]]))
    return [m for m in out if m.shape[0] > 0 and m.any()]


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[a, e) of each run of True in ``flags``."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True))


def _subsets_of(idx: np.ndarray, n: int) -> np.ndarray:
    """(2^m − 1, n) bool: every non-empty subset of the sites ``idx`` (m ≤ 16), else prefixes."""
    if idx.size <= MAX_EXHAUSTIVE_SITES:
        sub = subset_matrix(idx.size)
        out = np.zeros((sub.shape[0], n), dtype=bool)
        out[:, idx] = sub
        return out
    out = np.zeros((idx.size, n), dtype=bool)
    out[:, idx] = np.tri(idx.size, dtype=bool)
    return out


def _best_distinct(score: np.ndarray, joined: np.ndarray, width: int) -> np.ndarray:
    """Indices of the ``width`` lowest scores, at most one per distinct row of ``joined``."""
    order = np.argsort(score, kind="stable")
    _, first = np.unique(joined[order], axis=0, return_index=True)
    distinct = order[np.sort(first)]
    return distinct[:width]
