"""Scenarios: what is trained, on which sites, under which power, loaded and checked once.

A scenario is a TOML file (the shipped ones are ``powertrip_env/scenario/shipped/*.toml``;
the format is docs/scenarios.md). Loading it reads the catalogues and power data it names and
checks every value, so the simulator never second-guesses its inputs. The modules, in the order
a load uses them:

* ``paths``: the shipped scenarios and data folder, and how a named file is found;
* ``extends``: reading the TOML and merging the scenario it ``extends`` (``TIED_FIELDS``);
* ``fields``: typed, range-checked reading of one table;
* ``catalogues``: the GPU and site catalogues (CSV) and inline ``[[sites.site]]`` tables;
* ``sections``: each table read into its dataclass, and the checks that span the sites;
* ``loading``: ``load_scenario``, which puts them together into a ``Scenario`` (``types``);
* ``power_data``: the power traces and forecasts (``traces/*.csv``), loaded once and cached;
* ``power``: each site's available power on the episode's calendar, from those files;
* ``carbon_data``: hourly grid carbon intensity per zone (``traces/carbon_intensity_2022.csv``);
* ``sampling``: site catalogues drawn per episode (``SiteSampler``);
* ``portable``: a scenario and its power by value, for workers that share no files.

Importing this package reads no data; the modules up to ``loading`` need only the standard
library, and pandas is imported only with ``power_data`` (and ``carbon_data``, which reads
through it).
"""

from __future__ import annotations

from powertrip_env.scenario.loading import load_scenario
from powertrip_env.scenario.paths import data_dir, scenario_names, scenario_path
from powertrip_env.scenario.types import (
    Episode,
    GpuType,
    LearnerConfig,
    Network,
    Scenario,
    Site,
    TraceFiles,
    Workload,
)

__all__ = [
    "Episode",
    "GpuType",
    "LearnerConfig",
    "Network",
    "Scenario",
    "Site",
    "TraceFiles",
    "Workload",
    "data_dir",
    "load_scenario",
    "scenario_names",
    "scenario_path",
]
