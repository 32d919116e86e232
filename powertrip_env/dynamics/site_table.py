"""The per-row table of site features, computed once per scenario by ``build_params``.

Every site feature but one (joined) depends only on the trace row, so each is computed here, in
numpy at load time, for every row of the calendar; the kernel's observation (``observation``)
copies the current row. The columns are declared in ``features``. This module sits below
``params``, which builds the table, and below ``observation``, which reads it.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from powertrip_env.dynamics.features import (
    CARBON_WINDOWS_H,
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
    FC_INTENSITY,
    FC_PV_SHARE,
    FC_WEEK,
    FC_YESTERDAY,
    FORECAST_QUARTERS,
    INTENSITY_SCALE,
    N_CARBON_SITE,
    N_SITE_FEATURES,
    QUARTER_S,
    TREND_S,
    WEEK_DAYS,
)
from powertrip_env.dynamics.layout import S_GPU_RATE, S_GPUS, S_JOIN, S_QUOTA, S_RTT
from powertrip_env.units import S_PER_DAY, deg_to_h, h_to_s, per_j_to_per_kwh


class PowerData(Protocol):
    """What the kernel reads of a scenario's power (``powertrip_env.scenario.power.SitePower``;
    named here by what it holds, so that the kernel imports nothing above it)."""

    interval_s: float  # length of a trace row
    rows: int  # rows of the calendar
    t0_s: float  # Unix time of row 0
    available_w: np.ndarray  # (rows, N) watts the job may draw
    forecast_w: np.ndarray  # (rows, H, N) watts forecast at row k for row k + h
    peak_w: np.ndarray  # (N,) the most a site can have: capacity + PV peak
    pv_w: np.ndarray  # (rows, N) the part of available_w that on-site PV makes
    carbon_g_per_j: np.ndarray  # (rows, N) gCO2eq per joule from the site's grid (0: unknown)
    has_carbon: bool  # whether carbon_g_per_j holds a carbon intensity file's values

    def day_rows(self, first_day: int, last_day: int, where: str) -> tuple[int, int]:
        """Rows ``[start, stop)`` of days ``first_day..last_day`` (1-based, inclusive)."""
        ...


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
    solar_s = (row_time[:, None] + h_to_s(deg_to_h(longitude))) % S_PER_DAY
    solar_day = 2.0 * math.pi * solar_s / S_PER_DAY

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


def _carbon_obs_table(
    g_per_j: np.ndarray, pv_w: np.ndarray, busy_w: np.ndarray, interval_s: float
) -> np.ndarray:
    """(rows, N, N_CARBON_SITE) float32: a carbon task's site columns (features.CARBON_SITE_ROWS),
    which depend only on the trace row, from the wrapped (rows, N) intensity (g/J), PV output and
    busy draw (W) of the powered GPUs.

    Both forecasts are those of ``params.carbon_sources``, issued at the row itself: within a
    day ahead, row k + h's "yesterday" is row k + h − D (D rows a day), and its "week" the mean
    of that row and the six days before it, early in the trace over the days it has, taken in
    turn; before the trace's first whole day both hold row k's (persistence). No column reads
    a row after k.
    """
    rows, n = g_per_j.shape
    intensity = np.minimum(per_j_to_per_kwh(g_per_j) / INTENSITY_SCALE, 1.0)
    day = round(S_PER_DAY / interval_s)
    per_h = round(h_to_s(1.0) / interval_s)
    # base[q]: the forecasts of row q + D, issued a day or less before it, from q and before
    week = intensity[same_hour_rows(np.arange(rows), day, WEEK_DAYS)].mean(axis=1)
    out = np.empty((rows, n, N_CARBON_SITE), dtype=np.float32)
    out[..., FC_INTENSITY] = intensity
    k = np.arange(rows)
    for base, first in ((week, FC_WEEK), (intensity, FC_YESTERDAY)):
        total = np.concatenate([np.zeros((1, n)), np.cumsum(base, axis=0)])
        for w, (a, b) in enumerate(CARBON_WINDOWS_H):
            lo, hi = round(a * per_h) + 1, round(b * per_h)  # rows ahead, both ends in
            start = np.clip(k - day + lo, 0, rows)
            stop = np.clip(k - day + hi + 1, 0, rows)
            mean = (total[stop] - total[start]) / np.maximum(stop - start, 1)[:, None]
            out[..., first + w] = np.where((k >= day)[:, None], mean, intensity)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(busy_w > 0.0, pv_w / busy_w, 0.0)
    out[..., FC_PV_SHARE] = np.clip(share, 0.0, 1.0)
    return out


def same_hour_rows(latest: np.ndarray, day: int, days: int) -> np.ndarray:
    """(len(latest), days) the rows a seasonal forecast averages for a row whose latest same
    time of day already past is ``latest``: that row and the ``days − 1`` days before it, and
    early in the trace, where fewer days are past, the days it has, taken in turn. ``day`` is
    the rows a day holds. Every row is at most ``latest`` (``params.carbon_sources`` and the
    carbon observation's forecasts both read the past through it)."""
    had = latest // day + 1  # the days the trace has at that time of day, up to the latest
    return latest[:, None] - day * (np.arange(days)[None, :] % had[:, None])
