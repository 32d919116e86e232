"""The simulator: pure array functions over a batch of episodes.

Every state array has a leading batch axis, ``(batch, n_sites)`` or ``(batch,)``, so the single
environment (a batch of one), the vector environment (a batch of B) and the planners in
``baselines/`` (a batch of candidate plans) run this one implementation of the dynamics. The
model, with every equation and parameter, is in docs/model.md. This module imports numpy only.

Power enters through tables built once per scenario (``SimParams``): powered GPUs, throughput,
the cumulative samples and GPU energy a site could accumulate, and each site's next outage, per
trace interval. The time a site needs for its quota is then one search in the cumulative table,
which integrates the piecewise-constant power exactly: a site whose power falls mid-round
slows down, and one left with no powered GPU drops out of the round. The tables hold the trace
twice (wrapped once at its end) so that reads just past an episode's window stay in bounds.

Randomness does not live here: callers pass multiplicative jitter factors drawn from the
episode's generator, which keeps these functions pure and a batch equal to its members.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:  # only for type hints; core stays numpy-only at run time
    from powertrip_env.config import Scenario
    from powertrip_env.power import SitePower

EARTH_RADIUS_KM = 6371.0
TREND_S = 3600.0  # the observation's power trend looks back one hour
FORECAST_QUARTERS = 4  # the observation's forecast: four quarter hours ahead
QUARTER_S = 900.0

# Per-site observation features, in column order, with their ranges.
SITE_FEATURES = (
    "available_power_fraction",  # A_i / peak (capacity + PV peak), [0, 1]
    "powered_gpu_fraction",  # powered GPUs / GPU count, [0, 1]
    "throughput",  # samples/s over the largest full-power site throughput, [0, 1]
    "compute_time",  # quota / throughput over `time_scale_s`, clipped; 1 if unavailable
    "rtt_to_hub",  # RTT to the hub over the largest site RTT (0 if all are 0), [0, 1]
    "power_trend",  # change of A_i / peak over the last hour, [-1, 1]
    "selected_last_round",  # 0 or 1: the site completed the last round (it is joined)
    "available",  # 0 or 1: at least one GPU can be powered now
    "join_time",  # join_fixed_s + model_bytes / wan_bw over `time_scale_s`, clipped, [0, 1]
    "forecast_power_q1",  # forecast A_i / peak, mean over the next 0-15 min, [0, 1]
    "forecast_power_q2",  # ... 15-30 min
    "forecast_power_q3",  # ... 30-45 min
    "forecast_power_q4",  # ... 45-60 min
    "local_time_sin",  # the site's local solar time of day (longitude / 15 h from UTC)
    "local_time_cos",
)
GLOBAL_FEATURES = (
    "progress_to_target",  # (a - a0) / (a* - a0), [0, 1]
    "elapsed_fraction",  # elapsed time / time budget, [0, 1]
    "time_of_day_sin",  # UTC time of day, [-1, 1]
    "time_of_day_cos",  # [-1, 1]
    "last_round_time",  # last round time over `time_scale_s`, clipped, [0, 1]
    "data_coverage",  # non-IID coverage of the last round, [0, 1]
)
SITE_LOW = np.array([0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, -1, -1], dtype=np.float32)
SITE_HIGH = np.ones(len(SITE_FEATURES), dtype=np.float32)
GLOBAL_LOW = np.array([0, 0, -1, -1, 0, 0], dtype=np.float32)
GLOBAL_HIGH = np.ones(len(GLOBAL_FEATURES), dtype=np.float32)
SELECTED_COL = SITE_FEATURES.index("selected_last_round")


def great_circle_km(lat1: np.ndarray, lon1: np.ndarray, lat2: float, lon2: float) -> np.ndarray:
    """Haversine distance on a spherical Earth."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def rtt_ms(distance_km: np.ndarray, base_ms: float, route_factor: float, km_per_ms: float):
    """``RTT = base + 2 · route_factor · d / v_fiber`` (docs/model.md, "Network")."""
    return base_ms + 2.0 * route_factor * np.asarray(distance_km) / km_per_ms


