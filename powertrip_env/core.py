"""The simulator: pure array functions over a batch of episodes.

Every state array has a leading batch axis, ``(batch, n_sites)`` or ``(batch,)``, so the single
environment (batch 1) and the vector environment (batch B) run this one implementation of the
dynamics. The model is DESIGN.md §3; this module imports numpy only.

Power enters through tables built once per scenario and trace (``SimParams``): powered GPUs,
throughput and the cumulative samples a site can process, per trace interval. The time a site
needs for its quota is then one ``searchsorted`` on the cumulative table, which integrates the
piecewise-constant trace exactly: a site whose power falls mid-round finishes later. The trace is
wrapped once at its end so an episode that starts late still has a future.

Randomness does not live here: callers pass standard-normal draws (``noise``) taken from the
episode's generator, which keeps these functions pure and the batch equal to its members.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:  # config is only needed for type hints; core stays numpy-only at run time
    from powertrip_env.config import Scenario

EARTH_RADIUS_KM = 6371.0
TREND_ROWS_S = 3600.0  # the observation's power trend looks back one hour

# Per-site observation features, in column order, with their ranges.
SITE_FEATURES = (
    "available_power_fraction",  # headroom / capacity, [0, 1]
    "powered_gpu_fraction",  # powered GPUs / GPU count, [0, 1]
    "throughput",  # samples/s over the largest full-power site throughput, [0, 1]
    "compute_time",  # estimated compute time over `time_scale_s`, clipped, [0, 1]; 1 if unavailable
    "rtt_to_hub",  # RTT to the hub over the largest site RTT, [0, 1]
    "power_trend",  # change of headroom over the last hour / capacity, [-1, 1]
    "selected_last_round",  # 0 or 1
    "available",  # 0 or 1: at least one GPU can be powered now
)
GLOBAL_FEATURES = (
    "progress_to_target",  # (a - a0) / (a* - a0), [0, 1]
    "elapsed_fraction",  # elapsed time / time budget, [0, 1]
    "time_of_day_sin",  # UTC time of day, [-1, 1]
    "time_of_day_cos",  # [-1, 1]
    "last_round_time",  # last round time over `time_scale_s`, clipped, [0, 1]
    "data_coverage",  # non-IID coverage of the last round, [0, 1]
)
SITE_LOW = np.array([0, 0, 0, 0, 0, -1, 0, 0], dtype=np.float32)
SITE_HIGH = np.ones(len(SITE_FEATURES), dtype=np.float32)
GLOBAL_LOW = np.array([0, 0, -1, -1, 0, 0], dtype=np.float32)
GLOBAL_HIGH = np.ones(len(GLOBAL_FEATURES), dtype=np.float32)
_SELECTED_COL = SITE_FEATURES.index("selected_last_round")


def great_circle_km(lat1: np.ndarray, lon1: np.ndarray, lat2: float, lon2: float) -> np.ndarray:
    """Haversine distance on a spherical Earth."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    h = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def rtt_ms(distance_km: np.ndarray, base_ms: float, route_factor: float, km_per_ms: float):
    """``RTT = base + 2 · route_factor · d / v_fiber`` (DESIGN.md §3, REFERENCES.md "WAN")."""
    return base_ms + 2.0 * route_factor * np.asarray(distance_km) / km_per_ms


