"""The simulator: one compiled kernel over a batch of episodes.

Every function here works on a batch: the single environment is a batch of one, the vector
environment a batch of B, and the planners in ``baselines/`` a batch of candidate plans, so the
dynamics are written once. They are plain scalar loops over episodes and sites, compiled by numba
(``cache=True``: the first use after an install compiles them in about 15 s, later imports load
the cached machine code). ``NUMBA_DISABLE_JIT=1`` runs the very same functions as plain Python,
which is slow but lets a debugger step through a round. The model, with every equation and
parameter, is in docs/model.md; the round is `_round`, the what-if of candidate sets
`_predict_batch`.

Power enters through tables built once per scenario (``SimParams``): powered GPUs, throughput,
the cumulative samples and GPU energy a site could accumulate, and each site's next outage, per
trace interval. The time a site needs for its quota is then one search in the cumulative table,
which integrates the piecewise-constant power exactly: a site whose power falls mid-round
slows down, and one left with no powered GPU drops out of the round. The tables hold the trace
twice (wrapped once at its end) so that reads just past an episode's window stay in bounds.

The jitter is counter-based: a round's factor for a site is a hash of (the episode's key, the
round, the site), turned into a standard normal. The key is drawn from the episode's generator
at reset and travels in the state, so a batch equals its members, a copied state replays the
same jitter, and nothing here holds a generator.
"""

from __future__ import annotations

import math
import threading
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numba
import numpy as np

if TYPE_CHECKING:  # only for type hints; core needs numpy and numba only at run time
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
    "selected_last_round",  # 1: the site is joined; with non-blocking joins, a fetch part done
    "available",  # 0 or 1: at least one GPU can be powered now
    "join_time",  # join_fixed_s + state_bytes / wan_bw over `time_scale_s`, clipped, [0, 1]
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
N_SITE_FEATURES, N_GLOBAL = len(SITE_FEATURES), len(GLOBAL_FEATURES)


