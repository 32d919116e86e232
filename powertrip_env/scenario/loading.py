"""Load and validate a scenario: a TOML file, the catalogues it names, and what it ``extends``.

A scenario is a TOML file (see ``powertrip_env/scenario/shipped/default.toml`` for a fully commented
one). Sites and GPUs may come from CSV catalogues (``traces/sites_*.csv``, ``traces/gpus.csv``)
or be written inline, so a user's scenario can be one self-contained file. Everything is checked
here, at load time, so that the simulator never has to second-guess its inputs: a bad value is
reported with the file, the field, the value and what is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from powertrip_env.errors import ScenarioError
from powertrip_env.scenario.catalogues import (
    load_gpu_catalogue,
    make_site,
    sites_from_csv,
    sites_from_toml,
)
from powertrip_env.scenario.extends import Lineage, apply_extends, read_toml
from powertrip_env.scenario.fields import REQUIRED, Table
from powertrip_env.scenario.paths import resolve_file, scenario_path
from powertrip_env.scenario.sections import (
    check_sites,
    load_episode,
    load_learner_config,
    load_moving,
    load_network,
    load_trace_files,
    load_unknowns,
    load_workload,
    normalised_shares,
)
from powertrip_env.scenario.types import Scenario


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """Load and validate a named scenario or a user's TOML file.

    Data shares that sum to within ``SHARE_SUM_TOLERANCE`` of 1 are normalised with a
    ``UserWarning``; everything else that is wrong raises ``ScenarioError``.
    """
    path = scenario_path(name_or_path)
    source = str(path)
    doc = read_toml(path, source)
    if not doc:
        raise ScenarioError(f"{source}: the scenario file is empty")
    tomls: list[Path] = [path]
    lineage = Lineage()
    doc, path = apply_extends(doc, path, source, seen=(str(path),), read=tomls, lineage=lineage)

    def table(key: str, default: Any = REQUIRED) -> Table:
        return Table(top.raw(key, default), source, key, lineage)

    top = Table(doc, source, "top level")
    name = top.string("name", path.stem)
    description = top.string("description", name)

    gpus_table = table("gpus", {})
    gpu_file = resolve_file(
        gpus_table.string("catalogue", "gpus.csv"), path, f"{source}: [gpus] field 'catalogue'"
    )
    gpus_table.finish()
    gpus = load_gpu_catalogue(gpu_file)

    sites_table = table("sites")
    sites, site_file, sites_source = _load_sites(sites_table, path, source, lineage, gpus)

    trace_table = table("trace")
    trace = load_trace_files(trace_table, path, sites)

    workload = load_workload(table("workload"))
    network, hub_index = load_network(table("network"), sites, sites_table)
    sites_table.finish()
    episode = load_episode(table("episode", {}), trace_table)
    trace_table.finish()
    learner = load_learner_config(table("learner", {}))
    unknowns = load_unknowns(table("unknowns", {}), workload)
    moving = load_moving(table("moving", {}), workload)
    top.finish()
    data_files = [
        gpu_file,
        site_file,
        trace.file,
        trace.pv_file,
        trace.pv_forecast_file,
        trace.carbon_file,
    ]
    inputs = dict.fromkeys([*tomls, *(f for f in data_files if f is not None)])
    return Scenario(
        name=name,
        description=description,
        source=source,
        sites=tuple(sites),
        gpus=gpus,
        workload=workload,
        network=network,
        episode=episode,
        trace=trace,
        hub_index=hub_index,
        inputs=tuple(inputs),
        sites_source=sites_source,
        learner=learner,
        unknowns=unknowns,
        moving=moving,
    )


def _load_sites(
    sites_table: Table, path: Path, source: str, lineage: Lineage, gpus: Any
) -> tuple[list[Any], Path, str]:
    """The ``[sites]`` table: a catalogue CSV or inline ``[[sites.site]]`` tables, with their
    ``data_shares`` applied and checked against the GPUs; (sites, the file that last set them,
    the file that lists them)."""
    if sites_table.has("catalogue") == sites_table.has("site"):
        raise ScenarioError(
            f"{source}: [sites] must have exactly one of 'catalogue' (a CSV file) or "
            "[[sites.site]] tables"
        )
    if sites_table.has("catalogue"):
        site_file = resolve_file(
            sites_table.string("catalogue"), path, f"{source}: [sites] field 'catalogue'"
        )
        sites = sites_from_csv(site_file)
        share_field = f"{site_file}: field 'data_share'"
    else:
        site_file = path
        # Inline sites taken from a base are reported where they are written.
        written_in = lineage.inherited.get(("sites", "site"), source)
        sites = sites_from_toml(sites_table.raw("site"), written_in)
        share_field = f"{written_in}: field 'data_share'"
    sites_source = str(site_file)
    shares = sites_table.raw("data_shares", None)
    if shares is not None:
        if (
            not isinstance(shares, list)
            or len(shares) != len(sites)
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in shares)
        ):
            raise ScenarioError(
                f"{sites_table._where('data_shares')} = {shares!r}: must be a list of "
                f"{len(sites)} numbers (one per site, in site order) summing to 1"
            )
        sites = [
            make_site({**vars(s), "data_share": float(v)}, f"{source}: [sites] data_shares")
            for s, v in zip(sites, shares, strict=True)
        ]
        site_file = path
        share_field = f"{sites_table._where('data_shares')} = {shares!r} (field 'data_share')"
    sites = normalised_shares(sites, share_field)
    check_sites(sites, gpus, str(site_file), source)
    return sites, site_file, sites_source
