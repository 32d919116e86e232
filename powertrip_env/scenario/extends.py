"""Reading a scenario's TOML, and ``extends``: a scenario that starts from another and overrides
it table by table.

``TIED_FIELDS`` says which of a base's fields describe what a scenario replaces (and so are not
inherited); ``Lineage`` records where every merged field came from, for messages.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from powertrip_env.errors import ScenarioError
from powertrip_env.scenario.paths import resolve_file, scenario_names, scenario_path


def read_toml(path: Path, source: str) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read scenario: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from None


_FILE_KEYS = ("catalogue", "file", "pv_file", "pv_forecast_file", "carbon_file")

_SPLIT_DAYS = (("trace", "train_days"), ("trace", "test_days"))
_SITE_LISTS = (("sites", "hub"), ("sites", "data_shares"), ("network", "rtt_to_hub_ms"))
# the carbon intensity names the base's sites' zones and covers the base's calendar
_CARBON = (("trace", "carbon_file"), ("trace", "carbon_kind"))
# What a scenario's fields describe, as (table, field): ``extends`` inherits a base's field on
# the right only together with the field on the left. A scenario that writes a field on the left
# itself gets none of the base's fields on the right (it keeps the ones it writes), because they
# describe a file, sites or hub that are no longer its own, and TOML cannot unset a field: the
# time zone of the flagship's Google trace, inherited by a user's trace that replaced it, refused
# every site without one. Writing the base's own value again counts as writing it: restating
# [trace] file takes the base's trace without its time zone and shift. docs/scenarios.md
# ("Starting from a shipped scenario") lists the same table.
TIED_FIELDS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    # The grid trace: its time zone and shift, the PV data laid on its calendar, and the day
    # split counted on that calendar.
    ("trace", "file"): (
        ("trace", "utc_offset_h"),
        ("trace", "shift_days"),
        ("trace", "pv_file"),
        ("trace", "pv_forecast_file"),
        *_SPLIT_DAYS,
        *_CARBON,
    ),
    # The PV trace: its forecasts; and the calendar (where every file has data) moves with it.
    ("trace", "pv_file"): (("trace", "pv_forecast_file"), *_SPLIT_DAYS),
    ("trace", "pv_forecast_file"): _SPLIT_DAYS,
    # The sites: the hub names one of them; data_shares and rtt_to_hub_ms are in their order.
    ("sites", "catalogue"): (("sites", "site"), *_SITE_LISTS, *_CARBON),
    ("sites", "site"): (("sites", "catalogue"), *_SITE_LISTS, *_CARBON),
    # The hub: rtt_to_hub_ms are round trips to it.
    ("sites", "hub"): (("network", "rtt_to_hub_ms"),),
}


@dataclass
class Lineage:
    """Where the fields of a scenario merged through ``extends`` came from, for messages.

    A value the user never wrote, or one they expected but did not get, is confusing in an
    error unless the message says which base wrote it or why it was left out.
    """

    inherited: dict[tuple[str, str], str] = field(default_factory=dict)  # -> the base file
    dropped: dict[tuple[str, str], str] = field(default_factory=dict)  # -> why, as a clause


def _shown(value: Any) -> str:
    """A base's value as a message shows it: inline sites by their count, not in full."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"[{len(value)} site table(s)]"
    return repr(value)


