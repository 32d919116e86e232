"""The kernel's formulas, for tools that reason about the model rather than step it.

Policies and tools do not reach into the dynamics: they read the environment through
``decision_view``, ``predict_round`` and, for the clairvoyant references, ``clairvoyant()``. A
report that checks the model against published figures
(``powertrip_env.harness.calibration.fidelity``) and a
bound that relaxes it (``powertrip_env.baselines.lower_bound.lower_bound_h``) need the formulas
themselves: learning progress and a round's communication time. This module hands over exactly
those, computed by the same compiled functions the environment steps with (docs/model.md, "Learning
progress" and "A round"), and the two compiled searches the lower bounds run over those formulas
(``round_bound_dp``, ``join_bound_dp``; their relaxations are argued where they are used,
``powertrip_env.baselines.lower_bound.round_bound_h`` and ``join_bound_h``).
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.learning import (
    _accuracy,
    _delta_progress,
    _delta_progress_many,
    _noise_scale,
)
from powertrip_env.dynamics.round import _comm_time, _comm_time_many

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams

__all__ = [
    "accuracy",
    "comm_time_s",
    "delta_progress",
    "join_bound_dp",
    "least_round_ends",
    "noise_scale",
    "noise_scale_array",
    "progress_needed",
    "round_bound_dp",
    "rounds_to_target",
]


def noise_scale(params: SimParams, progress: Any) -> np.ndarray:
    """The gradient noise scale ``B_noise(P)`` at each value of ``progress``."""
    p = np.asarray(progress, dtype=np.float64)
    return np.array([_noise_scale(params.consts, 1.0, x) for x in p.ravel()]).reshape(p.shape)


def noise_scale_array(constants: Any, progress: Any, noise: Any = 1.0) -> Any:
    """``B_noise(P) = (B0 · noise) · (1 + P / P_B)^γ`` over arrays, in numpy, from any object
    with the workload's ``noise_b0``, ``noise_p_b`` and ``noise_gamma`` (a ``SimParams`` or the
    scenario's ``Workload``); ``noise`` is a factor on ``B0`` (a scalar or an array, broadcast).

    The tools that reason about the curve over many points (the carbon bound's integrand, the
    adaptive rules' fit over a grid of noise factors) use this one. It is ``noise_scale``'s
    formula, but numpy's vectorised power can differ from the compiled kernel's by an ulp, so the
    two are not interchangeable where a published number depends on the last bit.
    """
    growth = np.power(1.0 + np.asarray(progress) / constants.noise_p_b, constants.noise_gamma)
    return (constants.noise_b0 * noise) * growth


def accuracy(params: SimParams, progress: Any, cover: Any = 1.0) -> np.ndarray:
    """The surrogate accuracy at each value of ``progress`` (and ``cover``, broadcast against
    it)."""
    p, cv = np.broadcast_arrays(np.asarray(progress, np.float64), np.asarray(cover, np.float64))
    values = [_accuracy(params.consts, x, y) for x, y in zip(p.ravel(), cv.ravel(), strict=True)]
    return np.array(values, dtype=np.float64).reshape(p.shape)


def delta_progress(params: SimParams, progress: float, batch: Any, cover: float = 1.0) -> Any:
    """What one round of global batch ``batch`` adds at ``progress``; for an array of batches,
    the array of what each would add (a bound asks for many at once)."""
    if np.ndim(batch) == 0:
        return float(
            _delta_progress(params.consts, 1.0, 1.0, float(progress), float(batch), float(cover))
        )
    b = np.asarray(batch, dtype=np.float64)
    out = np.empty(b.size)
    _delta_progress_many(params.consts, float(progress), b.ravel(), float(cover), out)
    return out.reshape(b.shape)


def progress_needed(params: SimParams, cover: Any = None) -> Any:
    """Progress at which the accuracy curve reaches the target (its inverse at a*): at full
    coverage (a float), or at each value of ``cover`` (an array; inf where that coverage caps
    the accuracy at or below the target, as ``coverage_ceiling`` can)."""
    if cover is None:
        return _progress_to_target(params, params.a_max)
    cv = np.asarray(cover, dtype=np.float64)
    a_max = (
        params.a_max * cv**params.coverage_ceiling
        if params.coverage_ceiling > 0.0
        else params.a_max
    )
    a_max = np.broadcast_to(a_max, cv.shape)
    out = np.full(cv.shape, np.inf)
    reach = a_max > params.a_target
    out[reach] = _progress_to_target(params, a_max[reach])
    return out


def _progress_to_target(params: SimParams, a_max: Any) -> Any:
    """The curve's inverse at the target under the ceiling ``a_max`` (a float or an array)."""
    ratio = (a_max - params.a_target) / (a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


def comm_time_s(params: SimParams, n_done: Any, rtt_s: Any, site_tx_s: Any) -> np.ndarray:
    """The kernel's communication time of a round before jitter, elementwise (arguments
    broadcast), for tools that bound or report it without stepping a round."""
    k, r, x = np.broadcast_arrays(
        np.asarray(n_done, np.float64),
        np.asarray(rtt_s, np.float64),
        np.asarray(site_tx_s, np.float64),
    )
    out = np.empty(k.size)
    _comm_time_many(params.consts, k.ravel(), r.ravel(), x.ravel(), out)
    return out.reshape(k.shape)


def rounds_to_target(params: SimParams, sites: float, site_batch: float | None = None) -> float:
    """Rounds that ``sites`` equally fast sites need to the target at full coverage.

    Each round's global batch is ``sites · site_batch`` (the scenario's largest per-site batch if
    not given), as under equal steps with no site dropping out; the last round counts by the
    share of it that was needed, so the result is smooth in ``sites``.
    """
    need = progress_needed(params)
    batch = float(sites) * float(site_batch if site_batch is not None else params.site_batch.max())
    progress, rounds = 0.0, 0
    while True:
        dp = delta_progress(params, progress, batch)
        if progress + dp >= need:
            return rounds + (need - progress) / dp
        progress += dp
        rounds += 1


# At most this many groups of the sites' RTTs, and of their transfers, make the thresholds of
# ``least_round_ends`` (its cost grows with their product): the flagship's 10 RTTs and 3
# transfers are exact; 32 sites of many links share groups.
ROUND_END_RTT_GROUPS = 12
ROUND_END_TX_GROUPS = 6


def least_round_ends(params: SimParams, finish: np.ndarray, comm_factor: float = 1.0) -> np.ndarray:
    """(J, N): the earliest end of a round of k = 1..N completing sites, for each row of
    ``finish`` (J, N), each site's compute end.

    A round's communication depends on its completing sites' largest RTT and largest update
    transfer (``_comm_time``). The sites' RTTs are cut into at most ``ROUND_END_RTT_GROUPS``
    groups of neighbouring values, their transfers into at most ``ROUND_END_TX_GROUPS``. For each
    pair of groups, the sites within both groups' largest values may complete, and the
    communication is taken at both groups' smallest: the k-th earliest compute end among those
    sites plus that communication (times ``comm_factor``, the least network jitter) and
    aggregation. A real round's own maxima fall in one pair of groups, whose sites include its
    own and whose communication is no longer than its own, so no k sites end a round earlier;
    with a group per value (the flagship) it is exact.
    """
    rtt = np.ascontiguousarray(params.rtt_s, dtype=np.float64)
    tx = np.ascontiguousarray(params.site_tx_s, dtype=np.float64)
    out = np.empty(finish.shape)
    _least_round_ends(
        params.consts,
        np.ascontiguousarray(finish, np.float64),
        rtt,
        tx,
        _groups(rtt, ROUND_END_RTT_GROUPS),
        _groups(tx, ROUND_END_TX_GROUPS),
        float(comm_factor),
        params.aggregation_s,
        out,
    )
    return out


def _groups(values: np.ndarray, most: int) -> np.ndarray:
    """(G, 2) the smallest and largest value of each group of neighbouring distinct values."""
    distinct = np.unique(values)
    parts = np.array_split(distinct, min(most, distinct.size))
    return np.array([[part[0], part[-1]] for part in parts], dtype=np.float64)


@jit
def _least_round_ends(c, finish, rtt, tx, rtt_groups, tx_groups, comm_factor, aggregation, out):
    cells, n = finish.shape
    pairs = []  # the sites within each pair of groups' largest values, and the pair's comm
    for a in range(rtt_groups.shape[0]):
        for b in range(tx_groups.shape[0]):
            within = np.flatnonzero((rtt <= rtt_groups[a, 1]) & (tx <= tx_groups[b, 1]))
            if within.size == 0:
                continue
            comm = np.empty(n)
            for k in range(n):
                comm[k] = (
                    _comm_time(c, k + 1, rtt_groups[a, 0], tx_groups[b, 0]) * comm_factor
                    + aggregation
                )
            pairs.append((within, comm))
    for j in range(cells):
        out[j, :] = np.inf
        for q in range(len(pairs)):
            within, comm = pairs[q]
            ends = np.sort(finish[j, within])
            for k in range(within.size):
                value = ends[k] + comm[k]
                if value < out[j, k]:
                    out[j, k] = value


def round_bound_dp(
    params: SimParams,
    progress: float,
    need: float,
    end: np.ndarray,
    cell: np.ndarray,
    batch: np.ndarray,
) -> float:
    """The earliest round end (s) that reaches progress ``need`` from ``progress``, over start
    cells: ``end`` (J, K) the earliest end of a k-site round starting in cell j, ``cell`` (J, K)
    the cell that end falls in, ``batch`` (K,) the largest batch of k sites."""
    return float(_round_dp(params.consts, float(progress), float(need), end, cell, batch))


def join_bound_dp(
    params: SimParams,
    progress: float,
    need: float,
    finish: tuple[np.ndarray, np.ndarray],
    round_extra_s: np.ndarray,
    batch: np.ndarray,
    grid: tuple[float, float],
    joined: int,
    idle_cells: int,
) -> float:
    """The earliest round end (s) reaching ``need`` over states (cell, joined set, progress):
    ``finish`` the (J, N) earliest quota ends of a joined site and of a joining one from each
    cell, ``round_extra_s`` (K,) what a k-site round adds after its last compute, ``grid``
    (first cell's start, cell length), ``joined`` the joined set now as bits."""
    fin_in, fin_out = finish
    t_begin, step_s = grid
    return float(
        _join_dp(
            params.consts,
            float(progress),
            float(need),
            fin_in,
            fin_out,
            round_extra_s,
            batch,
            float(t_begin),
            float(step_s),
            int(joined),
            int(idle_cells),
        )
    )


@jit
def _round_dp(consts, progress, need, end, cell, batch):
    """``round_bound_h``'s DP over start cells: the earliest round end reaching ``need``."""
    cells, kmax = end.shape
    most = np.full(cells + 1, -1.0)  # the most progress a round starting in the cell can have
    most[0] = progress
    best = math.inf
    for j in range(cells):
        here = most[j]
        if here < 0.0:
            continue
        if end[j, 0] >= best:  # every later round ends later still
            break
        if most[j + 1] < here:
            most[j + 1] = here
        for k in range(kmax):
            after = here + _delta_progress(consts, 1.0, 1.0, here, batch[k], 1.0)
            if after >= need:
                if end[j, k] < best:
                    best = end[j, k]
            else:
                c = cell[j, k]
                if most[c] < after:
                    most[c] = after
    return best


@jit
def _join_dp(
    consts, progress, need, fin_in, fin_out, comm, batch, t_begin, step_s, joined, idle_cells
):
    """``join_bound_h``'s DP: states (cell, joined set as bits, progress) expanded by cell."""
    cells, n = fin_in.shape
    full = 1 << n
    covered = np.full(full, -1.0)  # the most progress of an expanded state holding each set
    heap = [(0, -progress, joined)]
    best = math.inf
    f = np.empty(n)
    gains = np.empty(n)
    while len(heap) > 0:
        j, neg, mask = heapq.heappop(heap)
        here = -neg
        if t_begin + j * step_s >= best:
            break
        if covered[mask] >= here:
            continue
        sub = mask  # every subset of the set is now covered up to this progress
        while True:
            if covered[sub] < here:
                covered[sub] = here
            if sub == 0:
                break
            sub = (sub - 1) & mask
        for i in range(n):
            f[i] = fin_in[j, i] if (mask >> i) & 1 else fin_out[j, i]
            gains[i] = _delta_progress(consts, 1.0, 1.0, here, batch[i], 1.0)
        order = np.argsort(f)
        prefix = 0
        for m in range(n):
            prefix |= 1 << order[m]
            barrier = f[order[m]]
            for k in range(m + 1):
                end = barrier + comm[k]
                after = here + gains[k]
                if after >= need:
                    if end < best:
                        best = end
                    continue
                c = int((end - t_begin) // step_s)
                if c < cells and covered[prefix] < after:
                    heapq.heappush(heap, (c, -after, prefix))
        if j + idle_cells < cells:
            heapq.heappush(heap, (j + idle_cells, -here, 0))
    return best
