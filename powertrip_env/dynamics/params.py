"""``SimParams``: a scenario and its power data as the kernel's arrays, built once.

Everything static about a scenario is held in three groups: the per-site values (``site``,
layout.SITE_FIELDS), the tables per row of the calendar (``table`` and what the observation and
the forecast read), and the scalars (``consts``, layout.CONSTS). Each group is stored once, in
the packed form the kernel takes; the names SimParams offers (``params.rtt_s``,
``params.a_target``, ...) read the packed arrays.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np

from powertrip_env.dynamics.features import WEEK_DAYS
from powertrip_env.dynamics.layout import (
    CONSTS,
    CUM_BUSY_G,
    CUM_GPU_J,
    CUM_SAMPLES,
    G_PER_J,
    OUTAGE_S,
    POWERED,
    PV_W,
    RATE,
    SITE_FIELDS,
    TABLE_FIELDS,
)
from powertrip_env.dynamics.site_table import (
    PowerData,
    _carbon_obs_table,
    _site_obs_table,
    same_hour_rows,
)
from powertrip_env.units import (
    S_PER_DAY,
    bytes_to_bits,
    gbps_to_bps,
    h_to_s,
    ms_to_s,
    tflops_to_flops,
)

EARTH_RADIUS_KM = 6371.0


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

    trace_rows: int  # rows of the calendar; the per-row tables hold it twice (wrapped)
    site: np.ndarray  # (len(SITE_FIELDS), N), read by name below
    # per row of the wrapped calendar
    table: np.ndarray  # (rows + 1, len(TABLE_FIELDS), N): the kernel's (layout.TABLE_FIELDS)
    available: np.ndarray  # (rows, N) bool: at least one powered GPU
    forecast_rate: np.ndarray  # (rows, H, N) samples/s forecast at row k for row k + h
    site_obs: np.ndarray  # float32 (rows, N, F) the site features that depend only on the row
    consts: np.ndarray  # (len(CONSTS),), read by name below
    # (rows,) the time budget (s) of an episode starting in each row: its deadline is its start
    # plus this (``episode_budgets``), which ``state.initial_state`` writes into the state
    budget_s: np.ndarray

    # The names read the packed arrays once, when the instance is made (`__post_init__`): plain
    # attributes are the quickest to read, and the environments read some at every step.
    n_sites: int = field(init=False, repr=False)
    # (rows, N) GPUs each site can power, and their samples/s: views of ``table``
    powered: np.ndarray = field(init=False, repr=False)
    rate: np.ndarray = field(init=False, repr=False)
    pv_w: np.ndarray = field(init=False, repr=False)  # (rows, N) on-site PV output (W)
    g_per_j: np.ndarray = field(init=False, repr=False)  # (rows, N) grid carbon (g/J; 0: none)
    # (rows + 1, N) samples the powered GPUs compute from row 0 to each row's start
    cum_samples: np.ndarray = field(init=False, repr=False)
    # per site, (N,): the rows of ``site`` (layout.SITE_FIELDS has their meaning), as views
    gpu_count: np.ndarray = field(init=False, repr=False)
    gpu_wall_w: np.ndarray = field(init=False, repr=False)
    gpu_rate: np.ndarray = field(init=False, repr=False)
    site_batch: np.ndarray = field(init=False, repr=False)
    rtt_s: np.ndarray = field(init=False, repr=False)
    data_share: np.ndarray = field(init=False, repr=False)
    quota: np.ndarray = field(init=False, repr=False)
    join_s: np.ndarray = field(init=False, repr=False)
    site_tx_s: np.ndarray = field(init=False, repr=False)
    idle_w_per_gpu: np.ndarray = field(init=False, repr=False)
    # the scalars: the slots of ``consts`` (layout.CONSTS has their meaning), as these types
    interval_s: float = field(init=False, repr=False)
    rows: int = field(init=False, repr=False)
    trace_t0_s: float = field(init=False, repr=False)
    hub_tx_s: float = field(init=False, repr=False)
    rtt_factor: float = field(init=False, repr=False)
    aggregation_s: float = field(init=False, repr=False)
    local_steps: float = field(init=False, repr=False)
    eta_local: float = field(init=False, repr=False)
    noise_b0: float = field(init=False, repr=False)
    noise_p_b: float = field(init=False, repr=False)
    noise_gamma: float = field(init=False, repr=False)
    a0: float = field(init=False, repr=False)
    a_max: float = field(init=False, repr=False)
    a_target: float = field(init=False, repr=False)
    span: float = field(init=False, repr=False)
    p0: float = field(init=False, repr=False)
    alpha: float = field(init=False, repr=False)
    non_iid: float = field(init=False, repr=False)
    coverage_tau: float = field(init=False, repr=False)
    coverage_ceiling: float = field(init=False, repr=False)
    fixed_time: bool = field(init=False, repr=False)
    round_s: float = field(init=False, repr=False)
    idle_s: float = field(init=False, repr=False)
    jitter_sigma: float = field(init=False, repr=False)
    time_budget_s: float = field(init=False, repr=False)
    max_rounds: int = field(init=False, repr=False)
    time_scale_s: float = field(init=False, repr=False)
    h_ref_s: float = field(init=False, repr=False)
    ring: bool = field(init=False, repr=False)
    grace: float = field(init=False, repr=False)
    nonblocking: bool = field(init=False, repr=False)
    measured: bool = field(init=False, repr=False)
    carbon: bool = field(init=False, repr=False)
    carbon_ref_kg: float = field(init=False, repr=False)
    slow_rate_per_s: float = field(init=False, repr=False)
    slow_mean_s: float = field(init=False, repr=False)
    slow_factor: float = field(init=False, repr=False)
    link_rate_per_s: float = field(init=False, repr=False)
    link_mean_s: float = field(init=False, repr=False)
    link_depth: float = field(init=False, repr=False)
    callback_rate_per_s: float = field(init=False, repr=False)
    callback_mean_s: float = field(init=False, repr=False)
    callback_depth: float = field(init=False, repr=False)
    moving: bool = field(init=False, repr=False)
    carbon_obs: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: the one place these are set
        put(self, "n_sites", self.site.shape[1])
        rows = self.table.shape[0] - 1
        put(self, "powered", self.table[:rows, POWERED])
        put(self, "rate", self.table[:rows, RATE])
        put(self, "pv_w", self.table[:rows, PV_W])
        put(self, "g_per_j", self.table[:rows, G_PER_J])
        put(self, "cum_samples", self.table[:, CUM_SAMPLES])
        for slot, name in enumerate(SITE_FIELDS):
            put(self, name, self.site[slot])
        for slot, name in enumerate(CONSTS):
            put(self, name, _CONST_TYPES[name](self.consts[slot]))

    def with_constants(self, **values: float) -> SimParams:
        """A copy with the named scalars (layout.CONSTS) replaced, sharing every table."""
        consts = self.consts.copy()
        for name, value in values.items():
            if name not in CONSTS:
                raise TypeError(f"SimParams has no scalar {name!r}")
            consts[CONSTS.index(name)] = float(value)
        consts.flags.writeable = False
        return dataclasses.replace(self, consts=consts)

    def row_of(self, time_s: Any) -> np.ndarray:
        """Row of the per-row tables for each clock ``time_s`` (seconds since row 0)."""
        return np.minimum((np.asarray(time_s) / self.interval_s).astype(np.intp), self.rows - 1)

    def budget_at(self, start_s: Any) -> np.ndarray:
        """The time budget (s) of episodes starting at ``start_s`` (seconds since row 0): their
        deadlines are ``start_s`` plus it (``episode_budgets``)."""
        return self.budget_s[self.row_of(start_s)]

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


_TYPES = {"int": int, "bool": bool, "float": float}
# each scalar's type, from its annotation above (layout.CONSTS stores them all as float64)
_CONST_TYPES = {f.name: _TYPES[str(f.type)] for f in fields(SimParams) if f.name in CONSTS}
if set(_CONST_TYPES) != set(CONSTS) or not set(SITE_FIELDS) <= {f.name for f in fields(SimParams)}:
    raise RuntimeError("SimParams does not name every slot of layout.CONSTS and SITE_FIELDS")


def build_params(scenario: Any, power: PowerData) -> SimParams:
    """Turn a validated scenario (``powertrip_env.scenario.Scenario``: its sites, GPUs,
    workload, network and episode) and its sites' power into the simulator's tables."""
    site_values = _site_values(scenario)
    site = np.stack(_in_order(site_values, SITE_FIELDS))
    gpu_count, gpu_wall_w = site_values["gpu_count"], site_values["gpu_wall_w"]
    gpu_rate, quota = site_values["gpu_rate"], site_values["quota"]
    wl = scenario.workload
    iv = float(power.interval_s)

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
    wrap = lambda a: np.ascontiguousarray(np.concatenate([a] * 2), dtype=np.float64)  # noqa: E731
    table = _power_table(
        rate, powered, gpu_wall_w, iv, wrap(power.pv_w), wrap(power.carbon_g_per_j)
    )

    full_time = quota / (gpu_count * gpu_rate)
    if wl.round_mode == "fixed_time":
        time_scale_s = float(4.0 * wl.round_s)
    else:
        time_scale_s = float(20.0 * full_time.min())
    longitude = np.array([s.longitude for s in scenario.sites], dtype=np.float64)
    params = SimParams(
        trace_rows=power.rows,
        site=site,
        table=table,
        available=powered > 0,
        forecast_rate=forecast_rate,
        site_obs=_site_obs(power, site, avail_w, fc_w, table, longitude, time_scale_s),
        consts=np.array(
            _in_order(_constants(scenario, power, rate.shape[0], time_scale_s), CONSTS),
            dtype=np.float64,
        ),
        budget_s=episode_budgets(scenario.episode, power, table),
    )
    for value in vars(params).values():  # shared by every env of the scenario: read-only
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return params


def episode_budgets(episode: Any, power: PowerData, table: np.ndarray) -> np.ndarray:
    """(rows,) the time budget (s) of an episode starting in each row of the wrapped calendar.

    Without ``deadline_slack`` it is ``time_budget_h`` everywhere. With it, an episode's deadline
    is set when it starts, as a job's owner would set it, from what is known then: the slack
    times an estimate of its time to accuracy, ``deadline_ref_h · C̄ / C(k)``, where C(k) is the
    samples per second the sites' powered GPUs offered over the day before row k (since row 0
    if the trace has less; row k's own early on) and C̄ its mean over the train days' rows. A
    start after a day of little power gets a later deadline, so the slack over the best time
    found is about the same on both splits (docs/carbon.md, "The deadline"). No row after k is
    read; ``time_budget_h`` caps it.
    """
    cap = h_to_s(episode.time_budget_h)
    rows = table.shape[0] - 1
    if not episode.deadline_slack:
        return np.full(rows, cap)
    cum = table[:, CUM_SAMPLES].sum(axis=1)  # (rows + 1,) samples of every site from row 0
    day = max(1, round(S_PER_DAY / power.interval_s))
    k = np.arange(rows)
    lo = np.maximum(k - day, 0)
    past = (cum[k] - cum[lo]) / np.maximum((k - lo) * float(power.interval_s), 1.0)
    past[0] = table[0, RATE].sum()  # nothing before row 0: its own compute
    first, stop = power.day_rows(*episode.train_days, "[trace] field 'train_days'")
    typical = float(past[first:stop].mean())
    with np.errstate(divide="ignore"):
        estimate = np.where(past > 0.0, h_to_s(episode.deadline_ref_h) * typical / past, np.inf)
    return np.minimum(episode.deadline_slack * estimate, cap)


def _site_obs(
    power: PowerData,
    site: np.ndarray,
    avail_w: np.ndarray,
    fc_w: np.ndarray,
    table: np.ndarray,
    longitude: np.ndarray,
    time_scale_s: float,
) -> np.ndarray:
    """(rows, N, F) the site features that depend only on the row; with a carbon intensity
    file, a carbon task's site columns after them (``carbon_obs=True`` shows them)."""
    rows = table.shape[0] - 1
    powered, rate = table[:rows, POWERED], table[:rows, RATE]
    obs = _site_obs_table(power, site, avail_w, fc_w, powered, rate, longitude, time_scale_s)
    if not power.has_carbon:
        return obs
    busy_w = powered * site[SITE_FIELDS.index("gpu_wall_w")]
    carbon = _carbon_obs_table(
        table[:rows, G_PER_J], table[:rows, PV_W], busy_w, float(power.interval_s)
    )
    return np.ascontiguousarray(np.concatenate([obs, carbon], axis=2))


