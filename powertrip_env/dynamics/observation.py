"""Observations: the per-row table of site features, and each episode's observation from it.

Every site feature but one depends only on the trace row, so ``build_params`` computes them
once per scenario (`_site_obs_table`) and an observation is a copy of the current row plus the
episode's joined slots and its global features (`_observe_batch`). The columns are declared in
``features.py``; ``step_observe`` runs a round and observes in one call into compiled code.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING

import numba
import numpy as np

from powertrip_env.dynamics.features import (
    F_AVAILABLE,
    F_COMPUTE,
    F_FORECAST,
    F_JOIN_TIME,
    F_JOINED,
    F_LOCAL_COS,
    F_LOCAL_SIN,
    F_POWER,
    F_POWERED,
    F_RTT,
    F_THROUGHPUT,
    F_TREND,
    FORECAST_QUARTERS,
    G_COVERAGE,
    G_DAY_COS,
    G_DAY_SIN,
    G_ELAPSED,
    G_LAST_ROUND,
    G_PROGRESS,
    N_GLOBAL,
    N_SITE_FEATURES,
    QUARTER_S,
    TREND_S,
)
from powertrip_env.dynamics.jit import compiled, jit
from powertrip_env.dynamics.layout import (
    ACC,
    C_A0,
    C_BUDGET,
    C_SPAN,
    C_T0,
    C_TIME_SCALE,
    COVERAGE,
    JOINED,
    LAST_ROUND,
    NO_JITTER,
    PARALLEL_CHUNKS,
    PARALLEL_MIN_BATCH,
    S_GPU_RATE,
    S_GPUS,
    S_JOIN,
    S_QUOTA,
    S_RTT,
    START,
    TIME,
)
from powertrip_env.dynamics.round import _step_batch
from powertrip_env.dynamics.state import RoundResult, SimState, _c_bool, _round_buffers
from powertrip_env.dynamics.tables import _row

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import PowerData, SimParams

_PARALLEL_LOCK = threading.Lock()


def _site_obs_table(
    power: PowerData,
    site: np.ndarray,
    avail_w: np.ndarray,
    fc_w: np.ndarray,
    powered: np.ndarray,
    rate: np.ndarray,
    longitude: np.ndarray,
    time_scale_s: float,
) -> np.ndarray:
    """(rows, N, F) float32: every site feature that depends only on the trace row.

    ``avail_w``, ``powered`` and ``rate`` are wrapped once (2T rows); ``fc_w`` is the forecast
    of one calendar (T rows), whose features are wrapped here. ``site`` is the packed per-site
    array (layout.SITE_FIELDS).
    """
    rows, n = rate.shape
    iv = float(power.interval_s)
    gpu_count, rtt_s = site[S_GPUS], site[S_RTT]
    frac = np.clip(avail_w / power.peak_w, 0.0, 1.0)
    lag = max(1, round(TREND_S / iv))
    past = np.concatenate([np.repeat(frac[:1], lag, axis=0), frac[:-lag]])
    available = rate > 0
    with np.errstate(divide="ignore"):
        est = np.where(
            available, site[S_QUOTA] / np.where(available, rate, 1.0) / time_scale_s, 1.0
        )
    rtt_max = rtt_s.max()
    fc_frac = np.clip(fc_w / power.peak_w, 0.0, 1.0)
    per_quarter = max(1, round(QUARTER_S / iv))
    horizons = fc_w.shape[1]
    row_time = power.t0_s + (np.arange(rows) % power.rows) * iv
    solar_day = 2.0 * math.pi * ((row_time[:, None] + longitude / 15.0 * 3600.0) % 86400.0) / 86400

    obs = np.empty((rows, n, N_SITE_FEATURES), dtype=np.float32)
    obs[..., F_POWER] = frac
    obs[..., F_POWERED] = powered / gpu_count
    obs[..., F_THROUGHPUT] = rate / (gpu_count * site[S_GPU_RATE]).max()
    obs[..., F_COMPUTE] = np.minimum(est, 1.0)
    obs[..., F_RTT] = rtt_s / rtt_max if rtt_max > 0 else 0.0
    obs[..., F_TREND] = np.clip(frac - past, -1.0, 1.0)
    obs[..., F_JOINED] = 0.0  # the episode's: `_observe_batch` writes it
    obs[..., F_AVAILABLE] = available
    obs[..., F_JOIN_TIME] = np.minimum(site[S_JOIN] / time_scale_s, 1.0)
    wraps = rows // fc_frac.shape[0]
    for q in range(FORECAST_QUARTERS):
        lo = min(q * per_quarter, horizons - 1)
        hi = max(lo + 1, min((q + 1) * per_quarter, horizons))
        obs[..., F_FORECAST + q] = np.concatenate([fc_frac[:, lo:hi, :].mean(axis=1)] * wraps)
    obs[..., F_LOCAL_SIN] = np.sin(solar_day)
    obs[..., F_LOCAL_COS] = np.cos(solar_day)
    return obs


@jit
def _observe_batch(c, site_obs, state, out, width, valid):
    """Each episode's observation into a row of ``out``: the site features of ``width`` sites
    (zeros past N), the global features, then (``valid``) the per-site valid flags."""
    n, nf = site_obs.shape[1], site_obs.shape[2]
    g = width * nf
    for b in range(state.shape[0]):
        st = state[b]
        row = out[b]
        k = _row(c, st[TIME])
        for i in range(n):
            for q in range(nf):
                row[i * nf + q] = site_obs[k, i, q]
            row[i * nf + F_JOINED] = st[JOINED + i]
        for x in range(n * nf, g):
            row[x] = 0.0
        day = 2.0 * math.pi * ((st[TIME] + c[C_T0]) % 86400.0) / 86400.0
        row[g + G_PROGRESS] = min(max((st[ACC] - c[C_A0]) / c[C_SPAN], 0.0), 1.0)
        row[g + G_ELAPSED] = min(max((st[TIME] - st[START]) / c[C_BUDGET], 0.0), 1.0)
        row[g + G_DAY_SIN] = math.sin(day)
        row[g + G_DAY_COS] = math.cos(day)
        row[g + G_LAST_ROUND] = min(max(st[LAST_ROUND] / c[C_TIME_SCALE], 0.0), 1.0)
        row[g + G_COVERAGE] = min(max(st[COVERAGE], 0.0), 1.0)
        if valid:
            for i in range(width):
                row[g + N_GLOBAL + i] = 1.0 if i < n else 0.0


@jit
def _step_observe(c, site, table, site_obs, state, masks, jitter, rec, srec, out, width, valid):
    """`_step_batch` then `_observe_batch`: what an environment step needs, in one call."""
    _step_batch(c, site, table, state, masks, jitter, rec, srec)
    _observe_batch(c, site_obs, state, out, width, valid)


@compiled(nogil=True, error_model="numpy", parallel=True)
def _step_observe_parallel(c, site, table, site_obs, state, masks, rec, srec, out, width, valid):
    """`_step_observe` on all cores: the batch in chunks, each episode as in the serial call."""
    b = state.shape[0]
    chunks = min(b, PARALLEL_CHUNKS)
    for ch in numba.prange(chunks):
        lo, hi = ch * b // chunks, (ch + 1) * b // chunks
        _step_observe(
            c, site, table, site_obs, state[lo:hi], masks[lo:hi], NO_JITTER, rec[lo:hi],
            srec[lo:hi], out[lo:hi], width, valid,
        )  # fmt: skip


def _obs_buffer(batch: int, width: int, valid: bool) -> np.ndarray:
    """Flat observations of ``width`` sites: their features, the global ones, valid flags."""
    return np.empty(
        (batch, width * N_SITE_FEATURES + N_GLOBAL + (width if valid else 0)), np.float32
    )


def step_observe(
    params: SimParams, state: SimState, mask: np.ndarray, width: int, valid: bool
) -> tuple[RoundResult, np.ndarray]:
    """`step_round` and the new observations, flat (B, width·F + G [+ width]), in one call."""
    data, record, sites = _round_buffers(params, state)
    b = data.shape[0]
    obs = _obs_buffer(b, width, valid)
    args = (params.consts, params.site, params.table, params.site_obs, data, _c_bool(mask))
    if b >= PARALLEL_MIN_BATCH and numba.get_num_threads() > 1:
        with _PARALLEL_LOCK:  # numba's "workqueue" thread pool is documented not thread-safe
            _step_observe_parallel(*args, record, sites, obs, width, valid)
    else:
        _step_observe(*args, NO_JITTER, record, sites, obs, width, valid)
    return RoundResult(SimState(data), record, sites), obs


def observe(params: SimParams, state: SimState, width: int, valid: bool) -> np.ndarray:
    """Flat observations (B, width·F + G [+ width]) float32: site features (zeros for padded
    sites), global features, and with ``valid`` the per-site valid flags."""
    obs = _obs_buffer(state.batch, width, valid)
    _observe_batch(params.consts, params.site_obs, state.data, obs, width, valid)
    return obs