def _base_path(base_name: Any, path: Path, source: str, what: str) -> Path:
    """The scenario file ``base_name`` (a shipped name, or a path relative to ``path``'s folder)
    names, or a ``ScenarioError`` naming ``what`` wrote it and what is allowed."""
    if not isinstance(base_name, str):
        raise ScenarioError(f"{source}: {what} = {base_name!r}: must be a scenario name")
    names = scenario_names()
    if base_name not in names:
        # A name that is neither shipped nor an existing file is most likely a misspelt
        # scenario name; scenario_path would report a path the user never wrote.
        candidate = path.parent / os.path.expanduser(base_name)
        if not candidate.is_file():
            close = difflib.get_close_matches(Path(base_name).stem, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ScenarioError(
                f"{source}: {what} = {base_name!r}: not a shipped scenario and no such "
                f"file ({candidate} not found); allowed: one of {names} or the path of a "
                f"scenario .toml file, relative to {path.parent}{hint}"
            )
        base_name = str(candidate)
    return scenario_path(base_name)


def _table_extends(
    doc: dict[str, Any],
    path: Path,
    source: str,
    seen: tuple[str, ...],
    read: list[Path],
) -> dict[tuple[str, str], str]:
    """``[table] extends = "measured"``: one table of another scenario, as that scenario
    resolves it, under this file's own fields of the table. It writes a table shared by
    scenarios with different bases once (the measured tasks' ``[unknowns]`` spreads); the
    table's fields then count as this file's own, so they also replace its base's. Returns
    where each taken field came from (``Lineage.inherited``'s entries)."""
    taken: dict[tuple[str, str], str] = {}
    for table, own in list(doc.items()):
        if not isinstance(own, dict) or "extends" not in own:
            continue
        what = f"[{table}] field 'extends'"
        other_path = _base_path(own.pop("extends"), path, source, what)
        if str(other_path) in seen:
            raise ScenarioError(f"{source}: {what} forms a cycle through {other_path}")
        other = read_toml(other_path, str(other_path))
        read.append(other_path)
        other, other_root = apply_extends(
            other, other_path, str(other_path), (*seen, str(other_path)), read, Lineage()
        )
        shared = other.get(table)
        if not isinstance(shared, dict):
            raise ScenarioError(
                f"{source}: {what} = {other_path.stem!r}: {other_path} has no [{table}] table "
                "to take"
            )
        shared = dict(shared)
        for key in _FILE_KEYS:  # the other file's data files stay findable
            if key in shared and key not in own:
                where = f"{other_path}: [{table}] field {key!r}"
                shared[key] = str(resolve_file(shared[key], other_root, where))
        taken |= {(table, key): str(other_path) for key in shared if key not in own}
        doc[table] = {**shared, **own}
    return taken


def apply_extends(
    doc: dict[str, Any],
    path: Path,
    source: str,
    seen: tuple[str, ...],
    read: list[Path],
    lineage: Lineage | None = None,
) -> tuple[dict[str, Any], Path]:
    """``extends = "default"`` starts from another scenario and overrides it table by table.

    Fields of a table in this file replace the same fields of the base; relative data files
    keep resolving against the file that names them. A table may take another scenario's table
    first (``[unknowns] extends = "measured"``, ``_table_extends``). The base's fields that
    describe what this file replaces (``TIED_FIELDS``) are left out. Returns the merged
    document and the path that relative names in it resolve against; ``lineage`` records where
    the fields came from.
    """
    lineage = lineage if lineage is not None else Lineage()
    taken = _table_extends(doc, path, source, seen, read)
    base_name = doc.pop("extends", None)
    if base_name is None:
        lineage.inherited.update(taken)
        return doc, path
    base_path = _base_path(base_name, path, source, "field 'extends'")
    if str(base_path) in seen:
        raise ScenarioError(f"{source}: 'extends' forms a cycle through {base_path}")
    base_doc = read_toml(base_path, str(base_path))
    read.append(base_path)
    base_doc, base_root = apply_extends(
        base_doc, base_path, str(base_path), (*seen, str(base_path)), read, lineage
    )

    def writes(table: str, key: str) -> bool:
        own = doc.get(table)
        return isinstance(own, dict) and key in own

    base = {t: dict(v) if isinstance(v, dict) else v for t, v in base_doc.items()}
    for (table, key), tied in TIED_FIELDS.items():
        if not writes(table, key):
            continue
        for t, k in tied:
            if writes(t, k) or not isinstance(base.get(t), dict) or k not in base[t]:
                continue
            value = base[t].pop(k)
            origin = lineage.inherited.pop((t, k), str(base_path))
            own = "[[sites.site]]" if (table, key) == ("sites", "site") else f"[{table}] {key}"
            lineage.dropped[(t, k)] = (
                f" (the base's [{t}] {k} = {_shown(value)} in {origin} is not inherited through "
                f"'extends': it describes what {source} replaces with its own {own})"
            )
    for t, k in [*lineage.inherited, *lineage.dropped]:
        if writes(t, k):  # this file's own value stands
            lineage.inherited.pop((t, k), None)
            lineage.dropped.pop((t, k), None)
    for table, value in base.items():
        if isinstance(value, dict):
            for key in _FILE_KEYS:  # keep the base's data files findable
                if key in value and not writes(table, key):
                    where = f"{base_path}: [{table}] field {key!r}"
                    value[key] = str(resolve_file(value[key], base_root, where))
            for key in value:
                if not writes(table, key):
                    lineage.inherited.setdefault((table, key), str(base_path))
        if table in doc and isinstance(doc[table], dict) and isinstance(value, dict):
            doc[table] = {**value, **doc[table]}
        elif table not in doc and table not in ("name", "description"):
            doc[table] = value
    lineage.inherited.update(taken)  # a table's fields taken from another file name it
    return doc, path