def _site_values(scenario: Any) -> dict[str, np.ndarray]:
    """The per-site columns of ``SITE_FIELDS``, by name, from the sites, GPUs and network."""
    sites = scenario.sites
    n = len(sites)
    wl, net, ep = scenario.workload, scenario.network, scenario.episode
    col = lambda attr: np.array([getattr(s, attr) for s in sites], dtype=np.float64)  # noqa: E731
    gpu = [scenario.gpus[s.gpu] for s in sites]
    tdp_w = np.array([g.power_w for g in gpu])
    tflops = np.array([g.tflops_bf16 for g in gpu])
    gpu_count = col("gpu_count")
    gpu_wall_w = tdp_w * ep.server_overhead * col("pue")
    gpu_rate = tflops_to_flops(tflops) * wl.mfu / wl.flops_per_sample
    site_batch = np.full(n, float(wl.site_batch))
    quota = site_batch * wl.local_steps
    wan_bps = gbps_to_bps(col("wan_gbps"))
    model_bits = bytes_to_bits(wl.model_bytes)
    if net.rtt_to_hub_ms is not None:
        rtt = np.array(net.rtt_to_hub_ms, dtype=np.float64)
    else:
        d = great_circle_km(col("latitude"), col("longitude"), net.hub_latitude, net.hub_longitude)
        rtt = rtt_ms(d, net.base_ms, net.route_factor, net.fiber_km_per_ms)
    # a joining site fetches the training state (or, if the scenario gives none, the model)
    state_bits = bytes_to_bits(wl.state_bytes if wl.state_bytes is not None else wl.model_bytes)
    site_values = {
        "gpu_count": gpu_count,
        "gpu_wall_w": gpu_wall_w,
        "gpu_rate": gpu_rate,
        "site_batch": site_batch,
        "rtt_s": ms_to_s(rtt),
        "data_share": col("data_share"),
        "quota": quota,
        "join_s": net.join_fixed_s + state_bits / wan_bps,
        "site_tx_s": model_bits / wan_bps,
        "idle_w_per_gpu": ep.idle_fraction * gpu_wall_w,
    }
    return site_values


