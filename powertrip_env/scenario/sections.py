"""Each table of a scenario read into its dataclass, and the checks that span the sites.

``[workload]``, ``[network]``, ``[episode]``, ``[trace]`` and ``[learner]`` each have a reader
here, shared by scenario files (``powertrip_env.scenario.loading``) and portable scenarios
(``powertrip_env.scenario.portable``), so both are checked alike: a bad value is reported with
the file, the field, the value and what is allowed.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

from powertrip_env.dynamics.layout import PROCESSES
from powertrip_env.errors import ScenarioError
from powertrip_env.scenario.fields import Table
from powertrip_env.scenario.paths import resolve_file
from powertrip_env.scenario.types import (
    CARBON_KINDS,
    DEFAULT_MAX_ROUNDS,
    Episode,
    GpuType,
    LearnerConfig,
    MovingProcesses,
    Network,
    Site,
    TraceFiles,
    UnknownSpreads,
    Workload,
)
from powertrip_env.units import h_to_s, s_to_h

DATASETS = ("digits",)
AGGREGATIONS = ("fedavg", "diloco")


def load_learner_config(t: Table) -> LearnerConfig:
    """``[learner]``: the real learner's model, optimiser and data split (all optional)."""
    d = LearnerConfig()
    config = LearnerConfig(
        dataset=t.string("dataset", d.dataset, choices=DATASETS),
        hidden=t.integer("hidden", d.hidden, lo=1),
        lr=t.number("lr", d.lr, lo=0.0, lo_open=True, hi=10.0),
        aggregation=t.string("aggregation", d.aggregation, choices=AGGREGATIONS),
        outer_lr=t.number("outer_lr", d.outer_lr, lo=0.0, lo_open=True, hi=10.0),
        outer_momentum=t.number("outer_momentum", d.outer_momentum, lo=0.0, hi=0.999),
        dirichlet_alpha=t.number("dirichlet_alpha", d.dirichlet_alpha, lo=0.0),
        test_fraction=t.number("test_fraction", d.test_fraction, lo=0.05, hi=0.5),
        data_seed=t.integer("data_seed", d.data_seed, lo=0),
    )
    t.finish()
    return config


def load_trace_files(t: Table, path: Path, sites: list[Site]) -> TraceFiles:
    """``[trace]``: the grid trace, the optional PV trace and forecasts, and their calendar."""

    def optional_file(key: str) -> Path | None:
        if not t.has(key):
            return None
        return resolve_file(t.string(key), path, f"{t.source}: [trace] field {key!r}")

    trace = TraceFiles(
        file=resolve_file(t.string("file"), path, f"{t.source}: [trace] field 'file'"),
        pv_file=optional_file("pv_file"),
        pv_forecast_file=optional_file("pv_forecast_file"),
        shift_days=t.integer("shift_days", 0, lo=-100_000),
        utc_offset_h=t.number("utc_offset_h", lo=-12.0, hi=14.0) if t.has("utc_offset_h") else None,
        carbon_file=optional_file("carbon_file"),
        carbon_kind=t.string("carbon_kind", "lca", choices=CARBON_KINDS),
    )
    if t.has("carbon_kind") and trace.carbon_file is None:
        raise ScenarioError(
            f"{t.source}: [trace] field 'carbon_kind' needs 'carbon_file', the carbon intensity "
            "it picks the columns of"
        )
    if trace.carbon_file is not None:
        unzoned = [s.name for s in sites if not s.carbon_zone]
        if unzoned:
            raise ScenarioError(
                f"{t.source}: [trace] names a 'carbon_file', but site(s) {unzoned} have no "
                "'carbon_zone' (the file's zone whose intensity charges their grid energy); "
                "give each site its zone, or leave out the sites whose grid has no series"
            )
    if trace.pv_forecast_file is not None and trace.pv_file is None:
        raise ScenarioError(
            f"{t.source}: [trace] field 'pv_forecast_file' needs 'pv_file' too: forecasts "
            "complement the PV trace, they do not replace it"
        )
    solar = [s.name for s in sites if s.has_pv]
    if solar and trace.pv_file is None:
        raise ScenarioError(
            f"{t.source}: site(s) {solar} have pv_kw > 0 but [trace] has no 'pv_file' to drive "
            f"their solar output; add one or set pv_kw = 0{t.dropped('pv_file')}"
        )
    if trace.utc_offset_h is not None:
        missing = [s.name for s in sites if s.utc_offset_h is None]
        if missing:
            inherited = t.lineage is not None and ("trace", "utc_offset_h") in t.lineage.inherited
            own_file = (
                ", or write [trace] file in this file: the base's utc_offset_h describes the "
                "base's trace and is not inherited with a trace of your own"
                if inherited
                else ""
            )
            raise ScenarioError(
                f"{t._where('utc_offset_h')} = {trace.utc_offset_h!r} replays the grid trace in "
                f"each site's local time, so every site needs 'utc_offset_h'; missing for "
                f"{missing}: give those sites a utc_offset_h (in [-12, 14]){own_file}"
            )
    return trace


