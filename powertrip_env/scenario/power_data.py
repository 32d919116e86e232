"""Load and validate power traces and forecasts (``traces/*.csv``, optionally gzipped).

A trace file is a CSV with a ``timestamp`` column (ISO-8601; ``Z`` or an offset; naive times are
taken as UTC) marking the start of each interval on a regular grid, and one column per series
holding a fraction in [0, 1]: a grid trace's utilisation ``u`` of a power domain by other load
(Google's ``measured_power_util``), or a PV trace's output as a fraction of peak. A forecast
file adds an ``issued`` column: each row is the forecast issued then for the interval starting
at ``timestamp`` (docs/data.md).

Why the loader is strict and cached:

* Bad input must fail at load time with a message a user can act on (docs/scenarios.md), not
  as a NaN deep inside the simulator. Every ``TraceError`` names the file, the column, the line
  and the bad value, and says what is allowed. **Line numbers are lines of the file as an editor
  shows them: line 1 is the header, so the first data row is line 2.**
* pandas is used once, at load time; the simulator only sees plain read-only numpy arrays.
  Loading the same unchanged file again returns the *same* ``PowerTrace`` object, so every env
  instance in a process shares one copy of the data (docs/performance.md).
"""

from __future__ import annotations

import csv
import difflib
import gzip
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from powertrip_env.errors import TraceError
from powertrip_env.units import S_PER_DAY

__all__ = [
    "GridCsv",
    "PowerForecast",
    "PowerTrace",
    "TraceError",
    "clear_trace_cache",
    "find_columns",
    "iso_utc",
    "load_cached",
    "load_forecast",
    "load_trace",
]

TIMESTAMP = "timestamp"
ISSUED = "issued"


