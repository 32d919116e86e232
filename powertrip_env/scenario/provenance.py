"""Which power data is real: the data folder's own record, read where it is written.

``traces/README.md`` (installed beside the data as ``powertrip_env/_data/README.md``) lists
every data file in its "Files" table and marks each power trace **real** or **synthetic**. That
table is the one place the fact is written; ``provenance`` reads it, and ``power_trace`` reads
which grid trace a scenario runs on from its TOML (after ``extends``), so that what the
environment's documentation says runs on real data follows the data and the registrations, not
a sentence someone has to remember to change (``power_data_sentence``).
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from powertrip_env.scenario.extends import apply_extends, read_toml
from powertrip_env.scenario.paths import data_dir, scenario_path

REAL, SYNTHETIC = "real", "synthetic"
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*\*\*(real|synthetic)\*\*", re.MULTILINE)

REAL_DATA = (
    "Google's 2019 PDU spare capacity in each site's local time plus Solcast 2022 solar output, "
    "with real solar forecasts"
)
"""What the real power data is (``traces/README.md``): every ID on it runs on all of it."""


@functools.cache
def provenance() -> dict[str, str]:
    """Data file name -> ``REAL`` or ``SYNTHETIC``, as the data folder's README marks it (empty
    if the README is missing, so that nothing is called real unread)."""
    try:
        text = (data_dir() / "README.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    return dict(_ROW.findall(text))


@functools.cache
def power_trace(scenario: str) -> str:
    """The file name of the grid power trace that the shipped or TOML ``scenario`` runs on,
    read from its TOML after ``extends`` (no data is loaded)."""
    path = scenario_path(scenario)
    doc, _ = apply_extends(read_toml(path, str(path)), path, str(path), (str(path),), [])
    return Path(doc["trace"]["file"]).name


def power_data_sentence(registered: Sequence[tuple[str, str]], width: int = 92) -> str:
    """Which of the ``registered`` IDs (pairs of an ID and its scenario) run on real power data
    and which on a synthetic trace, as the data folder's README marks their grid traces; an ID
    whose trace it does not mark is in neither list. Wrapped to ``width``."""
    marked = provenance()
    kinds: dict[str, list[str]] = {REAL: [], SYNTHETIC: []}
    for env_id, scenario in registered:
        kind = marked.get(power_trace(scenario))
        if kind in kinds:
            kinds[kind].append(env_id)
    parts = []
    if kinds[REAL]:
        parts.append(f"{_listed(kinds[REAL])} {_run(kinds[REAL])} on real data: {REAL_DATA}")
    if kinds[SYNTHETIC]:
        parts.append(f"{_listed(kinds[SYNTHETIC])} {_run(kinds[SYNTHETIC])} on a synthetic trace")
    if not parts:
        return ""
    text = "; ".join(parts) + " (traces/README.md says which data is real)."
    return textwrap.fill(text, width, break_on_hyphens=False)


def _listed(ids: Sequence[str]) -> str:
    named = [f"`{env_id}`" for env_id in ids]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _run(ids: Sequence[str]) -> str:
    return "runs" if len(ids) == 1 else "run"
