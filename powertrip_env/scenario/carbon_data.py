"""Load and validate hourly grid carbon intensity (``traces/carbon_intensity_2022.csv``).

A carbon file is a CSV with a ``timestamp`` column (ISO-8601, the start of each interval on a
regular grid, as in every trace; naive times are UTC) and, for each grid zone, two columns in
gCO₂eq/kWh: ``<zone>_direct`` (the emissions of burning the fuel) and ``<zone>_lca`` (life-cycle:
also building the plants and extracting the fuel). ``traces/tools/convert_carbon.py`` writes it
from Electricity Maps' data (docs/data.md, "Carbon intensity").

Why it is a loader of its own, strict and cached like ``power_data``: carbon intensity is not a
fraction of capacity, so the power traces' [0, 1] check does not fit it, and a carbon-aware task
needs it per zone, not per site. It reads through ``power_data``'s reader (``GridCsv``: the
header, timestamp and grid checks), cache (``load_cached``) and column lookup
(``find_columns``), so a bad file fails at load time with a ``TraceError`` that names the file,
the line (line 1 is the header), the column and the value, and says what is allowed; and every
env in a process shares one read-only copy.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from powertrip_env.errors import TraceError
from powertrip_env.scenario.power_data import (
    TIMESTAMP,
    GridCsv,
    find_columns,
    iso_utc,
    load_cached,
)
from powertrip_env.units import s_to_h

__all__ = ["CarbonIntensity", "check_covers", "load_carbon"]

DIRECT = "_direct"
LCA = "_lca"
_ALLOWED = "a carbon intensity in gCO₂eq/kWh, a finite number >= 0"


@dataclass(frozen=True, eq=False)
class CarbonIntensity:
    """Hourly carbon intensity per zone: (T,) start times and (T, Z) direct and LCA values.

    The arrays are read-only because one instance is shared by every env in the process;
    instances compare by identity, as ``PowerTrace`` does.
    """

    path: str
    zones: tuple[str, ...]
    timestamps_s: np.ndarray  # (T,) float64 Unix seconds UTC, start of each interval
    step_s: int
    direct: np.ndarray  # (T, Z) gCO2eq/kWh
    lca: np.ndarray  # (T, Z) gCO2eq/kWh

    @property
    def n_rows(self) -> int:
        """Number of intervals (rows)."""
        return int(self.direct.shape[0])

    @property
    def end_s(self) -> float:
        """When the last interval ends: the file covers ``[timestamps_s[0], end_s)``."""
        return float(self.timestamps_s[-1]) + self.step_s

    @property
    def columns(self) -> tuple[str, ...]:
        """The zones, as ``PowerTrace.column_indices`` reads a file's columns."""
        return self.zones

    def zone_indices(self, names: Sequence[str], *, source: str = "") -> np.ndarray:
        """Column indices of the zones ``names`` (int64, in the order given), as
        `PowerTrace.column_indices` finds a trace's columns.

        ``source`` says who asked (a scenario and site), so that a zone the file does not hold is
        reported where it was named, with the zones it does hold.
        """
        return find_columns(
            self.zones, names, lambda name: self._missing_column_message(name, source)
        )

    def _missing_column_message(self, name: str, source: str) -> str:
        prefix = f"{source}: " if source else ""
        close = difflib.get_close_matches(name, self.zones, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        return (
            f"{prefix}zone {name!r} not found in carbon intensity file {self.path}.{hint} "
            f"Zones available ({len(self.zones)}): {', '.join(self.zones)}"
        )


def load_carbon(path: str | Path) -> CarbonIntensity:
    """Load, validate and cache a carbon intensity file; raise ``TraceError`` on any problem.

    Cached like ``power_data.load_trace``: by resolved path, modification time and size.
    """
    return load_cached(path, "carbon intensity", _read_carbon)


def check_covers(carbon: CarbonIntensity, start_s: float, end_s: float, source: str) -> None:
    """Raise ``TraceError`` unless ``carbon`` has a value for every instant of ``[start_s, end_s)``.

    A carbon-aware task calls this with its calendar (an episode's, or the power data's with the
    history a forecast needs) so that a short file fails when the task is built, naming
    ``source`` (who asked), the file, what it covers and what is missing, not as an index error
    mid-episode.
    """
    if not end_s > start_s:
        raise ValueError(
            f"{source}: check_covers needs start_s < end_s; got {start_s!r} and {end_s!r}"
        )
    first, last = float(carbon.timestamps_s[0]), carbon.end_s
    if first <= start_s and end_s <= last:
        return
    short = []
    if start_s < first:
        short.append(f"it starts {s_to_h(first - start_s):g} h after the calendar does")
    if end_s > last:
        short.append(f"it ends {s_to_h(end_s - last):g} h before the calendar does")
    raise TraceError(
        f"{source}: the carbon intensity file {carbon.path} covers {iso_utc(first)} to "
        f"{iso_utc(last)}, not the calendar {iso_utc(start_s)} to {iso_utc(end_s)}: "
        f"{' and '.join(short)}; it must cover the whole calendar"
    )


def _read_carbon(path: Path) -> CarbonIntensity:
    grid = GridCsv(path)
    names = grid.names
    zones = _zones(path, names)
    frame = grid.rows()
    ts = grid.times(frame[TIMESTAMP])
    columns = [name for name in names if name != TIMESTAMP]
    values = _parse_intensity(grid, frame, columns)
    direct = np.ascontiguousarray(values[:, [columns.index(z + DIRECT) for z in zones]])
    lca = np.ascontiguousarray(values[:, [columns.index(z + LCA) for z in zones]])
    if len(frame) < 2:
        raise TraceError(
            f"{path}: carbon intensity file has only one data row; at least two are needed to "
            "know the time step"
        )
    step = grid.step(frame[TIMESTAMP], ts)
    times = ts.astype(np.float64)
    for array in (times, direct, lca):
        array.setflags(write=False)
    return CarbonIntensity(str(path), zones, times, step, direct, lca)


def _zones(path: Path, names: list[str]) -> tuple[str, ...]:
    """The zones of the header, in order; each needs its ``_direct`` and ``_lca`` column."""
    zones: list[str] = []
    for name in names:
        if name == TIMESTAMP:
            continue
        zone = next((name[: -len(s)] for s in (DIRECT, LCA) if name.endswith(s)), "")
        if not zone:
            raise TraceError(
                f"{path}, line 1: column {name!r} is neither '<zone>{DIRECT}' nor "
                f"'<zone>{LCA}'; a carbon intensity file has 'timestamp' and two columns per "
                "zone, both in gCO₂eq/kWh"
            )
        if zone not in zones:
            zones.append(zone)
    for zone in zones:
        for suffix in (DIRECT, LCA):
            if zone + suffix not in names:
                raise TraceError(
                    f"{path}, line 1: zone {zone!r} has no column {zone + suffix!r}; every zone "
                    f"needs both '{zone}{DIRECT}' and '{zone}{LCA}'"
                )
    return tuple(zones)


def _parse_intensity(grid: GridCsv, frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The ``columns`` (in header order) as a (T, C) float64 array; the first bad cell in file
    order (text, empty or NaN, infinite, negative) is reported with its line and raw text."""
    out = np.empty((len(frame), len(columns)), dtype=np.float64)
    first_bad: tuple[int, int] | None = None  # (row, column position)
    for j, name in enumerate(columns):
        series = frame[name]
        out[:, j] = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
        if pd.api.types.is_bool_dtype(series):  # True/False are not intensities
            out[:, j] = np.nan
        hits = np.flatnonzero(~np.isfinite(out[:, j]) | (out[:, j] < 0.0))
        if hits.size and (first_bad is None or (int(hits[0]), j) < first_bad):
            first_bad = (int(hits[0]), j)
    if first_bad is None:
        return out
    row, j = first_bad
    name, line, value = columns[j], row + 2, out[row, j]
    raw = grid.cell(line, grid.names.index(name))
    where = f"{grid.path}, line {line}, column {name!r}"
    if np.isnan(value) and frame[name].isna().iloc[row]:
        raise TraceError(f"{where}: empty or NaN value {raw!r}; every cell needs {_ALLOWED}")
    if np.isnan(value):
        raise TraceError(f"{where}: value {raw!r} is not a number; expected {_ALLOWED}")
    if np.isinf(value):
        raise TraceError(f"{where}: value {raw!r} is not finite; expected {_ALLOWED}")
    raise TraceError(
        f"{where}: value {raw!r} is negative; expected {_ALLOWED} (a grid cannot emit less than "
        "nothing per kWh)"
    )