@dataclass(frozen=True, eq=False)
class SimParams:
    """Everything static about a scenario and its trace, as arrays. Shared read-only."""

    n_sites: int
    interval_s: float
    trace_rows: int  # rows of the real trace; the tables below hold it twice (wrapped)
    trace_t0_s: float  # Unix time of trace row 0
    # per site, shape (n_sites,)
    gpu_count: np.ndarray
    gpu_wall_w: np.ndarray  # p_g = tdp · server_overhead · PUE
    gpu_rate: np.ndarray  # θ_g, samples/s per powered GPU
    capacity_w: np.ndarray
    site_batch: np.ndarray
    wan_bps: np.ndarray
    rtt_s: np.ndarray  # round trip to the hub
    data_share: np.ndarray
    quota: np.ndarray  # samples per round per site (fixed_quota mode)
    # per trace row (wrapped), shape (rows, n_sites); cum_* have rows + 1
    powered: np.ndarray
    rate: np.ndarray  # samples/s
    cum_samples: np.ndarray
    cum_gpu_j: np.ndarray  # energy of the powered GPUs if busy
    available: np.ndarray  # bool
    site_obs: np.ndarray  # float32 (rows, n_sites, F) static part of the site features
    flat_cum: np.ndarray  # cum_samples per site laid end to end, offset to be sorted
    flat_offset: np.ndarray  # (n_sites,)
    # workload and network scalars
    model_bits: float
    hub_bps: float
    rtt_factor: float
    aggregation_s: float
    join_s: float
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
    fixed_time: bool
    round_s: float
    idle_s: float
    jitter_sigma: float
    idle_fraction: float
    time_budget_s: float
    h_ref_s: float
    max_rounds: int
    time_scale_s: float  # normaliser of time-valued observations

    @property
    def rows(self) -> int:
        return self.rate.shape[0]


def build_params(scenario: Scenario, util: np.ndarray, interval_s: float, t0_s: float) -> SimParams:
    """Turn a validated scenario and its sites' trace columns ``util`` (T, N) into tables."""
    sites = scenario.sites
    n = len(sites)
    wl, net, ep = scenario.workload, scenario.network, scenario.episode
    col = lambda attr: np.array([getattr(s, attr) for s in sites], dtype=np.float64)  # noqa: E731
    gpu = [scenario.gpus[s.gpu] for s in sites]
    tdp_w = np.array([g.power_w for g in gpu])
    tflops = np.array([g.tflops_bf16 for g in gpu])
    gpu_count = col("gpu_count")
    capacity_w = col("capacity_kw") * 1e3
    gpu_wall_w = tdp_w * ep.server_overhead * col("pue")
    gpu_rate = tflops * 1e12 * wl.mfu / wl.flops_per_sample
    site_batch = np.full(n, float(wl.site_batch))
    quota = site_batch * wl.local_steps

    if net.rtt_to_hub_ms is not None:
        rtt = np.array(net.rtt_to_hub_ms, dtype=np.float64)
    else:
        d = great_circle_km(col("latitude"), col("longitude"), net.hub_latitude, net.hub_longitude)
        rtt = rtt_ms(d, net.base_ms, net.route_factor, net.fiber_km_per_ms)
    rtt_s = rtt / 1e3

    u = np.concatenate([util, util], axis=0).astype(np.float64)  # wrap once
    headroom_w = capacity_w * (1.0 - u)
    # the 1e-9 keeps 10.0 GPUs' worth of headroom from flooring to 9 through rounding
    powered = np.minimum(gpu_count, np.floor(headroom_w / gpu_wall_w + 1e-9))
    rate = powered * gpu_rate
    rows = rate.shape[0]
    zero = np.zeros((1, n))
    cum_samples = np.concatenate([zero, np.cumsum(rate * interval_s, axis=0)])
    cum_gpu_j = np.concatenate([zero, np.cumsum(powered * gpu_wall_w * interval_s, axis=0)])
    block = cum_samples[-1].max() * 1.01 + 1.0
    flat_offset = np.arange(n) * block
    flat_cum = (cum_samples + flat_offset).T.ravel()
    available = powered > 0

    full_time = quota / (gpu_count * gpu_rate)
    time_scale_s = float(20.0 * full_time.min()) if not wl.round_mode == "fixed_time" else (
        float(4.0 * wl.round_s)
    )
    lag = max(1, round(TREND_ROWS_S / interval_s))
    headroom_frac = 1.0 - u
    past = np.concatenate([np.repeat(headroom_frac[:1], lag, axis=0), headroom_frac[:-lag]])
    with np.errstate(divide="ignore"):
        est = np.where(available, quota / np.where(rate > 0, rate, 1.0) / time_scale_s, 1.0)
    site_obs = np.empty((rows, n, len(SITE_FEATURES)), dtype=np.float32)
    site_obs[..., 0] = headroom_frac
    site_obs[..., 1] = powered / gpu_count
    site_obs[..., 2] = rate / (gpu_count * gpu_rate).max()
    site_obs[..., 3] = np.minimum(est, 1.0)
    site_obs[..., 4] = rtt_s / rtt_s.max()
    site_obs[..., 5] = np.clip(headroom_frac - past, -1.0, 1.0)
    site_obs[..., 6] = 0.0
    site_obs[..., 7] = available
    for array in (powered, rate, cum_samples, cum_gpu_j, available, site_obs, flat_cum):
        array.flags.writeable = False

    return SimParams(
        n_sites=n,
        interval_s=float(interval_s),
        trace_rows=util.shape[0],
        trace_t0_s=float(t0_s),
        gpu_count=gpu_count,
        gpu_wall_w=gpu_wall_w,
        gpu_rate=gpu_rate,
        capacity_w=capacity_w,
        site_batch=site_batch,
        wan_bps=col("wan_gbps") * 1e9,
        rtt_s=rtt_s,
        data_share=col("data_share"),
        quota=quota,
        powered=powered,
        rate=rate,
        cum_samples=cum_samples,
        cum_gpu_j=cum_gpu_j,
        available=available,
        site_obs=site_obs,
        flat_cum=flat_cum,
        flat_offset=flat_offset,
        model_bits=wl.model_bytes * 8.0,
        hub_bps=net.hub_gbps * 1e9,
        rtt_factor=net.rtt_factor,
        aggregation_s=net.aggregation_s,
        join_s=net.join_s,
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
        fixed_time=wl.round_mode == "fixed_time",
        round_s=wl.round_s,
        idle_s=ep.idle_s if ep.idle_s > 0 else float(interval_s),
        jitter_sigma=ep.jitter_sigma,
        idle_fraction=ep.idle_fraction,
        time_budget_s=ep.time_budget_h * 3600.0,
        h_ref_s=ep.h_ref_h * 3600.0,
        max_rounds=ep.max_rounds,
        time_scale_s=time_scale_s,
    )