@dataclass(frozen=True, eq=False)
class SimParams:
    """Everything static about a scenario and its power data, as arrays. Shared read-only."""

    n_sites: int
    interval_s: float
    trace_rows: int  # rows of the calendar; the per-row tables hold it twice (wrapped)
    trace_t0_s: float  # Unix time of row 0
    # per site, shape (n_sites,)
    gpu_count: np.ndarray
    gpu_wall_w: np.ndarray  # p_g = tdp · server_overhead · PUE
    gpu_rate: np.ndarray  # θ_g, samples/s per powered GPU
    peak_w: np.ndarray  # the most power a site can have: capacity + PV peak
    site_batch: np.ndarray
    wan_bps: np.ndarray
    rtt_s: np.ndarray  # round trip to the hub
    data_share: np.ndarray
    quota: np.ndarray  # samples per round per site (fixed_quota mode)
    join_s: np.ndarray  # join_fixed_s + model bits / WAN bandwidth
    # per row of the wrapped calendar, shape (rows, n_sites); cum_* have rows + 1
    powered: np.ndarray
    rate: np.ndarray  # samples/s
    cum_samples: np.ndarray
    cum_gpu_j: np.ndarray  # energy of the powered GPUs if busy
    available: np.ndarray  # bool
    outage_s: np.ndarray  # start of the first row at or after this one with no powered GPU
    forecast_rate: np.ndarray  # (rows, H, n_sites) samples/s forecast at row k for row k + h
    site_obs: np.ndarray  # float32 (rows, n_sites, F) static part of the site features
    flat_cum: np.ndarray  # cum_samples per site laid end to end, offset to be sorted
    flat_offset: np.ndarray  # (n_sites,)
    # workload and network scalars
    model_bits: float
    hub_bps: float
    rtt_factor: float
    aggregation_s: float
    local_steps: float
    eta_local: float
    noise_b0: float
    noise_p_b: float
    noise_gamma: float
    a0: float
    a_max: float
    a_target: float
    p0: float
    alpha: float
    non_iid: float
    coverage_tau: float
    coverage_ceiling: float
    fixed_time: bool
    round_s: float
    idle_s: float
    jitter_sigma: float
    idle_fraction: float
    time_budget_s: float
    h_ref_s: float
    max_rounds: int
    time_scale_s: float  # normaliser of time-valued observations

    @cached_property
    def rows(self) -> int:
        """Rows of the wrapped per-row tables."""
        return self.rate.shape[0]

    @cached_property
    def site_cols(self) -> np.ndarray:
        return np.arange(self.n_sites)

    @cached_property
    def site_tx_s(self) -> np.ndarray:
        """``M / bw_i``: seconds to send the update over each site's WAN link."""
        return self.model_bits / self.wan_bps

    @cached_property
    def hub_tx_s(self) -> float:
        """``M / bw_hub``: seconds the hub's link needs per site's update."""
        return self.model_bits / self.hub_bps

    @cached_property
    def idle_w_per_gpu(self) -> np.ndarray:
        """Draw of one joined-but-waiting GPU: ``idle_fraction · p_g``."""
        return self.idle_fraction * self.gpu_wall_w


