"""A scenario by value: everything a simulation needs, in one plain, picklable dict.

On a cluster the process that runs an environment may share no filesystem with the one that set
the run up: a scenario file, its site catalogue and its traces at one path on the head node are
nowhere on a worker. A portable scenario carries the validated scenario's fields and its sites'
available power (the arrays ``power.site_power`` makes of the trace files), so a worker builds
the same simulation without reading a file. Pass it as ``scenario=`` to ``gym.make`` or to the
RLlib env creator (``powertrip_env.integrations.rllib``).

The dict holds Python strings, numbers, lists and dicts, and numpy arrays for the power data
(``to_portable(..., arrays=False)`` gives lists instead, for JSON). ``from_portable`` checks it
as strictly as a scenario file is checked when it is rebuilt: a missing or unknown key, a wrong
type or a bad array shape is a ``ScenarioError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from powertrip_env.errors import ScenarioError
from powertrip_env.scenario.catalogues import OPTIONAL_SITE_FIELDS, SITE_KINDS, make_site
from powertrip_env.scenario.fields import Table
from powertrip_env.scenario.loading import load_scenario
from powertrip_env.scenario.power import SitePower, site_power
from powertrip_env.scenario.sections import (
    check_sites,
    load_episode,
    load_learner_config,
    load_moving,
    load_network,
    load_unknowns,
    load_workload,
)
from powertrip_env.scenario.types import Episode, GpuType, Network, Scenario, Site, TraceFiles

FORMAT = "powertrip-env/portable-scenario@1"


def to_portable(
    scenario: str | os.PathLike[str] | Scenario, *, arrays: bool = True
) -> dict[str, Any]:
    """The scenario (a name, a TOML path or a loaded ``Scenario``) and its power, by value."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    power = site_power(scenario)

    def array(a: np.ndarray) -> Any:
        return np.array(a) if arrays else a.tolist()

    return {
        "format": FORMAT,
        "scenario": _plain(scenario),
        "power": {
            "t0_s": int(power.t0_s),
            "interval_s": int(power.interval_s),
            "available_w": array(power.available_w),
            "forecast_w": array(power.forecast_w),
            "peak_w": array(power.peak_w),
            "sources": power.sources,
            "pv_w": array(power.pv_w),
            "carbon_g_per_j": array(power.carbon_g_per_j),
        },
    }


def is_portable(value: Any) -> bool:
    """Whether ``value`` is (meant to be) a portable scenario."""
    return isinstance(value, Mapping) and "format" in value


def from_portable(data: Mapping[str, Any]) -> tuple[Scenario, SitePower]:
    """The scenario and its power from a portable dict; ``ScenarioError`` names a bad key."""
    where = "portable scenario"
    _keys(data, where, ("format", "scenario", "power"))
    if data["format"] != FORMAT:
        raise ScenarioError(
            f"{where}: 'format' = {data['format']!r}: this version of powertrip-env reads "
            f"{FORMAT!r}; make it again with powertrip_env.scenario.portable.to_portable"
        )
    scenario = _scenario(data["scenario"], f"{where} ['scenario']")
    power = _power(data["power"], f"{where} ['power']", scenario)
    return scenario, power


# --------------------------------------------------------------------------- to plain values


def _plain(value: Any) -> Any:
    """Dataclasses, paths and tuples as dicts, strings and lists (the scenario's inputs, which
    name files of this machine, are left out)."""
    if dataclasses.is_dataclass(value):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name != "inputs"
        }
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, str):
        return str(value)  # a plain str, also for str subclasses
    return value


# --------------------------------------------------------------------------- back, checked


_LATER_NETWORK = ("allreduce", "join_mode")
_LATER_TRACE = ("carbon_file", "carbon_kind")  # a portable made before 0.6 has neither
_LATER_SITE = ("carbon_zone",)
_LATER_EPISODE = ("carbon_ref_kg",)  # a portable made before 0.6 has none
# strings a site may leave empty
_MAY_BE_EMPTY = ("pv_column", "carbon_zone")


def _keys(data: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()):
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: must be a dict, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    unknown = sorted(set(data) - set(required) - set(optional))
    if missing or unknown:
        raise ScenarioError(
            f"{where}: missing key(s) {missing} and unknown key(s) {unknown}; expected "
            f"{sorted(required + optional)}"
        )


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError
    if kind is int and float(value) != int(value):
        raise ValueError
    return kind(value)


