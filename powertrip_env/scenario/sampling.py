"""Site catalogues drawn per episode, for agents that must work on sites they never saw.

An operator's sites are not the shipped catalogue. ``SiteSampler`` draws a new catalogue for
every episode, on a base scenario's job, network model and power data: how many sites, at which
cities, with which GPUs and how many, how much grid headroom and on-site solar, and which power
domain of the grid trace each one draws on. ``PowerTrip-Random-v0`` is the flagship's job and
real power data under the default sampler; ``gym.make(ID, sites=SiteSampler(...))`` uses other
ranges (docs/scenarios.md, "Random site catalogues", documents each range and where it comes
from).

Every draw comes from the generator ``reset(seed=...)`` seeds, so a seed gives the same
catalogue and the same episode.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from powertrip_env.scenario.catalogues import load_site_catalogue
from powertrip_env.scenario.paths import data_dir
from powertrip_env.scenario.power_data import load_trace
from powertrip_env.scenario.types import Scenario, Site
from powertrip_env.units import w_to_kw

# docs/data.md, "sites_solar.csv": the Google PDUs' typical spare capacity, and the share of PV
# peak a site's solar delivers when it powers the rest of the GPUs.
TYPICAL_SPARE = 0.28
PV_DESIGN_SHARE = 0.75


@dataclass(frozen=True)
class SiteSampler:
    """Ranges a site catalogue is drawn from; every range is inclusive.

    The defaults span the flagship's catalogue (docs/data.md, "sites_solar.csv") and go beyond
    it: one to sixteen sites, two sites may share a city, any of the six datacenter GPU types in
    whole 8-GPU servers, grid shares from the flagship's solar-first sites to mostly-grid ones,
    and a share of sites without solar at all.

    Attributes:
        n_sites: (fewest, most) sites per episode, drawn uniformly.
        cities: the site catalogue whose locations (name, region, coordinates, UTC offset and
            PV column) the sites are drawn from, with replacement; a file in the shipped data
            or a path.
        gpus: GPU types, drawn uniformly; names of the base scenario's GPU catalogue.
        servers: (fewest, most) 8-GPU servers per site, drawn uniformly.
        pue: (lowest, highest) power usage effectiveness, drawn uniformly.
        wan_gbps: WAN bandwidths a site may have, drawn uniformly.
        grid_share: (lowest, highest) share ``f`` of the site's GPUs its grid headroom powers
            at the typical spare capacity, for a site with solar (docs/data.md's rule).
        grid_only_share: the same range for a site without solar.
        pv_probability: chance that a site at a city with PV data has on-site solar.
    """

    n_sites: tuple[int, int] = (1, 16)
    cities: str = "sites_solar.csv"
    gpus: tuple[str, ...] = ("V100", "A100", "H100", "H200", "MI250X", "MI300X")
    servers: tuple[int, int] = (1, 8)
    pue: tuple[float, float] = (1.1, 1.5)
    wan_gbps: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)  # INTELLECT-1 measured 0.5-4 Gb/s
    grid_share: tuple[float, float] = (0.03, 0.8)
    grid_only_share: tuple[float, float] = (0.3, 1.0)
    pv_probability: float = 0.8

    def __post_init__(self) -> None:
        def pair(name: str, lo_allowed: float, hi_allowed: float, kind: type) -> None:
            value = getattr(self, name)
            ok = (
                isinstance(value, tuple)
                and len(value) == 2
                and all(isinstance(v, kind) and not isinstance(v, bool) for v in value)
                and lo_allowed <= value[0] <= value[1] <= hi_allowed
            )
            if not ok:
                what = "whole numbers" if kind is int else "numbers"
                raise ValueError(
                    f"SiteSampler field {name!r} = {value!r}: give a tuple (low, high) of {what} "
                    f"with {lo_allowed:g} <= low <= high <= {hi_allowed:g}"
                )

        pair("n_sites", 1, 1024, int)
        pair("servers", 1, 10_000, int)
        pair("pue", 1.0, 3.0, int | float)
        pair("grid_share", 0.0, 10.0, int | float)
        pair("grid_only_share", 0.0, 10.0, int | float)
        if not self.gpus or not all(isinstance(g, str) for g in self.gpus):
            raise ValueError(f"SiteSampler field 'gpus' = {self.gpus!r}: give GPU type names")
        if not self.wan_gbps or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in self.wan_gbps
        ):
            raise ValueError(
                f"SiteSampler field 'wan_gbps' = {self.wan_gbps!r}: give positive bandwidths "
                "in Gbit/s"
            )
        if not 0.0 <= self.pv_probability <= 1.0:
            raise ValueError(
                f"SiteSampler field 'pv_probability' = {self.pv_probability!r}: give a "
                "probability in [0, 1]"
            )

    @property
    def max_sites(self) -> int:
        """The most sites an episode can have: the smallest ``max_sites`` an env can pad to."""
        return self.n_sites[1]

    def check(self, base: Scenario) -> None:
        """Refuse ranges the base scenario cannot serve, naming what is missing."""
        unknown = [g for g in self.gpus if g not in base.gpus]
        if unknown:
            raise ValueError(
                f"SiteSampler field 'gpus': {unknown} are not in the GPU catalogue of "
                f"{base.source}; allowed: {', '.join(base.gpus)}"
            )
        if base.trace.carbon_file is not None:
            raise ValueError(
                f"SiteSampler: {base.source} charges its sites' grid energy with a carbon "
                "intensity file ([trace] carbon_file), and the drawn cities "
                f"({self.cities}) name no carbon_zone; draw sites on a scenario without one"
            )
        self._pool()
        # Drawn sites read the raw traces (a portable scenario carries only its own sites'
        # power): a missing file fails here, when the env is made, not at its first reset.
        load_trace(base.trace.file)
        if base.trace.pv_file is not None:
            load_trace(base.trace.pv_file)

    def _pool(self) -> tuple[Site, ...]:
        path = Path(self.cities)
        if not path.is_absolute() and not path.is_file():
            path = data_dir() / path  # a shipped catalogue, by file name
        if not path.is_file():
            raise ValueError(
                f"SiteSampler field 'cities' = {self.cities!r}: no such site catalogue (looked "
                f"in the working directory and in {data_dir()})"
            )
        return _city_pool(str(path))

    def draw(self, base: Scenario, rng: np.random.Generator) -> Scenario:
        """A scenario with ``base``'s job, network model and power data and drawn sites.

        The hub (where the outer optimiser runs) is one of the drawn sites, uniformly.
        """
        pool = self._pool()
        grid_columns = load_trace(base.trace.file).columns
        with_pv = base.trace.pv_file is not None
        overhead = base.episode.server_overhead
        n = int(rng.integers(self.n_sites[0], self.n_sites[1] + 1))
        sites = []
        for k in range(n):
            city = pool[int(rng.integers(len(pool)))]
            gpu = self.gpus[int(rng.integers(len(self.gpus)))]
            count = 8 * int(rng.integers(self.servers[0], self.servers[1] + 1))
            pue = float(rng.uniform(*self.pue))
            wall_kw = w_to_kw(count * base.gpus[gpu].power_w * overhead * pue)
            solar = with_pv and bool(city.pv_column) and rng.random() < self.pv_probability
            share = float(rng.uniform(*(self.grid_share if solar else self.grid_only_share)))
            sites.append(
                dataclasses.replace(
                    city,
                    name=f"{city.name}-{k + 1}",
                    gpu=gpu,
                    gpu_count=count,
                    capacity_kw=round(share * wall_kw / TYPICAL_SPARE, 1),
                    pue=round(pue, 2),
                    wan_gbps=float(self.wan_gbps[int(rng.integers(len(self.wan_gbps)))]),
                    data_share=1.0 / n,
                    trace_column=grid_columns[int(rng.integers(len(grid_columns)))],
                    pv_kw=round((1.0 - min(share, 1.0)) * wall_kw / PV_DESIGN_SHARE, 1)
                    if solar
                    else 0.0,
                    pv_column=city.pv_column if solar else "",
                )
            )
        hub = int(rng.integers(n))
        network = dataclasses.replace(
            base.network,
            hub=sites[hub].name,
            hub_latitude=sites[hub].latitude,
            hub_longitude=sites[hub].longitude,
            rtt_to_hub_ms=None,
        )
        return dataclasses.replace(
            base,
            name=f"{base.name}+random-sites",
            description=f"{base.description}; {n} sites drawn by SiteSampler",
            sites=tuple(sites),
            network=network,
            hub_index=hub,
            sites_source=f"SiteSampler over {self.cities}",
        )


def as_sampler(sites: str | SiteSampler | None) -> SiteSampler | None:
    """The ``sites`` argument of the envs: None (the scenario's sites), ``"random"`` (the
    default ``SiteSampler``) or a ``SiteSampler``."""
    if sites is None:
        return None
    if sites == "random":
        return SiteSampler()
    if not isinstance(sites, SiteSampler):
        raise ValueError(
            f"sites={sites!r}: give None (the scenario's own sites), 'random' or a "
            "powertrip_env.scenario.sampling.SiteSampler"
        )
    return sites


_POOLS: dict[str, tuple[Site, ...]] = {}


def _city_pool(path: str) -> tuple[Site, ...]:
    if path not in _POOLS:
        _POOLS[path] = tuple(load_site_catalogue(path))
    return _POOLS[path]