def build_params(scenario: Scenario, power: SitePower) -> SimParams:
    """Turn a validated scenario and its sites' available power into the simulator's tables."""
    sites = scenario.sites
    n = len(sites)
    wl, net, ep = scenario.workload, scenario.network, scenario.episode
    col = lambda attr: np.array([getattr(s, attr) for s in sites], dtype=np.float64)  # noqa: E731
    gpu = [scenario.gpus[s.gpu] for s in sites]
    tdp_w = np.array([g.power_w for g in gpu])
    tflops = np.array([g.tflops_bf16 for g in gpu])
    gpu_count = col("gpu_count")
    gpu_wall_w = tdp_w * ep.server_overhead * col("pue")
    gpu_rate = tflops * 1e12 * wl.mfu / wl.flops_per_sample
    site_batch = np.full(n, float(wl.site_batch))
    quota = site_batch * wl.local_steps
    wan_bps = col("wan_gbps") * 1e9
    model_bits = wl.model_bytes * 8.0
    iv = float(power.interval_s)

    if net.rtt_to_hub_ms is not None:
        rtt = np.array(net.rtt_to_hub_ms, dtype=np.float64)
    else:
        d = great_circle_km(col("latitude"), col("longitude"), net.hub_latitude, net.hub_longitude)
        rtt = rtt_ms(d, net.base_ms, net.route_factor, net.fiber_km_per_ms)
    rtt_s = rtt / 1e3

    def powered_gpus(watts: np.ndarray) -> np.ndarray:
        # the 1e-9 keeps 10.0 GPUs' worth of power from flooring to 9 through rounding
        return np.minimum(gpu_count, np.floor(watts / gpu_wall_w + 1e-9))

    # Wrap once; C order because episodes read whole rows.
    avail_w = np.ascontiguousarray(np.concatenate([power.available_w] * 2), dtype=np.float64)
    # The forecast tables are (rows, H, N), H times the others: computed on one calendar and
    # then wrapped, which gives the same values in half the time (a drawn catalogue builds
    # its tables at every reset).
    fc_w = np.asarray(power.forecast_w, dtype=np.float64)
    powered = powered_gpus(avail_w)
    rate = powered * gpu_rate
    forecast_rate = np.concatenate([powered_gpus(fc_w) * gpu_rate] * 2)
    rows = rate.shape[0]
    zero = np.zeros((1, n))
    cum_samples = np.concatenate([zero, np.cumsum(rate * iv, axis=0)])
    cum_gpu_j = np.concatenate([zero, np.cumsum(powered * gpu_wall_w * iv, axis=0)])
    block = cum_samples[-1].max() * 1.01 + 1.0
    flat_offset = np.arange(n) * block
    flat_cum = (cum_samples + flat_offset).T.ravel()
    available = powered > 0
    # first row at or after each row with no powered GPU, by a running minimum from the end
    row_index = np.where(available, rows, np.arange(rows)[:, None])
    next_out = np.minimum.accumulate(row_index[::-1], axis=0)[::-1]
    outage_s = np.where(next_out < rows, next_out * iv, np.inf)
    join_s = net.join_fixed_s + model_bits / wan_bps

    full_time = quota / (gpu_count * gpu_rate)
    if wl.round_mode == "fixed_time":
        time_scale_s = float(4.0 * wl.round_s)
    else:
        time_scale_s = float(20.0 * full_time.min())
    site_obs = _site_obs_table(
        power, avail_w, fc_w, powered, rate, rtt_s, join_s, quota, gpu_count, gpu_rate,
        col("longitude"), time_scale_s,
    )  # fmt: skip

    params = SimParams(
        n_sites=n,
        interval_s=iv,
        trace_rows=power.rows,
        trace_t0_s=float(power.t0_s),
        gpu_count=gpu_count,
        gpu_wall_w=gpu_wall_w,
        gpu_rate=gpu_rate,
        peak_w=power.peak_w,
        site_batch=site_batch,
        wan_bps=wan_bps,
        rtt_s=rtt_s,
        data_share=col("data_share"),
        quota=quota,
        join_s=join_s,
        powered=powered,
        rate=rate,
        cum_samples=cum_samples,
        cum_gpu_j=cum_gpu_j,
        available=available,
        outage_s=outage_s,
        forecast_rate=forecast_rate,
        site_obs=site_obs,
        flat_cum=flat_cum,
        flat_offset=flat_offset,
        model_bits=model_bits,
        hub_bps=net.hub_gbps * 1e9,
        rtt_factor=net.rtt_factor,
        aggregation_s=net.aggregation_s,
        local_steps=float(wl.local_steps),
        eta_local=wl.eta_local,
        noise_b0=wl.noise_b0,
        noise_p_b=wl.noise_p_b,
        noise_gamma=wl.noise_gamma,
        a0=wl.a0,
        a_max=wl.a_max,
        a_target=wl.a_target,
        p0=wl.p0,
        alpha=wl.alpha,
        non_iid=wl.non_iid,
        coverage_tau=wl.coverage_tau_rounds,
        coverage_ceiling=wl.coverage_ceiling,
        fixed_time=wl.round_mode == "fixed_time",
        round_s=wl.round_s,
        idle_s=ep.idle_s if ep.idle_s > 0 else iv,
        jitter_sigma=ep.jitter_sigma,
        idle_fraction=ep.idle_fraction,
        time_budget_s=ep.time_budget_h * 3600.0,
        h_ref_s=ep.h_ref_h * 3600.0,
        max_rounds=ep.max_rounds,
        time_scale_s=time_scale_s,
    )
    for value in vars(params).values():  # shared by every env of the scenario: read-only
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return params


