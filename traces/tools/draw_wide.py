"""Draw ``traces/sites_wide.csv``: the ``wide`` scenario's 24 sites at the flagship's cities.

The flagship (``default``) runs on ten hand-written sites, one per Solcast city. The ``wide``
scenario runs the same job on the same real power data (Google's PDUs, replayed in each site's
local time, and the cities' Solcast PV) on more sites than ``MyopicOptimal``'s exhaustive search
can take (N > 16). Its catalogue is one draw of ``powertrip_env.scenario.sampling.SiteSampler``
over the flagship's cities (``sites_solar.csv``, drawn with replacement, so sites may share a
city): GPU type, PUE, WAN bandwidth and each site's Google PDU from the sampler's default ranges
(docs/scenarios.md, "Random site catalogues", gives each range and where it comes from), and
three ranges narrowed inside the defaults so that the sites look like the flagship's:

* ``SERVERS``: 1-4 servers of 8 GPUs (default 1-8). 24 sites of 8-64 GPUs hold about 1,000
  GPUs, three times the flagship's 352, and reach the target in about 7 h, before the sun has
  moved far; at 8-32 GPUs they hold about 1.5 times as many and the job lasts about a day, as
  the flagship's does.
* ``GRID_SHARE``: 0.03-0.4 (default 0.03-0.8): the flagship's solar-first sites (its ``f``,
  docs/data.md, "sites_solar.csv", is 0.03-0.45 at every site but São Paulo's 0.8).
* ``PV_PROBABILITY``: 1 (default 0.8): every flagship site has on-site solar.

The draw comes from ``numpy.random.default_rng(SEED)`` on the flagship scenario, so
``python -m traces.tools.draw_wide`` rewrites the shipped file byte for byte. The data shares are
1/N written with 6 decimals, the last row absorbing the rounding (traces/README.md). The hub the
sampler drew is printed; ``powertrip_env/scenario/shipped/wide.toml`` names it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from powertrip_env import load_scenario
from powertrip_env.atomic import write_text
from powertrip_env.scenario.catalogues import load_site_catalogue
from powertrip_env.scenario.sampling import SiteSampler
from powertrip_env.scenario.types import Scenario, Site

HERE = Path(__file__).resolve().parents[1]  # traces/, where the data lives
DEFAULT_OUT = HERE / "sites_wide.csv"
BASE = "default"  # the flagship: its GPU catalogue, grid trace and PV data
CITIES = "sites_solar.csv"  # the flagship's ten cities
SEED = 24
N_SITES = 24
SERVERS = (1, 4)
GRID_SHARE = (0.03, 0.4)
PV_PROBABILITY = 1.0
# The columns of sites_solar.csv, in its order.
COLUMNS = (
    "name", "region", "latitude", "longitude", "gpu", "gpu_count", "capacity_kw", "pue",
    "wan_gbps", "data_share", "trace_column", "pv_kw", "pv_column", "utc_offset_h",
)  # fmt: skip


def draw(seed: int = SEED, n_sites: int = N_SITES) -> Scenario:
    """The flagship scenario with ``n_sites`` sites drawn by ``SiteSampler`` (module docstring)."""
    base = load_scenario(BASE)
    sampler = SiteSampler(
        n_sites=(n_sites, n_sites),
        cities=CITIES,
        servers=SERVERS,
        grid_share=GRID_SHARE,
        pv_probability=PV_PROBABILITY,
    )
    sampler.check(base)
    return sampler.draw(base, np.random.default_rng(seed))


def shares(n: int) -> list[str]:
    """1/n with 6 decimals for every site; the last one absorbs the rounding."""
    each = round(1.0 / n, 6)
    return [f"{each:.6f}"] * (n - 1) + [f"{1.0 - each * (n - 1):.6f}"]


def row(site: Site, share: str) -> list[str]:
    """One catalogue row, formatted as sites_solar.csv writes it."""
    return [
        site.name,
        site.region,
        f"{site.latitude:.4f}",
        f"{site.longitude:.4f}",
        site.gpu,
        str(site.gpu_count),
        f"{site.capacity_kw:g}",
        f"{site.pue:.2f}",
        f"{site.wan_gbps:g}",
        share,
        site.trace_column,
        f"{site.pv_kw:g}",
        site.pv_column,
        f"{site.utc_offset_h:g}",
    ]


def to_csv(scenario: Scenario) -> str:
    """The catalogue text: a header and one line per site (no cell holds a comma)."""
    sites = scenario.sites
    lines = [",".join(COLUMNS)]
    lines += [",".join(row(s, x)) for s, x in zip(sites, shares(len(sites)), strict=True)]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the catalogue (default: the shipped file) and check it loads."""
    parser = argparse.ArgumentParser(
        description="Draw the wide scenario's site catalogue (traces/sites_wide.csv)."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output CSV path")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    parser.add_argument(
        "--sites", type=int, default=N_SITES, help=f"number of sites (default {N_SITES})"
    )
    args = parser.parse_args(argv)
    try:
        scenario = draw(args.seed, args.sites)
        write_text(args.out, to_csv(scenario))
        sites = load_site_catalogue(args.out)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cities = len({s.name.rsplit("-", 1)[0] for s in sites})
    print(
        f"wrote {args.out} ({len(sites)} sites at {cities} cities, seed {args.seed}); "
        f"the sampler's hub: {scenario.network.hub}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