# A sum of data shares this close to 1 is 1 (decimals as written): the shares are used as they
# are. Up to SHARE_SUM_TOLERANCE off, they are rounded decimals (twelve sites at 0.083333 sum to
# 0.999996) and are normalised, with a warning; further off is a mistake and refused.
SHARE_SUM_EXACT = 1e-6
SHARE_SUM_TOLERANCE = 1e-3


def normalised_shares(sites: list[Site], where: str) -> list[Site]:
    """``sites`` with data shares that sum to 1, normalising a sum that is nearly 1.

    Shares are usually written as rounded decimals, and 1/12 cannot be written exactly, so an
    exact sum would refuse honest files; but a sum well off 1 is most likely a share left out
    or mistyped, which normalising would hide. ``where`` names the file and field, for the
    warning and the error.

    Raises:
        ScenarioError: if the sum is more than ``SHARE_SUM_TOLERANCE`` away from 1.
    """
    total = math.fsum(s.data_share for s in sites)
    if abs(total - 1.0) <= SHARE_SUM_EXACT:
        return sites
    if abs(total - 1.0) > SHARE_SUM_TOLERANCE:
        raise ScenarioError(
            f"{where} sums to {total:.6g} over the sites; it must sum to 1 (a sum within "
            f"{SHARE_SUM_TOLERANCE:g} of 1 is accepted and normalised)"
        )
    warnings.warn(
        f"{where} sums to {total:.6g} over the sites, not 1; the shares were normalised to "
        f"sum to 1 (each divided by {total:.6g})",
        UserWarning,
        stacklevel=3,
    )
    return [replace(s, data_share=s.data_share / total) for s in sites]


def check_sites(sites: list[Site], gpus: dict[str, GpuType], site_file: str, source: str) -> None:
    names = [s.name for s in sites]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScenarioError(f"{site_file}: site name(s) {duplicates} appear more than once")
    for site in sites:
        if site.gpu not in gpus:
            raise ScenarioError(
                f"{site_file}: site {site.name!r} field 'gpu' = {site.gpu!r}: unknown GPU type; "
                f"allowed: {sorted(gpus)}"
            )
    total = sum(s.data_share for s in sites)
    if abs(total - 1.0) > 1e-6:
        raise ScenarioError(
            f"{site_file}: field 'data_share' sums to {total:.6g} over the sites; it must sum to 1"
        )
    if len(sites) > 64:
        raise ScenarioError(f"{source}: {len(sites)} sites; at most 64 are supported")