# The kernel's packed arrays. Numba reads these module constants at compile time.
TABLE_FIELDS = ("rate", "powered", "cum_samples", "cum_gpu_j", "outage_s")
RATE, POWERED, CUM_SAMPLES, CUM_GPU_J, OUTAGE_S = range(len(TABLE_FIELDS))
SITE_FIELDS = (
    "gpu_count", "gpu_wall_w", "gpu_rate", "site_batch", "rtt_s", "data_share", "quota",
    "join_s", "site_tx_s", "idle_w_per_gpu",
)  # fmt: skip
S_GPUS, S_WALL_W, S_GPU_RATE, S_BATCH, S_RTT, S_SHARE, S_QUOTA, S_JOIN, S_TX, S_IDLE_W = range(
    len(SITE_FIELDS)
)
CONSTS = (
    "interval_s", "rows", "trace_t0_s", "hub_tx_s", "rtt_factor", "aggregation_s",
    "local_steps", "eta_local", "noise_b0", "noise_p_b", "noise_gamma", "a0", "a_max",
    "a_target", "span", "p0", "alpha", "non_iid", "coverage_tau", "coverage_ceiling",
    "fixed_time", "round_s", "idle_s", "jitter_sigma", "time_budget_s", "max_rounds",
    "time_scale_s", "h_ref_s", "ring", "grace", "nonblocking",
)  # fmt: skip
(
    C_IV, C_ROWS, C_T0, C_HUB_TX, C_RTT_FACTOR, C_AGG, C_LOCAL_STEPS, C_ETA, C_B0, C_PB,
    C_GAMMA, C_A0, C_AMAX, C_TARGET, C_SPAN, C_P0, C_ALPHA, C_NON_IID, C_TAU, C_KAPPA,
    C_FIXED_TIME, C_ROUND_S, C_IDLE_S, C_SIGMA, C_BUDGET, C_MAX_ROUNDS, C_TIME_SCALE, C_H_REF,
    C_RING, C_GRACE, C_NONBLOCKING,
) = range(len(CONSTS))  # fmt: skip


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
    # per row of the wrapped calendar, shape (rows, n_sites)
    powered: np.ndarray
    rate: np.ndarray  # samples/s
    available: np.ndarray  # bool
    forecast_rate: np.ndarray  # (rows, H, n_sites) samples/s forecast at row k for row k + h
    site_obs: np.ndarray  # float32 (rows, n_sites, F) static part of the site features
    # the kernel's packed tables: (rows + 1, TABLE_FIELDS, n_sites), of which powered and rate
    # above are views (the cumulative sums and outages are read only from it), and the
    # per-site values (SITE_FIELDS, n_sites)
    table: np.ndarray
    site: np.ndarray
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
    grace: float  # fixed_time rounds: a site's compute window stretches at most by this share
    ring: bool  # ring all-reduce among the completing sites instead of exchanges via the hub
    nonblocking: bool  # a joiner fetches during a round it does not delay, and adds nothing to it
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
    def consts(self) -> np.ndarray:
        """The scalars the kernel reads, in the order of ``CONSTS`` (per instance: a copy with
        another ``jitter_sigma`` has its own)."""
        values = {name: float(getattr(self, name)) for name in CONSTS if hasattr(self, name)}
        values["hub_tx_s"] = self.hub_tx_s
        values["rows"] = float(self.rows)
        values["span"] = self.a_target - self.a0
        out = np.array([values[name] for name in CONSTS], dtype=np.float64)
        out.flags.writeable = False
        return out

    @property
    def site_tx_s(self) -> np.ndarray:
        """``M / bw_i``: seconds to send the update over each site's WAN link."""
        return self.site[S_TX]

    @cached_property
    def hub_tx_s(self) -> float:
        """``M / bw_hub``: seconds the hub's link needs per site's update."""
        return self.model_bits / self.hub_bps

    @cached_property
    def exchange_s(self) -> np.ndarray:
        """What each site adds to a round's communication: its round trips and its update.

        ``rtt_factor · RTT'_i + 2 · M / bw'_i``: the latency term and the transfer of its
        update over its link (there and back; through the hub, at least its per-site share of
        the hub's link). ``RTT'_i`` is the site's RTT, but never less than the smallest RTT of
        any other site: a round with a second site in it pays at least that, so the aggregator's
        own site, whose RTT to itself is a few milliseconds, gains nothing from it. This is the
        network cost of PowerTrip's power-to-cost ranking (docs/model.md, "Baselines").
        """
        rtt = self.rtt_s
        order = np.argsort(rtt, kind="stable")
        others = np.full(rtt.shape, rtt[order[0]])  # every site's smallest other RTT ...
        if rtt.shape[0] > 1:
            others[order[0]] = rtt[order[1]]  # ... but the smallest's is the second smallest
        latency = np.maximum(rtt, others)
        tx = self.site_tx_s if self.ring else np.maximum(self.site_tx_s, self.hub_tx_s)
        out = self.rtt_factor * latency + 2.0 * tx
        out.flags.writeable = False
        return out


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
    # The kernel's table: one row per trace row plus the cumulative sums' end.
    table = np.zeros((rows + 1, len(TABLE_FIELDS), n))
    table[:rows, RATE] = rate
    table[:rows, POWERED] = powered
    table[1:, CUM_SAMPLES] = np.cumsum(rate * iv, axis=0)
    table[1:, CUM_GPU_J] = np.cumsum(powered * gpu_wall_w * iv, axis=0)
    available = powered > 0
    # first row at or after each row with no powered GPU, by a running minimum from the end
    row_index = np.where(available, rows, np.arange(rows)[:, None])
    next_out = np.minimum.accumulate(row_index[::-1], axis=0)[::-1]
    table[:rows, OUTAGE_S] = np.where(next_out < rows, next_out * iv, np.inf)
    table[rows, OUTAGE_S] = np.inf
    # a joining site fetches the training state (or, if the scenario gives none, the model)
    state_bits = 8.0 * (wl.state_bytes if wl.state_bytes is not None else wl.model_bytes)
    join_s = net.join_fixed_s + state_bits / wan_bps

    full_time = quota / (gpu_count * gpu_rate)
    if wl.round_mode == "fixed_time":
        time_scale_s = float(4.0 * wl.round_s)
    else:
        time_scale_s = float(20.0 * full_time.min())
    site_obs = _site_obs_table(
        power, avail_w, fc_w, powered, rate, rtt_s, join_s, quota, gpu_count, gpu_rate,
        col("longitude"), time_scale_s,
    )  # fmt: skip

    site_tx_s, idle_w = model_bits / wan_bps, ep.idle_fraction * gpu_wall_w
    site = np.stack(
        [gpu_count, gpu_wall_w, gpu_rate, site_batch, rtt_s, col("data_share"), quota, join_s,
         site_tx_s, idle_w]
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
        powered=table[:rows, POWERED],
        rate=table[:rows, RATE],
        available=available,
        forecast_rate=forecast_rate,
        site_obs=site_obs,
        table=table,
        site=site,
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
        grace=wl.grace if wl.grace is not None else math.inf,
        ring=net.allreduce == "ring",
        nonblocking=net.join_mode == "non_blocking",
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


# --------------------------------------------------------------------------- the kernel's layout
#
# A batch of episodes is one (B, len(STATE_FIELDS) + 2N) float64 array: the scalars below, then
# each site's "joined" flag (it completed the last round) and its rounds absent. A round's
# outcome is a (B, len(RECORD_FIELDS)) record and a (B, len(SITE_RECORD), N) per-site record.
# Few, packed arrays keep the cost of entering the compiled code small.

STATE_FIELDS = (
    "time_s", "start_s", "progress", "accuracy", "rounds", "energy_j", "last_round_s",
    "coverage", "key",
)  # fmt: skip
TIME, START, PROGRESS, ACC, ROUNDS, ENERGY, LAST_ROUND, COVERAGE, KEY = range(len(STATE_FIELDS))
JOINED = len(STATE_FIELDS)  # first of the N joined flags; the N absent counts follow them
RECORD_FIELDS = (
    "round_time_s", "compute_s", "comm_s", "delta_accuracy", "energy_j", "straggler",
    "invalid", "idle", "cut", "n_selected", "terminated", "truncated", "over", "excess_gain",
    "gain_rate",
)  # fmt: skip
(
    R_ROUND_S, R_COMPUTE_S, R_COMM_S, R_DELTA_ACC, R_ENERGY_J, R_STRAGGLER, R_INVALID, R_IDLE,
    R_CUT, R_N_SELECTED, R_TERMINATED, R_TRUNCATED, R_OVER, R_EXCESS_GAIN, R_GAIN_RATE,
) = range(len(RECORD_FIELDS))  # fmt: skip
SITE_RECORD = ("selected", "dropped", "powered")
SELECTED, DROPPED, POWERED_NOW = range(len(SITE_RECORD))
_JUST_BELOW_1 = 1.0 - 2.0**-30  # a fetch not yet done never reads as joined
KEY_LIMIT = 2**53  # episode keys are whole numbers below this: exact in the float64 state
_NO_JITTER = np.zeros((0, 0))  # "no jitter given": each episode's own, from its key
PARALLEL_MIN_BATCH = 256  # episodes from which a step runs on all cores (threads cost ~10 µs)
PARALLEL_CHUNKS = 64  # pieces of the batch the threads share out
_PARALLEL_LOCK = threading.Lock()


def _compiled(**options: Any) -> Any:
    """``numba.njit(cache=True, **options)``, or without the cache where none can be written.

    numba keeps compiled code in ``__pycache__`` beside this file, else in the user's cache
    folder. In a container or on a cluster node with read-only site-packages and a read-only
    HOME it finds neither and refuses to decorate the function ("no locator available"), which
    would make the package unimportable. There, each import compiles again (about 15 s) instead,
    after one warning that says how to keep the cache.
    """

    def decorate(fn: Any) -> Any:
        try:
            return numba.njit(cache=True, **options)(fn)
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
        _warn_no_cache()
        return numba.njit(cache=False, **options)(fn)

    return decorate


_cache_warned = False


def _warn_no_cache() -> None:
    global _cache_warned
    if _cache_warned:
        return
    _cache_warned = True
    warnings.warn(
        f"powertrip_env: numba cannot cache the compiled kernel (neither {Path(__file__).parent}"
        " nor the user cache folder is writable), so every import compiles it again (about 15 s);"
        " set NUMBA_CACHE_DIR to a writable folder to keep it",
        RuntimeWarning,
        stacklevel=3,
    )


_jit = _compiled(nogil=True, error_model="numpy")
_M32 = 0xFFFFFFFF
# the hashes' third word, one per use
_JITTER_STREAM, _START_STREAM, _KEY_STREAM, _LEARNER_STREAM = 1, 2, 3, 5


# --------------------------------------------------------------------------- the learning model


@_jit
def _noise_scale(c: np.ndarray, progress: float) -> float:
    """Gradient noise scale ``B_noise(P) = B0 · (1 + P / P_B)^γ`` (McCandlish et al. 2018)."""
    return c[C_B0] * (1.0 + progress / c[C_PB]) ** c[C_GAMMA]


@_jit
def _accuracy(c: np.ndarray, progress: float, cover: float) -> float:
    """Surrogate accuracy curve ``a(P) = a_max − (a_max − a0)(1 + P/P0)^−α``.

    Written as ``a0 + (a_max − a0)(1 − (1 + P/P0)^−α)`` so that ``a(0)`` is exactly ``a0`` in
    floating point: an idle round must not move the accuracy by a rounding error.

    Under non-IID data the ceiling also falls with the data the model covers: ``a_max`` becomes
    ``a_max · coverage^κ`` (``coverage_ceiling`` κ; 0, the default, leaves it alone). A model
    trained only on some sites' label-skewed shards cannot classify what it never sees, so
    leaving sites out caps its accuracy, and taking them back lifts the cap (docs/model.md).
    """
    a_max = c[C_AMAX]
    if c[C_KAPPA] > 0.0:
        a_max = a_max * cover ** c[C_KAPPA]
    return c[C_A0] + (a_max - c[C_A0]) * (1.0 - (1.0 + progress / c[C_P0]) ** (-c[C_ALPHA]))


@_jit
def _coverage(c: np.ndarray, site: np.ndarray, absent: np.ndarray) -> float:
    """Fraction of the data a round's update reflects under non-IID data (1 when IID).

    A site away for ``r`` rounds has its share forgotten as ``1 − exp(−r/τ)``; ``non_iid``
    scales how much that matters.
    """
    if c[C_NON_IID] == 0.0:
        return 1.0
    lost = 0.0
    for i in range(absent.shape[0]):
        lost += (1.0 - math.exp(-absent[i] / c[C_TAU])) * site[S_SHARE, i]
    return 1.0 - c[C_NON_IID] * lost


@_jit
def _delta_progress(c: np.ndarray, progress: float, batch: float, cover: float) -> float:
    """``ΔP = local_steps · η · coverage / (1 + B_noise(P) / B_r)``; zero for an empty round."""
    if batch <= 0.0:
        return 0.0
    eff = 1.0 / (1.0 + _noise_scale(c, progress) / batch)
    return c[C_LOCAL_STEPS] * c[C_ETA] * eff * cover


def noise_scale(params: SimParams, progress: Any) -> np.ndarray:
    """`_noise_scale` at each value of ``progress``."""
    p = np.asarray(progress, dtype=np.float64)
    return np.array([_noise_scale(params.consts, x) for x in p.ravel()]).reshape(p.shape)


def accuracy(params: SimParams, progress: Any, cover: Any = 1.0) -> np.ndarray:
    """`_accuracy` at each value of ``progress`` (and ``cover``, broadcast against it)."""
    p, cv = np.broadcast_arrays(np.asarray(progress, np.float64), np.asarray(cover, np.float64))
    values = [_accuracy(params.consts, x, y) for x, y in zip(p.ravel(), cv.ravel(), strict=True)]
    return np.array(values, dtype=np.float64).reshape(p.shape)


def delta_progress(params: SimParams, progress: float, batch: float, cover: float = 1.0) -> float:
    """`_delta_progress`: what one round of global batch ``batch`` adds at ``progress``."""
    return float(_delta_progress(params.consts, float(progress), float(batch), float(cover)))


def progress_needed(params: SimParams) -> float:
    """Progress at which the accuracy curve reaches the target (its inverse at a*)."""
    ratio = (params.a_max - params.a_target) / (params.a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


# --------------------------------------------------------------------------- power tables


@_jit
def _row(c: np.ndarray, t: float) -> int:
    """Row of the per-row tables for a clock ``t`` (seconds since row 0, never negative).

    ``int(t / iv)``, not ``t // iv``: floor division of floats goes through ``fmod``, which costs
    more than the rest of a site's round. `current_row` uses the same formula.
    """
    k = int(t / c[C_IV])
    last = int(c[C_ROWS]) - 1
    return k if k < last else last


@_jit
def _samples_at(c: np.ndarray, table: np.ndarray, t: float, i: int) -> float:
    """Cumulative samples site ``i`` could have processed from row 0 to time ``t``."""
    return _samples_in(c, table, t, i, _row(c, t))


@_jit
def _samples_in(c: np.ndarray, table: np.ndarray, t: float, i: int, k: int) -> float:
    """`_samples_at` with ``t``'s row ``k`` known."""
    return table[k, CUM_SAMPLES, i] + table[k, RATE, i] * (t - k * c[C_IV])


@_jit
def _gpu_energy_at(c: np.ndarray, table: np.ndarray, site: np.ndarray, t: float, i: int) -> float:
    """Energy of site ``i``'s powered GPUs, if busy, from row 0 to time ``t``."""
    k = _row(c, t)
    busy_w = table[k, POWERED, i] * site[S_WALL_W, i]
    return table[k, CUM_GPU_J, i] + busy_w * (t - k * c[C_IV])


@_jit
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


# --------------------------------------------------------------------------- jitter


@_jit
def _mul32(a: int, b: int) -> int:
    """``a · b mod 2³²`` for 32-bit ``a`` and ``b``, in parts that fit a signed 64-bit int (so
    compiled and plain Python agree without overflow)."""
    return (a * (b & 0xFFFF) + (((a * (b >> 16)) & 0xFFFF) << 16)) & _M32


@_jit
def _mix32(x: int) -> int:
    """A 32-bit integer hash with good avalanche (Wellons' "lowbias32"); a bijection."""
    x ^= x >> 16
    x = _mul32(x, 0x7FEB352D)
    x ^= x >> 15
    x = _mul32(x, 0x846CA68B)
    x ^= x >> 16
    return x


@_jit
def _hash(a: int, b: int, c: int) -> int:
    """A 32-bit hash of three whole numbers ``a`` (below 2⁵³), ``b`` and ``c`` (below 2³²)."""
    return _mix32(_mix32(_mix32(_mix32(a & _M32) ^ (a >> 32)) ^ b) ^ c)


@_jit
def _uniform(h: int) -> float:
    """A 32-bit hash as a uniform number in (0, 1)."""
    return (h + 0.5) / 4294967296.0


@_jit
def _round_seed(key: float, rnd: int) -> int:
    """Round ``rnd``'s 32-bit jitter seed: a hash of the episode's key and the round."""
    return _hash(int(key), rnd & _M32, _JITTER_STREAM)


@_jit
def _jitter_value(c: np.ndarray, seed: int, j: int) -> float:
    """Factor ``j`` of a round (N compute factors, then the network's): ``exp(σ · z)``.

    The standard normals come in pairs from Box–Muller on two uniforms, hashes of the round's
    seed and the pair's first index; ``z`` is the pair's cosine (even ``j``) or sine (odd).
    """
    first = j - (j & 1)
    radius = math.sqrt(-2.0 * math.log(_uniform(_mix32(seed ^ first))))
    angle = 2.0 * math.pi * _uniform(_mix32(seed ^ (first + 1)))
    z = math.cos(angle) if j == first else math.sin(angle)
    return math.exp(c[C_SIGMA] * radius * z)


@_jit
def _factor(c: np.ndarray, jitter: np.ndarray, b: int, seed: int, j: int) -> float:
    """Factor ``j`` of episode ``b``'s round: given (``jitter`` not empty), 1 without jitter,
    or its own. Computed only for the sites that start, the network only if needed."""
    if jitter.shape[0] > 0:
        return jitter[b, j]
    if c[C_SIGMA] <= 0.0:
        return 1.0
    return _jitter_value(c, seed, j)


@_jit
def _jitter_into(c: np.ndarray, key: float, rnd: int, out: np.ndarray) -> None:
    """Every factor of round ``rnd`` of the episode with ``key`` (the clairvoyant's view)."""
    seed = _round_seed(key, rnd)
    for j in range(out.shape[0]):
        out[j] = _jitter_value(c, seed, j) if c[C_SIGMA] > 0.0 else 1.0


@_jit
def _episode_batch(bases, episodes, lo, hi, out):
    """Per episode: its start row in [lo, hi), its jitter key (below 2⁵³) and a 31-bit seed for a
    real learner, hashed from (the env's base, the episode's index), into ``out`` (B, 3)."""
    for b in range(bases.shape[0]):
        base, e = bases[b], episodes[b] & _M32
        out[b, 0] = lo + (_hash(base, e, _START_STREAM) * (hi - lo) >> 32)
        high = _hash(base, e, _KEY_STREAM) & 0x1FFFFF
        out[b, 1] = (high << 32) | _hash(base, e, _KEY_STREAM + 1)
        out[b, 2] = _hash(base, e, _LEARNER_STREAM) >> 1


def episode_draws(
    bases: np.ndarray, episodes: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counter-based episode randomness: (start rows in [lo, hi), jitter keys, learner seeds)
    of episode ``episodes[b]`` of an environment whose generator gave ``bases[b]``."""
    out = np.empty((len(bases), 3), dtype=np.int64)
    _episode_batch(
        np.asarray(bases, dtype=np.int64), np.asarray(episodes, dtype=np.int64), lo, hi, out
    )
    return out[:, 0], out[:, 1], out[:, 2]


@_jit
def _jitter_batch(c: np.ndarray, state: np.ndarray, first: np.ndarray, out: np.ndarray) -> None:
    for b in range(out.shape[0]):
        for r in range(out.shape[1]):
            _jitter_into(c, state[b, KEY], first[b] + r, out[b, r])


# --------------------------------------------------------------------------- the round


@_jit
def _round(c, site, table, st, mask, jitter, b, rec, srec, begin, end, s_begin, fetch):
    """One round of one episode, in the order docs/model.md gives it; ``st`` is updated.

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

    With non-blocking joins (``[network] join_mode``), step 2 differs: a joining site fetches
    the training state while the others train, delays nothing and adds nothing to the round (a
    zero pseudo-gradient); it has joined once its fetch is done, and a fetch longer than the
    round goes on in the next (the joined slot of the state holds the share fetched). A round
    in which every started site is fetching ends when the first fetch does.

    The jitter factors are episode ``b``'s row of ``jitter`` if it is not empty, else the
    episode's own (`_factor`); ``begin``, ``end``, ``s_begin`` and ``fetch`` are scratch of N.
    """
    n = site.shape[1]
    t = st[TIME]
    k = _row(c, t)
    fixed = c[C_FIXED_TIME] > 0.0
    seed = _round_seed(st[KEY], int(st[ROUNDS]))
    n_req = 0
    n_sel = 0
    for i in range(n):
        powered = table[k, POWERED, i]
        chosen = mask[i] != 0
        n_req += chosen
        sel = chosen and powered > 0.0
        n_sel += sel
        srec[SELECTED, i] = sel
        srec[DROPPED, i] = 0.0
        srec[POWERED_NOW, i] = powered
    idle = n_sel == 0

    n_done = 0
    latest = -math.inf
    straggler = -1
    last_drop = -math.inf
    rtt = 0.0
    site_tx = 0.0
    batch = 0.0
    nonblocking = c[C_NONBLOCKING] > 0.0
    first_fetch = math.inf
    for i in range(n):
        fetch[i] = -1.0  # not fetching
        if srec[SELECTED, i] == 0.0:
            continue
        joined = st[JOINED + i] >= 1.0
        if nonblocking and not joined:  # fetches through the round, trains next round
            fetch[i] = _fetch_end(site, st, t, i)
            first_fetch = min(first_fetch, fetch[i])
            begin[i] = t
            end[i] = t
            continue
        begin[i] = t + (0.0 if joined else site[S_JOIN, i])
        k_begin = _row(c, begin[i])
        s_begin[i] = _samples_in(c, table, begin[i], i, k_begin)
        if fixed:  # a slow window stops at the grace deadline: the update goes as it is
            window = c[C_ROUND_S] * min(_factor(c, jitter, b, seed, i), 1.0 + c[C_GRACE])
            end[i] = begin[i] + window
        else:
            target = s_begin[i] + site[S_QUOTA, i] * _factor(c, jitter, b, seed, i)
            end[i] = _time_to_reach(c, table, target, i, k_begin)
        drop_at = table[k, OUTAGE_S, i]  # the next row without power; the current row has some
        if drop_at < end[i]:
            srec[DROPPED, i] = 1.0
            last_drop = max(last_drop, drop_at)
            continue
        n_done += 1
        if end[i] > latest:
            latest = end[i]
            straggler = i
        rtt = max(rtt, site[S_RTT, i])
        site_tx = max(site_tx, site[S_TX, i])
        if fixed:
            batch += _samples_at(c, table, min(end[i], drop_at), i) - s_begin[i]
        else:
            batch += site[S_BATCH, i]
    if fixed:
        batch = batch / c[C_LOCAL_STEPS]

    comm_jitter = _factor(c, jitter, b, seed, n) if n_done > 0 else 1.0
    compute_s, comm_s, round_s = _barrier(
        c, t, n_sel, n_done, latest, last_drop, rtt, site_tx, comm_jitter, first_fetch
    )
    deadline = st[START] + c[C_BUDGET]
    budget_left = deadline - t
    cut = round_s > budget_left
    round_s = min(round_s, budget_left)
    compute_s = min(compute_s, round_s)
    comm_s = min(comm_s, round_s - compute_s)
    # A round that reaches the budget ends exactly at it: t + (deadline − t) can round below
    # the deadline, and the episode would then never see its budget run out.
    t_end = deadline if round_s >= budget_left else t + round_s
    if cut:
        batch = 0.0
    for i in range(n):  # a fetching site whose power fails before it is done starts again
        if fetch[i] >= 0.0 and table[k, OUTAGE_S, i] < min(fetch[i], t_end):
            srec[DROPPED, i] = 1.0

    # Busy GPUs from the end of the join to the end of compute (or the outage, or the cut);
    # joined GPUs wait at idle power through the join and after they finish, until the round
    # ends. A site that dropped out has no powered GPU left to wait with.
    busy_j = 0.0
    idle_j = 0.0
    for i in range(n):
        if srec[SELECTED, i] == 0.0:
            continue
        drop_at = table[k, OUTAGE_S, i]
        stop = min(min(end[i], drop_at), t_end)
        busy_s = max(stop - begin[i], 0.0)
        if busy_s > 0.0:
            busy_j += _gpu_energy_at(c, table, site, stop, i) - _gpu_energy_at(
                c, table, site, min(begin[i], stop), i
            )
        held_until = min(drop_at, t_end) if srec[DROPPED, i] > 0.0 else t_end
        waiting_s = max(held_until - t - busy_s, 0.0)
        idle_j += site[S_IDLE_W, i] * srec[POWERED_NOW, i] * waiting_s
    energy_j = busy_j + idle_j

    if not idle:
        for i in range(n):
            done = srec[SELECTED, i] > 0.0 and srec[DROPPED, i] == 0.0 and fetch[i] < 0.0
            st[JOINED + n + i] = 0.0 if done else st[JOINED + n + i] + 1.0
    cover = st[COVERAGE] if idle else _coverage(c, site, st[JOINED + n : JOINED + 2 * n])
    dp = _delta_progress(c, st[PROGRESS], batch, cover)
    progress = st[PROGRESS] + dp
    acc = _accuracy(c, progress, cover)
    target = c[C_TARGET]
    rec[R_DELTA_ACC] = min(acc, target) - min(st[ACC], target)

    for i in range(n):
        if srec[SELECTED, i] == 0.0 or srec[DROPPED, i] > 0.0:
            st[JOINED + i] = 0.0
        elif fetch[i] < 0.0 or fetch[i] <= t_end:
            st[JOINED + i] = 1.0
        else:  # the share of the training state fetched so far
            st[JOINED + i] = min(st[JOINED + i] + (t_end - t) / site[S_JOIN, i], _JUST_BELOW_1)
    st[TIME] = t_end
    st[PROGRESS] = progress
    st[ACC] = acc
    st[ROUNDS] += 1.0
    st[ENERGY] += energy_j
    st[LAST_ROUND] = round_s
    st[COVERAGE] = cover

    rec[R_ROUND_S] = round_s
    rec[R_COMPUTE_S] = compute_s
    rec[R_COMM_S] = comm_s
    rec[R_ENERGY_J] = energy_j
    rec[R_STRAGGLER] = straggler
    rec[R_INVALID] = n_req - n_sel
    rec[R_IDLE] = idle
    rec[R_CUT] = cut
    rec[R_N_SELECTED] = n_sel
    over = t_end >= deadline or st[ROUNDS] >= c[C_MAX_ROUNDS]
    rec[R_OVER] = over
    rec[R_TERMINATED] = acc >= target
    rec[R_TRUNCATED] = over and not acc >= target
    _rewards(c, rec)


@_jit
def _rewards(c: np.ndarray, rec: np.ndarray) -> None:
    """The round's rewards (``powertrip_env.rewards``), from its accuracy gain and time.

    * excess gain ``(Δa − ρ_ref·T_r) / (a* − a0)`` with ``ρ_ref = (a* − a0) / H_ref``: the gain
      minus what the reference rate gains in the same time. Its sum over a successful episode
      is exactly ``1 − TTA/H_ref``, so maximising the return minimises the time to accuracy.
    * gain rate ``Δa / (a* − a0) · H_ref / T_r``: the literal gain per unit time; 0 for a round
      of no time (only an episode already at its budget has one).
    """
    gain = rec[R_DELTA_ACC] / c[C_SPAN]
    rec[R_EXCESS_GAIN] = gain - rec[R_ROUND_S] / c[C_H_REF]
    rec[R_GAIN_RATE] = gain * (c[C_H_REF] / rec[R_ROUND_S]) if rec[R_ROUND_S] > 0.0 else 0.0


@_jit
def _fetch_end(site, st, t, i):
    """When site ``i``'s fetch of the training state is done if it goes on from ``t``
    (non-blocking joins: the joined slot holds the share already fetched)."""
    return t + (1.0 - st[JOINED + i]) * site[S_JOIN, i]


@_jit
def _comm_time(c, n_done, rtt, site_tx):
    """The exchange among ``n_done`` completing sites whose largest RTT and largest ``M/bw_i``
    are ``rtt`` and ``site_tx``, before the network jitter (see `_barrier`)."""
    if c[C_RING] > 0.0:
        if n_done > 1:
            return c[C_RTT_FACTOR] * rtt + 2.0 * (n_done - 1) / n_done * site_tx
        return 0.0
    return c[C_RTT_FACTOR] * rtt + 2.0 * max(site_tx, n_done * c[C_HUB_TX])


@_jit
def _comm_time_many(c, n_done, rtt, site_tx, out):
    for j in range(out.shape[0]):
        out[j] = _comm_time(c, n_done[j], rtt[j], site_tx[j])


def comm_time_s(params: SimParams, n_done: Any, rtt_s: Any, site_tx_s: Any) -> np.ndarray:
    """`_comm_time` elementwise (arguments broadcast): the kernel's communication time of a
    round before jitter, for tools that bound or report it without stepping a round."""
    k, r, x = np.broadcast_arrays(
        np.asarray(n_done, np.float64), np.asarray(rtt_s, np.float64),
        np.asarray(site_tx_s, np.float64),
    )  # fmt: skip
    out = np.empty(k.size)
    _comm_time_many(params.consts, k.ravel(), r.ravel(), x.ravel(), out)
    return out.reshape(k.shape)


@_jit
def _barrier(c, t, n_sel, n_done, latest, last_drop, rtt, site_tx, comm_jitter, first_fetch):
    """(compute, communication, round) seconds of a round that began at ``t``.

    The round ends at the barrier: the last completing site's compute end (``latest``), then
    the exchange of the pseudo-gradients among the completing sites times the network jitter,
    then aggregation. Through the hub (a parameter server) every update goes up and the result
    comes down, through the slower of the sites' links and the hub's shared one:
    ``rtt_factor · max RTT + 2 · max(max M/bw_i, |S| · M/bw_hub)``. A ring all-reduce moves
    ``2 (|S| − 1) / |S|`` updates through every site's link, so the slowest link sets it:
    ``rtt_factor · max RTT + 2 (|S| − 1) / |S| · max M/bw_i``, nothing for a lone site
    (``rtt``, ``site_tx``: the completing sites' maxima). If every started site dropped out it
    ends at the last drop-out (``last_drop``), with no communication, or, if some are fetching
    the training state (non-blocking joins), when the first fetch is done (``first_fetch``) and
    no earlier than the last drop-out; with none started it is an idle round of ``idle_s``.
    """
    if n_done > 0:
        compute_s = latest - t
        comm_s = _comm_time(c, n_done, rtt, site_tx) * comm_jitter
        return compute_s, comm_s, compute_s + comm_s + c[C_AGG]
    if first_fetch < math.inf:
        until = max(first_fetch, last_drop) - t
        return until, 0.0, until
    if n_sel > 0:
        return last_drop - t, 0.0, last_drop - t
    return 0.0, 0.0, c[C_IDLE_S]


@_jit
def _step_batch(c, site, table, state, masks, jitter, rec, srec):
    """Every episode of ``state`` (updated in place) one round on; ``jitter`` (B, N + 1) gives
    the factors, or is empty to take each episode's own from its key."""
    n = site.shape[1]
    begin = np.empty(n)
    end = np.empty(n)
    s_begin = np.empty(n)
    fetch = np.empty(n)
    for b in range(state.shape[0]):
        _round(
            c, site, table, state[b], masks[b], jitter, b, rec[b], srec[b], begin, end, s_begin,
            fetch,
        )  # fmt: skip


# --------------------------------------------------------------------------- observations


@_jit
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
            row[i * nf + SELECTED_COL] = st[JOINED + i]
        for x in range(n * nf, g):
            row[x] = 0.0
        day = 2.0 * math.pi * ((st[TIME] + c[C_T0]) % 86400.0) / 86400.0
        row[g] = min(max((st[ACC] - c[C_A0]) / c[C_SPAN], 0.0), 1.0)
        row[g + 1] = min(max((st[TIME] - st[START]) / c[C_BUDGET], 0.0), 1.0)
        row[g + 2] = math.sin(day)
        row[g + 3] = math.cos(day)
        row[g + 4] = min(max(st[LAST_ROUND] / c[C_TIME_SCALE], 0.0), 1.0)
        row[g + 5] = min(max(st[COVERAGE], 0.0), 1.0)
        if valid:
            for i in range(width):
                row[g + N_GLOBAL + i] = 1.0 if i < n else 0.0


@_jit
def _step_observe(c, site, table, site_obs, state, masks, jitter, rec, srec, out, width, valid):
    """`_step_batch` then `_observe_batch`: what an environment step needs, in one call."""
    _step_batch(c, site, table, state, masks, jitter, rec, srec)
    _observe_batch(c, site_obs, state, out, width, valid)


@_compiled(nogil=True, error_model="numpy", parallel=True)
def _step_observe_parallel(c, site, table, site_obs, state, masks, rec, srec, out, width, valid):
    """`_step_observe` on all cores: the batch in chunks, each episode as in the serial call."""
    b = state.shape[0]
    chunks = min(b, PARALLEL_CHUNKS)
    for ch in numba.prange(chunks):
        lo, hi = ch * b // chunks, (ch + 1) * b // chunks
        _step_observe(
            c, site, table, site_obs, state[lo:hi], masks[lo:hi], _NO_JITTER, rec[lo:hi],
            srec[lo:hi], out[lo:hi], width, valid,
        )  # fmt: skip


# --------------------------------------------------------------------------- what if


@_jit
def _forecast_site(c, site, fc, st, i, steady, edges, out):
    """Site ``i``'s predicted round on its own from the forecast ``fc`` (H, N) issued now, into
    ``out``: available, finish time, outage time, dropped, samples (fixed_time rounds).

    The forecast rate of row k + h (h = 0 the current row's actual) holds piecewise over the
    coming rows and the last forecast row beyond them; a site's compute time integrates it, as
    the true round integrates the trace. ``steady`` leaves out the join.
    """
    iv = c[C_IV]
    horizons = fc.shape[0]
    t = st[TIME]
    k = _row(c, t)
    available = fc[0, i] > 0.0
    edges[0] = 0.0
    for h in range(horizons):  # cumulative samples at the start of each forecast row
        edges[h + 1] = edges[h] + fc[h, i] * iv
    joining = available and st[JOINED + i] < 1.0 and not steady
    x_begin = (t - k * iv) + (site[S_JOIN, i] if joining else 0.0)
    s_begin = _forecast_samples(fc, edges, iv, i, x_begin)
    samples = 0.0
    if c[C_FIXED_TIME] > 0.0:
        x_end = x_begin + c[C_ROUND_S]
        samples = _forecast_samples(fc, edges, iv, i, x_end) - s_begin
    else:
        target = s_begin + site[S_QUOTA, i]
        h = 0
        while h < horizons and edges[h + 1] < target:
            h += 1
        r = fc[min(h, horizons - 1), i]  # the last row's rate continues
        x_end = h * iv + (target - edges[h]) / r if r > 0.0 else math.inf
    first_out = 0
    while first_out < horizons and fc[first_out, i] > 0.0:
        first_out += 1
    drop_x = first_out * iv if first_out < horizons else math.inf
    out[0] = available
    out[1] = k * iv + x_end
    out[2] = k * iv + drop_x
    out[3] = available and drop_x < x_end
    out[4] = samples


@_jit
def _forecast_samples(fc, edges, iv, i, x):
    """Forecast cumulative samples of site ``i`` at ``x`` seconds into the current row."""
    horizons = fc.shape[0]
    h = min(max(int(x / iv), 0), horizons)
    return edges[h] + fc[min(h, horizons - 1), i] * (x - h * iv)


@_jit
def _predict_batch(c, site, forecast, state, masks, steady, out):
    """What-if of the candidate sets ``masks`` (B, M, N) into ``out`` (5, B, M): round time,
    compute time, communication time, progress and accuracy gained."""
    n = site.shape[1]
    horizons = forecast.shape[1]
    edges = np.empty(horizons + 1)
    fs = np.empty((n, 5))
    absent = np.empty(n)
    nonblocking = c[C_NONBLOCKING] > 0.0
    for b in range(state.shape[0]):
        st = state[b]
        t = st[TIME]
        fc = forecast[_row(c, t)]
        for i in range(n):
            _forecast_site(c, site, fc, st, i, steady, edges, fs[i])
        for m in range(masks.shape[1]):
            mask = masks[b, m]
            n_sel = 0
            n_done = 0
            latest = -math.inf
            last_drop = -math.inf
            rtt = 0.0
            site_tx = 0.0
            batch = 0.0
            first_fetch = math.inf
            for i in range(n):
                absent[i] = st[JOINED + n + i] + 1.0
                if not (mask[i] and fs[i, 0] > 0.0):
                    continue
                n_sel += 1
                if nonblocking and st[JOINED + i] < 1.0 and not steady:  # fetches, adds nothing
                    first_fetch = min(first_fetch, _fetch_end(site, st, t, i))
                    continue
                if fs[i, 3] > 0.0:
                    last_drop = max(last_drop, fs[i, 2])
                    continue
                n_done += 1
                absent[i] = 0.0
                latest = max(latest, fs[i, 1])
                rtt = max(rtt, site[S_RTT, i])
                site_tx = max(site_tx, site[S_TX, i])
                batch += fs[i, 4] if c[C_FIXED_TIME] > 0.0 else site[S_BATCH, i]
            if c[C_FIXED_TIME] > 0.0:
                batch = batch / c[C_LOCAL_STEPS]
            compute_s, comm_s, round_s = _barrier(
                c, t, n_sel, n_done, latest, last_drop, rtt, site_tx, 1.0, first_fetch
            )
            cover = _coverage(c, site, absent)
            dp = _delta_progress(c, st[PROGRESS], batch, cover)
            out[0, b, m] = round_s
            out[1, b, m] = compute_s
            out[2, b, m] = comm_s
            out[3, b, m] = dp
            out[4, b, m] = _accuracy(c, st[PROGRESS] + dp, cover) - st[ACC]


# --------------------------------------------------------------------------- the Python face


class SimState:
    """A batch of B episodes: ``data`` is (B, len(STATE_FIELDS) + 2N) float64.

    Functions here never change a state; each step makes a new one, and so must callers (the
    array stays writeable because flipping the flag costs a third of a kernel call). The
    properties give the fields as arrays (views, except the bool ``prev_selected`` and the
    int ``rounds``).
    """

    __slots__ = ("data",)
    FIELDS = (*STATE_FIELDS, "prev_selected", "absent_rounds")  # the properties, by name

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    @property
    def batch(self) -> int:
        return self.data.shape[0]

    @property
    def n_sites(self) -> int:
        return (self.data.shape[1] - JOINED) // 2

    time_s = property(lambda self: self.data[:, TIME], doc="(B,) seconds since row 0")
    start_s = property(lambda self: self.data[:, START], doc="(B,) the episode's start")
    progress = property(lambda self: self.data[:, PROGRESS], doc="(B,) surrogate progress P")
    accuracy = property(lambda self: self.data[:, ACC], doc="(B,)")
    energy_j = property(lambda self: self.data[:, ENERGY], doc="(B,) energy so far")
    last_round_s = property(lambda self: self.data[:, LAST_ROUND], doc="(B,)")
    coverage = property(lambda self: self.data[:, COVERAGE], doc="(B,) of the last round")
    key = property(lambda self: self.data[:, KEY], doc="(B,) the jitter's key")

    @property
    def rounds(self) -> np.ndarray:
        """(B,) int: rounds played."""
        return self.data[:, ROUNDS].astype(np.int64)

    @property
    def prev_selected(self) -> np.ndarray:
        """(B, N) bool: the sites that completed the last round (joined)."""
        return self.data[:, JOINED : JOINED + self.n_sites] >= 1.0

    @property
    def absent_rounds(self) -> np.ndarray:
        """(B, N) rounds since each site last took part."""
        n = self.n_sites
        return self.data[:, JOINED + n : JOINED + 2 * n]

    def take(self, index: np.ndarray) -> SimState:
        """The episodes at ``index`` (an int array, repeats allowed), as a new batch."""
        return SimState(self.data[np.asarray(index)])

    def replace(self, **fields: Any) -> SimState:
        """A copy with the named fields (``STATE_FIELDS``, ``prev_selected``,
        ``absent_rounds``) set to the given values, broadcast over the batch."""
        data = self.data.copy()
        n = self.n_sites
        for name, value in fields.items():
            if name == "prev_selected":
                data[:, JOINED : JOINED + n] = np.asarray(value, dtype=bool)
            elif name == "absent_rounds":
                data[:, JOINED + n : JOINED + 2 * n] = value
            elif name in STATE_FIELDS:
                data[:, STATE_FIELDS.index(name)] = value
            else:
                raise TypeError(f"SimState has no field {name!r}")
        return SimState(data)

    def put(self, index: np.ndarray, part: SimState) -> SimState:
        """A copy with the episodes at ``index`` replaced by those of ``part``."""
        data = self.data.copy()
        data[index] = part.data
        return SimState(data)


def initial_state(params: SimParams, start_s: Any, key: Any = 0) -> SimState:
    """Fresh episodes starting at ``start_s`` (seconds since row 0) with jitter keys ``key``
    (whole numbers below ``KEY_LIMIT``, drawn from each episode's generator)."""
    start = np.asarray(start_s, dtype=np.float64).reshape(-1)
    n = params.n_sites
    data = np.zeros((start.shape[0], JOINED + 2 * n))
    data[:, TIME] = start
    data[:, START] = start
    data[:, ACC] = params.a0
    data[:, COVERAGE] = 1.0
    data[:, KEY] = key
    return SimState(data)


class RoundResult:
    """The outcome of one simulated round for every episode in the batch.

    ``record`` is (B, len(RECORD_FIELDS)) and ``sites`` (B, 3, N) (``SITE_RECORD``); the
    properties read them as typed arrays.
    """

    __slots__ = ("record", "sites", "state")
    # the properties besides ``state``, by name
    FIELDS = (
        "round_time_s", "compute_s", "comm_s", "delta_accuracy", "energy_j", "straggler",
        "invalid", "idle", "cut", "terminated", "truncated", "selected", "dropped", "powered",
    )  # fmt: skip

    def __init__(self, state: SimState, record: np.ndarray, sites: np.ndarray) -> None:
        self.state, self.record, self.sites = state, record, sites

    round_time_s = property(lambda self: self.record[:, R_ROUND_S])
    compute_s = property(lambda self: self.record[:, R_COMPUTE_S])
    comm_s = property(lambda self: self.record[:, R_COMM_S])
    delta_accuracy = property(
        lambda self: self.record[:, R_DELTA_ACC],
        doc="clipped at the target, so a* − a0 sums exactly on success",
    )
    energy_j = property(lambda self: self.record[:, R_ENERGY_J], doc="of this round")
    straggler = property(
        lambda self: self.record[:, R_STRAGGLER].astype(np.int64),
        doc="the completing site that finished compute last; -1 if none",
    )
    invalid = property(
        lambda self: self.record[:, R_INVALID].astype(np.int64),
        doc="requested sites that were unavailable",
    )
    idle = property(lambda self: self.record[:, R_IDLE] > 0.0, doc="no site started")
    cut = property(
        lambda self: self.record[:, R_CUT] > 0.0,
        doc="the round was cut at the time budget and taught nothing",
    )
    terminated = property(lambda self: self.record[:, R_TERMINATED] > 0.0)
    truncated = property(lambda self: self.record[:, R_TRUNCATED] > 0.0)
    selected = property(
        lambda self: self.sites[:, SELECTED] > 0.0,
        doc="(B, N) the sites that started the round (selection ∧ available)",
    )
    dropped = property(
        lambda self: self.sites[:, DROPPED] > 0.0,
        doc="(B, N) selected sites that lost all power before finishing",
    )
    powered = property(
        lambda self: self.sites[:, POWERED_NOW], doc="(B, N) powered GPUs at the round's start"
    )

    def with_accuracy(self, params: SimParams, before: Any, after: Any) -> RoundResult:
        """This round taking the accuracy from ``before`` to ``after`` instead (a real
        learner's): the state, the gain, the rewards and whether the episode terminated
        follow it."""
        accuracy = np.asarray(after, dtype=np.float64)
        target = params.a_target
        record = self.record.copy()
        record[:, R_DELTA_ACC] = np.minimum(accuracy, target) - np.minimum(before, target)
        done = accuracy >= target
        record[:, R_TERMINATED] = done
        record[:, R_TRUNCATED] = (record[:, R_OVER] > 0.0) & ~done
        for row in record:
            _rewards(params.consts, row)
        return RoundResult(self.state.replace(accuracy=accuracy), record, self.sites)


def _c_bool(values: np.ndarray) -> np.ndarray:
    """A mask the kernel can read: bool, C-contiguous."""
    return np.ascontiguousarray(values, dtype=np.bool_)


def _round_buffers(params: SimParams, state: SimState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a round writes: a copy of the state, its record and its per-site record."""
    b = state.batch
    record = np.empty((b, len(RECORD_FIELDS)))
    return state.data.copy(), record, np.empty((b, len(SITE_RECORD), params.n_sites))


def _obs_buffer(batch: int, width: int, valid: bool) -> np.ndarray:
    """Flat observations of ``width`` sites: their features, the global ones, valid flags."""
    return np.empty(
        (batch, width * N_SITE_FEATURES + N_GLOBAL + (width if valid else 0)), np.float32
    )


def step_round(
    params: SimParams, state: SimState, mask: np.ndarray, jitter: np.ndarray | None = None
) -> RoundResult:
    """Simulate one round of every episode on the true power trace (see `_round`).

    ``mask`` (B, N) bool is the requested set. The jitter is each episode's own, from its key;
    ``jitter`` (B, N + 1) factors replace it (tests and what-ifs).
    """
    data, record, sites = _round_buffers(params, state)
    given = _NO_JITTER if jitter is None else np.ascontiguousarray(jitter, dtype=np.float64)
    _step_batch(params.consts, params.site, params.table, data, _c_bool(mask), given, record, sites)
    return RoundResult(SimState(data), record, sites)


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
        _step_observe(*args, _NO_JITTER, record, sites, obs, width, valid)
    return RoundResult(SimState(data), record, sites), obs


def observe(params: SimParams, state: SimState, width: int, valid: bool) -> np.ndarray:
    """Flat observations (B, width·F + G [+ width]) float32: site features (zeros for padded
    sites), global features, and with ``valid`` the per-site valid flags."""
    obs = _obs_buffer(state.batch, width, valid)
    _observe_batch(params.consts, params.site_obs, state.data, obs, width, valid)
    return obs


def jitter_factors(params: SimParams, state: SimState, rounds: int) -> np.ndarray:
    """CLAIRVOYANT: (B, rounds, N + 1) jitter factors of each episode's next ``rounds`` rounds,
    exactly those `step_round` will use. For the references named clairvoyant only."""
    b, n = state.batch, params.n_sites
    out = np.empty((b, max(int(rounds), 0), n + 1))
    first = state.data[:, ROUNDS].astype(np.int64)
    _jitter_batch(params.consts, state.data, first, out)
    return out


def current_row(params: SimParams, time_s: np.ndarray) -> np.ndarray:
    """Row of the per-row tables for each episode's clock."""
    return np.minimum((np.asarray(time_s) / params.interval_s).astype(np.intp), params.rows - 1)


def available_now(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N) bool: sites with at least one powered GPU at the current time."""
    return params.available[current_row(params, state.time_s)]


@_jit
def _finish_batch(c, table, begin, work, out):
    for j in range(begin.shape[0]):
        for i in range(begin.shape[1]):
            target = _samples_at(c, table, begin[j, i], i) + work[i]
            out[j, i] = _time_to_reach(c, table, target, i, _row(c, begin[j, i]))


def finish_times(params: SimParams, begin: np.ndarray, work: np.ndarray) -> np.ndarray:
    """CLAIRVOYANT: when each site, starting at ``begin`` (J, N), has processed ``work`` (N,)
    samples on the true trace (the time a round's compute would end, without jitter)."""
    out = np.empty(begin.shape)
    _finish_batch(params.consts, params.table, begin, work, out)
    return out


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
    mask = _c_bool(mask)
    squeeze = mask.ndim == 2
    if squeeze:
        mask = mask[:, None, :]
    out = np.empty((5, mask.shape[0], mask.shape[1]))
    _predict_batch(
        params.consts, params.site, params.forecast_rate, state.data, mask, bool(steady_state), out
    )
    if squeeze:
        out = out[:, :, 0]
    return RoundPrediction(*out)