@dataclass(frozen=True, eq=False)
class PowerTrace:
    """A validated trace: regular UTC timestamps and a (T, C) utilisation matrix.

    Both arrays are read-only because one instance is shared by every env in the process.
    Instances compare by identity (``eq=False``): comparing arrays element-wise is never what a
    caller wants from ``==``, and identity is what the cache guarantees.
    """

    path: str
    columns: tuple[str, ...]
    timestamps_s: np.ndarray
    util: np.ndarray
    interval_s: int

    @property
    def n_rows(self) -> int:
        """Number of time steps (rows) in the trace."""
        return int(self.util.shape[0])

    @property
    def n_days(self) -> float:
        """Length covered by the rows in days (each row covers one interval)."""
        return self.n_rows * self.interval_s / S_PER_DAY

    def column_indices(self, names: Sequence[str], *, source: str = "") -> np.ndarray:
        """Indices of ``names`` in ``columns``, as an int64 array in the order given.

        ``source`` says who asked (e.g. ``"scenarios/my.toml, site us-east-virginia"``) so that a
        typo in a scenario is reported where it was made.
        """
        return find_columns(
            self.columns, names, lambda name: self._missing_column_message(name, source)
        )

    def _missing_column_message(self, name: str, source: str) -> str:
        prefix = f"{source}: " if source else ""
        close = difflib.get_close_matches(name, self.columns, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        return (
            f"{prefix}trace column {name!r} not found in power trace {self.path}.{hint} "
            f"Available columns ({len(self.columns)}): {shown}"
        )


@dataclass(frozen=True, eq=False)
class PowerForecast:
    """Forecasts issued on a regular grid, each for the same run of intervals ahead.

    ``values[i, h, c]`` is the forecast issued at ``issued_s[i]`` for column ``c`` over the
    interval that starts ``h`` intervals after the issue time (h = 0: the interval that starts
    when the forecast is issued). Read-only and shared, as ``PowerTrace``.
    """

    path: str
    columns: tuple[str, ...]
    issued_s: np.ndarray
    values: np.ndarray
    interval_s: int

    @property
    def horizons(self) -> int:
        """Intervals each forecast covers."""
        return int(self.values.shape[1])

    def column_indices(self, names: Sequence[str], *, source: str = "") -> np.ndarray:
        """As `PowerTrace.column_indices`, for the forecast's columns."""
        return find_columns(
            self.columns, names, lambda name: self._missing_column_message(name, source)
        )

    def _missing_column_message(self, name: str, source: str) -> str:
        return PowerTrace._missing_column_message(self, name, source)  # type: ignore[arg-type]


def find_columns(
    columns: Sequence[str], names: Sequence[str] | str, missing: Callable[[str], str]
) -> np.ndarray:
    """Indices of ``names`` in ``columns``, as an int64 array in the order given.

    Every file of named columns looks its columns up this way (a trace's, a forecast's, the
    zones of ``carbon_data``'s carbon intensity), so a bare string is one name and not its
    characters in all of them; ``missing(name)`` words the ``TraceError`` of a name the file
    does not hold, which each kind of file says in its own terms.
    """
    if isinstance(names, str):  # a bare string would be split into characters
        names = [names]
    lookup = {name: i for i, name in enumerate(columns)}
    out = np.empty(len(names), dtype=np.int64)
    for k, name in enumerate(names):
        if name not in lookup:
            raise TraceError(missing(str(name)))
        out[k] = lookup[name]
    return out


def iso_utc(seconds: float) -> str:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SSZ``: the form every file and message here uses."""
    return pd.Timestamp(int(seconds), unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


_CACHE: dict[str, tuple[tuple[int, int], Any]] = {}
_LOCK = threading.Lock()
_Loaded = TypeVar("_Loaded")


def clear_trace_cache() -> None:
    """Forget every cached trace (tests use this; normal code never needs it)."""
    with _LOCK:
        _CACHE.clear()


def load_trace(path: str | os.PathLike[str]) -> PowerTrace:
    """Load, validate and cache a power trace; raise ``TraceError`` on any problem.

    The cache key is the resolved path plus the file's modification time and size, so an edited
    file is re-read while repeated loads of an unchanged file return the identical object.
    """
    return load_cached(path, "power trace", _read_trace)


def load_forecast(path: str | os.PathLike[str]) -> PowerForecast:
    """Load, validate and cache a forecast file (``issued,timestamp,<columns>``)."""
    return load_cached(path, "forecast", _read_forecast)


def load_cached(
    path: str | os.PathLike[str], what: str, read: Callable[[Path], _Loaded]
) -> _Loaded:
    """``read(path)``, once per version of the file: a later call for the same unchanged file
    (resolved path, modification time and size) returns the identical object.

    Every loader of trace-like files caches through this (``carbon_data`` too), so every env
    in a process shares one read-only copy of each file; ``what`` names the kind of file in
    the ``TraceError`` of a path that cannot be read, and keeps kinds apart in the cache.
    """
    resolved = Path(path).expanduser().resolve()
    try:
        st = resolved.stat()
    except OSError as exc:
        raise TraceError(
            f"{resolved}: cannot read {what} ({exc.strerror or exc}); "
            "expected a CSV file with a 'timestamp' column"
        ) from None
    if not resolved.is_file():
        raise TraceError(f"{resolved}: cannot read {what} (not a regular file)")
    key = f"{what}:{resolved}"
    stamp = (st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        loaded = read(resolved)
        _CACHE[key] = (stamp, loaded)
        return loaded


class GridCsv:
    """One CSV file on a regular time grid, read with the checks every trace file gets.

    Public for the loaders of other series on such a grid (``carbon_data``'s carbon intensity):
    they read the header, the rows, the times and the step through it, in their own order of
    checks, and check their values themselves, so a bad file of any kind fails alike, with a
    ``TraceError`` that names the file, the line (line 1 is the header), the column and the
    value. Making one reads and checks the header (``names``); the rest is read on request.
    """

    def __init__(self, path: Path, index_columns: tuple[str, ...] = (TIMESTAMP,)) -> None:
        self.path = path
        self.index_columns = index_columns
        self.names = _read_header(path, index_columns)

    def rows(self) -> pd.DataFrame:
        """The data rows, the index columns as text; blank trailing lines are dropped and a
        blank line inside the data is refused."""
        return _read_frame(self.path, self.names, self.index_columns)

    def times(self, raw: pd.Series, column: str = TIMESTAMP) -> np.ndarray:
        """``column``'s ISO-8601 text (``raw``) as int64 Unix seconds; naive times are UTC."""
        return _parse_timestamps(self.path, raw, column)

    def step(self, raw: pd.Series, times: np.ndarray, column: str = TIMESTAMP) -> int:
        """The one step of ``times`` (parsed from ``raw``), which must increase strictly and
        evenly; the first row that breaks that is named."""
        return _regular_step(self.path, raw, times, column)

    def cell(self, line: int, column: int) -> str:
        """The text of one cell as the file writes it, for an error message ("?" if the file
        cannot be read again)."""
        return _raw_cell(self.path, line, column)


def _open_text(path: Path) -> Any:
    """The file as text (UTF-8, a BOM allowed), through gzip for a ``.gz`` name."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    return path.open(newline="", encoding="utf-8-sig")


def _read_header(path: Path, index_columns: tuple[str, ...] = (TIMESTAMP,)) -> list[str]:
    try:
        with _open_text(path) as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: cannot read power trace ({exc})") from None
    if header is None:
        raise TraceError(
            f"{path}: power trace file is empty; expected a header 'timestamp,<column>,...' "
            "and one row per time step"
        )
    names = [h.strip() for h in header]
    if not any(names):
        raise TraceError(f"{path}, line 1: the header is blank; expected 'timestamp,<column>,...'")
    for i, name in enumerate(names):
        if not name:
            raise TraceError(
                f"{path}, line 1: column {i + 1} of the header has an empty name; "
                "every column needs a name"
            )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TraceError(
                f"{path}, line 1: duplicate column name {name!r}; each column must be named once"
            )
        seen.add(name)
    expected = ",".join([*index_columns, "<column>,..."])
    for column in index_columns:
        if column not in names:
            raise TraceError(
                f"{path}, line 1: no {column!r} column in the header ({', '.join(names[:6])}"
                f"{', ...' if len(names) > 6 else ''}); expected '{expected}'"
            )
    if len(names) <= len(index_columns):
        raise TraceError(
            f"{path}, line 1: no data columns besides {', '.join(map(repr, index_columns))}; "
            f"expected '{expected}' with at least one column of fractions in [0, 1]"
        )
    return names


def _raw_cell(path: Path, line: int, col: int) -> str:
    """The text of one cell as written in the file (for error messages only)."""
    try:
        with _open_text(path) as fh:
            for number, row in enumerate(csv.reader(fh), start=1):
                if number == line:
                    return row[col] if col < len(row) else ""
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, csv.Error):
        pass
    return "?"


def _read_frame(path: Path, names: list[str], index_columns: tuple[str, ...]) -> pd.DataFrame:
    """The data rows as a frame, blank trailing lines dropped and inner blank lines refused."""
    try:
        frame = pd.read_csv(
            path,
            header=0,
            names=names,
            dtype=dict.fromkeys(index_columns, str),
            keep_default_na=False,
            na_values=["", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "-nan"],
            skip_blank_lines=False,
            encoding="utf-8-sig",
            compression="infer",
        )
    except pd.errors.ParserError as exc:
        raise TraceError(f"{path}: malformed CSV ({str(exc).strip()})") from None
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read the file ({exc})") from None

    # An editor may leave blank lines at the end; blank lines inside are reported below.
    blank = frame.isna().all(axis=1).to_numpy()
    n = len(frame)
    while n > 0 and blank[n - 1]:
        n -= 1
    frame = frame.iloc[:n]
    if n == 0:
        raise TraceError(f"{path}: the file has a header but no data rows")
    inner = np.flatnonzero(blank[:n])
    if inner.size:
        raise TraceError(
            f"{path}, line {int(inner[0]) + 2}: blank line inside the data; every line after "
            "the header must be one row"
        )
    return frame


def _read_trace(path: Path) -> PowerTrace:
    grid = GridCsv(path)
    names = grid.names
    frame = grid.rows()
    ts = grid.times(frame[TIMESTAMP])
    columns = [c for c in names if c != TIMESTAMP]
    util = _parse_values(grid, frame, columns)
    if len(frame) < 2:
        raise TraceError(
            f"{path}: power trace has only one data row; at least two are needed to know the "
            "time step"
        )
    step = grid.step(frame[TIMESTAMP], ts)
    ts.setflags(write=False)
    util.setflags(write=False)
    return PowerTrace(str(path), tuple(columns), ts, util, step)


def _regular_step(path: Path, raw: pd.Series, ts: np.ndarray, column: str) -> int:
    """The one step of strictly increasing, evenly spaced times; the first offender is named."""
    steps = np.diff(ts)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise TraceError(
            f"{path}, line {i + 2}, column {column!r}: {raw.iloc[i]!r} is not later than "
            f"{raw.iloc[i - 1]!r} on line {i + 1}; times must increase strictly"
        )
    step = int(steps[0])
    bad = np.flatnonzero(steps != step)
    if bad.size:
        i = int(bad[0]) + 1
        raise TraceError(
            f"{path}, line {i + 2}, column {column!r}: {raw.iloc[i]!r} is "
            f"{int(steps[i - 1])} s after the previous row; every step must equal the first "
            f"step of {step} s (the file must be on a regular grid)"
        )
    return step


def _read_forecast(path: Path) -> PowerForecast:
    """``issued,timestamp,<columns>``: per issue time, consecutive intervals from the issue on.

    Rows come grouped by issue time (as forecast providers publish them) and, within an issue,
    by interval; every issue covers the same number of intervals starting at the issue time.
    """
    grid = GridCsv(path, (ISSUED, TIMESTAMP))
    frame = grid.rows()
    issued = grid.times(frame[ISSUED], ISSUED)
    start = grid.times(frame[TIMESTAMP])
    columns = [c for c in grid.names if c not in (ISSUED, TIMESTAMP)]
    values = _parse_values(grid, frame, columns)
    first = np.flatnonzero(np.concatenate([[True], issued[1:] != issued[:-1]]))
    horizons = int(first[1]) if first.size > 1 else len(frame)
    if len(frame) % horizons or not np.array_equal(first, np.arange(0, len(frame), horizons)):
        i = int(next(j for j in range(first.size) if first[j] != j * horizons))
        row = int(first[i])
        raise TraceError(
            f"{path}, line {row + 2}, column {ISSUED!r}: every issue time must have the same "
            f"number of rows ({horizons}, as the first), grouped together; the forecast issued "
            f"at {frame[ISSUED].iloc[row]!r} breaks that"
        )
    times = issued[first]
    step = grid.step(frame[ISSUED].iloc[first], times, ISSUED) if times.size > 1 else 0
    lead = (start - issued).reshape(-1, horizons)
    if step == 0 and horizons > 1:  # a single issue time: its rows give the interval
        step = int(lead[0, 1] - lead[0, 0])
    interval = step
    expected = np.arange(horizons) * interval
    bad = np.flatnonzero((lead != expected).any(axis=1))
    if interval <= 0 or bad.size:
        row = int(first[bad[0]]) if bad.size else 0
        raise TraceError(
            f"{path}, line {row + 2}, column {TIMESTAMP!r}: the forecast issued at "
            f"{frame[ISSUED].iloc[row]!r} must cover the consecutive intervals starting at its "
            f"issue time, one row each, {interval} s apart"
        )
    values = np.ascontiguousarray(values.reshape(times.size, horizons, len(columns)))
    times.setflags(write=False)
    values.setflags(write=False)
    return PowerForecast(str(path), tuple(columns), times, values, interval)


def _parse_timestamps(path: Path, raw: pd.Series, column: str = TIMESTAMP) -> np.ndarray:
    """ISO-8601 text -> int64 seconds since the epoch (UTC); naive times count as UTC."""
    parsed = pd.to_datetime(raw.str.strip(), utc=True, format="ISO8601", errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        value = raw.iloc[i]
        shown = "" if value is None or (isinstance(value, float) and math.isnan(value)) else value
        raise TraceError(
            f"{path}, line {i + 2}, column {column!r}: cannot parse {shown!r} as a time; "
            "expected ISO-8601 such as 2019-05-01T07:00:00Z (an offset like +02:00 is allowed; "
            "times without one are taken as UTC)"
        )
    exact = parsed.dt.tz_convert(None).to_numpy()
    seconds = exact.astype("datetime64[s]")
    frac = np.flatnonzero(seconds != exact)
    if frac.size:
        i = int(frac[0])
        raise TraceError(
            f"{path}, line {i + 2}, column {column!r}: {raw.iloc[i]!r} has a fraction of a "
            "second; timestamps must be whole seconds"
        )
    return seconds.astype(np.int64)


def _parse_values(grid: GridCsv, frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Check every value is a number in [0, 1]; report the first bad cell in file order."""
    util = np.empty((len(frame), len(columns)), dtype=np.float64)
    first_bad: tuple[int, int, str] | None = None  # (row, column position, kind)
    for j, name in enumerate(columns):
        series = frame[name]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            values = series.to_numpy(dtype=np.float64)
            non_numeric = np.zeros(len(values), dtype=bool)
        else:
            values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
            non_numeric = np.isnan(values) & series.notna().to_numpy()
            if pd.api.types.is_bool_dtype(series):
                non_numeric[:] = True
        missing = np.isnan(values) & ~non_numeric
        outside = ~np.isnan(values) & ((values < 0.0) | (values > 1.0))
        for kind, mask in (
            ("non-numeric", non_numeric),
            ("missing", missing),
            ("outside", outside),
        ):
            hits = np.flatnonzero(mask)
            if hits.size and (first_bad is None or (int(hits[0]), j) < first_bad[:2]):
                first_bad = (int(hits[0]), j, kind)
        util[:, j] = values
    if first_bad is None:
        return util

    row, j, kind = first_bad
    name, line = columns[j], row + 2
    raw = grid.cell(line, grid.names.index(name))
    where = f"{grid.path}, line {line}, column {name!r}"
    if kind == "non-numeric":
        raise TraceError(
            f"{where}: value {raw!r} is not a number; expected a utilisation in [0, 1]"
        )
    if kind == "missing":
        raise TraceError(
            f"{where}: empty or NaN value {raw!r}; every cell needs a utilisation in [0, 1] "
            "(convert_google.py fills gaps in real data)"
        )
    raise TraceError(
        f"{where}: value {raw!r} is outside [0, 1]; utilisation is a fraction of the power "
        "domain's capacity"
    )
