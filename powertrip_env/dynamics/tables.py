"""Reading the power tables: a clock's row, and the samples and energy up to a time.

``SimParams.table`` holds, per trace row, each site's throughput and powered GPUs and their
cumulative sums from row 0 (layout.TABLE_FIELDS). Power is piecewise constant over a row, so a
cumulative sum plus the row's rate times the time into it integrates it exactly, and the time a
site needs for a quota is one search in the cumulative column: a site whose power falls
mid-round slows down (docs/model.md, "A round").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    C_IV,
    C_ROWS,
    CUM_BUSY_G,
    CUM_GPU_J,
    CUM_SAMPLES,
    G_PER_J,
    POWERED,
    PV_W,
    RATE,
    S_WALL_W,
)

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState


@jit
def _row(c: np.ndarray, t: float) -> int:
    """Row of the per-row tables for a clock ``t`` (seconds since row 0, never negative).

    ``int(t / iv)``, not ``t // iv``: floor division of floats goes through ``fmod``, which costs
    more than the rest of a site's round. `current_row` uses the same formula.
    """
    k = int(t / c[C_IV])
    last = int(c[C_ROWS]) - 1
    return k if k < last else last


@jit
def _samples_at(c: np.ndarray, table: np.ndarray, t: float, i: int) -> float:
    """Cumulative samples site ``i`` could have processed from row 0 to time ``t``."""
    return _samples_in(c, table, t, i, _row(c, t))


@jit
def _samples_in(c: np.ndarray, table: np.ndarray, t: float, i: int, k: int) -> float:
    """`_samples_at` with ``t``'s row ``k`` known."""
    return table[k, CUM_SAMPLES, i] + table[k, RATE, i] * (t - k * c[C_IV])


@jit
def _gpu_energy_at(c: np.ndarray, table: np.ndarray, site: np.ndarray, t: float, i: int) -> float:
    """Energy of site ``i``'s powered GPUs, if busy, from row 0 to time ``t``."""
    k = _row(c, t)
    busy_w = table[k, POWERED, i] * site[S_WALL_W, i]
    return table[k, CUM_GPU_J, i] + busy_w * (t - k * c[C_IV])


@jit
def _busy_carbon_at(c: np.ndarray, table: np.ndarray, site: np.ndarray, t: float, i: int) -> float:
    """Grid carbon (g) of site ``i``'s powered GPUs, if busy, from row 0 to time ``t``: the
    draw above the row's PV output, at the row's intensity (docs/model.md, "Carbon")."""
    k = _row(c, t)
    grid_w = max(table[k, POWERED, i] * site[S_WALL_W, i] - table[k, PV_W, i], 0.0)
    return table[k, CUM_BUSY_G, i] + grid_w * table[k, G_PER_J, i] * (t - k * c[C_IV])


@jit
def _steady_carbon(c: np.ndarray, table: np.ndarray, draw_w: float, t0: float, t1: float, i: int):
    """Grid carbon (g) of a steady draw ``draw_w`` at site ``i`` from ``t0`` to ``t1``: row by
    row, what PV does not cover times the row's intensity (a round spans few rows)."""
    if t1 <= t0 or draw_w <= 0.0:
        return 0.0
    iv = c[C_IV]
    last = int(c[C_ROWS]) - 1
    grams = 0.0
    k = _row(c, t0)
    start = t0
    while start < t1:
        end = t1 if k >= last else min(t1, (k + 1) * iv)
        grid_w = max(draw_w - table[k, PV_W, i], 0.0)
        grams += grid_w * table[k, G_PER_J, i] * (end - start)
        start = end
        k += 1
    return grams


@jit
def _time_to_reach(c: np.ndarray, table: np.ndarray, target: float, i: int, hint: int) -> float:
    """Earliest time at which site ``i``'s cumulative samples reach ``target``.

    The first table row whose cumulative reaches it is found by galloping forward from
    ``hint`` (the row the work starts in: a round spans few rows), then bisecting. A target
    beyond the (wrapped) calendar is placed at its end, which no episode reaches (rounds are
    cut at the time budget).
    """
    rows = int(c[C_ROWS])
    iv = c[C_IV]
    if table[hint, CUM_SAMPLES, i] >= target:
        lo, hi = 0, hint  # the answer is in [lo, hi]; rows + 1 stands for "never"
    else:
        below, step = hint, 1  # cum[below] < target
        while below + step <= rows and table[below + step, CUM_SAMPLES, i] < target:
            below += step
            step *= 2
        lo, hi = below + 1, min(below + step, rows + 1)
    while lo < hi:
        mid = (lo + hi) // 2
        if table[mid, CUM_SAMPLES, i] >= target:
            hi = mid
        else:
            lo = mid + 1
    if lo > rows:
        return rows * iv
    j = min(max(lo - 1, 0), rows - 1)
    rate = table[j, RATE, i]
    if rate <= 0.0:
        return rows * iv
    return j * iv + (target - table[j, CUM_SAMPLES, i]) / rate


@jit
def _finish_batch(c, table, begin, work, out):
    for j in range(begin.shape[0]):
        for i in range(begin.shape[1]):
            target = _samples_at(c, table, begin[j, i], i) + work[i]
            out[j, i] = _time_to_reach(c, table, target, i, _row(c, begin[j, i]))


def current_row(params: SimParams, time_s: np.ndarray) -> np.ndarray:
    """Row of the per-row tables for each episode's clock."""
    return params.row_of(time_s)


def available_now(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N) bool: sites with at least one powered GPU at the current time."""
    out = np.empty((state.data.shape[0], params.n_sites), dtype=np.bool_)
    _available_batch(params.consts, params.available, state.time_s, out)
    return out


@jit
def _available_batch(c, available, time_s, out):
    """``available_now`` in one compiled pass: a policy asks before every decision, and the
    row's arithmetic and a gather in numpy cost more than a one-set what-if."""
    for b in range(time_s.shape[0]):
        row = _row(c, time_s[b])
        for i in range(out.shape[1]):
            out[b, i] = available[row, i]


def finish_times(params: SimParams, begin: np.ndarray, work: np.ndarray) -> np.ndarray:
    """CLAIRVOYANT: when each site, starting at ``begin`` (J, N), has processed ``work`` (N,)
    samples on the true trace (the time a round's compute would end, without jitter)."""
    out = np.empty(begin.shape)
    _finish_batch(params.consts, params.table, begin, work, out)
    return out
