"""Clairvoyant references and a lower bound: what the policies are measured against.

Each reference is named for what it knows, and none is a deployable policy:

* ``BestFixedSet`` knows the whole episode in hindsight (future power and jitter) and plays the
  one site set that reaches the target first when requested every round.
* ``BeamPlanner`` knows the same and searches per-round plans with a beam: the best plan it
  finds that changes sets as power moves. It starts from the complete episodes of PowerTrip,
  MyopicOptimal and the best fixed set, so it is never slower than any of them.
* ``lower_bound_h`` is no policy at all: a relaxation of the time to accuracy that no policy can
  beat, whatever it knows.

The gap between ``BestFixedSet`` and ``BeamPlanner`` is a scenario's *sequential headroom*: how
much a policy can gain by changing sets during an episode rather than choosing one set well.
Near 1, the scenario is a one-shot subset choice (``powertrip_env.baselines.headroom``).

They read the future through ``env.unwrapped.clairvoyant()`` (``powertrip_env.clairvoyant``),
which plays candidate plans as a batch of episodes on the true trace with the episode's own
jitter, so an episode's references cost a few hundred batched rounds, and through
``play_on_copy``, which plays a deployable policy on a copy of the episode.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.baselines.base import MAX_EXHAUSTIVE_SITES, Policy, subset_matrix
from powertrip_env.baselines.policies import (
    MyopicOptimal,
    PowerTrip,
)  # the plans BeamPlanner starts from
from powertrip_env.dynamics import (
    comm_time_s,
    delta_progress,
    join_bound_dp,
    least_round_ends,
    round_bound_dp,
)


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


def play_on_copy(env: Any, policy: Policy) -> PolicyRun:
    """CLAIRVOYANT: ``policy`` played from the episode's current state to its end, on a copy.

    The copy is the unwrapped env itself, deep-copied except for what it shares read-only with
    every env of its scenario (``sim``, ``params``, ``scenario``) and what is fixed when it is
    made (``layout``, ``starts``), so it costs a fraction of a millisecond: same state, same
    jitter key, same power trace, and its own learner, reward function and history, so the
    episode is unchanged. The env is deterministic given its
    state, so the copy runs exactly the rounds the episode would run if ``policy`` played it,
    and its masks, replayed in the episode, reproduce its time to accuracy.

    Only the copy's stepping looks ahead; the policy sees what it always sees, the copy's
    ``decision_view`` and ``predict_round`` (and its observation and info after each round;
    before the first round, ``None`` and ``{}``: the policies played here read the env, as
    ``Policy`` asks). ``policy`` is reset on the copy and left bound to it.
    """
    real = env.unwrapped
    shared = (real.sim, real.params, real.scenario, real.layout, real.starts)
    twin = copy.deepcopy(real, {id(x): x for x in shared})
    policy.reset(twin)
    obs: Any = None
    info: dict[str, Any] = {}
    masks = []
    while True:
        mask = np.asarray(policy.act(obs, info))
        masks.append(mask != 0)
        obs, _, terminated, truncated, info = twin.step(mask)
        if terminated or truncated:
            return PolicyRun(policy.name, np.array(masks), float(info["tta_h"]), bool(terminated))


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
    if env.params.n_sites > MAX_EXHAUSTIVE_SITES:  # not every set was tried: climb from the best
        mask, tta, success, rounds = _climb_fixed_set(env, mask, tta, success, rounds)
    rounds = max(int(rounds) - int(env.state.rounds[0]), 1)
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
    p = env.params
    n = p.n_sites
    if n <= MAX_EXHAUSTIVE_SITES:
        return subset_matrix(n).copy()
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
        self.mask = best_fixed_set(self.env).masks[0].astype(np.int8)

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
        self, width: int = 8, lookahead: int = 8, top_k: int = 16, starts: Sequence[Policy] = ()
    ) -> None:
        super().__init__()
        if min(width, lookahead, top_k) < 1:
            raise ValueError(
                f"BeamPlanner: width={width}, lookahead={lookahead} and top_k={top_k} must all "
                "be >= 1"
            )
        self.width, self.lookahead, self.top_k = width, lookahead, top_k
        # more deployable policies whose episodes the search starts from; the same instances
        # every episode, so a policy with its own generator (RandomK) plays here exactly the
        # episode it plays when evaluated in the same order
        self.extra_starts = list(starts)
        self.plan: list[np.ndarray] = []
        self.planned_tta_h = float("nan")
        self.starts: dict[str, float] = {}  # TTA (h) of each starting plan
        self.source = ""  # which plan is played: a starting plan's name, or "beam"

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.plan, self.planned_tta_h = self.search()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        r = int(self.env.state.rounds[0]) - self._first_round
        if r < len(self.plan):
            return self.plan[r].astype(np.int8)
        return self.plan[-1].astype(np.int8) if self.plan else self.env.available().astype(np.int8)

    def starting_plans(self) -> list[PolicyRun]:
        """The complete plans the search must beat, from the env's current state.

        PowerTrip's and (N ≤ 16) MyopicOptimal's episodes, each played by a fresh policy on a
        copy of the episode, those of the ``starts`` given (the registry's ``BeamPlanner``
        starts from every shipped deployable baseline), and the best fixed set's.
        """
        starts: list[Policy] = [PowerTrip()]
        if self.env.params.n_sites <= MAX_EXHAUSTIVE_SITES:
            starts.append(MyopicOptimal())
        starts += [p for p in self.extra_starts if p.name not in {"PowerTrip", "MyopicOptimal"}]
        return [*(play_on_copy(self.env, policy) for policy in starts), best_fixed_set(self.env)]

    def search(self) -> tuple[list[np.ndarray], float]:
        """The best plan found from the env's current state, and its TTA in hours."""
        env, p = self.env, self.env.params
        future = env.clairvoyant()
        self._first_round = int(env.state.rounds[0])
        need = future.progress_needed

        runs = self.starting_plans()
        self.starts = {run.name: run.tta_h for run in runs}
        first = min(runs, key=lambda run: run.tta_h)  # ties: the earlier in the list
        best_tta, best_plan, self.source = first.tta_h, list(first.masks), first.name

        # The exchange rate between time and progress when scoring: the best start's pace.
        rate = need / (best_tta * 3600.0) if best_tta > 0.0 else need / p.time_budget_s
        beam = env.state
        plans: list[list[np.ndarray]] = [[]]
        for _ in range(p.max_rounds - self._first_round):
            if beam.batch == 0:
                break
            parents, masks = self._children(future, beam, plans)
            child = future.simulate(masks, beam.take(parents), rounds=1)
            child_state = child.state
            elapsed_h = (child_state.time_s - child_state.start_s) / 3600.0
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
        n = self.env.params.n_sites
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
    env: Any, plan: np.ndarray, tta_h: float, iterations: int = 40
) -> tuple[np.ndarray, float]:
    """CLAIRVOYANT: ``plan`` (R, N), whose TTA from the env's current state is ``tta_h``,
    improved by the moves of ``Optimiser`` while one is strictly faster; (plan, its TTA)."""
    future = env.clairvoyant()
    rounds_left = env.params.max_rounds - int(env.state.rounds[0])
    for _ in range(iterations):
        moves = plan_moves(plan)
        if moves.shape[0] == 0:
            break
        # room for a move that makes the episode longer: the last set goes on
        extra = min(max(plan.shape[0] // 4, 16), max(rounds_left - plan.shape[0], 0))
        tail = np.repeat(moves[:, -1:], extra, axis=1)
        out = future.simulate(np.concatenate([moves, tail], axis=1))
        tta = np.where(out.success, out.tta_h, np.inf)
        i = int(np.argmin(tta))
        if not tta[i] < tta_h - 1e-12:
            break
        played = int(out.state.rounds[i]) - int(env.state.rounds[0])
        plan, tta_h = np.concatenate([moves[i], tail[i]])[:played], float(tta[i])
    return plan, tta_h


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


# --------------------------------------------------------------------------- the lower bound


def lower_bound_h(env: Any, max_steps: int = 50_000) -> float:
    """A time to accuracy (hours) that no policy can beat in this episode, from its start.

    The largest of three relaxations, each valid on its own: ``rate_bound_h`` (any round
    mode); for rounds of equal steps (``fixed_quota``), ``round_bound_h``, which keeps each
    round's progress at its end and ties its length to its start; and, with blocking joins and
    at most ``JOIN_BOUND_MAX_SITES`` sites, ``join_bound_h``, which also charges every join.
    """
    p = env.params
    bound = rate_bound_h(env, max_steps)
    if not p.fixed_time:
        bound = max(bound, round_bound_h(env))
        if not p.nonblocking and p.n_sites <= JOIN_BOUND_MAX_SITES:
            bound = max(bound, join_bound_h(env))
    return bound


ROUND_BOUND_CELLS = 100.0  # start cells per fastest round: the bound's resolution
JOIN_BOUND_CELLS = 100.0
JOIN_BOUND_MAX_SITES = 12  # the DP keeps a table over the 2^N joined sets
_ROUND_BOUND_STEPS = 400_000


def round_bound_h(env: Any, max_steps: int = _ROUND_BOUND_STEPS) -> float:
    """A lower bound on the TTA (hours) for rounds of equal steps: a DP over round starts.

    Every policy plays rounds back to back. A round that starts at t with k sites completing
    it ends no earlier than ``e_k(t)`` (``dynamics.least_round_ends``): over every pair of
    thresholds on the completing sites' largest RTT and update transfer, the k-th earliest time
    at which a site within both could finish the quota started at t (a site that was not joined
    when the bound starts can finish no earlier than if it started one join later: blocking, it
    computes after its join; non-blocking, after its fetch), plus that pair's communication and
    aggregation, with the episode's least jitter. It adds at most ``ΔP(P, B_k)``, B_k the k
    largest site batches, at full coverage. Finish times only grow with the start, and
    ``P + ΔP(P)`` with ``P``, so on a grid of start cells (each cell's rounds credited the end
    of a round started at the cell's beginning), the most progress any policy can have when a
    round starts in cell j, G_j, obeys ``G_c ≥ G_j + ΔP(G_j, B_k)`` for the cell c in which
    ``e_k`` falls, and ``G_{j+1} ≥ G_j`` (waiting, for free); the earliest ``e_k`` that
    reaches the target is the bound. Unlike ``rate_bound_h`` no round's progress is spread, no
    round is credited a start it could not have had, and no round the links of sites other
    than its own. Joins after the first are free: that is what remains loose.
    """
    g = _RoundGrid.of(env, ROUND_BOUND_CELLS, max_steps)
    joined = env.state.prev_selected[0]
    begin = np.maximum(g.starts[:, None], np.where(joined, g.t_begin, g.t_begin + g.p.join_s))
    end = least_round_ends(g.p, g.finish(begin), g.comm_min)  # (J, K) of a k-site round
    cell = np.minimum(((end - g.t_begin) // g.step_s).astype(np.int64), g.starts.size)
    best = round_bound_dp(g.p, g.progress, g.need, end, cell, g.batch)
    return g.hours(best)


def join_bound_h(env: Any, max_steps: int = _ROUND_BOUND_STEPS) -> float:
    """``round_bound_h`` that also charges every join (blocking joins, rounds of equal steps).

    The DP's states are (start cell, joined set J, progress), J the sites that completed the
    last round. From a round starting in cell j, a joined site can finish its quota no earlier
    than ``f_i`` from the cell's start, a site outside J no earlier than from one join later.
    A round whose k completing sites have their last compute end at b leaves J' = the sites it
    completed; every site with ``f_i ≤ b`` could have been among them, so the DP moves, for
    each m ≥ k, to J' = the m sites of smallest f (a superset of any such round's J'), at
    ``b = f_(m)`` plus the least communication of k sites and aggregation, with ``ΔP(P, B_k)``.
    An idle round moves to J = ∅ one ``idle_s`` later. More progress, an earlier start and a
    larger joined set are never worse in this relaxation, so a state is dropped when one
    already expanded has at least its progress, started no later and holds its joined set;
    states are expanded in order of their start, and the first end that reaches the target is
    the bound. What it still gives away: the k sites with the smallest RTTs and links set the
    communication, every round starts at the beginning of its cell, and no site drops out.
    """
    g = _RoundGrid.of(env, JOIN_BOUND_CELLS, max_steps)
    p = g.p
    fin_in = g.finish(np.repeat(g.starts[:, None], p.n_sites, axis=1))
    fin_out = g.finish(g.starts[:, None] + p.join_s[None, :])
    joined = int(np.sum(np.left_shift(1, np.flatnonzero(env.state.prev_selected[0]))))
    idle_cells = max(int(p.idle_s // g.step_s), 1)
    best = join_bound_dp(
        p, g.progress, g.need, (fin_in, fin_out), g.comm + p.aggregation_s, g.batch,
        (g.t_begin, g.step_s), joined, idle_cells,
    )  # fmt: skip
    return g.hours(best)


@dataclass(frozen=True)
class _RoundGrid:
    """What ``round_bound_h`` and ``join_bound_h`` share: the episode's start cells, the least
    jitter, the least communication and the largest batch of k sites."""

    p: Any
    future: Any
    start: float  # the episode's start
    t_begin: float  # now
    budget_end: float
    need: float
    progress: float
    compute_min: float
    comm: np.ndarray  # (K,) the least communication of k sites, before aggregation
    comm_min: float  # the episode's least network jitter
    batch: np.ndarray  # (K,) the k largest site batches
    step_s: float
    starts: np.ndarray  # (J,) the cells' beginnings

    @classmethod
    def of(cls, env: Any, cells_per_round: float, max_steps: int) -> _RoundGrid:
        p, state = env.params, env.state
        n = p.n_sites
        future = env.clairvoyant()
        start, t_begin = float(state.start_s[0]), float(state.time_s[0])
        budget_end = start + p.time_budget_s
        jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
        compute_min = float(jitter[:, :n].min()) if jitter.size else 1.0
        comm_min = float(jitter[:, n].min()) if jitter.size else 1.0
        k = np.arange(1, n + 1)
        comm = comm_time_s(p, k, np.sort(p.rtt_s), np.sort(p.site_tx_s)) * comm_min
        fastest_s = float((p.quota / (p.gpu_count * p.gpu_rate)).min() * compute_min)
        step_s = max(fastest_s / cells_per_round, (budget_end - t_begin) / max_steps)
        starts = t_begin + step_s * np.arange(math.ceil((budget_end - t_begin) / step_s) + 1)
        return cls(
            p=p, future=future, start=start, t_begin=t_begin, budget_end=budget_end,
            need=future.progress_needed, progress=float(state.progress[0]),
            compute_min=compute_min, comm=comm, comm_min=comm_min,
            batch=np.cumsum(np.sort(p.site_batch)[::-1]), step_s=step_s, starts=starts,
        )  # fmt: skip

    def finish(self, begin: np.ndarray) -> np.ndarray:
        """When each site, starting at ``begin`` (J, N), finishes the quota (least jitter)."""
        return self.future.finish_s(begin, self.p.quota * self.compute_min)

    def hours(self, end_s: float) -> float:
        return (min(end_s, self.budget_end) - self.start) / 3600.0


def rate_bound_h(env: Any, max_steps: int = 50_000) -> float:
    """A time to accuracy (hours) that no policy can beat in this episode, from its start.

    A relaxation, with every simplification in the policy's favour:

    * a round of k completing sites teaches at most ``ΔP(P, B) = local_steps · η / (1 +
      B_noise(P) / B)`` (the kernel's ``delta_progress``; full data coverage, no site
      dropping out), with B at most the k largest site batches (``fixed_quota``), or the most
      samples any k sites could process in the round's window over ``local_steps``
      (``fixed_time``: each site from the round's start or the end of its join, whichever
      gives more, on the true trace);
    * a k-site round starting at t0 lasts at least its compute: the k-th smallest single-site
      compute time from t0 (``fixed_quota``: no join, the smallest compute jitter of the
      episode) or the shortest window ``round_s · min(ε, 1 + grace)`` of the episode's jitter
      (``fixed_time``), plus the communication of the k sites with the smallest RTTs and the
      fastest links, which no k sites undercut (through the hub or by ring all-reduce, as the
      scenario has it; the smallest network jitter), plus aggregation;
    * between rounds no time is lost, and a round's progress may be spread evenly over it.

    In ``fixed_time`` rounds a longer window buys more samples and a longer round: the range of
    the episode's windows is cut into a few levels, and a round whose longest window is in a
    level gets the level's shortest round and its longest window's samples.

    Spread that way, progress P̃(t) grows at most at ``R(t, P̃)``: the best ΔP / T of any round
    that could be running at t (one that started at most τ before t and lasts τ or more, which
    also caps its rate at ΔP_max / τ), evaluated at the least progress its start could have had
    (P̃ − ΔP_max, since progress only falls with P through B_noise). The solution of dP/dt =
    R(t, P) from the progress now then stays above every policy's P̃, so the time it reaches
    the target is a lower bound. It is integrated on a time grid, conservatively: a round that
    starts in a grid cell is credited the shortest time and the largest batch of any start in
    the cell (single-site compute times lowered by one grid step, as a compute time falls at
    most one second per second of later start; windows' samples counted over one step more),
    and each step uses the rate at the step's start and its largest window. The step is a 25th
    of the fastest possible compute time, or the budget over ``max_steps`` if that is longer,
    so the bound stays tight for rounds of seconds and of minutes alike. The result is capped
    at the time budget, which every failing episode counts.

    Clairvoyant: reads the true trace and the episode's jitter. Valid in both round modes
    (``fixed_quota``, ``fixed_time`` with or without ``grace``) and both all-reduces (hub,
    ring).
    """
    p = env.params
    n = p.n_sites
    future = env.clairvoyant()
    state = env.state
    start, t_begin = float(state.start_s[0]), float(state.time_s[0])
    need = future.progress_needed
    budget_end = start + p.time_budget_s
    jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
    compute_jitter = jitter[:, :n] if jitter.size else np.ones((1, n))
    comm_min = float(jitter[:, n].min()) if jitter.size else 1.0
    # the k smallest RTTs and link times: no k completing sites exchange faster
    k = np.arange(1, n + 1)
    comm = comm_time_s(p, k, np.sort(p.rtt_s), np.sort(p.site_tx_s)) * comm_min
    if p.fixed_time:  # a site's compute window: round_s · min(ε, 1 + grace) (dynamics.round._round)
        extremes = np.array([compute_jitter.min(), compute_jitter.max()])
        window = p.round_s * np.minimum(extremes, 1.0 + p.grace)
        fastest_s = float(window[0])
    else:
        fastest_s = float((p.quota / (p.gpu_count * p.gpu_rate)).min() * compute_jitter.min())
    step_s = max(fastest_s / 25.0, (budget_end - t_begin) / max_steps)
    grid = t_begin + step_s * np.arange(math.ceil((budget_end - t_begin) / step_s) + 1)

    # Per grid cell of a round's start and column (k sites; fixed_time: and window level), the
    # largest batch and the least round time; one of the two is the same for every start.
    if p.fixed_time:
        batch, inv_time = _fixed_time_rounds(p, grid, step_s, window, comm)  # (J, C), (C,)
        varying = batch
    else:
        inv_time = _fixed_quota_inv_time(p, future, grid, step_s, compute_jitter.min(), comm)
        batch = np.cumsum(np.sort(p.site_batch)[::-1])  # (K,): the k largest batches
        varying = inv_time  # (J, K)
    history = np.maximum.accumulate(varying, axis=0)  # any start so far: rounds of any length

    dp_max = float(delta_progress(p, 0.0, float(np.max(batch))))
    # Rounds up to τ_m = 2^m steps long started in the last 2^m + 1 cells; longer ones are
    # capped by ΔP_max / τ_(m−1) and may have started anywhere before.
    levels = _BOUND_LEVELS
    tau = step_s * (1 << np.arange(levels))
    cap = np.concatenate([[np.inf], dp_max / tau])  # cap of each window, then the catch-all

    progress = float(state.progress[0])
    for j0 in range(0, grid.size - 1, _BOUND_CHUNK):
        j1 = min(j0 + _BOUND_CHUNK, grid.size - 1)
        windows = _window_maxima(varying, j0, j1, levels)  # (j1 - j0, levels, C)
        for j in range(j0, j1):
            least = max(progress - dp_max, 0.0)
            reach = np.concatenate([windows[j - j0], history[j][None]])  # (levels + 1, C)
            if p.fixed_time:
                best = (delta_progress(p, least, reach) * inv_time).max(axis=1)
            else:
                best = (reach * delta_progress(p, least, batch)).max(axis=1)
            rate = float(np.max(np.minimum(cap, best)))
            if progress + rate * step_s >= need:
                reached = grid[j] + (need - progress) / rate
                return (min(reached, budget_end) - start) / 3600.0
            progress += rate * step_s
    return (budget_end - start) / 3600.0


def _fixed_quota_inv_time(
    p: Any, future: Any, grid: np.ndarray, step_s: float, compute_min: float, comm: np.ndarray
) -> np.ndarray:
    """(J, K): one over the least time of a round of k sites that starts in grid cell j.

    The k-th smallest single-site compute time of the quota from the cell's start on the true
    trace (no join, the least compute jitter), lowered by one step for later starts in the
    cell, plus the least communication of k sites and aggregation.
    """
    begin = np.repeat(grid[:, None], p.n_sites, axis=1)
    compute = np.maximum(future.finish_s(begin, p.quota * compute_min) - begin - step_s, 0.0)
    compute.sort(axis=1)
    return 1.0 / (compute + comm + p.aggregation_s)


def _fixed_time_rounds(
    p: Any, grid: np.ndarray, step_s: float, window: np.ndarray, comm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(J, C) largest batches and (C,) one over the least round times of fixed_time rounds.

    Column ``l · N + k − 1``: k sites, the round's longest window W in level l of the range
    ``window`` (the episode's shortest and longest, geometric levels). Such a round lasts at
    least level l's shortest W plus the least communication of k sites and aggregation; each of
    its sites processes at most the samples of level l's longest W on the true trace, starting
    in the round's grid cell (a joined site) or one join later (a joining one), counted over
    one grid step more for starts later in the cell. The batch is the k largest of those over
    ``local_steps``.
    """
    lo, hi = float(window[0]), float(window[1])
    levels = 1
    if hi > lo:
        levels = min(_FIXED_TIME_LEVELS, math.ceil(math.log(hi / lo) / math.log(1.02)))
    edges = lo * (hi / lo) ** (np.arange(levels + 1) / levels)
    edges[-1] = hi
    # samples each site could have processed from row 0 on: the integral of its piecewise
    # constant throughput on the true trace, as the kernel's cumulative table
    # (dynamics.tables._samples_at)
    n, iv = p.n_sites, p.interval_s
    knots = iv * np.arange(p.rate.shape[0] + 1)
    cum = np.concatenate([np.zeros((1, n)), np.cumsum(p.rate * iv, axis=0)])

    def samples_to(t: np.ndarray) -> np.ndarray:
        return np.stack([np.interp(t[:, i], knots, cum[:, i]) for i in range(n)], axis=1)

    starts = (np.repeat(grid[:, None], n, axis=1), grid[:, None] + p.join_s)
    before = [samples_to(b) for b in starts]
    batches, inv_time = [], []
    for level in range(levels):
        span = step_s + edges[level + 1]
        most = np.maximum(*(samples_to(b + span) - c for b, c in zip(starts, before, strict=True)))
        most = -np.sort(-most, axis=1)  # the largest first
        batches.append(np.cumsum(most, axis=1) / p.local_steps)
        inv_time.append(1.0 / (edges[level] + comm + p.aggregation_s))
    return np.concatenate(batches, axis=1), np.concatenate(inv_time)


_BOUND_LEVELS = 12  # windows of 2^1 ... 2^12 grid cells; longer rounds use the catch-all
_FIXED_TIME_LEVELS = 8  # at most this many levels of fixed_time windows (2% apart or fewer)
_BOUND_CHUNK = 4096  # grid cells whose windows are built at a time (memory stays bounded)


def _window_maxima(values: np.ndarray, j0: int, j1: int, levels: int) -> np.ndarray:
    """(j1 − j0, levels, K): for each row j of ``values`` in [j0, j1) and level m, the maximum
    over rows [j − 2^(m+1) + 1, j] (rows before 0 count as row 0)."""
    reach = 1 << levels
    lo = max(j0 - reach, 0)
    part = values[lo:j1]
    pad = reach - (j0 - lo)
    if pad > 0:
        part = np.concatenate([np.repeat(part[:1], pad, axis=0), part])
    out = np.empty((j1 - j0, levels, values.shape[1]))
    level = part
    for m in range(levels + 1):
        if m > 0:
            out[:, m - 1] = level[reach:]
        w = 1 << m
        level = np.maximum(level, np.concatenate([np.repeat(level[:1], w, axis=0), level[:-w]]))
    return out
