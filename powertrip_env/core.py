"""The simulator: pure array functions over a batch of episodes.

Every state array has a leading batch axis, ``(batch, n_sites)`` or ``(batch,)``, so the single
environment (batch 1) and the vector environment (batch B) run this one implementation of the
dynamics. The model is DESIGN.md §3; this module imports numpy only.

One episode may also be held *unbatched* (``episode_state``): per-episode values are then Python
scalars and per-site values ``(n_sites,)`` arrays, and the same functions accept it. That form
exists for speed: a numpy call costs about a microsecond however small its array, while a round
does a few dozen per-episode operations, so the single env does those on Python floats. It is
the same IEEE arithmetic, bit for bit; the small helpers under "the two forms" (``_pick``,
``_per_site``, ``_sum_sites``, ``_pow``, ...) are what tell the two apart.

Power enters through tables built once per scenario and trace (``SimParams``): powered GPUs,
throughput and the cumulative samples a site can process, per trace interval. The time a site
needs for its quota is then one search in the cumulative table, which integrates the
piecewise-constant trace exactly: a site whose power falls mid-round finishes later. The trace is
wrapped once at its end so an episode that starts late still has a future.

Randomness does not live here: callers pass standard-normal draws (``noise``) taken from the
episode's generator, which keeps these functions pure and the batch equal to its members.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

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
SELECTED_COL = SITE_FEATURES.index("selected_last_round")


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
    # lookup tables of the fast round (`step_round`, `_reach`), derived from the tables above
    at_row_cum: np.ndarray  # (rows, 2, n_sites): [cum_samples, cum_gpu_j] at each row's start
    at_row_rate: np.ndarray  # (rows, 2, n_sites): [rate, busy GPU watts] during each row
    reach_table: np.ndarray  # (slots, 3) per flat_cum slot: see `_reach_tables`
    energy_table: np.ndarray  # (slots, 3) per flat_cum slot: see `_reach_tables`
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

    @cached_property
    def rows(self) -> int:
        """Rows of the wrapped trace tables."""
        return self.rate.shape[0]

    # Small per-site constants of the round, computed once per parameter set. They are cached
    # rather than stored so that `dataclasses.replace` (e.g. a different jitter or idle
    # fraction) can never leave them stale.

    @cached_property
    def site_cols(self) -> np.ndarray:
        return np.arange(self.n_sites)

    @cached_property
    def site_tx_s(self) -> np.ndarray:
        """``M / bw_i``: seconds to send the update over each site's WAN link."""
        return self.model_bits / self.wan_bps

    @cached_property
    def rtt_rank(self) -> np.ndarray:
        """1..N by RTT: the selected site of highest rank has the largest RTT (`_comm_s`)."""
        return np.argsort(np.argsort(self.rtt_s, kind="stable"), kind="stable") + 1

    @cached_property
    def tx_rank(self) -> np.ndarray:
        """1..N by ``M / bw_i``, as `rtt_rank`."""
        return np.argsort(np.argsort(self.site_tx_s, kind="stable"), kind="stable") + 1

    @cached_property
    def at_row_field_index(self) -> np.ndarray:
        """(2, N): offset of [field, site] inside one row of ``at_row_cum``/``at_row_rate``."""
        return np.arange(2 * self.n_sites).reshape(2, self.n_sites)

    @cached_property
    def idle_w_per_gpu(self) -> np.ndarray:
        """Draw of one joined-but-waiting GPU: ``idle_fraction · p_g``."""
        return self.idle_fraction * self.gpu_wall_w

    @cached_property
    def uniform_site_batch(self) -> float | None:
        """The site batch when every site has the same whole-number one, else None.

        Then ``B_r = |S| · site_batch`` exactly (sums of whole numbers below 2**53 are exact in
        any order), which saves a masked sum per round.
        """
        first = float(self.site_batch[0])
        same = bool(np.all(self.site_batch == first)) and first.is_integer()
        return first if same and first * self.n_sites < 2.0**53 else None

    @cached_property
    def site_base(self) -> np.ndarray:
        """Index in ``flat_cum`` of each site's row 0."""
        return self.site_cols * (self.rows + 1)

    @cached_property
    def energy_slot(self) -> np.ndarray:
        """Slot in ``energy_table`` of each site's row 0 (see `_reach_tables`)."""
        return self.site_base + 1

    @cached_property
    def reach_cap(self) -> np.ndarray:
        """Upper clamp of `_reach`'s search keys: past each site's last cumulative value but
        short of the next site's block, so a target beyond the trace stays in its own block."""
        block = self.cum_samples[-1].max() * 1.01 + 1.0  # as build_params lays out flat_cum
        return self.flat_offset + 0.5 * (self.cum_samples[-1] + block)

    @cached_property
    def invalid_end_s(self) -> float:
        """Every real finish time is below this; `_reach` marks slots it cannot use with more."""
        return 2.0 * self.rows * self.interval_s


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

    # wrap once; C order because episodes read whole rows (a trace's columns come F-ordered)
    u = np.ascontiguousarray(np.concatenate([util, util], axis=0), dtype=np.float64)
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
    busy_w = powered * gpu_wall_w
    # C order: a batch gathers whole rows of these
    at_row_cum = np.ascontiguousarray(np.stack([cum_samples[:-1], cum_gpu_j[:-1]], axis=1))
    at_row_rate = np.ascontiguousarray(np.stack([rate, busy_w], axis=1))
    reach_table, energy_table = _reach_tables(cum_samples, rate, cum_gpu_j, busy_w, interval_s)
    for array in (powered, rate, cum_samples, cum_gpu_j, available, site_obs, flat_cum,
                  at_row_cum, at_row_rate, reach_table, energy_table):  # fmt: skip
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
        at_row_cum=at_row_cum,
        at_row_rate=at_row_rate,
        reach_table=reach_table,
        energy_table=energy_table,
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