def _scenario(data: Any, where: str) -> Scenario:
    """Rebuild a ``Scenario`` through the same checks a scenario file goes through."""
    # a portable made before 0.4 has no unknowns, one made before 0.6 no moving
    later = ("unknowns", "moving")
    fields = [f.name for f in dataclasses.fields(Scenario) if f.name not in ("inputs", *later)]
    _keys(data, where, tuple(fields), later)
    for key in ("name", "description", "source", "sites_source"):
        if not isinstance(data[key], str):
            raise ScenarioError(f"{where} [{key!r}] = {data[key]!r}: must be a string")
    gpus = _gpus(data, where)

    sites = _sites(data, where, gpus)

    network = data["network"]
    # fields that came after format @1's first portables, whose defaults mean what they did
    _keys(
        network,
        f"{where} ['network']",
        tuple(f.name for f in dataclasses.fields(Network) if f.name not in _LATER_NETWORK),
        _LATER_NETWORK,
    )
    hub_index = data["hub_index"]
    if (
        isinstance(hub_index, bool)
        or not isinstance(hub_index, int)
        or not (-1 <= hub_index < len(sites))
    ):
        raise ScenarioError(f"{where} ['hub_index'] = {hub_index!r}: not -1 or a site index")
    hub: Any = (
        sites[hub_index].name
        if hub_index >= 0
        else {
            "name": network["hub"],
            "latitude": network["hub_latitude"],
            "longitude": network["hub_longitude"],
        }
    )
    link = {k: v for k, v in network.items() if not k.startswith("hub") or k == "hub_gbps"}
    if link.get("rtt_to_hub_ms") is None:
        link.pop("rtt_to_hub_ms", None)
    net, _ = load_network(Table(link, where, "network"), sites, Table({"hub": hub}, where, "sites"))

    episode = data["episode"]
    names = tuple(f.name for f in dataclasses.fields(Episode) if f.name not in _LATER_EPISODE)
    _keys(episode, f"{where} ['episode']", names, _LATER_EPISODE)
    days = {
        k: list(episode[k]) if isinstance(episode[k], list | tuple) else episode[k]
        for k in ("train_days", "test_days")
    }
    rest = {k: v for k, v in episode.items() if k not in days}
    ep = load_episode(Table(rest, where, "episode"), Table(days, where, "trace"))

    files = _trace_files(data, where)
    # optional fields a scenario left unset travel as None; a file would leave them out
    workload = load_workload(
        Table({k: v for k, v in dict(data["workload"]).items() if v is not None}, where, "workload")
    )
    unknowns = load_unknowns(Table(dict(data.get("unknowns", {})), where, "unknowns"), workload)
    moving = load_moving(Table(dict(data.get("moving", {})), where, "moving"), workload)

    return Scenario(
        name=data["name"],
        description=data["description"],
        source=data["source"],
        sites=tuple(sites),
        gpus=gpus,
        workload=workload,
        network=net,
        episode=ep,
        trace=files,
        hub_index=hub_index,
        sites_source=data["sites_source"],
        learner=load_learner_config(Table(dict(data["learner"]), where, "learner")),
        unknowns=unknowns,
        moving=moving,
    )


def _gpus(data: Any, where: str) -> dict[str, GpuType]:
    """The scenario's GPU types, each number checked as a scenario file's would be."""
    if not isinstance(data["gpus"], Mapping) or not data["gpus"]:
        raise ScenarioError(f"{where} ['gpus']: must be a non-empty dict of GPU types")
    gpus = {}
    for name, gpu in data["gpus"].items():
        at = f"{where} ['gpus'][{name!r}]"
        _keys(gpu, at, tuple(f.name for f in dataclasses.fields(GpuType)))
        numbers = Table(dict(gpu), at, "gpu")
        values = {
            key: numbers.number(key, lo=0.0, lo_open=True)
            for key in ("tflops_bf16", "power_w", "memory_gb")
        }
        gpus[str(name)] = GpuType(name=str(name), **values)
    return gpus