def _site_obs_table(
    power: SitePower,
    avail_w: np.ndarray,
    fc_w: np.ndarray,
    powered: np.ndarray,
    rate: np.ndarray,
    rtt_s: np.ndarray,
    join_s: np.ndarray,
    quota: np.ndarray,
    gpu_count: np.ndarray,
    gpu_rate: np.ndarray,
    longitude: np.ndarray,
    time_scale_s: float,
) -> np.ndarray:
    """(rows, N, F) float32: every site feature that depends only on the trace row.

    ``avail_w`` and the others are wrapped once (2T rows); ``fc_w`` is the forecast of one
    calendar (T rows), whose features are wrapped here.
    """
    rows, n = rate.shape
    iv = float(power.interval_s)
    frac = np.clip(avail_w / power.peak_w, 0.0, 1.0)
    lag = max(1, round(TREND_S / iv))
    past = np.concatenate([np.repeat(frac[:1], lag, axis=0), frac[:-lag]])
    available = rate > 0
    with np.errstate(divide="ignore"):
        est = np.where(available, quota / np.where(available, rate, 1.0) / time_scale_s, 1.0)
    rtt_max = rtt_s.max()
    fc_frac = np.clip(fc_w / power.peak_w, 0.0, 1.0)
    per_quarter = max(1, round(QUARTER_S / iv))
    horizons = fc_w.shape[1]
    row_time = power.t0_s + (np.arange(rows) % power.rows) * iv
    solar_day = 2.0 * math.pi * ((row_time[:, None] + longitude / 15.0 * 3600.0) % 86400.0) / 86400

    obs = np.empty((rows, n, len(SITE_FEATURES)), dtype=np.float32)
    obs[..., 0] = frac
    obs[..., 1] = powered / gpu_count
    obs[..., 2] = rate / (gpu_count * gpu_rate).max()
    obs[..., 3] = np.minimum(est, 1.0)
    obs[..., 4] = rtt_s / rtt_max if rtt_max > 0 else 0.0
    obs[..., 5] = np.clip(frac - past, -1.0, 1.0)
    obs[..., 6] = 0.0
    obs[..., 7] = available
    obs[..., 8] = np.minimum(join_s / time_scale_s, 1.0)
    wraps = rows // fc_frac.shape[0]
    for q in range(FORECAST_QUARTERS):
        lo = min(q * per_quarter, horizons - 1)
        hi = max(lo + 1, min((q + 1) * per_quarter, horizons))
        obs[..., 9 + q] = np.concatenate([fc_frac[:, lo:hi, :].mean(axis=1)] * wraps)
    obs[..., 13] = np.sin(solar_day)
    obs[..., 14] = np.cos(solar_day)
    return obs


# --------------------------------------------------------------------------- the learning model


def noise_scale(params: SimParams, progress: np.ndarray) -> np.ndarray:
    """Gradient noise scale ``B_noise(P) = B0 · (1 + P / P_B)^γ`` (McCandlish et al. 2018)."""
    return params.noise_b0 * (1.0 + progress / params.noise_p_b) ** params.noise_gamma


def accuracy(params: SimParams, progress: np.ndarray, cover: Any = 1.0) -> np.ndarray:
    """Surrogate accuracy curve ``a(P) = a_max − (a_max − a0)(1 + P/P0)^−α``.

    Written as ``a0 + (a_max − a0)(1 − (1 + P/P0)^−α)`` so that ``a(0)`` is exactly ``a0`` in
    floating point: an idle round must not move the accuracy by a rounding error.

    Under non-IID data the ceiling also falls with the data the model covers: ``a_max`` becomes
    ``a_max · coverage^κ`` (``coverage_ceiling`` κ; 0, the default, leaves it alone). A model
    trained only on some sites' label-skewed shards cannot classify what it never sees, so
    leaving sites out caps its accuracy, and taking them back lifts the cap (docs/model.md).
    """
    a_max = params.a_max
    if params.coverage_ceiling > 0.0:
        a_max = params.a_max * np.asarray(cover) ** params.coverage_ceiling
    return params.a0 + (a_max - params.a0) * (1.0 - (1.0 + progress / params.p0) ** (-params.alpha))


def progress_needed(params: SimParams) -> float:
    """Progress at which the accuracy curve reaches the target (its inverse at a*)."""
    ratio = (params.a_max - params.a_target) / (params.a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


def coverage(params: SimParams, absent_rounds: np.ndarray) -> np.ndarray:
    """Fraction of the data a round's update reflects under non-IID data (1 when IID).

    A site away for ``r`` rounds has its share forgotten as ``1 − exp(−r/τ)``; ``non_iid``
    scales how much that matters. ``absent_rounds`` is (..., N); the result is (...).
    """
    if params.non_iid == 0.0:
        return np.ones(absent_rounds.shape[:-1])
    forgotten = 1.0 - np.exp(-absent_rounds / params.coverage_tau)
    # One dot product per row: a batched product may sum each row in a different order
    # depending on the batch size, and a batch must equal its members.
    lost = (forgotten[..., None, :] @ params.data_share)[..., 0]
    return 1.0 - params.non_iid * lost


def delta_progress(
    params: SimParams, progress: np.ndarray, batch: np.ndarray, cover: np.ndarray
) -> np.ndarray:
    """``ΔP = local_steps · η · coverage / (1 + B_noise(P) / B_r)``; zero for an empty round."""
    bn = noise_scale(params, progress)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(batch > 0, 1.0 / (1.0 + bn / np.where(batch > 0, batch, 1.0)), 0.0)
    return params.local_steps * params.eta_local * eff * cover


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, eq=False)
class SimState:
    """A batch of B episodes. Arrays are never modified in place; each step builds a new state."""

    time_s: np.ndarray  # (B,) seconds since row 0
    start_s: np.ndarray  # (B,)
    progress: np.ndarray  # (B,)
    accuracy: np.ndarray  # (B,)
    prev_selected: np.ndarray  # (B, N) bool: the sites that completed the last round (joined)
    absent_rounds: np.ndarray  # (B, N) rounds since each site last took part
    rounds: np.ndarray  # (B,) int
    energy_j: np.ndarray  # (B,)
    last_round_s: np.ndarray  # (B,)
    coverage: np.ndarray  # (B,)

    @property
    def batch(self) -> int:
        return self.time_s.shape[0]

    def take(self, index: np.ndarray) -> SimState:
        """The episodes at ``index`` (an int array, repeats allowed), as a new batch."""
        return SimState(**{name: getattr(self, name)[index] for name in _FIELDS})