_WINDOW = 3  # trace rows a batched `_reach` scans from the begin row before it falls back
_DUMMY_SLOTS = _WINDOW  # unusable slots after the last site's block (see `_reach_tables`)


def _reach_tables(
    cum_samples: np.ndarray,
    rate: np.ndarray,
    cum_gpu_j: np.ndarray,
    busy_w: np.ndarray,
    interval_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row values laid out slot by slot like ``flat_cum``, for one gather per site.

    ``flat_cum`` holds each site's cumulative samples for rows 0..R, site after site, and a
    search for a target returns slot ``c·(R+1) + e`` exactly when site c reaches it during row
    ``e − 1``. Slot e of the reach table holds that row's ``[cum_samples, rate, start time]``
    and slot e of the energy table ``[cum_gpu_j, busy watts, start time]``. Slot 0 of each
    site, and the padding after the last site, mean "not found here": their start time is far
    beyond any real finish time, so `step_round` sees it and redoes the site exactly, and
    their other values keep the arithmetic finite and silent. The values are the ones the
    exact functions (`_time_to_reach`, `_gpu_energy_at`) read, so results agree bit for bit.
    """
    rows, n = rate.shape
    start = np.arange(rows) * interval_s
    slots = n * (rows + 1) + _DUMMY_SLOTS
    reach = np.empty((slots, 3))
    reach[:] = (0.0, np.inf, 4.0 * rows * interval_s)
    energy = np.zeros((slots, 3))
    for c in range(n):  # build time only: one block of rows per site
        found = slice(c * (rows + 1) + 1, (c + 1) * (rows + 1))
        reach[found, 0] = cum_samples[:-1, c]
        reach[found, 1] = np.where(rate[:, c] > 0, rate[:, c], np.inf)
        reach[found, 2] = start
        energy[found, 0] = cum_gpu_j[:-1, c]
        energy[found, 1] = busy_w[:, c]
        energy[found, 2] = start
    return reach, energy


# --------------------------------------------------------------------------- the two forms


def _pick(cond: Any, a: Any, b: Any) -> Any:
    """``np.where`` for a batch; a plain conditional for one episode's scalars."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def _minimum(x: Any, y: Any) -> Any:
    return np.minimum(x, y) if isinstance(x, np.ndarray) else min(x, y)


def _maximum(x: Any, y: Any) -> Any:
    return np.maximum(x, y) if isinstance(x, np.ndarray) else max(x, y)


def _float(x: Any) -> Any:
    """A numpy scalar as a Python float (cheaper arithmetic); arrays unchanged."""
    return x if isinstance(x, np.ndarray) else float(x)


def _per_site(x: Any) -> Any:
    """A per-episode value lined up against (…, N) per-site arrays."""
    return x[:, None] if isinstance(x, np.ndarray) else x


def _sum_sites(x: np.ndarray) -> Any:
    """Sum over the site axis: numpy's pairwise sum, per row, as the batch computes it."""
    if x.ndim == 1:
        return float(np.add.reduce(x))
    return np.add.reduce(x, axis=-1)


def _pow(x: Any, y: float) -> Any:
    """``x ** y`` computed by numpy also for a Python float.

    numpy's power differs from ``math.pow`` in the last bit for some inputs, and the batch uses
    numpy's; ``pow(x, 1) == x`` exactly in both, which saves the call in the common case.
    """
    if y == 1.0:
        return x
    if isinstance(x, np.ndarray):
        return x**y
    return float(np.power(x, y))


def _floor_div(t: np.ndarray, d: float) -> np.ndarray:
    """``(t // d).astype(intp)`` for times ``t >= 0``, exactly, at a tenth of the cost.

    numpy's float ``//`` is Python's (an ``fmod`` per element, slow). The rounded quotient
    ``t / d`` is never below the true one's floor (rounding is monotone and integers are
    representable) and at most one above it, and for a whole-number ``d`` (trace intervals
    and days are whole seconds) ``k · d`` is exact, so one comparison corrects it.
    """
    if t.size <= 64 or not float(d).is_integer():  # few values: the two calls are cheaper
        return (t // d).astype(np.intp)
    k = (t / d).astype(np.intp)
    k -= k * d > t
    return k


def _count_sites(x: np.ndarray) -> Any:
    """Selected sites per episode: an int, or (B,) ints (a product: a count over a short
    last axis is one of numpy's slowest reductions)."""
    if x.ndim == 1:
        return int(np.count_nonzero(x))
    return np.dot(x, np.ones(x.shape[-1])).astype(np.intp)  # whole numbers: exact


def _remainder(t: np.ndarray, d: float) -> np.ndarray:
    """``t % d`` for times ``t >= 0`` and a whole ``d``, exactly: ``t − ⌊t/d⌋·d`` loses
    nothing (Sterbenz's lemma)."""
    if not float(d).is_integer():
        return t % d
    return t - _floor_div(t, d) * d


# --------------------------------------------------------------------------- the learning model


def noise_scale(params: SimParams, progress: Any) -> Any:
    """Gradient noise scale ``B_noise(P) = B0 · (1 + P / P_B)^γ`` (McCandlish et al. 2018)."""
    return params.noise_b0 * _pow(1.0 + progress / params.noise_p_b, params.noise_gamma)


def accuracy(params: SimParams, progress: Any) -> Any:
    """Surrogate accuracy curve ``a(P) = a_max − (a_max − a0)(1 + P/P0)^−α``.

    Written as ``a0 + (a_max − a0)(1 − (1 + P/P0)^−α)`` so that ``a(0)`` is exactly ``a0`` in
    floating point: an idle round must not move the accuracy by a rounding error.
    """
    return params.a0 + (params.a_max - params.a0) * (
        1.0 - _pow(1.0 + progress / params.p0, -params.alpha)
    )


def progress_needed(params: SimParams) -> float:
    """Progress at which the accuracy curve reaches the target (its inverse at a*)."""
    ratio = (params.a_max - params.a_target) / (params.a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


def coverage(params: SimParams, absent_rounds: np.ndarray) -> Any:
    """Fraction of the data a round's update reflects under non-IID data (1 when IID).

    A site away for ``r`` rounds has its share forgotten as ``1 − exp(−r/τ)``; ``non_iid``
    scales how much that matters. ``absent_rounds`` is (N,) for one episode or (B, N).
    """
    if params.non_iid == 0.0:
        return 1.0 if absent_rounds.ndim == 1 else np.ones(absent_rounds.shape[0])
    forgotten = 1.0 - np.exp(-absent_rounds / params.coverage_tau)
    if forgotten.ndim == 1:
        lost = float(forgotten @ params.data_share)
    else:
        # One dot product per row: a (B, N) @ (N,) product may sum each row in a different
        # order depending on B, and a batch must equal its members.
        lost = (forgotten[:, None, :] @ params.data_share)[:, 0]
    return 1.0 - params.non_iid * lost


def delta_progress(params: SimParams, progress: Any, batch: Any, cover: Any) -> Any:
    """``ΔP = local_steps · η · coverage / (1 + B_noise(P) / B_r)``; zero for an empty round."""
    bn = noise_scale(params, progress)
    if isinstance(batch, np.ndarray):
        with np.errstate(divide="ignore"):
            eff = np.where(batch > 0, 1.0 / (1.0 + bn / np.where(batch > 0, batch, 1.0)), 0.0)
    else:
        eff = 1.0 / (1.0 + bn / batch) if batch > 0 else 0.0
    return params.local_steps * params.eta_local * eff * cover


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, eq=False)
class SimState:
    """A batch of episodes, or one episode. Arrays are never modified in place; each step
    builds a new state.

    Batched (what `initial_state` returns): per-episode fields are (B,) arrays and per-site
    fields (B, N). One episode (`episode_state`): per-episode fields are Python scalars and
    per-site fields (N,) arrays; this is the single env's fast form (see the module docstring).
    """

    time_s: Any  # (B,) seconds since trace row 0
    start_s: Any  # (B,)
    progress: Any  # (B,)
    accuracy: Any  # (B,)
    prev_selected: np.ndarray  # (B, N) bool: the effective set of the last round
    absent_rounds: np.ndarray  # (B, N) rounds since each site last took part
    rounds: Any  # (B,) int
    energy_j: Any  # (B,)
    last_round_s: Any  # (B,)
    coverage: Any  # (B,)

    @property
    def batched(self) -> bool:
        return isinstance(self.time_s, np.ndarray)

    @property
    def batch(self) -> int:
        """Number of episodes (1 for an unbatched episode)."""
        return self.time_s.shape[0] if self.batched else 1


_PER_EPISODE = ("time_s", "start_s", "progress", "accuracy", "energy_j", "last_round_s", "coverage")


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


def episode_state(state: SimState, i: int = 0) -> SimState:
    """Episode ``i`` of a batch, unbatched: Python scalars and (N,) arrays."""
    out: dict[str, Any] = {name: float(getattr(state, name)[i]) for name in _PER_EPISODE}
    out["rounds"] = int(state.rounds[i])
    out["prev_selected"] = state.prev_selected[i]
    out["absent_rounds"] = state.absent_rounds[i]
    return SimState(**out)


def batch_state(state: SimState) -> SimState:
    """An unbatched episode as a batch of one (a batched state is returned as it is)."""
    if state.batched:
        return state
    out: dict[str, Any] = {name: np.array([getattr(state, name)]) for name in _PER_EPISODE}
    out["rounds"] = np.array([state.rounds], dtype=np.int64)
    out["prev_selected"] = state.prev_selected[None, :].copy()
    out["absent_rounds"] = state.absent_rounds[None, :].copy()
    return SimState(**out)


def merge_states(old: SimState, new: SimState, rows: np.ndarray) -> SimState:
    """``old`` with the episodes at boolean ``rows`` replaced by ``new`` (same batch size)."""
    out = {}
    for name in SimState.__dataclass_fields__:
        a, b = getattr(old, name), getattr(new, name)
        r = rows.reshape((-1,) + (1,) * (a.ndim - 1))
        out[name] = np.where(r, b, a)
    return SimState(**out)


def current_row(params: SimParams, time_s: Any) -> Any:
    """Trace row (interval index) of each episode's clock (an int for one episode's float)."""
    if isinstance(time_s, np.ndarray):
        return np.minimum(_floor_div(time_s, params.interval_s), params.rows - 1)
    # float // float is numpy's floor_divide, bit for bit (both are CPython's divmod)
    return min(int(time_s // params.interval_s), params.rows - 1)


def available_now(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N) bool: sites with at least one powered GPU at the current time ((N,) unbatched)."""
    return params.available[current_row(params, state.time_s)]


# --------------------------------------------------------------------------- the round


def _samples_at(params: SimParams, t: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
    """Cumulative samples each site could have processed from row 0 to time ``t`` (…, N).

    ``cols`` names the site of each entry when ``t`` is not laid out site by site.
    """
    k = np.minimum((t // params.interval_s).astype(np.intp), params.rows - 1)
    cols = params.site_cols if cols is None else cols
    return params.cum_samples[k, cols] + params.rate[k, cols] * (t - k * params.interval_s)


def _gpu_energy_at(params: SimParams, t: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
    k = np.minimum((t // params.interval_s).astype(np.intp), params.rows - 1)
    cols = params.site_cols if cols is None else cols
    busy_w = params.powered[k, cols] * params.gpu_wall_w[cols]
    return params.cum_gpu_j[k, cols] + busy_w * (t - k * params.interval_s)


def _cumulative_at(params: SimParams, k: int, into_row: Any) -> np.ndarray:
    """(2, N) [samples, GPU energy] each site could have accumulated ``into_row`` seconds (a
    float, or one per site) into row ``k``: the sums of `_samples_at` and `_gpu_energy_at`."""
    return params.at_row_cum[k] + params.at_row_rate[k] * into_row


def _cumulative_at_rows(params: SimParams, row: np.ndarray, into_row: np.ndarray) -> np.ndarray:
    """`_cumulative_at` for a batch, each site in its own row: (B, 2, N) from (B, N) rows."""
    n = params.n_sites
    index = (row * (2 * n))[:, None, :] + params.at_row_field_index
    return params.at_row_cum.take(index) + params.at_row_rate.take(index) * into_row[:, None, :]


def _time_to_reach(
    params: SimParams, target: np.ndarray, cols: np.ndarray | None = None
) -> np.ndarray:
    """Earliest time at which each site's cumulative samples reach ``target`` (…, N).

    One ``searchsorted`` over all sites: their cumulative tables are laid end to end with
    offsets that keep the whole array sorted. A target beyond the (wrapped) trace caps at its end.
    This is the exact reference; `_reach` is its fast path.
    """
    rows = params.rows
    cols = params.site_cols if cols is None else cols
    pos = np.searchsorted(params.flat_cum, target + params.flat_offset[cols], side="left")
    e = pos - cols * (rows + 1)  # first table row whose cumulative reaches the target
    beyond = e > rows
    j = np.clip(e - 1, 0, rows - 1)
    rate = params.rate[j, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = j * params.interval_s + (target - params.cum_samples[j, cols]) / rate
    return np.where(beyond | (rate <= 0), rows * params.interval_s, t)


def _reach(params: SimParams, target: np.ndarray, begin_row: Any) -> np.ndarray:
    """Fast `_time_to_reach`: the finish time of each site, from one gather.

    The slot indexes `_reach_tables`. For one episode (N targets) the slot comes from
    ``searchsorted``; for a batch, from counting the ``_WINDOW`` cumulative values after each
    site's ``begin_row`` that are still below the target: a round usually ends within a few
    rows of its start, and a binary search of B·N targets in the whole table costs far more.
    Where the answer is not certain (the window is too short, or the target lies before it)
    the slot is a dummy one whose finish time is at least ``invalid_end_s``; a target beyond
    the trace lands on a dummy slot too (the clamp keeps it inside its site's block). The
    caller redoes those sites with `_time_to_reach` if they were selected.
    """
    q = target + params.flat_offset
    np.minimum(q, params.reach_cap, out=q)
    if q.ndim == 1:
        slot = params.flat_cum.searchsorted(q)
    else:
        lo = params.site_base + begin_row
        below = (params.flat_cum.take(lo) < q).astype(np.intp)
        for step in range(1, _WINDOW):  # over window rows, not sites: a few (B, N) operations
            below += params.flat_cum.take(lo + step, mode="clip") < q
        sure = (below > 0) & (below < _WINDOW)
        lo += below
        slot = np.where(sure, lo, params.flat_cum.shape[0])
    g = params.reach_table.take(slot, axis=0)
    return g[..., 2] + (target - g[..., 0]) / g[..., 1]


def _energy_at(params: SimParams, t: np.ndarray) -> np.ndarray:
    """`_gpu_energy_at` for per-site times laid out site by site, from one gather."""
    k = _floor_div(t, params.interval_s)
    np.minimum(k, params.rows - 1, out=k)
    k += params.energy_slot
    g = params.energy_table.take(k, axis=0)
    return g[..., 0] + g[..., 1] * (t - g[..., 2])


def _comm_s(params: SimParams, sel: np.ndarray, n_sel: Any) -> Any:
    """``rtt_factor · max RTT + 2 · max(max M/bw_i, |S| · M/bw_hub)`` over the selected sites.

    The largest per-site constant over the selected sites is that of the selected site ranking
    highest by it: an argmax, cheaper than a masked max. (With no site selected it picks an
    unselected one, but then the time is 0 anyway.)
    """
    rtt = _float(params.rtt_s[(sel * params.rtt_rank).argmax(axis=-1)])
    site_tx = _float(params.site_tx_s[(sel * params.tx_rank).argmax(axis=-1)])
    hub_tx = n_sel * (params.model_bits / params.hub_bps)
    return _pick(n_sel > 0, params.rtt_factor * rtt + 2.0 * _maximum(site_tx, hub_tx), 0.0)


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
    state = batch_state(state)
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
    """The outcome of one simulated round for every episode in the batch.

    For an unbatched episode the per-episode fields are Python scalars and the per-site ones
    (N,) arrays (``powered`` is then a read-only view of the trace table).
    """

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


def jitter_factors(params: SimParams, noise: np.ndarray) -> np.ndarray:
    """Multiplicative log-normal jitter ``exp(σ · noise)`` of compute (first N) and network time.

    Elementwise, so a whole block of draws can be converted at once, as the environments do.
    """
    if params.jitter_sigma > 0:
        return np.exp(params.jitter_sigma * noise)
    return np.ones_like(noise)


def step_round(
    params: SimParams,
    state: SimState,
    mask: np.ndarray,
    noise: np.ndarray | None = None,
    *,
    jitter: np.ndarray | None = None,
) -> RoundResult:
    """Simulate one round for each episode with the true trace.

    ``mask`` (B, N) bool is the requested set; ``noise`` (B, N + 1) standard normals, or
    ``jitter`` the factors `jitter_factors` makes of them. For an unbatched episode all of these
    drop the batch axis. Selected sites that are unavailable now are dropped. An empty effective
    set is an idle round: the clock advances ``idle_s``, nothing is learned, and every site is
    released.
    """
    if jitter is None:
        jitter = jitter_factors(params, noise)
    n = params.n_sites
    single = not state.batched
    t = state.time_s
    k = current_row(params, t)
    avail = params.available[k]
    powered = params.powered[k]
    sel = mask & avail
    if single:
        n_sel = int(np.count_nonzero(sel))
        invalid = int(np.count_nonzero(mask)) - n_sel
    else:
        n_sel = _count_sites(sel)
        invalid = _count_sites(mask) - n_sel
    idle = n_sel == 0
    compute_jitter, comm_jitter = jitter[..., :n], jitter[..., n]
    if single:
        comm_jitter = float(comm_jitter)

    # Compute starts now, or join_s later at a site that sat out the last round.
    joining = sel > state.prev_selected
    t_join = t + params.join_s
    begin_row = k
    iv = params.interval_s
    if single:
        k_join = current_row(params, t_join) if np.count_nonzero(joining) else None
        if k_join is None:
            begin = t
            at_begin = _cumulative_at(params, k, t - k * iv)  # [samples, GPU energy], (2, N)
        elif k_join == k:  # usually: one row, two offsets into it
            begin = np.where(joining, t_join, t)
            at_begin = _cumulative_at(params, k, np.where(joining, t_join - k * iv, t - k * iv))
        else:
            begin = np.where(joining, t_join, t)
            at_join = _cumulative_at(params, k_join, t_join - k_join * iv)
            at_begin = np.where(joining, at_join, _cumulative_at(params, k, t - k * iv))
    else:
        # each site's own begin row and time into it: one gather per table for the batch
        k_join = current_row(params, t_join)
        begin = np.where(joining, t_join[:, None], t[:, None])
        begin_row = np.where(joining, k_join[:, None], k[:, None])
        into_row = np.where(joining, (t_join - k_join * iv)[:, None], (t - k * iv)[:, None])
        at_begin = _cumulative_at_rows(params, begin_row, into_row)
    samples_begin, energy_begin = at_begin[..., 0, :], at_begin[..., 1, :]

    if params.fixed_time:
        end = begin + params.round_s * compute_jitter
        done = _samples_at(params, end) - samples_begin
        batch = _sum_sites(np.where(sel, done, 0.0)) / params.local_steps
        energy_end = _gpu_energy_at(params, end)
    else:
        target = samples_begin + params.quota * compute_jitter
        end = _reach(params, target, begin_row)
        if params.uniform_site_batch is not None:
            batch = n_sel * params.uniform_site_batch
        else:
            batch = _sum_sites(np.where(sel, params.site_batch, 0.0))
    finish = np.where(sel, end, -np.inf)
    straggler = finish.argmax(axis=-1)
    if single:
        straggler = int(straggler)
    if not params.fixed_time:
        # A selected site that `_reach` could not place gets the exact search.
        if single:
            if finish[straggler] >= params.invalid_end_s:
                end = _time_to_reach(params, target)
                finish = np.where(sel, end, -np.inf)
                straggler = int(finish.argmax())
        else:
            redo = sel & (end >= params.invalid_end_s)
            if redo.any():
                _, c_idx = np.nonzero(redo)
                end[redo] = _time_to_reach(params, target[redo], c_idx)
                finish = np.where(sel, end, -np.inf)
                straggler = finish.argmax(axis=-1)
        energy_end = _energy_at(params, end)

    # The round ends at the barrier: T_r = max_i T_i^compute + T_comm(S) + aggregation_s.
    if single:
        latest = float(finish[straggler])
    else:
        latest = np.take_along_axis(finish, straggler[:, None], axis=1)[:, 0]
    compute_s = _pick(idle, 0.0, latest - t)
    straggler = _pick(idle, -1, straggler)
    comm_s = _comm_s(params, sel, n_sel) * comm_jitter
    round_s = _pick(idle, params.idle_s, compute_s + comm_s + params.aggregation_s)

    absent = _pick(
        _per_site(idle), state.absent_rounds, np.where(sel, 0.0, state.absent_rounds + 1.0)
    )
    cover = coverage(params, absent)
    dp = delta_progress(params, state.progress, batch, cover)
    progress = state.progress + dp
    acc = accuracy(params, progress)
    delta_acc = _minimum(acc, params.a_target) - _minimum(state.accuracy, params.a_target)

    busy_j = np.where(sel, energy_end - energy_begin, 0.0)
    waiting_s = np.maximum(_per_site(round_s) - (end - begin), 0.0)
    idle_j = np.where(sel, params.idle_w_per_gpu * powered * waiting_s, 0.0)
    energy_j = _sum_sites(busy_j) + _sum_sites(idle_j)

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
        coverage=_pick(idle, state.coverage, cover),
    )
    return RoundResult(
        new_state, sel, invalid, idle, round_s, compute_s, comm_s, delta_acc, energy_j,
        straggler, powered,
    )  # fmt: skip


# --------------------------------------------------------------------------- observations


def site_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, N, F) float32 site features at the current time ((N, F) unbatched)."""
    obs = params.site_obs[current_row(params, state.time_s)]
    if not state.batched:
        obs = obs.copy()  # basic indexing gives a view of the shared table
    obs[..., SELECTED_COL] = state.prev_selected
    return obs


def global_features(params: SimParams, state: SimState) -> list[Any]:
    """The global features in `GLOBAL_FEATURES` order, as float64 values or (B,) arrays."""
    span = params.a_target - params.a0
    clock = state.time_s + params.trace_t0_s
    if state.batched:
        day = 2.0 * math.pi * _remainder(clock, 86400.0) / 86400.0
        return [
            np.clip((state.accuracy - params.a0) / span, 0.0, 1.0),
            np.clip((state.time_s - state.start_s) / params.time_budget_s, 0.0, 1.0),
            np.sin(day),
            np.cos(day),
            np.clip(state.last_round_s / params.time_scale_s, 0.0, 1.0),
            np.clip(state.coverage, 0.0, 1.0),
        ]
    # one episode: Python floats; min(max(x, 0), 1) is np.clip for a non-NaN x (-0.0 too), and
    # math.sin/cos agree with numpy's bit for bit
    day = 2.0 * math.pi * (clock % 86400.0) / 86400.0
    return [
        min(max((state.accuracy - params.a0) / span, 0.0), 1.0),
        min(max((state.time_s - state.start_s) / params.time_budget_s, 0.0), 1.0),
        math.sin(day),
        math.cos(day),
        min(max(state.last_round_s / params.time_scale_s, 0.0), 1.0),
        min(max(state.coverage, 0.0), 1.0),
    ]


def global_observation(params: SimParams, state: SimState) -> np.ndarray:
    """(B, G) float32 global features ((G,) unbatched)."""
    values = global_features(params, state)
    if not state.batched:
        return np.array(values, dtype=np.float32)
    g = np.empty((state.batch, len(GLOBAL_FEATURES)), dtype=np.float32)
    for i, value in enumerate(values):
        g[:, i] = value
    return g