# --------------------------------------------------------------------------- the learning model


def noise_scale(params: SimParams, progress: np.ndarray) -> np.ndarray:
    """Gradient noise scale ``B_noise(P) = B0 · (1 + P / P_B)^γ`` (McCandlish et al. 2018)."""
    return params.noise_b0 * (1.0 + progress / params.noise_p_b) ** params.noise_gamma


def accuracy(params: SimParams, progress: np.ndarray) -> np.ndarray:
    """Surrogate accuracy curve ``a(P) = a_max − (a_max − a0)(1 + P/P0)^−α``."""
    return params.a_max - (params.a_max - params.a0) * (1.0 + progress / params.p0) ** (
        -params.alpha
    )


def progress_needed(params: SimParams) -> float:
    """Progress at which the accuracy curve reaches the target (its inverse at a*)."""
    ratio = (params.a_max - params.a_target) / (params.a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


def coverage(params: SimParams, absent_rounds: np.ndarray) -> np.ndarray:
    """Fraction of the data a round's update reflects under non-IID data (1 when IID).

    A site away for ``r`` rounds has its share forgotten as ``1 − exp(−r/τ)``; ``non_iid``
    scales how much that matters.
    """
    if params.non_iid == 0.0:
        return np.ones(absent_rounds.shape[0])
    forgotten = 1.0 - np.exp(-absent_rounds / params.coverage_tau)
    return 1.0 - params.non_iid * (forgotten @ params.data_share)


def delta_progress(
    params: SimParams, progress: np.ndarray, batch: np.ndarray, cover: np.ndarray
) -> np.ndarray:
    """``ΔP = local_steps · η · coverage / (1 + B_noise(P) / B_r)``; zero for an empty round."""
    bn = noise_scale(params, progress)
    with np.errstate(divide="ignore"):
        eff = np.where(batch > 0, 1.0 / (1.0 + bn / np.where(batch > 0, batch, 1.0)), 0.0)
    return params.local_steps * params.eta_local * eff * cover


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, eq=False)
class SimState:
    """A batch of episodes. Arrays are never modified in place; each step builds a new state."""

    time_s: np.ndarray  # (B,) seconds since trace row 0
    start_s: np.ndarray  # (B,)
    progress: np.ndarray  # (B,)
    accuracy: np.ndarray  # (B,)
    prev_selected: np.ndarray  # (B, N) bool: the effective set of the last round
    absent_rounds: np.ndarray  # (B, N) rounds since each site last took part
    rounds: np.ndarray  # (B,) int
    energy_j: np.ndarray  # (B,)
    last_round_s: np.ndarray  # (B,)
    coverage: np.ndarray  # (B,)

    @property
    def batch(self) -> int:
        return self.time_s.shape[0]