def _constants(scenario: Any, power: PowerData, rows: int, time_scale_s: float) -> dict[str, Any]:
    """The scalars of ``CONSTS``, by name: the workload's learning curve and rounds, the network's
    hub and all-reduce, the episode's budget and limits."""
    wl, net, ep = scenario.workload, scenario.network, scenario.episode
    iv = float(power.interval_s)
    model_bits = bytes_to_bits(wl.model_bytes)
    constants = {
        "interval_s": iv,
        "rows": rows,
        "trace_t0_s": float(power.t0_s),
        "hub_tx_s": model_bits / gbps_to_bps(net.hub_gbps),
        "rtt_factor": net.rtt_factor,
        "aggregation_s": net.aggregation_s,
        "local_steps": float(wl.local_steps),
        "eta_local": wl.eta_local,
        "noise_b0": wl.noise_b0,
        "noise_p_b": wl.noise_p_b,
        "noise_gamma": wl.noise_gamma,
        "a0": wl.a0,
        "a_max": wl.a_max,
        "a_target": wl.a_target,
        "span": wl.a_target - wl.a0,
        "p0": wl.p0,
        "alpha": wl.alpha,
        "non_iid": wl.non_iid,
        "coverage_tau": wl.coverage_tau_rounds,
        "coverage_ceiling": wl.coverage_ceiling,
        "fixed_time": wl.round_mode == "fixed_time",
        "round_s": wl.round_s,
        "idle_s": ep.idle_s if ep.idle_s > 0 else iv,
        "jitter_sigma": ep.jitter_sigma,
        "time_budget_s": h_to_s(ep.time_budget_h),
        "max_rounds": ep.max_rounds,
        "time_scale_s": time_scale_s,
        "h_ref_s": h_to_s(ep.h_ref_h),
        "ring": net.allreduce == "ring",
        "grace": wl.grace if wl.grace is not None else math.inf,
        "nonblocking": net.join_mode == "non_blocking",
        "measured": scenario.unknowns.drawn,
        "carbon": power.has_carbon,
        "carbon_ref_kg": ep.carbon_ref_kg,
        **scenario.moving.constants(),
        "carbon_obs": 0.0,  # an environment's option (carbon_obs=True), not the scenario's
    }
    return constants