def _sites(data: Any, where: str, gpus: dict[str, GpuType]) -> list[Site]:
    """The sites, each field checked as a catalogue's would be, then checked against the GPUs."""
    if not isinstance(data["sites"], list | tuple) or not data["sites"]:
        raise ScenarioError(f"{where} ['sites']: must be a non-empty list of sites")
    sites = []
    site_fields = tuple(f.name for f in dataclasses.fields(Site))
    for i, entry in enumerate(data["sites"]):
        at = f"{where} ['sites'][{i}]"
        _keys(entry, at, tuple(k for k in site_fields if k not in _LATER_SITE), _LATER_SITE)
        table = Table(dict(entry), at, "site")
        values: dict[str, Any] = {}
        for key in site_fields:
            if key in _LATER_SITE and key not in entry:
                values[key] = OPTIONAL_SITE_FIELDS[key][1]
                continue
            kind = SITE_KINDS.get(key) or OPTIONAL_SITE_FIELDS[key][0]
            if key == "utc_offset_h" and entry[key] is None:
                values[key] = None
            elif kind is str:
                values[key] = entry[key] if key in _MAY_BE_EMPTY else table.string(key)
                if not isinstance(values[key], str):
                    raise ScenarioError(f"{at} [{key!r}] = {entry[key]!r}: must be a string")
            elif kind is int:
                values[key] = table.integer(key, lo=1)
            else:
                values[key] = table.number(key)
        sites.append(make_site(values, at))
    check_sites(sites, gpus, where, where)
    return sites


def _trace_files(data: Any, where: str) -> TraceFiles:
    """The trace files the scenario names (its power data travel beside it, in ``power``)."""
    trace = data["trace"]
    names = tuple(f.name for f in dataclasses.fields(TraceFiles))
    required = tuple(k for k in names if k not in _LATER_TRACE)
    _keys(trace, f"{where} ['trace']", required, _LATER_TRACE)
    try:
        return TraceFiles(
            file=Path(trace["file"]),
            pv_file=None if trace["pv_file"] is None else Path(trace["pv_file"]),
            pv_forecast_file=(
                None if trace["pv_forecast_file"] is None else Path(trace["pv_forecast_file"])
            ),
            shift_days=_number(trace["shift_days"], int),
            utc_offset_h=None
            if trace["utc_offset_h"] is None
            else _number(trace["utc_offset_h"], float),
            carbon_file=None if trace.get("carbon_file") is None else Path(trace["carbon_file"]),
            carbon_kind=str(trace.get("carbon_kind", "lca")),
        )
    except (TypeError, ValueError):
        raise ScenarioError(
            f"{where} ['trace']: {dict(trace)!r} has a value of the wrong type"
        ) from None


def _power(data: Any, where: str, scenario: Scenario) -> SitePower:
    _keys(
        data,
        where,
        ("t0_s", "interval_s", "available_w", "forecast_w", "peak_w", "sources"),
        ("pv_w", "carbon_g_per_j"),  # a portable made before 0.6 has neither
    )
    n = scenario.n_sites

    def array(key: str, ndim: int) -> np.ndarray:
        try:
            a = np.array(data[key], dtype=np.float64)
        except (TypeError, ValueError):
            raise ScenarioError(f"{where} [{key!r}]: must be an array of numbers") from None
        if a.ndim != ndim or a.shape[-1] != n or not np.isfinite(a).all() or (a < 0).any():
            raise ScenarioError(
                f"{where} [{key!r}]: shape {a.shape}; expected {ndim} dimensions ending in the "
                f"{n} sites, every value finite and >= 0"
            )
        a.setflags(write=False)
        return a

    try:
        t0, interval = _number(data["t0_s"], int), _number(data["interval_s"], int)
    except (TypeError, ValueError):
        raise ScenarioError(f"{where}: 't0_s' and 'interval_s' must be whole seconds") from None
    available, forecast, peak = array("available_w", 2), array("forecast_w", 3), array("peak_w", 1)
    if interval <= 0 or available.shape[0] < 2 or forecast.shape[0] != available.shape[0]:
        raise ScenarioError(
            f"{where}: 'interval_s' = {interval} must be > 0, and 'available_w' and "
            f"'forecast_w' must have the same rows, at least 2 (got {available.shape[0]} and "
            f"{forecast.shape[0]})"
        )
    if (peak <= 0).any():
        raise ScenarioError(f"{where} ['peak_w']: every site's peak power must be > 0")
    extra = {key: array(key, 2) for key in ("pv_w", "carbon_g_per_j") if key in data}
    for key, a in extra.items():
        if a.shape != available.shape:
            raise ScenarioError(
                f"{where} [{key!r}]: shape {a.shape}; expected {available.shape}, as 'available_w'"
            )
    return SitePower(
        **extra,
        has_carbon=scenario.trace.carbon_file is not None and "carbon_g_per_j" in extra,
        t0_s=t0,
        interval_s=interval,
        available_w=available,
        forecast_w=forecast,
        peak_w=peak,
        sources=str(data["sources"]),
    )