def load_workload(t: Table) -> Workload:
    a0 = t.number("a0", lo=0.0, hi=1.0)
    a_max = t.number("a_max", lo=0.0, hi=1.0)
    a_target = t.number("a_target", lo=0.0, hi=1.0)
    if not a0 < a_target < a_max:
        raise ScenarioError(
            f"{t.source}: [workload] fields a0 = {a0}, a_target = {a_target}, a_max = {a_max}: "
            "must satisfy a0 < a_target < a_max"
        )
    workload = Workload(
        name=t.string("name"),
        flops_per_sample=t.number("flops_per_sample", lo=0.0, lo_open=True),
        model_bytes=t.number("model_bytes", lo=0.0, lo_open=True),
        site_batch=t.integer("site_batch", lo=1),
        local_steps=t.integer("local_steps", lo=1),
        mfu=t.number("mfu", lo=0.0, hi=1.0, lo_open=True),
        eta_local=t.number("eta_local", 1.0, lo=0.0, hi=1.0, lo_open=True),
        noise_b0=t.number("noise_b0", lo=0.0),
        noise_p_b=t.number("noise_p_b", lo=0.0, lo_open=True),
        noise_gamma=t.number("noise_gamma", 0.0, lo=0.0, hi=4.0),
        a0=a0,
        a_max=a_max,
        a_target=a_target,
        p0=t.number("p0", lo=0.0, lo_open=True),
        alpha=t.number("alpha", lo=0.0, lo_open=True),
        non_iid=t.number("non_iid", 0.0, lo=0.0, hi=1.0),
        coverage_tau_rounds=t.number("coverage_tau_rounds", 5.0, lo=0.0, lo_open=True),
        coverage_ceiling=t.number("coverage_ceiling", 0.0, lo=0.0, hi=10.0),
        round_mode=t.string("round_mode", "fixed_quota", choices=("fixed_quota", "fixed_time")),
        round_s=t.number("round_s", 60.0, lo=0.0, lo_open=True),
        grace=t.number("grace", lo=0.0) if t.has("grace") else None,
        state_bytes=t.number("state_bytes", lo=0.0, lo_open=True) if t.has("state_bytes") else None,
        parameters=t.number("parameters", lo=0.0, lo_open=True) if t.has("parameters") else None,
    )
    t.finish()
    return workload


def load_unknowns(t: Table, workload: Workload) -> UnknownSpreads:
    """``[unknowns]`` (optional): the spreads of what each episode draws. A σ above 1 would
    make a site's factor vary by e^±2 and more between episodes, far past any measurement the
    spreads are cited from (docs/references.md), so it is refused."""
    sigma = {"lo": 0.0, "hi": 1.0}
    unknowns = UnknownSpreads(
        throughput_sigma=t.number("throughput_sigma", 0.0, **sigma),
        slow_probability=t.number("slow_probability", 0.0, lo=0.0, hi=1.0),
        slow_factor=t.number("slow_factor", 1.0, lo=1.0, hi=10.0),
        rtt_sigma=t.number("rtt_sigma", 0.0, **sigma),
        bandwidth_sigma=t.number("bandwidth_sigma", 0.0, **sigma),
        join_sigma=t.number("join_sigma", 0.0, **sigma),
        pace_sigma=t.number("pace_sigma", 0.0, **sigma),
        noise_sigma=t.number("noise_sigma", 0.0, **sigma),
    )
    t.finish()
    if unknowns.drawn:
        _needs_a_quota(t, workload, "a site's unknown throughput")
    return unknowns


def _needs_a_quota(t: Table, workload: Workload, what: str) -> None:
    """Refuse a section that changes how long a site's quota takes (``what`` does) on rounds
    that have none (``round_mode = "fixed_time"``)."""
    if workload.round_mode == "fixed_time":
        raise ScenarioError(
            f"{t.source}: [{t.section}] needs [workload] round_mode = 'fixed_quota' (got "
            f"'fixed_time'): {what} sets how long its quota takes, and a fixed-time round has "
            "no quota"
        )


