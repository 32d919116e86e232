"""Clairvoyant references and a lower bound: what the policies are measured against.

Each reference is named for what it knows, and none is a deployable policy:

* ``BestFixedSet`` knows the whole episode in hindsight (future power and jitter) and plays the
  one site set that reaches the target first when requested every round.
* ``BeamPlanner`` knows the same and searches per-round plans with a beam: the best plan it
  finds that changes sets as power moves.
* ``lower_bound_h`` is no policy at all: a relaxation of the time to accuracy that no policy can
  beat, whatever it knows.

The gap between ``BestFixedSet`` and ``BeamPlanner`` is a scenario's *sequential headroom*: how
much a policy can gain by changing sets during an episode rather than choosing one set well.
Near 1, the scenario is a one-shot subset choice (``baselines.headroom``).

They read the future through ``env.unwrapped.clairvoyant()`` (``powertrip_env.clairvoyant``),
which plays candidate plans as a batch of episodes on the true trace with the episode's own
jitter, so an episode's references cost a few hundred batched rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.policies import MAX_EXHAUSTIVE_SITES, Policy, subset_matrix


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
    rankings) through the rest of the episode on the true trace with the episode's own jitter,
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
        masks = fixed_set_candidates(self.env)
        out = rollout_fixed(self.env, masks)
        order = np.lexsort((np.arange(masks.shape[0]), masks.sum(axis=1), out.tta_h))
        self.mask = masks[order[0]].astype(np.int8)

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
    * The best fixed set (``BestFixedSet``) is a complete plan from the start, so the planner is
      never worse than it: the ratio of the two is the scenario's sequential headroom.

    Defaults: width 8, lookahead 8 rounds, top_k 16. It is a strong reference, not an exact
    optimum; ``lower_bound_h`` bounds how far from the optimum it can be.
    """

    name = "BeamPlanner"

    def __init__(self, width: int = 8, lookahead: int = 8, top_k: int = 16) -> None:
        super().__init__()
        if min(width, lookahead, top_k) < 1:
            raise ValueError(
                f"BeamPlanner: width={width}, lookahead={lookahead} and top_k={top_k} must all "
                "be >= 1"
            )
        self.width, self.lookahead, self.top_k = width, lookahead, top_k
        self.plan: list[np.ndarray] = []
        self.planned_tta_h = float("nan")

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.plan, self.planned_tta_h = self.search()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        r = int(self.env.state.rounds[0]) - self._first_round
        if r < len(self.plan):
            return self.plan[r].astype(np.int8)
        return self.plan[-1].astype(np.int8) if self.plan else self.env.available().astype(np.int8)

    def search(self) -> tuple[list[np.ndarray], float]:
        """The best plan found from the env's current state, and its TTA in hours."""
        env, p = self.env, self.env.params
        future = env.clairvoyant()
        self._first_round = int(env.state.rounds[0])
        need = future.progress_needed

        fixed = fixed_set_candidates(env)
        fixed_out = rollout_fixed(env, fixed)
        best_fixed = int(np.lexsort((fixed.sum(axis=1), fixed_out.tta_h))[0])
        best_tta = float(fixed_out.tta_h[best_fixed])
        best_plan = [fixed[best_fixed]] if np.isfinite(best_tta) else []

        # The exchange rate between time and progress when scoring: the best fixed set's pace.
        rate = need / (best_tta * 3600.0) if np.isfinite(best_tta) else need / p.time_budget_s
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

    A relaxation, with every simplification in the policy's favour:

    * a round's progress is at most ``ΔP_k(P) = local_steps · η / (1 + B_noise(P) / (k · b))``
      for k sites (full data coverage, no site dropping out);
    * a k-site round starting at t0 lasts at least the k-th smallest single-site compute time
      from t0 (no join, the smallest compute jitter of the episode) plus the k-th smallest RTT
      and link terms of the communication time (the smallest network jitter) plus aggregation;
    * between rounds no time is lost, and a round's progress may be spread evenly over it.

    Spread that way, progress P̃(t) grows at most at ``R(t, P̃)``: the best ΔP_k / T_k of any
    round that could be running at t (one that started at most τ before t and lasts τ or more,
    which also caps its rate at ΔP_max / τ), evaluated at the least progress its start could
    have had (P̃ − ΔP_max, since progress only falls with P through B_noise). The solution of
    dP/dt = R(t, P) from P = 0 then stays above every policy's P̃, so the time it reaches the
    target is a lower bound. It is integrated on a time grid, conservatively: single-site
    compute times are lowered by one grid step (a compute time falls at most one second per
    second of later start), and each step uses the rate at the step's start and its largest
    window. The step is a 25th of the fastest possible compute time, or the budget over
    ``max_steps`` if that is longer, so the bound stays tight for rounds of seconds and of
    minutes alike. The result is capped at the time budget, which every failing episode counts.

    Clairvoyant: reads the true trace and the episode's jitter. Valid for ``fixed_quota``
    rounds; raises ``ValueError`` for ``fixed_time`` scenarios.
    """
    p = env.params
    if p.fixed_time:
        raise ValueError("lower_bound_h supports fixed_quota rounds only")
    n = p.n_sites
    future = env.clairvoyant()
    state = env.state
    start, t_begin = float(state.start_s[0]), float(state.time_s[0])
    need = future.progress_needed
    budget_end = start + p.time_budget_s
    jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
    compute_min = float(jitter[:, :n].min()) if jitter.size else 1.0
    comm_min = float(jitter[:, n].min()) if jitter.size else 1.0
    fastest_s = float((p.quota / (p.gpu_count * p.gpu_rate)).min()) * compute_min
    step_s = max(fastest_s / 25.0, (budget_end - t_begin) / max_steps)
    grid = t_begin + step_s * np.arange(math.ceil((budget_end - t_begin) / step_s) + 1)

    # k-th smallest single-site compute time from each grid point, lowered by one step
    begin = np.repeat(grid[:, None], n, axis=1)
    compute = np.maximum(future.finish_s(begin, p.quota * compute_min) - begin - step_s, 0.0)
    compute.sort(axis=1)
    k = np.arange(1, n + 1)
    comm = (
        p.rtt_factor * np.sort(p.rtt_s) + 2.0 * np.maximum(np.sort(p.site_tx_s), k * p.hub_tx_s)
    ) * comm_min
    inv_time = 1.0 / (compute + comm + p.aggregation_s)  # (J, K): the best rate per round, k sites
    history = np.maximum.accumulate(inv_time, axis=0)  # any start so far: rounds of any length

    batch = np.cumsum(np.sort(p.site_batch)[::-1])  # the k largest batches
    dp_max = float(p.local_steps * p.eta_local / (1.0 + p.noise_b0 / batch[-1]))
    # Rounds up to τ_m = 2^m steps long started in the last 2^m + 1 cells; longer ones are
    # capped by ΔP_max / τ_(m−1) and may have started anywhere before.
    levels = _BOUND_LEVELS
    tau = step_s * (1 << np.arange(levels))
    cap = np.concatenate([[np.inf], dp_max / tau])  # cap of each window, then the catch-all

    progress = float(state.progress[0])
    for j0 in range(0, grid.size - 1, _BOUND_CHUNK):
        j1 = min(j0 + _BOUND_CHUNK, grid.size - 1)
        windows = _window_maxima(inv_time, j0, j1, levels)  # (j1 - j0, levels, K)
        for j in range(j0, j1):
            least = max(progress - dp_max, 0.0)
            noise = p.noise_b0 * (1.0 + least / p.noise_p_b) ** p.noise_gamma
            dp = p.local_steps * p.eta_local / (1.0 + noise / batch)  # (K,)
            best = np.concatenate([(windows[j - j0] * dp).max(axis=1), [(history[j] * dp).max()]])
            rate = float(np.max(np.minimum(cap, best)))
            if progress + rate * step_s >= need:
                reached = grid[j] + (need - progress) / rate
                return (min(reached, budget_end) - start) / 3600.0
            progress += rate * step_s
    return (budget_end - start) / 3600.0


_BOUND_LEVELS = 12  # windows of 2^1 ... 2^12 grid cells; longer rounds use the catch-all
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
