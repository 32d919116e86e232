"""Convert Google's real ``powerdata_2019`` CSV files into PowerTrip's trace format.

Why: the project ships five of Google's PDUs (``traces/google_cella_2019.csv``, made with this
tool). A user who downloads the others (``gs://powerdata_2019/``, CC-BY 4.0, Sakalkar et al.,
ASPLOS 2020; docs/references.md) can turn them into the same wide format and point a scenario
at the result.

Input schema (docs/references.md): one row per power domain and 5-minute window with ``time``
(microseconds since 600 s before the trace start, 2019-05-01 00:00 US/Pacific = 07:00 UTC, and
the start of the window), ``cell``, ``pdu``, ``measured_power_util``, ``production_power_util``,
``bad_measurement_data``, ``bad_production_power_data``. Only the columns the chosen field needs
are required: ``time``, ``cell``, ``pdu``, the value column and its ``bad_*`` flag.

Output: ``timestamp,<cell>_<pdu>,...`` on the regular 5-minute UTC grid (ISO-8601 with ``Z``),
one column per power domain, which ``powertrip_env.scenario.power_data.load_trace`` reads.

* Rows whose ``bad_*`` flag is true are dropped (as Google's own notebook filters them).
* A run of at most ``--max-gap`` missing windows between two good values is filled by linear
  interpolation. Longer runs, and missing windows at the start or end of a column, are reported
  on stderr (column, from, to, length) and filled by carrying the nearest earlier value forward
  (the first good value for a leading run). Such stretches are flat and not real data.
* Every value must lie in [0, 1]; malformed input stops the conversion with a message naming the
  file, line (line 1 is the header), column and value, and exit status 2.

The output is written atomically (temp file + ``os.replace``).
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from powertrip_env.atomic import write_text
from traces.tools.common import ConvertError, finish

# Trace start 2019-05-01 00:00 PDT = 07:00 UTC; `time` counts from 600 s before it.
TRACE_START_S = 1_556_694_000
TIME_ORIGIN_S = TRACE_START_S - 600
STEP_S = 300

FIELDS = {
    "measured": ("measured_power_util", "bad_measurement_data"),
    "production": ("production_power_util", "bad_production_power_data"),
}
_TRUE = {"true", "t", "1", "yes", "y"}
_FALSE = {"false", "f", "0", "no", "n", ""}


@dataclass
class Series:
    """Good samples of one power domain: grid index (windows since trace start) -> value."""

    name: str
    index: np.ndarray
    values: np.ndarray
    source: str


def find_inputs(inputs: Sequence[str]) -> list[Path]:
    """Expand files and directories (every *.csv and *.csv.gz directly inside) into files."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and (p.name.endswith(".csv") or p.name.endswith(".csv.gz"))
            )
            if not found:
                raise ConvertError(f"{path}: directory contains no *.csv or *.csv.gz files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise ConvertError(f"{path}: no such file or directory")
    return files


def _read(path: Path) -> pd.DataFrame:
    """Read one file as strings, so that bad values can be quoted exactly as written."""
    try:
        frame = pd.read_csv(
            path, dtype=str, keep_default_na=False, compression="infer", encoding="utf-8"
        )
    except pd.errors.EmptyDataError:
        raise ConvertError(f"{path}: file is empty (expected a CSV header and rows)") from None
    except (UnicodeDecodeError, gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise ConvertError(f"{path}: not a readable CSV or gzip file ({exc})") from None
    except pd.errors.ParserError as exc:
        raise ConvertError(f"{path}: malformed CSV ({exc})") from None
    except OSError as exc:
        raise ConvertError(f"{path}: cannot read ({exc.strerror or exc})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise ConvertError(f"{path}: file has a header but no data rows")
    return frame


def _bad(path: Path, row: int, column: str, value: object, allowed: str) -> ConvertError:
    # `row` is the 0-based data row; line 1 of the file is the header.
    return ConvertError(
        f"{path}, line {row + 2}, column '{column}': bad value {value!r}; expected {allowed}"
    )


_FILE_NAME = re.compile(r"^(?P<cell>cell[a-z])_(?P<pdu>pdu\d+)\.csv(\.gz)?$")


def _fill_from_file_name(path: Path, frame: pd.DataFrame) -> None:
    """Add a missing ``cell`` or ``pdu`` column from a file named like Google's files.

    Google's bucket names every file ``<cell>_<pdu>.csv.gz``; copies of single PDUs that were
    shared elsewhere often drop the columns the name already says.
    """
    match = _FILE_NAME.match(path.name)
    if match is None:
        return
    for key in ("cell", "pdu"):
        if key not in frame.columns:
            frame[key] = match[key]


def column_name(cell: str, pdu: str) -> str:
    """``<cell>_<pdu>``, e.g. ``a_pdu6``; a cell already spelled ``cella`` is kept as is."""
    return f"{cell}_{pdu}"


def read_file(path: Path, field: str) -> list[Series]:
    """Validate one Google CSV and return its good samples per power domain."""
    value_col, flag_col = FIELDS[field]
    frame = _read(path)
    _fill_from_file_name(path, frame)
    required = ["time", "cell", "pdu", value_col]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ConvertError(
            f"{path}: missing column(s) {', '.join(repr(m) for m in missing)}; "
            f"the powerdata_2019 schema needs {', '.join(required)} (found: "
            f"{', '.join(frame.columns)}); 'cell' and 'pdu' may instead come from a file named "
            "like cella_pdu6.csv"
        )
    if flag_col not in frame.columns:
        # Copies of the traces that were filtered before they were shared have no flag column.
        print(f"note: {path}: no {flag_col!r} column; no row is dropped as bad", file=sys.stderr)
        frame[flag_col] = "false"

    flags_raw = frame[flag_col].str.strip().str.lower()
    unknown = ~flags_raw.isin(_TRUE | _FALSE)
    if unknown.any():
        i = int(np.flatnonzero(unknown.to_numpy())[0])
        raise _bad(path, i, flag_col, frame[flag_col].iloc[i], "true or false")
    keep = ~flags_raw.isin(_TRUE).to_numpy()

    rows = np.flatnonzero(keep)
    sub = frame.iloc[rows]

    time_us = pd.to_numeric(sub["time"].str.strip(), errors="coerce").to_numpy(np.float64)
    bad_t = ~np.isfinite(time_us)
    if bad_t.any():
        i = int(np.flatnonzero(bad_t)[0])
        raise _bad(
            path,
            int(rows[i]),
            "time",
            sub["time"].iloc[i],
            "microseconds since 600 s before the trace start (a number)",
        )
    vals = pd.to_numeric(sub[value_col].str.strip(), errors="coerce").to_numpy(np.float64)
    bad_v = ~np.isfinite(vals) | (vals < 0.0) | (vals > 1.0)
    if bad_v.any():
        i = int(np.flatnonzero(bad_v)[0])
        raise _bad(path, int(rows[i]), value_col, sub[value_col].iloc[i], "a number in [0, 1]")
    for key in ("cell", "pdu"):
        empty = (sub[key].str.strip() == "").to_numpy()
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise _bad(path, int(rows[i]), key, sub[key].iloc[i], "a non-empty name")

    # Window start in seconds since TRACE_START, snapped to the 5-minute grid.
    offset_s = time_us / 1e6 + (TIME_ORIGIN_S - TRACE_START_S)
    index = np.floor(offset_s / STEP_S + 1e-9).astype(np.int64)
    off_grid = np.abs(offset_s - index * STEP_S) > 1.0
    if off_grid.any():
        i = int(np.flatnonzero(off_grid)[0])
        print(
            f"warning: {path}: {int(off_grid.sum())} time value(s) are not on the 5-minute grid "
            f"(first: line {int(rows[i]) + 2}, time {sub['time'].iloc[i]}); "
            "each was assigned to the window it falls in",
            file=sys.stderr,
        )

    names = [
        column_name(c, p)
        for c, p in zip(sub["cell"].str.strip(), sub["pdu"].str.strip(), strict=True)
    ]
    out: list[Series] = []
    names_arr = np.asarray(names, dtype=object)
    for name in dict.fromkeys(names):
        mask = names_arr == name
        out.append(Series(name, index[mask], vals[mask], str(path)))
    return out


def _natural_key(name: str) -> list[object]:
    """Sort ``a_pdu2`` before ``a_pdu10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _stamp(index: int) -> str:
    return pd.Timestamp(TRACE_START_S + index * STEP_S, unit="s", tz="UTC").strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def fill_gaps(name: str, column: np.ndarray, first: int, max_gap: int) -> tuple[int, int]:
    """Fill NaN runs in place; return (interpolated windows, carried windows).

    Runs of at most ``max_gap`` windows with good values on both sides are interpolated
    linearly; every other run is reported on stderr and filled with the nearest value before it
    (after it, for a run at the very start).
    """
    missing = np.isnan(column)
    if not missing.any():
        return 0, 0
    good = np.flatnonzero(~missing)
    n = column.size
    interp = carried = 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], missing.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        length = int(stop - start)
        inside = start > 0 and stop < n
        if inside and length <= max_gap:
            column[start:stop] = np.interp(np.arange(start, stop), good, column[good])
            interp += length
            continue
        if start > 0:
            fill = column[start - 1]
            how = f"carrying the previous value {fill:.4f} forward"
        else:
            fill = column[stop]
            how = f"repeating the first good value {fill:.4f} backward"
        column[start:stop] = fill
        carried += length
        if inside:
            why = f"inside the trace, longer than --max-gap {max_gap}"
        elif start == 0:
            why = "at the start of the column, nothing to interpolate from"
        else:
            why = "at the end of the column, nothing to interpolate to"
        print(
            f"warning: column {name}: {length} missing 5-minute window(s) ({why}) "
            f"from {_stamp(first + int(start))} to {_stamp(first + int(stop) - 1)}; "
            f"filled by {how} - these values are not real data",
            file=sys.stderr,
        )
    return interp, carried


def convert(files: Sequence[Path], max_gap: int, field: str) -> tuple[list[str], pd.DataFrame]:
    """Read all files and build the regular wide table: (timestamps, frame of columns)."""
    series: dict[str, list[Series]] = {}
    for path in files:
        for s in read_file(path, field):
            series.setdefault(s.name, []).append(s)
    if not series:
        raise ConvertError("no usable rows in the input (all rows flagged bad?)")

    names = sorted(series, key=_natural_key)
    lo = min(int(s.index.min()) for parts in series.values() for s in parts)
    hi = max(int(s.index.max()) for parts in series.values() for s in parts)
    n = hi - lo + 1
    if n > 1_000_000:  # ~9.5 years of 5-minute windows: the time column is not microseconds
        raise ConvertError(
            f"time values span {_stamp(lo)} to {_stamp(hi)} ({n} windows); expected "
            "microseconds since 600 s before the trace start (about 8,928 windows for May 2019)"
        )
    table = np.full((n, len(names)), np.nan)
    total_interp = total_carried = 0
    for j, name in enumerate(names):
        idx = np.concatenate([s.index for s in series[name]]) - lo
        val = np.concatenate([s.values for s in series[name]])
        sums = np.bincount(idx, weights=val, minlength=n)
        counts = np.bincount(idx, minlength=n)
        if (counts > 1).any():
            sources = sorted({s.source for s in series[name]})
            print(
                f"warning: column {name}: {int((counts > 1).sum())} window(s) appear more than "
                f"once (in {', '.join(sources)}); their values were averaged",
                file=sys.stderr,
            )
        with np.errstate(invalid="ignore", divide="ignore"):
            col = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        i, c = fill_gaps(name, col, lo, max_gap)
        total_interp += i
        total_carried += c
        table[:, j] = col
    stamps = [_stamp(lo + k) for k in range(n)]
    print(
        f"{len(names)} column(s) x {n} rows from {stamps[0]} to {stamps[-1]}; "
        f"{total_interp} window(s) interpolated, {total_carried} carried forward",
        file=sys.stderr,
    )
    return stamps, pd.DataFrame(table, columns=names)


def write_atomic(path: Path, stamps: Sequence[str], frame: pd.DataFrame) -> None:
    """Write ``timestamp,<columns>`` atomically, each value in its shortest exact form."""
    out = frame.copy()
    out.insert(0, "timestamp", list(stamps))
    write_text(path, out.to_csv(index=False, lineterminator="\n"))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 ok, 2 bad input)."""
    parser = argparse.ArgumentParser(
        description="Convert Google powerdata_2019 CSV(.gz) files into a PowerTrip trace."
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="powerdata_2019 files (.csv or .csv.gz) or directories of them",
    )
    parser.add_argument("--out", required=True, type=Path, help="output trace CSV")
    parser.add_argument(
        "--max-gap",
        type=int,
        default=3,
        metavar="N",
        help="interpolate runs of up to N missing 5-minute windows (default 3)",
    )
    parser.add_argument(
        "--field",
        choices=sorted(FIELDS),
        default="measured",
        help="measured_power_util (default) or production_power_util",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage message
        return int(exc.code or 0)
    if args.max_gap < 0:
        print("error: --max-gap must be >= 0", file=sys.stderr)
        return 2

    def work() -> str:
        files = find_inputs(args.inputs)
        stamps, frame = convert(files, args.max_gap, args.field)
        write_atomic(args.out, stamps, frame)
        return f"wrote {args.out}"

    return finish(work, args.out)


if __name__ == "__main__":
    sys.exit(main())
