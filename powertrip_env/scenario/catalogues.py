"""The CSV catalogues a scenario reads (``gpus.csv``, ``sites_*.csv``) and inline sites.

Sites and GPUs may come from CSV catalogues (``traces/sites_*.csv``, ``traces/gpus.csv``) or be
written inline as ``[[sites.site]]`` tables, so a user's scenario can be one self-contained
file; both go through the same checks.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

from powertrip_env.errors import ScenarioError
from powertrip_env.scenario.fields import Table, check_range
from powertrip_env.scenario.types import GpuType, Site


def _read_csv_rows(path: Path, required: tuple[str, ...], what: str) -> list[dict[str, str]]:
    """Rows of a catalogue as dicts of stripped cells.

    Catalogues are often edited in spreadsheets: Excel's "CSV UTF-8" starts the file with a
    byte-order mark (``utf-8-sig`` drops it), and hand-written headers such as ``name, region``
    carry spaces after the commas. Both would otherwise hide a column that is plainly there.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            rows = [
                {k: v.strip() if isinstance(v, str) else v for k, v in row.items()}
                for row in reader
            ]
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ScenarioError(f"{path}: {what} is not a readable CSV file: {exc}") from None
    if not rows:
        raise ScenarioError(f"{path}: {what} is empty; expected a header and at least one row")
    missing = [c for c in required if c not in header]
    if missing:
        raise ScenarioError(
            f"{path}: {what} is missing column(s) {missing}; required: {list(required)}; "
            f"the header has {header}"
        )
    return rows


def _csv_value(path: Path, row_no: int, column: str, text: str | None, kind: type) -> Any:
    where = f"{path}: row {row_no}, column {column!r}"
    if text is None or text.strip() == "":
        raise ScenarioError(f"{where} is empty; a {kind.__name__} is required")
    try:
        value = kind(text)
    except ValueError:
        raise ScenarioError(f"{where} = {text!r}: must be a {kind.__name__}") from None
    if kind is float and not math.isfinite(value):
        raise ScenarioError(f"{where} = {text!r}: must be finite")
    return value


_GPU_COLUMNS = ("name", "tflops_bf16", "power_w", "memory_gb")


def load_gpu_catalogue(path: Path) -> dict[str, GpuType]:
    """Read ``gpus.csv``: the accelerator models a site may name."""
    rows = _read_csv_rows(path, _GPU_COLUMNS, "GPU catalogue")
    gpus: dict[str, GpuType] = {}
    for i, row in enumerate(rows, start=2):  # row 1 is the header
        name = (row["name"] or "").strip()
        if not name:
            raise ScenarioError(f"{path}: row {i}, column 'name' is empty")
        if name in gpus:
            raise ScenarioError(f"{path}: row {i}, column 'name' = {name!r} appears twice")
        values = {c: _csv_value(path, i, c, row[c], float) for c in _GPU_COLUMNS[1:]}
        for column, value in values.items():
            if value <= 0:
                raise ScenarioError(f"{path}: row {i}, column {column!r} = {value!r}: must be > 0")
        gpus[name] = GpuType(name=name, **values)
    return gpus


REQUIRED_SITE_FIELDS = (
    "name", "region", "latitude", "longitude", "gpu", "gpu_count", "capacity_kw", "pue",
    "wan_gbps", "data_share", "trace_column",
)  # fmt: skip
SITE_KINDS: dict[str, type] = {
    "name": str,
    "region": str,
    "latitude": float,
    "longitude": float,
    "gpu": str,
    "gpu_count": int,
    "capacity_kw": float,
    "pue": float,
    "wan_gbps": float,
    "data_share": float,
    "trace_column": str,
}
_SITE_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "latitude": (-90.0, 90.0, False),
    "longitude": (-180.0, 180.0, False),
    "gpu_count": (1, None, False),
    "capacity_kw": (0.0, None, True),
    "pue": (1.0, 3.0, False),
    "wan_gbps": (0.0, None, True),
    "data_share": (0.0, 1.0, False),
    "pv_kw": (0.0, None, False),
    "utc_offset_h": (-12.0, 14.0, False),
}
# Columns a catalogue may leave out, with their defaults (None: not given).
OPTIONAL_SITE_FIELDS: dict[str, tuple[type, Any]] = {
    "pv_kw": (float, 0.0),
    "pv_column": (str, ""),
    "utc_offset_h": (float, None),
    "carbon_zone": (str, ""),
}


def make_site(values: dict[str, Any], where: str) -> Site:
    for key, (lo, hi, lo_open) in _SITE_RANGES.items():
        if values.get(key) is not None:
            check_range(f"{where}, field {key!r}", float(values[key]), lo, hi, lo_open)
    for key in ("name", "region", "gpu", "trace_column"):
        if not values[key]:
            raise ScenarioError(f"{where}, field {key!r} is empty")
    if values.get("pv_kw", 0.0) > 0 and not values.get("pv_column"):
        raise ScenarioError(
            f"{where}, field 'pv_kw' = {values['pv_kw']!r}: a site with on-site solar needs "
            "'pv_column', the column of the PV trace ([trace] pv_file) that drives it"
        )
    return Site(**values)


def load_site_catalogue(path: str | os.PathLike[str]) -> list[Site]:
    """The validated sites of a site-catalogue CSV (traces/README.md documents the columns)."""
    return sites_from_csv(Path(path))


def sites_from_csv(path: Path) -> list[Site]:
    rows = _read_csv_rows(path, REQUIRED_SITE_FIELDS, "site catalogue")
    sites = []
    for i, row in enumerate(rows, start=2):
        values = {}
        for column in REQUIRED_SITE_FIELDS:
            kind = SITE_KINDS[column]
            if kind is str:
                values[column] = (row[column] or "").strip()
            else:
                values[column] = _csv_value(path, i, column, row[column], kind)
        for column, (kind, default) in OPTIONAL_SITE_FIELDS.items():
            text = (row.get(column) or "").strip()
            if not text:
                values[column] = default
            elif kind is str:
                values[column] = text
            else:
                values[column] = _csv_value(path, i, column, text, kind)
        sites.append(make_site(values, f"{path}: row {i}"))
    return sites


def sites_from_toml(entries: Any, source: str) -> list[Site]:
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(
            f"{source}: [[sites.site]] must be a non-empty array of tables, got {entries!r}"
        )
    sites = []
    for i, entry in enumerate(entries):
        table = Table(entry, source, f"sites.site #{i + 1}")
        values: dict[str, Any] = {}
        for key in REQUIRED_SITE_FIELDS:
            kind = SITE_KINDS[key]
            if kind is str:
                values[key] = table.string(key)
            elif kind is int:
                values[key] = table.integer(key, lo=1)
            else:
                values[key] = table.number(key)
        for key, (kind, default) in OPTIONAL_SITE_FIELDS.items():
            if not table.has(key) or (key == "carbon_zone" and table.raw(key) == ""):
                values[key] = default  # a site may say it has no zone
            elif kind is str:
                values[key] = table.string(key)
            else:
                values[key] = table.number(key)
        table.finish()
        sites.append(make_site(values, f"{source}: [sites.site #{i + 1}]"))
    return sites