def load_moving(t: Table, workload: Workload) -> MovingProcesses:
    """``[moving]`` (optional): the processes that move the world while the job runs. A depth
    of 1 would be a site without power or a link without bandwidth: the power trace models the
    first (and the forecast sees it), the second is a failure, not an excursion; a slow factor
    past 10 is far beyond the fail-slows docs/references.md cites. A mean duration must be at
    least one trace row, the path's step (checked with the trace, ``check_moving_rows``)."""
    moving = MovingProcesses(
        slow_per_day=t.number("slow_per_day", 0.0, lo=0.0),
        slow_hours=t.number("slow_hours", 1.0, lo=0.0, lo_open=True),
        slow_factor=t.number("slow_factor", 1.0, lo=1.0, hi=10.0),
        link_per_day=t.number("link_per_day", 0.0, lo=0.0),
        link_hours=t.number("link_hours", 1.0, lo=0.0, lo_open=True),
        link_depth=t.number("link_depth", 0.5, lo=0.0, lo_open=True),
        callback_per_day=t.number("callback_per_day", 0.0, lo=0.0),
        callback_hours=t.number("callback_hours", 1.0, lo=0.0, lo_open=True),
        callback_depth=t.number("callback_depth", 0.25, lo=0.0, lo_open=True),
    )
    for key in ("link_depth", "callback_depth"):
        value = getattr(moving, key)
        if value >= 1.0:
            raise ScenarioError(
                f"{t.source}: [moving] field '{key}' = {value!r}: must be in (0, 1), the share "
                "lost (1 would leave nothing: an outage, which the power trace models)"
            )
    if moving.slow_per_day > 0.0 and moving.slow_factor <= 1.0:
        raise ScenarioError(
            f"{t.source}: [moving] field 'slow_factor' = {moving.slow_factor!r} with "
            f"slow_per_day = {moving.slow_per_day!r}: a fail-slow must divide the throughput "
            "by a factor > 1 (and <= 10)"
        )
    t.finish()
    if moving.on:
        _needs_a_quota(t, workload, "a fail-slow at a site")
    return moving


def check_moving_rows(moving: MovingProcesses, interval_s: float, source: str) -> None:
    """Refuse a process whose mean duration is below one trace row: the path steps by rows."""
    for name, (per_day, hours, _) in zip(PROCESSES, moving.processes(), strict=True):
        # a relative tolerance, so the row written in hours to six digits (5 min: 0.0833333)
        # is accepted as the row it names
        if per_day > 0.0 and h_to_s(hours) < interval_s * (1.0 - 1e-6):
            raise ScenarioError(
                f"{source}: [moving] field '{name}_hours' = {hours!r}: must be at least one "
                f"trace row ({s_to_h(interval_s):g} h, {interval_s:g} s): the path changes "
                "once a row"
            )