def _in_order(values: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    """``values`` in the order of a layout's ``names``, which they must match exactly: a name
    added to the layout and not built here (or the reverse) fails at once, not in the kernel."""
    if values.keys() != set(names):
        raise RuntimeError(f"layout mismatch: {sorted(set(names) ^ values.keys())}")
    return [values[name] for name in names]


def _power_table(
    rate: np.ndarray,
    powered: np.ndarray,
    gpu_wall_w: np.ndarray,
    iv: float,
    pv_w: np.ndarray | None = None,
    g_per_j: np.ndarray | None = None,
):
    """The kernel's per-row table (layout.TABLE_FIELDS): one row per trace row plus the
    cumulative sums' end. Without ``pv_w`` and ``g_per_j`` (a forecast's world) no carbon is
    counted."""
    rows, n = rate.shape
    table = np.zeros((rows + 1, len(TABLE_FIELDS), n))
    table[:rows, RATE] = rate
    table[:rows, POWERED] = powered
    table[1:, CUM_SAMPLES] = np.cumsum(rate * iv, axis=0)
    busy_w = powered * gpu_wall_w
    table[1:, CUM_GPU_J] = np.cumsum(busy_w * iv, axis=0)
    if pv_w is not None and g_per_j is not None:
        table[:rows, PV_W] = pv_w
        table[:rows, G_PER_J] = g_per_j
        # on-site PV is used first: only the draw above it comes from the grid
        table[1:, CUM_BUSY_G] = np.cumsum(np.maximum(busy_w - pv_w, 0.0) * g_per_j * iv, axis=0)
    # first row at or after each row with no powered GPU, by a running minimum from the end
    row_index = np.where(powered > 0, rows, np.arange(rows)[:, None])
    next_out = np.minimum.accumulate(row_index[::-1], axis=0)[::-1]
    table[:rows, OUTAGE_S] = np.where(next_out < rows, next_out * iv, np.inf)
    table[rows, OUTAGE_S] = np.inf
    return table


# How the forecast's world guesses the grid's carbon intensity and the on-site PV that offsets it
# (no carbon forecast is published with the data, docs/data.md): the same hour yesterday, the
# seasonal naive forecast; the mean of the same hour over the last WEEK_DAYS days, the seasonal
# mean; or the current hour's held (persistence). All read only the past.
CARBON_FORECASTS = ("yesterday", "persistence", "week")


def forecast_world(
    params: SimParams, row: int, rows: int, carbon_forecast: str = "yesterday"
) -> SimParams:
    """The world as the forecast issued at ``row`` sees it, for ``rows`` rows from there.

    Row 0 of the copy is calendar row ``row``; row h holds the forecast issued then for row
    ``row + h`` (h = 0: the row's actual), and the last forecast row holds beyond the forecast's
    horizon, as ``predict_round`` reads it. Everything else is the scenario's; the jitter and
    the [moving] path are off: a deterministic what-if of several rounds that reads no future
    actual. A state moves
    onto the copy's clock by subtracting ``row · interval_s`` from its time and start.

    With carbon intensity (``params.carbon``), the grid's intensity and the PV output that
    offsets it come from ``carbon_forecast`` (``CARBON_FORECASTS``): "yesterday" repeats the
    last day's rows (row ``row + h − D·⌈h / D⌉``, D rows a day), "persistence" holds row ``row``'s;
    h = 0 is the actual, and a row before the trace's start falls back to persistence; "week"
    averages the same hour of the last ``WEEK_DAYS`` days already past (of those the trace
    has: ``carbon_sources``).
    """
    fc = params.forecast_rate[row]  # (H, N) samples/s
    ahead = np.minimum(np.arange(max(int(rows), 1)), fc.shape[0] - 1)
    rate = np.ascontiguousarray(fc[ahead])
    powered = np.rint(rate / params.gpu_rate)  # whole GPUs, as the forecast counted them
    consts = params.consts.copy()
    for name, value in (
        ("rows", rate.shape[0]),
        ("trace_t0_s", params.trace_t0_s + row * params.interval_s),
        ("jitter_sigma", 0.0),
        ("moving", 0.0),  # the forecast knows nothing of the path (docs/moving.md)
    ):
        consts[CONSTS.index(name)] = float(value)
    pv_w = g_per_j = None
    if params.carbon:
        source = carbon_sources(params, row, rate.shape[0], carbon_forecast)
        pv_w = params.table[source, PV_W].mean(axis=1)
        g_per_j = params.table[source, G_PER_J].mean(axis=1)
    return SimParams(
        trace_rows=rate.shape[0],
        site=params.site,
        table=_power_table(rate, powered, params.gpu_wall_w, params.interval_s, pv_w, g_per_j),
        available=powered > 0,
        forecast_rate=rate[:, None, :],
        site_obs=np.zeros((rate.shape[0], params.n_sites, params.site_obs.shape[2]), np.float32),
        consts=consts,
        budget_s=np.full(rate.shape[0], params.budget_s[row]),
    )


def carbon_rows(params: SimParams, row: int, rows: int, carbon_forecast: str) -> np.ndarray:
    """(rows,) the past trace rows whose carbon intensity and PV the forecast issued at ``row``
    repeats for rows ``row``, ``row + 1``, ... (``forecast_world``): one per row, so for the
    forecasts that repeat one past row ("yesterday", "persistence"); "week" averages several
    (``carbon_sources``)."""
    if carbon_forecast == "week":
        raise ValueError('carbon_forecast="week" averages several rows: use carbon_sources')
    return carbon_sources(params, row, rows, carbon_forecast)[:, 0]


def carbon_sources(params: SimParams, row: int, rows: int, carbon_forecast: str) -> np.ndarray:
    """(rows, K) the past trace rows whose carbon intensity and PV the forecast issued at
    ``row`` averages for rows ``row``, ``row + 1``, ... (K = 1 but for "week").

    Row h's sources are h's same time of day on the latest days already past: the one day
    before (``row + h − D·⌈h / D⌉``, D rows a day) for "yesterday", that day and the
    ``WEEK_DAYS − 1`` before it for "week" (early in the trace, the days it has, taken in turn),
    and ``row`` itself for h = 0, for "persistence" and before the trace's first whole day.
    Every source is at most ``row``: no future actual.
    """
    if carbon_forecast not in CARBON_FORECASTS:
        raise ValueError(
            f"carbon_forecast={carbon_forecast!r}: allowed: {', '.join(CARBON_FORECASTS)}"
        )
    ahead = np.arange(rows)
    day = round(S_PER_DAY / params.interval_s)
    days = 1 if carbon_forecast == "yesterday" else WEEK_DAYS
    source = np.full((rows, days if carbon_forecast == "week" else 1), row, dtype=np.intp)
    if carbon_forecast == "persistence" or row < day:
        return source
    latest = row + ahead[1:] - day * -(-ahead[1:] // day)  # the latest same time already past
    source[1:] = same_hour_rows(latest, day, source.shape[1])
    return source
