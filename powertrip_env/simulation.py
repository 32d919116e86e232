"""``Simulation``: a scenario bound to its power data and the kernel's tables, loaded once.

Reading a scenario's files and building its tables is the slow part of making an environment,
and what it gives is read-only, so instances are cached per scenario file (and re-read when any
of its input files changes): every environment in a process shares one copy of the power data
and tables. What an environment lays over them is elsewhere: the spaces, observations, actions
and info in ``interface``, where episodes start in ``episodes``, the checked arguments in
``options``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from typing import Any

from powertrip_env import dynamics
from powertrip_env.scenario import Scenario, load_scenario, scenario_path
from powertrip_env.scenario.portable import from_portable
from powertrip_env.scenario.power import SitePower, site_power
from powertrip_env.scenario.sections import check_moving_rows


@dataclasses.dataclass(frozen=True, eq=False)
class Simulation:
    """A scenario bound to its power data and simulator tables."""

    scenario: Scenario
    power: SitePower
    params: dynamics.SimParams

    def __post_init__(self) -> None:
        # the one check of a scenario that needs its power data's row length
        check_moving_rows(self.scenario.moving, self.params.interval_s, self.scenario.source)

    def with_jitter(self, jitter: bool | float) -> Simulation:
        """This simulation with the scenario's jitter (True), none (False) or a given sigma."""
        if jitter is True:
            return self
        if isinstance(jitter, bool) or jitter is None:
            sigma = 0.0
        elif isinstance(jitter, int | float) and 0.0 <= jitter <= 1.0:
            sigma = float(jitter)
        else:
            raise ValueError(f"jitter={jitter!r}: give True, False or a sigma in [0, 1]")
        params = self.params.with_constants(jitter_sigma=sigma)
        return dataclasses.replace(self, params=params)


def load_simulation(
    scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any],
) -> Simulation:
    """The simulation for a scenario name, TOML path, ``Scenario`` or portable scenario.

    A file is cached per path, and the cache holds only while every file the scenario reads
    (the TOMLs it extends, the catalogues, the traces) is unchanged: an edited input is read
    again. A portable scenario (``powertrip_env.scenario.portable``) carries its power data
    and reads no file at all.
    """
    if isinstance(scenario, Scenario):
        return _build(scenario)
    if isinstance(scenario, Mapping):
        loaded, power = from_portable(scenario)
        return Simulation(scenario=loaded, power=power, params=dynamics.build_params(loaded, power))
    path = str(scenario_path(scenario))
    with _LOCK:
        hit = _CACHE.get(path)
        if hit is not None and _stamps(hit[0]) == hit[1]:
            return hit[2]
    sim = _build(load_scenario(path))
    files = sim.scenario.inputs
    with _LOCK:
        _CACHE[path] = (files, _stamps(files), sim)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
    return sim


_CACHE: dict[str, tuple[tuple[Any, ...], tuple[Any, ...], Simulation]] = {}
_CACHE_SIZE = 32
_LOCK = threading.Lock()


def _stamps(files: tuple[Any, ...]) -> tuple[Any, ...]:
    """(mtime, size) of each file, None for one that is gone: a change in any means re-read."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _build(scenario: Scenario) -> Simulation:
    power = site_power(scenario)
    params = dynamics.build_params(scenario, power)
    return Simulation(scenario=scenario, power=power, params=params)