_FIELDS = tuple(SimState.__dataclass_fields__)


def initial_state(params: SimParams, start_s: np.ndarray) -> SimState:
    """Fresh episodes starting at ``start_s`` (seconds since row 0)."""
    start = np.asarray(start_s, dtype=np.float64).reshape(-1)
    b, n = start.shape[0], params.n_sites
    return SimState(
        time_s=start.copy(),
        start_s=start.copy(),
        progress=np.zeros(b),
        accuracy=np.full(b, params.a0),
        prev_selected=np.zeros((b, n), dtype=bool),
        absent_rounds=np.zeros((b, n)),
        rounds=np.zeros(b, dtype=np.int64),
        energy_j=np.zeros(b),
        last_round_s=np.zeros(b),
        coverage=np.ones(b),
    )


def merge_states(old: SimState, new: SimState, rows: np.ndarray) -> SimState:
    """``old`` with the episodes at boolean ``rows`` replaced by ``new`` (same batch size)."""
    out = {}
    for name in _FIELDS:
        a, b = getattr(old, name), getattr(new, name)
        r = rows.reshape((-1,) + (1,) * (a.ndim - 1))
        out[name] = np.where(r, b, a)
    return SimState(**out)


def current_row(params: SimParams, time_s: np.ndarray) -> np.ndarray:
    """Row of the per-row tables for each episode's clock."""
    return np.minimum((time_s // params.interval_s).astype(np.intp), params.rows - 1)


def available_now(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N) bool: sites with at least one powered GPU at the current time."""
    return params.available[current_row(params, state.time_s)]


# --------------------------------------------------------------------------- the round


def _samples_at(params: SimParams, t: np.ndarray) -> np.ndarray:
    """Cumulative samples each site could have processed from row 0 to time ``t`` (…, N)."""
    k = current_row(params, t)
    cols = params.site_cols
    return params.cum_samples[k, cols] + params.rate[k, cols] * (t - k * params.interval_s)


def _gpu_energy_at(params: SimParams, t: np.ndarray) -> np.ndarray:
    """Energy of each site's powered GPUs, if busy, from row 0 to time ``t`` (…, N)."""
    k = current_row(params, t)
    cols = params.site_cols
    busy_w = params.powered[k, cols] * params.gpu_wall_w
    return params.cum_gpu_j[k, cols] + busy_w * (t - k * params.interval_s)


def _time_to_reach(params: SimParams, target: np.ndarray) -> np.ndarray:
    """Earliest time at which each site's cumulative samples reach ``target`` (…, N).

    One ``searchsorted`` over all sites: their cumulative tables are laid end to end with
    offsets that keep the whole array sorted. A target beyond the (wrapped) calendar is placed
    at its end, which no episode reaches (rounds are cut at the time budget).
    """
    rows, cols = params.rows, params.site_cols
    pos = np.searchsorted(params.flat_cum, target + params.flat_offset, side="left")
    e = pos - cols * (rows + 1)  # first table row whose cumulative reaches the target
    beyond = e > rows
    j = np.clip(e - 1, 0, rows - 1)
    rate = params.rate[j, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = j * params.interval_s + (target - params.cum_samples[j, cols]) / rate
    return np.where(beyond | (rate <= 0), rows * params.interval_s, t)


def _comm_s(params: SimParams, done: np.ndarray, n_done: np.ndarray) -> np.ndarray:
    """``rtt_factor · max RTT + 2 · max(max M/bw_i, |S| · M/bw_hub)`` over the sites in ``done``.

    ``done`` is (..., N) bool; the result is 0 where no site is in it.
    """
    rtt = np.max(np.where(done, params.rtt_s, 0.0), axis=-1)
    site_tx = np.max(np.where(done, params.site_tx_s, 0.0), axis=-1)
    hub_tx = n_done * params.hub_tx_s
    return np.where(n_done > 0, params.rtt_factor * rtt + 2.0 * np.maximum(site_tx, hub_tx), 0.0)


class RoundResult(NamedTuple):
    """The outcome of one simulated round for every episode in the batch."""

    state: SimState
    selected: np.ndarray  # (B, N) the sites that started the round (selection ∧ available)
    dropped: np.ndarray  # (B, N) selected sites that lost all power before finishing
    invalid: np.ndarray  # (B,) requested sites that were unavailable
    idle: np.ndarray  # (B,) bool: no site started
    cut: np.ndarray  # (B,) bool: the round was cut at the time budget and taught nothing
    round_time_s: np.ndarray
    compute_s: np.ndarray
    comm_s: np.ndarray
    delta_accuracy: np.ndarray  # clipped at the target, so a* − a0 sums exactly on success
    energy_j: np.ndarray  # of this round
    straggler: np.ndarray  # (B,) the completing site that finished compute last; -1 if none
    powered: np.ndarray  # (B, N) powered GPUs at the start of the round


def draw_noise(rng: np.random.Generator, rounds: int, n_sites: int) -> np.ndarray:
    """Standard-normal jitter draws for ``rounds`` rounds: N compute values and one network.

    Drawn in blocks from the episode's generator; the numbers a round gets do not depend on
    the block size, which keeps single and vector environments identical.
    """
    return rng.standard_normal((rounds, n_sites + 1))


def jitter_factors(params: SimParams, noise: np.ndarray) -> np.ndarray:
    """Multiplicative log-normal jitter ``exp(σ · noise)`` of compute (first N) and network."""
    if params.jitter_sigma > 0:
        return np.exp(params.jitter_sigma * noise)
    return np.ones_like(noise)


def step_round(
    params: SimParams, state: SimState, mask: np.ndarray, jitter: np.ndarray
) -> RoundResult:
    """Simulate one round of every episode on the true power trace.

    ``mask`` (B, N) bool is the requested set, ``jitter`` (B, N + 1) the factors
    `jitter_factors` makes. The round, in the order docs/model.md gives it:

    1. Requested sites without a powered GPU now are dropped (``invalid``); the rest start. None
       starting is an idle round: the clock moves ``idle_s``, nothing is learned, every site is
       released.
    2. A site that did not complete the previous round first joins: ``join_s`` (fixed cost plus
       fetching the model over its WAN link).
    3. Each site processes its quota on the GPUs it can power, integrated over the trace.
    4. A site whose power falls to no GPU before it finishes drops out at that moment: its work
       is lost and the barrier does not wait for it, but the energy it spent counts.
    5. The round ends at the barrier: slowest completing site, then communication among the
       completing sites and aggregation. If every site dropped out, the round ends when the
       last one did, with nothing learned.
    6. A round that would end after the episode's time budget is cut there and teaches nothing
       (a synchronous update lands only at the round's end).
    """
    n = params.n_sites
    t = state.time_s
    k = current_row(params, t)
    powered = params.powered[k]
    sel = mask & params.available[k]
    n_sel = np.count_nonzero(sel, axis=-1)
    invalid = np.count_nonzero(mask, axis=-1) - n_sel
    idle = n_sel == 0
    compute_jitter, comm_jitter = jitter[:, :n], jitter[:, n]

    joining = sel & ~state.prev_selected
    begin = t[:, None] + np.where(joining, params.join_s, 0.0)
    samples_begin = _samples_at(params, begin)
    if params.fixed_time:
        end = begin + params.round_s * compute_jitter
    else:
        end = _time_to_reach(params, samples_begin + params.quota * compute_jitter)
    drop_at = params.outage_s[k]  # the next row without power; the current row has some
    dropped = sel & (drop_at < end)
    done = sel & ~dropped
    n_done = np.count_nonzero(done, axis=-1)

    finish = np.where(done, end, -np.inf)
    straggler = np.where(n_done > 0, finish.argmax(axis=-1), -1)
    latest = finish.max(axis=-1)
    last_drop = np.max(np.where(dropped, drop_at, -np.inf), axis=-1)
    compute_s = np.where(n_done > 0, latest - t, np.where(idle, 0.0, last_drop - t))
    comm_s = _comm_s(params, done, n_done) * comm_jitter
    round_s = np.where(
        n_done > 0,
        compute_s + comm_s + params.aggregation_s,
        np.where(idle, params.idle_s, compute_s),
    )
    budget_left = state.start_s + params.time_budget_s - t
    cut = round_s > budget_left
    round_s = np.minimum(round_s, budget_left)
    compute_s = np.minimum(compute_s, round_s)
    comm_s = np.minimum(comm_s, round_s - compute_s)
    # A round that reaches the budget ends exactly at it: t + (deadline − t) can round below
    # the deadline, and the episode would then never see its budget run out.
    t_end = np.where(round_s >= budget_left, state.start_s + params.time_budget_s, t + round_s)

    if params.fixed_time:
        samples = _samples_at(params, np.minimum(end, drop_at)) - samples_begin
        batch = np.sum(np.where(done, samples, 0.0), axis=-1) / params.local_steps
    else:
        batch = np.sum(np.where(done, params.site_batch, 0.0), axis=-1)
    batch = np.where(cut, 0.0, batch)
    absent = np.where(
        idle[:, None], state.absent_rounds, np.where(done, 0.0, state.absent_rounds + 1.0)
    )
    cover = coverage(params, absent)
    dp = delta_progress(params, state.progress, batch, cover)
    progress = state.progress + dp
    acc = accuracy(params, progress, np.where(idle, state.coverage, cover))
    delta_acc = np.minimum(acc, params.a_target) - np.minimum(state.accuracy, params.a_target)

    # Busy GPUs from the end of the join to the end of compute (or the outage, or the cut);
    # joined GPUs wait at idle power through the join and after they finish, until the round
    # ends. A site that dropped out has no powered GPU left to wait with.
    stop = np.minimum(np.minimum(end, drop_at), t_end[:, None])
    busy_s = np.maximum(stop - begin, 0.0)
    busy_j = np.where(sel & (busy_s > 0), _gpu_energy_at(params, stop) - _gpu_energy_at(
        params, np.minimum(begin, stop)), 0.0)  # fmt: skip
    held_until = np.where(dropped, np.minimum(drop_at, t_end[:, None]), t_end[:, None])
    waiting_s = np.maximum(held_until - t[:, None] - busy_s, 0.0)
    idle_j = np.where(sel, params.idle_w_per_gpu * powered * waiting_s, 0.0)
    energy_j = np.sum(busy_j, axis=-1) + np.sum(idle_j, axis=-1)

    new_state = SimState(
        time_s=t_end,
        start_s=state.start_s,
        progress=progress,
        accuracy=acc,
        prev_selected=done,
        absent_rounds=absent,
        rounds=state.rounds + 1,
        energy_j=state.energy_j + energy_j,
        last_round_s=round_s,
        coverage=np.where(idle, state.coverage, cover),
    )
    return RoundResult(
        new_state, sel, dropped, invalid, idle, cut, round_s, compute_s, comm_s, delta_acc,
        energy_j, straggler, powered,
    )  # fmt: skip


# --------------------------------------------------------------------------- what if


class RoundPrediction(NamedTuple):
    """What-if outcome of candidate sets; arrays shaped like the masks without the site axis."""

    round_time_s: np.ndarray
    compute_s: np.ndarray
    comm_s: np.ndarray
    delta_progress: np.ndarray
    delta_accuracy: np.ndarray

    @property
    def efficiency(self) -> np.ndarray:
        """Predicted progress per second: the quantity PowerTrip's greedy compares."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.round_time_s > 0, self.delta_progress / self.round_time_s, 0.0)


class SiteForecast(NamedTuple):
    """Each site's predicted round on its own, from the forecast issued now. (B, N) each."""

    available: np.ndarray  # powered now
    finish_s: np.ndarray  # predicted end of its compute (absolute time), with its join
    drop_s: np.ndarray  # predicted start of an outage (inf if none in sight)
    dropped: np.ndarray  # predicted to lose power before it finishes
    samples: np.ndarray  # samples it would process in a fixed_time round


def forecast_sites(params: SimParams, state: SimState, steady_state: bool = False) -> SiteForecast:
    """What each site would do in a round starting now, judged from the forecast issued now.

    The forecast rate of row k + h (``forecast_rate[k, h]``, h = 0 the current row's actual)
    holds piecewise over the coming rows and the last forecast row beyond them; a site's compute
    time integrates it, as the true round integrates the trace. No future actual is read.
    ``steady_state`` leaves out the join, as if every site were already joined.
    """
    iv = params.interval_s
    t = state.time_s
    k = current_row(params, t)
    fc = params.forecast_rate[k]  # (B, H, N)
    horizons = fc.shape[1]
    available = fc[:, 0, :] > 0
    # cumulative samples at the start of each forecast row, from the start of row k
    edges = np.concatenate([np.zeros_like(fc[:, :1]), np.cumsum(fc * iv, axis=1)], axis=1)
    rate_after = np.concatenate([fc, fc[:, -1:]], axis=1)  # the last row's rate continues

    def samples_at(x: np.ndarray) -> np.ndarray:  # x: (B, N) seconds since the start of row k
        h = np.clip((x // iv).astype(np.intp), 0, horizons)
        base = np.take_along_axis(edges, h[:, None, :], axis=1)[:, 0]
        r = np.take_along_axis(rate_after, h[:, None, :], axis=1)[:, 0]
        return base + r * (x - h * iv)

    joining = available & ~state.prev_selected & (not steady_state)
    x_begin = (t - k * iv)[:, None] + np.where(joining, params.join_s, 0.0)
    s_begin = samples_at(x_begin)
    if params.fixed_time:
        x_end = x_begin + params.round_s
        samples = samples_at(x_end) - s_begin
    else:
        target = s_begin + params.quota
        h = np.count_nonzero(edges[:, 1:, :] < target[:, None, :], axis=1)  # row reaching it
        base = np.take_along_axis(edges, h[:, None, :], axis=1)[:, 0]
        r = np.take_along_axis(rate_after, h[:, None, :], axis=1)[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            x_end = np.where(r > 0, h * iv + (target - base) / r, np.inf)
        samples = np.zeros_like(x_end)
    outage = fc <= 0
    first_out = np.where(outage.any(axis=1), outage.argmax(axis=1), horizons)
    drop_x = np.where(first_out < horizons, first_out * iv, np.inf)
    start = (k * iv)[:, None]
    return SiteForecast(
        available=available,
        finish_s=start + x_end,
        drop_s=start + drop_x,
        dropped=available & (drop_x < x_end),
        samples=samples,
    )


def predict_round(
    params: SimParams, state: SimState, mask: np.ndarray, *, steady_state: bool = False
) -> RoundPrediction:
    """Round time and progress of candidate sets, judged from the forecast issued now.

    ``mask`` is ``(B, N)`` or ``(B, M, N)`` (M candidate sets per episode). Unavailable sites in
    a candidate are dropped, as `step_round` would, and sites the forecast sees losing power
    before they finish count as dropped out. No jitter, no future actuals; the state does not
    change. ``steady_state=True`` leaves the one-off join time out (a set's round once all its
    sites have joined), which is how PowerTrip ranks its prefixes.
    """
    mask = np.asarray(mask, dtype=bool)
    squeeze = mask.ndim == 2
    if squeeze:
        mask = mask[:, None, :]
    site = forecast_sites(params, state, steady_state)
    t = state.time_s[:, None]
    sel = mask & site.available[:, None, :]
    done = sel & ~site.dropped[:, None, :]
    n_sel = np.count_nonzero(sel, axis=-1)
    n_done = np.count_nonzero(done, axis=-1)
    latest = np.max(np.where(done, site.finish_s[:, None, :], -np.inf), axis=-1)
    last_drop = np.max(np.where(sel & ~done, site.drop_s[:, None, :], -np.inf), axis=-1)
    compute_s = np.where(n_done > 0, latest - t, np.where(n_sel > 0, last_drop - t, 0.0))
    comm_s = _comm_s(params, done, n_done)
    round_time = np.where(
        n_done > 0,
        compute_s + comm_s + params.aggregation_s,
        np.where(n_sel > 0, compute_s, params.idle_s),
    )
    if params.fixed_time:
        batch = np.sum(np.where(done, site.samples[:, None, :], 0.0), axis=-1) / params.local_steps
    else:
        batch = np.sum(np.where(done, params.site_batch, 0.0), axis=-1)
    absent = np.where(done, 0.0, state.absent_rounds[:, None, :] + 1.0)
    cover = coverage(params, absent)
    dp = delta_progress(params, state.progress[:, None], batch, cover)
    da = accuracy(params, state.progress[:, None] + dp, cover) - state.accuracy[:, None]
    out = RoundPrediction(round_time, compute_s, comm_s, dp, da)
    if squeeze:
        out = RoundPrediction(*(a[:, 0] for a in out))
    return out


# --------------------------------------------------------------------------- observations


def site_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N, F) float32 site features at the current time."""
    obs = params.site_obs[current_row(params, state.time_s)]  # a gather: a fresh array
    obs[..., SELECTED_COL] = state.prev_selected
    return obs


def global_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, G) float32 global features."""
    span = params.a_target - params.a0
    clock = state.time_s + params.trace_t0_s
    day = 2.0 * math.pi * (clock % 86400.0) / 86400.0
    values = (
        (state.accuracy - params.a0) / span,
        (state.time_s - state.start_s) / params.time_budget_s,
        np.sin(day),
        np.cos(day),
        state.last_round_s / params.time_scale_s,
        state.coverage,
    )
    g = np.empty((state.batch, len(GLOBAL_FEATURES)), dtype=np.float32)
    for i, value in enumerate(values):
        g[:, i] = value
    return np.clip(g, GLOBAL_LOW, GLOBAL_HIGH)
