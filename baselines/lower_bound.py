"""The lower bound: a time to accuracy that no policy can beat, whatever it knows.

``lower_bound_h`` is the largest of three relaxations of the dynamics, each valid on its own
(``rate_bound_h``, ``round_bound_h``, ``join_bound_h``); the benchmark brackets every policy
between it and the clairvoyant ``Optimiser`` (``references``). Clairvoyant: it reads the true
trace and the episode's jitter through ``env.unwrapped.clairvoyant()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.dynamics import (
    comm_time_s,
    delta_progress,
    join_bound_dp,
    least_round_ends,
    round_bound_dp,
)
from powertrip_env.units import s_to_h


def lower_bound_h(env: Any, max_steps: int = 50_000) -> float:
    """A time to accuracy (hours) that no policy can beat in this episode, from its start.

    The largest of three relaxations, each valid on its own: ``rate_bound_h`` (any round
    mode); for rounds of equal steps (``fixed_quota``), ``round_bound_h``, which keeps each
    round's progress at its end and ties its length to its start; and, with blocking joins and
    at most ``JOIN_BOUND_MAX_SITES`` sites, ``join_bound_h``, which also charges every join.
    """
    p = env.clairvoyant().params
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
    joined = env.decision_view().joined
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
    joined = int(np.sum(np.left_shift(1, np.flatnonzero(env.decision_view().joined))))
    idle_cells = max(int(p.idle_s // g.step_s), 1)
    best = join_bound_dp(
        p,
        g.progress,
        g.need,
        (fin_in, fin_out),
        g.comm + p.aggregation_s,
        g.batch,
        (g.t_begin, g.step_s),
        joined,
        idle_cells,
    )
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
        future = env.clairvoyant()
        p, state = future.params, future.state
        n = p.n_sites
        start, t_begin = float(state.start_s[0]), float(state.time_s[0])
        budget_end = start + float(state.budget_s[0])
        jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
        compute_min = float(jitter[:, :n].min()) if jitter.size else 1.0
        comm_min = float(jitter[:, n].min()) if jitter.size else 1.0
        k = np.arange(1, n + 1)
        comm = comm_time_s(p, k, np.sort(p.rtt_s), np.sort(p.site_tx_s)) * comm_min
        fastest_s = float((p.quota / (p.gpu_count * p.gpu_rate)).min() * compute_min)
        step_s = max(fastest_s / cells_per_round, (budget_end - t_begin) / max_steps)
        starts = t_begin + step_s * np.arange(math.ceil((budget_end - t_begin) / step_s) + 1)
        return cls(
            p=p,
            future=future,
            start=start,
            t_begin=t_begin,
            budget_end=budget_end,
            need=future.progress_needed,
            progress=float(state.progress[0]),
            compute_min=compute_min,
            comm=comm,
            comm_min=comm_min,
            batch=np.cumsum(np.sort(p.site_batch)[::-1]),
            step_s=step_s,
            starts=starts,
        )

    def finish(self, begin: np.ndarray) -> np.ndarray:
        """When each site, starting at ``begin`` (J, N), finishes the quota (least jitter)."""
        return self.future.finish_s(begin, self.p.quota * self.compute_min)

    def hours(self, end_s: float) -> float:
        return s_to_h(min(end_s, self.budget_end) - self.start)


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
    future = env.clairvoyant()
    p, state = future.params, future.state
    n = p.n_sites
    start, t_begin = float(state.start_s[0]), float(state.time_s[0])
    need = future.progress_needed
    budget_end = start + float(state.budget_s[0])
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

    varying, history, batch, inv_time = _round_table(
        p, future, grid, step_s, window if p.fixed_time else None, comm, compute_jitter.min()
    )

    reached = _integrate(
        p, grid, step_s, (varying, history, batch, inv_time), float(state.progress[0]), need
    )
    return s_to_h(min(reached, budget_end) - start)


def _round_table(
    p: Any,
    future: Any,
    grid: np.ndarray,
    step_s: float,
    window: np.ndarray | None,
    comm: np.ndarray,
    compute_min: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``rate_bound_h``'s rounds: (varying, history, batch, inv_time), per grid cell of a
    round's start the one of batch and inverse round time that depends on the start, its
    running maximum, and the two."""
    # Per grid cell of a round's start and column (k sites; fixed_time: and window level), the
    # largest batch and the least round time; one of the two is the same for every start.
    if p.fixed_time:
        batch, inv_time = _fixed_time_rounds(p, grid, step_s, window, comm)  # (J, C), (C,)
        varying = batch
    else:
        inv_time = _fixed_quota_inv_time(p, future, grid, step_s, compute_min, comm)
        batch = np.cumsum(np.sort(p.site_batch)[::-1])  # (K,): the k largest batches
        varying = inv_time  # (J, K)
    history = np.maximum.accumulate(varying, axis=0)  # any start so far: rounds of any length
    return varying, history, batch, inv_time


def _integrate(
    p: Any,
    grid: np.ndarray,
    step_s: float,
    rounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    progress: float,
    need: float,
) -> float:
    """When ``dP/dt = R(t, P)`` from ``progress`` on ``grid`` reaches ``need`` (s since row 0;
    inf if not on the grid): ``rate_bound_h``'s integration, one grid step at a time.

    ``rounds`` is (varying, history, batch, inv_time): per start cell the largest batch or the
    least round time, their maxima over every start so far, and the other of the two."""
    varying, history, batch, inv_time = rounds
    dp_max = float(delta_progress(p, 0.0, float(np.max(batch))))
    # Rounds up to τ_m = 2^m steps long started in the last 2^m + 1 cells; longer ones are
    # capped by ΔP_max / τ_(m−1) and may have started anywhere before.
    levels = _BOUND_LEVELS
    tau = step_s * (1 << np.arange(levels))
    cap = np.concatenate([[np.inf], dp_max / tau])  # cap of each window, then the catch-all
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
                return grid[j] + (need - progress) / rate
            progress += rate * step_s
    return math.inf  # not before the grid's end: the budget


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