def load_network(t: Table, sites: list[Site], sites_table: Table) -> tuple[Network, int]:
    if t.has("join_s"):
        raise ScenarioError(
            f"{t.source}: [network] field 'join_s' was renamed 'join_fixed_s': a joining site "
            "now pays join_fixed_s plus the time to fetch the model (model_bytes / wan_gbps)"
        )
    names = [s.name for s in sites]
    if not sites_table.has("hub"):
        raise ScenarioError(
            f"{sites_table._where('hub')} is missing; it is required{sites_table.dropped('hub')}"
            f"; set [sites] hub in {sites_table.source} to one of its sites {names} or to a "
            "table {name, latitude, longitude}"
        )
    hub_value = sites_table.raw("hub")
    if isinstance(hub_value, str):
        if hub_value not in names:
            raise ScenarioError(
                f"{sites_table._where('hub')} = {hub_value!r}: not a site of this "
                f"scenario; allowed: {names} or a table {{name, latitude, longitude}}"
            )
        hub_index = names.index(hub_value)
        hub_site = sites[hub_index]
        hub_name, hub_lat, hub_lon = str(hub_value), hub_site.latitude, hub_site.longitude
    else:
        hub = Table(hub_value, sites_table.source, "sites.hub")
        hub_name = hub.string("name")
        hub_lat = hub.number("latitude", lo=-90.0, hi=90.0)
        hub_lon = hub.number("longitude", lo=-180.0, hi=180.0)
        hub.finish()
        hub_index = -1

    rtt_to_hub = t.raw("rtt_to_hub_ms", None)
    if rtt_to_hub is not None:
        if (
            not isinstance(rtt_to_hub, list)
            or len(rtt_to_hub) != len(sites)
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 10_000
                for v in rtt_to_hub
            )
        ):
            raise ScenarioError(
                f"{t._where('rtt_to_hub_ms')} = {rtt_to_hub!r}: must be a list "
                f"of {len(sites)} round-trip times in ms (one per site, in site order), each in "
                "(0, 10000)"
            )
        rtt_to_hub = tuple(float(v) for v in rtt_to_hub)
    network = Network(
        hub=hub_name,
        hub_latitude=hub_lat,
        hub_longitude=hub_lon,
        hub_gbps=t.number("hub_gbps", lo=0.0, lo_open=True),
        base_ms=t.number("base_ms", 2.0, lo=0.0),
        route_factor=t.number("route_factor", 1.5, lo=1.0, hi=5.0),
        fiber_km_per_ms=t.number("fiber_km_per_ms", 204.0, lo=0.0, lo_open=True),
        rtt_factor=t.number("rtt_factor", 1.0, lo=0.0),
        aggregation_s=t.number("aggregation_s", 0.0, lo=0.0),
        join_fixed_s=t.number("join_fixed_s", 0.0, lo=0.0),
        rtt_to_hub_ms=rtt_to_hub,
        allreduce=t.string("allreduce", "hub", choices=("hub", "ring")),
        join_mode=t.string("join_mode", "blocking", choices=("blocking", "non_blocking")),
    )
    t.finish()
    return network, hub_index


def load_episode(t: Table, trace: Table) -> Episode:
    train_days = trace.day_range("train_days", (1, 21))
    test_days = trace.day_range("test_days", (22, 31))
    episode = Episode(
        time_budget_h=t.number("time_budget_h", lo=0.0, lo_open=True, hi=24.0 * 7),
        max_rounds=t.integer("max_rounds", DEFAULT_MAX_ROUNDS, lo=1),
        h_ref_h=t.number("h_ref_h", lo=0.0, lo_open=True),
        idle_s=t.number("idle_s", 0.0, lo=0.0),
        jitter_sigma=t.number("jitter_sigma", 0.05, lo=0.0, hi=1.0),
        server_overhead=t.number("server_overhead", 1.8, lo=1.0, hi=5.0),
        idle_fraction=t.number("idle_fraction", 0.3, lo=0.0, hi=1.0),
        train_days=train_days,
        test_days=test_days,
        carbon_ref_kg=t.number("carbon_ref_kg", 0.0, lo=0.0),
        deadline_slack=t.number("deadline_slack", 0.0, lo=0.0, hi=10.0),
        deadline_ref_h=t.number("deadline_ref_h", 0.0, lo=0.0, hi=24.0 * 7),
    )
    if episode.deadline_slack and episode.deadline_slack < 1.0:
        raise ScenarioError(
            f"{t._where('deadline_slack')} = {episode.deadline_slack!r}: must be 0 (every "
            "episode's deadline is time_budget_h) or at least 1 (the deadline over the estimated "
            "time to accuracy)"
        )
    if episode.deadline_slack and not episode.deadline_ref_h:
        raise ScenarioError(
            f"{t._where('deadline_slack')} = {episode.deadline_slack!r} needs deadline_ref_h > 0 "
            "(the best time to accuracy found on the train days, in h)"
        )
    t.finish()
    return episode
