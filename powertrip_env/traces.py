"""Load and validate power-utilisation traces (``traces/*.csv``).

A trace file is a CSV with a ``timestamp`` column (ISO-8601; ``Z`` or an offset; naive times are
taken as UTC) on a regular grid, and one column per power domain holding its utilisation
``u in [0, 1]`` by other load (Google's ``measured_power_util`` semantics, DESIGN.md section 3).
The shipped ``traces/power_synthetic_2019.csv`` is SYNTHETIC (see ``traces/README.md``).

Why the loader is strict and cached:

* Bad input must fail at load time with a message a user can act on (DESIGN.md section 9), not
  as a NaN deep inside the simulator. Every ``TraceError`` names the file, the column, the line
  and the bad value, and says what is allowed. **Line numbers are lines of the file as an editor
  shows them: line 1 is the header, so the first data row is line 2.**
* pandas is used once, at load time; the simulator only sees plain read-only numpy arrays.
  Loading the same unchanged file again returns the *same* ``PowerTrace`` object, so every env
  instance in a process shares one copy of the data (DESIGN.md section 8).
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import math
import operator
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from powertrip_env.errors import TraceError

__all__ = ["PowerTrace", "TraceError", "clear_trace_cache", "iso_utc", "load_trace"]

TIMESTAMP = "timestamp"
_SECONDS_PER_DAY = 86_400


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
        return self.n_rows * self.interval_s / _SECONDS_PER_DAY

    def column_indices(self, names: Sequence[str], *, source: str = "") -> np.ndarray:
        """Indices of ``names`` in ``columns``, as an int64 array in the order given.

        ``source`` says who asked (e.g. ``"scenarios/my.toml, site us-east-virginia"``) so that a
        typo in a scenario is reported where it was made.
        """
        if isinstance(names, str):  # a bare string would be split into characters
            names = [names]
        lookup = {name: i for i, name in enumerate(self.columns)}
        out = np.empty(len(names), dtype=np.int64)
        for k, name in enumerate(names):
            if name not in lookup:
                raise TraceError(self._missing_column_message(str(name), source))
            out[k] = lookup[name]
        return out

    def _missing_column_message(self, name: str, source: str) -> str:
        prefix = f"{source}: " if source else ""
        close = difflib.get_close_matches(name, self.columns, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        return (
            f"{prefix}trace column {name!r} not found in power trace {self.path}.{hint} "
            f"Available columns ({len(self.columns)}): {shown}"
        )

    def day_rows(self, first_day: int, last_day: int) -> tuple[int, int]:
        """Rows ``[start, stop)`` of days ``first_day..last_day`` (1-based, inclusive).

        Days are counted in 24-hour blocks from the first timestamp (not calendar days), so a
        trace that starts at 07:00 UTC has day 1 = its first 24 hours. DESIGN.md section 7 uses
        days 1-21 for training and 22-31 for testing.
        """
        try:
            first, last = operator.index(first_day), operator.index(last_day)
        except TypeError:
            raise TraceError(
                f"day range {first_day!r}-{last_day!r} for trace {self.path}: days must be "
                "whole numbers"
            ) from None
        max_day = math.ceil(self.n_rows * self.interval_s / _SECONDS_PER_DAY)
        if not 1 <= first <= last <= max_day:
            raise TraceError(
                f"day range {first}-{last} is not valid for trace {self.path}: it has "
                f"{max_day} day(s), numbered 1-{max_day} from {iso_utc(self.timestamps_s[0])}; "
                "need 1 <= first_day <= last_day <= number of days"
            )
        t0 = int(self.timestamps_s[0])
        start = int(np.searchsorted(self.timestamps_s, t0 + (first - 1) * _SECONDS_PER_DAY))
        stop = int(np.searchsorted(self.timestamps_s, t0 + last * _SECONDS_PER_DAY))
        return start, stop


def iso_utc(seconds: float) -> str:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SSZ``, the form the shipped traces write their times in.

    Messages, ``info`` and result files all print times this one way, so a time shown anywhere
    can be found in a trace file by searching for the text. Fractions of a second are dropped.
    """
    return dt.datetime.fromtimestamp(float(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_CACHE: dict[str, tuple[tuple[int, int], PowerTrace]] = {}
_LOCK = threading.Lock()


def clear_trace_cache() -> None:
    """Forget every cached trace (tests use this; normal code never needs it)."""
    with _LOCK:
        _CACHE.clear()


def load_trace(path: str | os.PathLike[str]) -> PowerTrace:
    """Load, validate and cache a power trace; raise ``TraceError`` on any problem.

    The cache key is the resolved path plus the file's modification time and size, so an edited
    file is re-read while repeated loads of an unchanged file return the identical object.
    """
    resolved = Path(path).expanduser().resolve()
    try:
        st = resolved.stat()
    except OSError as exc:
        raise TraceError(
            f"{resolved}: cannot read power trace ({exc.strerror or exc}); "
            "expected a CSV file with a 'timestamp' column"
        ) from None
    if not resolved.is_file():
        raise TraceError(f"{resolved}: cannot read power trace (not a regular file)")
    key = str(resolved)
    stamp = (st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        trace = _read_trace(resolved)
        _CACHE[key] = (stamp, trace)
        return trace


def _read_header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError) as exc:
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
    if TIMESTAMP not in names:
        raise TraceError(
            f"{path}, line 1: no {TIMESTAMP!r} column in the header ({', '.join(names[:6])}"
            f"{', ...' if len(names) > 6 else ''}); expected 'timestamp,<column>,...'"
        )
    if len(names) < 2:
        raise TraceError(
            f"{path}, line 1: no trace columns besides 'timestamp'; expected at least one "
            "utilisation column"
        )
    return names


def _raw_cell(path: Path, line: int, col: int) -> str:
    """The text of one cell as written in the file (for error messages only)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            for number, row in enumerate(csv.reader(fh), start=1):
                if number == line:
                    return row[col] if col < len(row) else ""
    except (OSError, UnicodeDecodeError, csv.Error):
        pass
    return "?"


def _read_trace(path: Path) -> PowerTrace:
    names = _read_header(path)
    try:
        frame = pd.read_csv(
            path,
            header=0,
            names=names,
            dtype={TIMESTAMP: str},
            keep_default_na=False,
            na_values=["", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "-nan"],
            skip_blank_lines=False,
            encoding="utf-8-sig",
        )
    except pd.errors.ParserError as exc:
        raise TraceError(f"{path}: malformed CSV ({str(exc).strip()})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{path}: cannot read power trace ({exc})") from None

    # An editor may leave blank lines at the end; blank lines inside are reported below.
    blank = frame.isna().all(axis=1).to_numpy()
    n = len(frame)
    while n > 0 and blank[n - 1]:
        n -= 1
    frame = frame.iloc[:n]
    if n == 0:
        raise TraceError(f"{path}: power trace has a header but no data rows")
    inner = np.flatnonzero(blank[:n])
    if inner.size:
        raise TraceError(
            f"{path}, line {int(inner[0]) + 2}: blank line inside the data; every line after "
            "the header must be one time step"
        )

    ts = _parse_timestamps(path, frame[TIMESTAMP])
    columns = [c for c in names if c != TIMESTAMP]
    util = _parse_values(path, frame, columns, names)

    if n < 2:
        raise TraceError(
            f"{path}: power trace has only one data row; at least two are needed to know the "
            "time step"
        )
    steps = np.diff(ts)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise TraceError(
            f"{path}, line {i + 2}, column {TIMESTAMP!r}: {frame[TIMESTAMP].iloc[i]!r} is not "
            f"later than {frame[TIMESTAMP].iloc[i - 1]!r} on line {i + 1}; timestamps must "
            "increase strictly"
        )
    step = int(steps[0])
    bad = np.flatnonzero(steps != step)
    if bad.size:
        i = int(bad[0]) + 1
        raise TraceError(
            f"{path}, line {i + 2}, column {TIMESTAMP!r}: {frame[TIMESTAMP].iloc[i]!r} is "
            f"{int(steps[i - 1])} s after the previous row; every step must equal the first "
            f"step of {step} s (the trace must be on a regular grid)"
        )

    ts.setflags(write=False)
    util.setflags(write=False)
    return PowerTrace(str(path), tuple(columns), ts, util, step)


def _parse_timestamps(path: Path, raw: pd.Series) -> np.ndarray:
    """ISO-8601 text -> int64 seconds since the epoch (UTC); naive times count as UTC."""
    parsed = pd.to_datetime(raw.str.strip(), utc=True, format="ISO8601", errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        value = raw.iloc[i]
        shown = "" if value is None or (isinstance(value, float) and math.isnan(value)) else value
        raise TraceError(
            f"{path}, line {i + 2}, column {TIMESTAMP!r}: cannot parse {shown!r} as a time; "
            "expected ISO-8601 such as 2019-05-01T07:00:00Z (an offset like +02:00 is allowed; "
            "times without one are taken as UTC)"
        )
    exact = parsed.dt.tz_convert(None).to_numpy()
    seconds = exact.astype("datetime64[s]")
    frac = np.flatnonzero(seconds != exact)
    if frac.size:
        i = int(frac[0])
        raise TraceError(
            f"{path}, line {i + 2}, column {TIMESTAMP!r}: {raw.iloc[i]!r} has a fraction of a "
            "second; timestamps must be whole seconds"
        )
    return seconds.astype(np.int64)


def _parse_values(
    path: Path, frame: pd.DataFrame, columns: list[str], names: list[str]
) -> np.ndarray:
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
    raw = _raw_cell(path, line, names.index(name))
    where = f"{path}, line {line}, column {name!r}"
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