def initial_state(params: SimParams, start_s: np.ndarray) -> SimState:
    """Fresh episodes starting at ``start_s`` (seconds since trace row 0)."""
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
    for name in SimState.__dataclass_fields__:
        a, b = getattr(old, name), getattr(new, name)
        r = rows.reshape((-1,) + (1,) * (a.ndim - 1))
        out[name] = np.where(r, b, a)
    return SimState(**out)


def current_row(params: SimParams, time_s: np.ndarray) -> np.ndarray:
    """Trace row (interval index) of each episode's clock."""
    return np.minimum((time_s // params.interval_s).astype(np.intp), params.rows - 1)


def available_now(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N) bool: sites with at least one powered GPU at the current time."""
    return params.available[current_row(params, state.time_s)]


# --------------------------------------------------------------------------- the round


def _samples_at(params: SimParams, t: np.ndarray) -> np.ndarray:
    """Cumulative samples each site could have processed from row 0 to time ``t`` (B, N)."""
    k = np.minimum((t // params.interval_s).astype(np.intp), params.rows - 1)
    cols = np.arange(params.n_sites)
    return params.cum_samples[k, cols] + params.rate[k, cols] * (t - k * params.interval_s)


def _gpu_energy_at(params: SimParams, t: np.ndarray) -> np.ndarray:
    k = np.minimum((t // params.interval_s).astype(np.intp), params.rows - 1)
    cols = np.arange(params.n_sites)
    busy_w = params.powered[k, cols] * params.gpu_wall_w
    return params.cum_gpu_j[k, cols] + busy_w * (t - k * params.interval_s)


def _time_to_reach(params: SimParams, target: np.ndarray) -> np.ndarray:
    """Earliest time at which each site's cumulative samples reach ``target`` (B, N).

    One ``searchsorted`` over all sites: their cumulative tables are laid end to end with
    offsets that keep the whole array sorted. A target beyond the (wrapped) trace caps at its end.
    """
    rows = params.rows
    cols = np.arange(params.n_sites)
    pos = np.searchsorted(params.flat_cum, target + params.flat_offset, side="left")
    e = pos - cols * (rows + 1)  # first table row whose cumulative reaches the target
    beyond = e > rows
    j = np.clip(e - 1, 0, rows - 1)
    rate = params.rate[j, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = j * params.interval_s + (target - params.cum_samples[j, cols]) / rate
    return np.where(beyond | (rate <= 0), rows * params.interval_s, t)


def _comm_s(params: SimParams, sel: np.ndarray, n_sel: np.ndarray) -> np.ndarray:
    """``rtt_factor · max RTT + 2 · max(max M/bw_i, |S| · M/bw_hub)`` over the selected sites."""
    rtt = np.max(np.where(sel, params.rtt_s, 0.0), axis=-1)
    site_tx = np.max(np.where(sel, params.model_bits / params.wan_bps, 0.0), axis=-1)
    hub_tx = n_sel * (params.model_bits / params.hub_bps)
    return np.where(n_sel > 0, params.rtt_factor * rtt + 2.0 * np.maximum(site_tx, hub_tx), 0.0)


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


def predict_round(params: SimParams, state: SimState, mask: np.ndarray) -> RoundPrediction:
    """Round time and progress of candidate sets, assuming current power holds for the round.

    ``mask`` is ``(B, N)`` or ``(B, M, N)`` (M candidate sets per episode). Unavailable sites in
    a candidate are dropped, as ``step_round`` would. Reads only the current trace row: this is
    what a policy may know at decision time. No jitter. The state is not changed.
    """
    mask = np.asarray(mask, dtype=bool)
    squeeze = mask.ndim == 2
    if squeeze:
        mask = mask[:, None, :]
    k = current_row(params, state.time_s)
    rate = params.rate[k][:, None, :]  # (B, 1, N)
    sel = mask & (rate > 0)
    joining = sel & ~state.prev_selected[:, None, :]
    join = np.where(joining, params.join_s, 0.0)
    if params.fixed_time:
        compute = np.where(sel, join + params.round_s, 0.0)
        batch = np.sum(np.where(sel, rate * params.round_s, 0.0), axis=-1) / params.local_steps
    else:
        with np.errstate(divide="ignore"):
            compute = np.where(sel, join + params.quota / np.where(rate > 0, rate, 1.0), 0.0)
        batch = np.sum(np.where(sel, params.site_batch, 0.0), axis=-1)
    compute_s = compute.max(axis=-1)
    n_sel = sel.sum(axis=-1)
    comm = _comm_s(params, sel, n_sel)
    round_time = np.where(n_sel > 0, compute_s + comm + params.aggregation_s, params.idle_s)
    absent = np.where(sel, 0.0, state.absent_rounds[:, None, :] + 1.0)
    cover = coverage(params, absent.reshape(-1, params.n_sites)).reshape(absent.shape[:2])
    dp = delta_progress(params, state.progress[:, None], batch, cover)
    da = accuracy(params, state.progress[:, None] + dp) - state.accuracy[:, None]
    out = RoundPrediction(round_time, compute_s, comm, dp, da)
    if squeeze:
        out = RoundPrediction(*(a[:, 0] for a in out))
    return out


class RoundResult(NamedTuple):
    """The outcome of one simulated round for every episode in the batch."""

    state: SimState
    selected: np.ndarray  # (B, N) the effective set (selection ∧ available)
    invalid: np.ndarray  # (B,) selected sites that were unavailable
    idle: np.ndarray  # (B,) bool: no site took part
    round_time_s: np.ndarray
    compute_s: np.ndarray
    comm_s: np.ndarray
    delta_accuracy: np.ndarray  # clipped at the target, so a* − a0 sums exactly on success
    energy_j: np.ndarray  # of this round
    straggler: np.ndarray  # (B,) index of the site that finished compute last, -1 if idle
    powered: np.ndarray  # (B, N) powered GPUs at the start of the round


def draw_noise(rng: np.random.Generator, rounds: int, n_sites: int) -> np.ndarray:
    """Standard-normal jitter draws for ``rounds`` rounds: N compute values and one network.

    Drawn in blocks from the episode's generator; the numbers a round gets do not depend on
    the block size, which keeps single and vector environments identical.
    """
    return rng.standard_normal((rounds, n_sites + 1))


def step_round(
    params: SimParams, state: SimState, mask: np.ndarray, noise: np.ndarray
) -> RoundResult:
    """Simulate one round for each episode with the true trace.

    ``mask`` (B, N) bool is the requested set; ``noise`` (B, N + 1) standard normals. Selected
    sites that are unavailable now are dropped. An empty effective set is an idle round: the
    clock advances ``idle_s``, nothing is learned, and every site is released.
    """
    n = params.n_sites
    t = state.time_s
    k = current_row(params, t)
    avail = params.available[k]
    powered = params.powered[k]
    sel = mask & avail
    invalid = np.count_nonzero(mask & ~avail, axis=1)
    n_sel = np.count_nonzero(sel, axis=1)
    idle = n_sel == 0

    sigma = params.jitter_sigma
    jitter = np.exp(sigma * noise) if sigma > 0 else np.ones_like(noise)
    begin = t[:, None] + np.where(sel & ~state.prev_selected, params.join_s, 0.0)
    if params.fixed_time:
        end = begin + params.round_s * jitter[:, :n]
        done = _samples_at(params, end) - _samples_at(params, begin)
        batch = np.sum(np.where(sel, done, 0.0), axis=1) / params.local_steps
    else:
        end = _time_to_reach(params, _samples_at(params, begin) + params.quota * jitter[:, :n])
        batch = np.sum(np.where(sel, params.site_batch, 0.0), axis=1)
    finish = np.where(sel, end, -np.inf)
    straggler = np.where(idle, -1, np.argmax(finish, axis=1))
    compute_s = np.where(idle, 0.0, finish.max(axis=1) - t)
    comm_s = _comm_s(params, sel, n_sel) * jitter[:, n]
    round_s = np.where(idle, params.idle_s, compute_s + comm_s + params.aggregation_s)

    absent = np.where(idle[:, None], state.absent_rounds, np.where(sel, 0.0, state.absent_rounds + 1))
    cover = coverage(params, absent)
    dp = delta_progress(params, state.progress, batch, cover)
    progress = state.progress + dp
    acc = accuracy(params, progress)
    delta_acc = np.minimum(acc, params.a_target) - np.minimum(state.accuracy, params.a_target)

    busy_j = np.where(sel, _gpu_energy_at(params, end) - _gpu_energy_at(params, begin), 0.0)
    waiting_s = np.maximum(round_s[:, None] - (end - begin), 0.0)
    idle_j = np.where(sel, params.idle_fraction * params.gpu_wall_w * powered * waiting_s, 0.0)
    energy_j = busy_j.sum(axis=1) + idle_j.sum(axis=1)

    new_state = SimState(
        time_s=t + round_s,
        start_s=state.start_s,
        progress=progress,
        accuracy=acc,
        prev_selected=sel,
        absent_rounds=absent,
        rounds=state.rounds + 1,
        energy_j=state.energy_j + energy_j,
        last_round_s=round_s,
        coverage=np.where(idle, state.coverage, cover),
    )
    return RoundResult(
        new_state, sel, invalid, idle, round_s, compute_s, comm_s, delta_acc, energy_j,
        straggler, powered,
    )  # fmt: skip


# --------------------------------------------------------------------------- observations


def site_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N, F) float32 site features at the current time."""
    obs = params.site_obs[current_row(params, state.time_s)]  # fancy indexing copies
    obs[..., _SELECTED_COL] = state.prev_selected
    return obs


def global_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, G) float32 global features."""
    span = params.a_target - params.a0
    day = 2.0 * math.pi * ((state.time_s + params.trace_t0_s) % 86400.0) / 86400.0
    g = np.empty((state.batch, len(GLOBAL_FEATURES)), dtype=np.float32)
    g[:, 0] = np.clip((state.accuracy - params.a0) / span, 0.0, 1.0)
    g[:, 1] = np.clip((state.time_s - state.start_s) / params.time_budget_s, 0.0, 1.0)
    g[:, 2] = np.sin(day)
    g[:, 3] = np.cos(day)
    g[:, 4] = np.clip(state.last_round_s / params.time_scale_s, 0.0, 1.0)
    g[:, 5] = np.clip(state.coverage, 0.0, 1.0)
    return g
