"""Cut the flagship's calendar out of Electricity Maps' hourly grid carbon intensity.

Why: carbon-aware training needs to know how much CO₂ a kWh drawn from each site's grid emits,
hour by hour, on the same calendar as the flagship's power data. Electricity Maps publishes
hourly carbon intensity per grid zone (free datasets, Open Database License, ODbL 1.0), and the
HewlettPackard/green-dcc repository (SustainCluster, MIT) redistributes a year of it per zone.
Six of the flagship's ten cities lie in a zone that repository carries; the other four (Hong
Kong, Lagos, Mexico City, Stockholm) have none and get no series. ``traces/README.md`` and
``traces/LICENSES.md`` keep the attribution and the share-alike terms that go with the output.

Input: a directory laid out as green-dcc's ``data/carbon_intensity``, that is
``<folder>/<year>/<folder>_<year>_hourly.csv`` (the green-dcc checkout's root works too), each
file with the columns ``Datetime (UTC)`` (naive UTC, one row per hour), ``Zone Id``,
``Carbon Intensity gCO₂eq/kWh (direct)`` and ``Carbon Intensity gCO₂eq/kWh (LCA)`` among others.

Output: ONE CSV, ``timestamp,<zone>_direct,<zone>_lca,...``, ``timestamp`` the start of the hour
in ISO-8601 UTC (``2022-06-01T00:00:00Z``) as every trace in ``traces/``, values in gCO₂eq/kWh
exactly as read. A column is named after the file's ``Zone Id``, which is what the data is, not
after green-dcc's folder: the folder ``DE-LU`` holds zone ``DE`` and ``BR-SP`` holds ``BR-CS``.

Only the calendar the flagship needs is kept: the Solcast PV window (2022-06-08T00:00Z for 29
days) and the 7 days before it, so that a forecast fitted on the preceding days, or "the same
hour yesterday", exists from the first episode on. Inside that window every hour must be there
exactly once and every value must be a number >= 0; a bad file stops the conversion with its
name, line (line 1 is the header) and value, and exit status 2. The output is written
atomically: on failure nothing is written.

    python -m traces.tools.convert_carbon SRC_DIR --out traces/carbon_intensity_2022.csv
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from powertrip_env.atomic import write_text
from traces.tools.common import ConvertError, finish

# green-dcc's folders for the flagship's cities, in the order of traces/sites_solar.csv: Berlin,
# Cape Town, Mumbai, San Francisco, Sydney, São Paulo.
FOLDERS = ("DE-LU", "ZA", "IN-WE", "US-CAL-CISO", "AU-NSW", "BR-SP")
YEAR = 2022
# The Solcast window is 2022-06-08T00:00Z to 2022-07-07T00:00Z; 7 days of history before it.
START = "2022-06-01T00:00:00Z"
END = "2022-07-07T00:00:00Z"  # exclusive: the last hour kept starts at 2022-07-06T23:00Z
STEP_S = 3600

TIME = "Datetime (UTC)"
ZONE = "Zone Id"
DIRECT = "Carbon Intensity gCO₂eq/kWh (direct)"
LCA = "Carbon Intensity gCO₂eq/kWh (LCA)"


@dataclass(frozen=True)
class Zone:
    """One zone's rows on the window: its ``Zone Id`` and (direct, LCA) per hour."""

    zone: str
    source: Path
    values: np.ndarray  # (hours, 2)


def zone_file(src: Path, folder: str, year: int) -> Path:
    """``src/<folder>/<year>/<folder>_<year>_hourly.csv``, or the same under
    ``src/data/carbon_intensity`` (a green-dcc checkout's root)."""
    name = Path(folder, str(year), f"{folder}_{year}_hourly.csv")
    for root in (src, src / "data" / "carbon_intensity"):
        if (root / name).is_file():
            return root / name
    raise ConvertError(
        f"{src / name}: no such file; SRC_DIR must be laid out as green-dcc's "
        "data/carbon_intensity/<zone>/<year>/<zone>_<year>_hourly.csv"
    )


def _utc_seconds(text: str, what: str) -> int:
    try:
        stamp = pd.Timestamp(text)
    except ValueError:
        raise ConvertError(f"{what} {text!r} is not a time (expected e.g. {START})") from None
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1_000_000_000)


def _iso(seconds: int) -> str:
    return f"{np.datetime64(int(seconds), 's')}Z"


def _read(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(
            path, dtype=str, keep_default_na=False, skip_blank_lines=False, encoding="utf-8-sig"
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise ConvertError(f"{path}: cannot read ({exc})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ConvertError(f"{path}: not a readable CSV file ({exc})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in (TIME, ZONE, DIRECT, LCA) if c not in frame.columns]
    if missing:
        raise ConvertError(
            f"{path}, line 1: no column {', '.join(map(repr, missing))}; expected green-dcc's "
            f"header with {TIME!r}, {ZONE!r}, {DIRECT!r} and {LCA!r}; found "
            f"{', '.join(frame.columns)}"
        )
    if frame.empty:
        raise ConvertError(f"{path}: the file has a header but no rows")
    return frame.fillna("")


def _times(path: Path, frame: pd.DataFrame) -> np.ndarray:
    """``Datetime (UTC)`` -> int64 Unix seconds, strictly increasing; no hour twice."""
    raw = frame[TIME].str.strip()
    parsed = pd.to_datetime(raw, utc=True, errors="coerce", format="ISO8601")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise ConvertError(
            f"{path}, line {i + 2}, column {TIME!r}: cannot parse {frame[TIME].iloc[i]!r} as a "
            "time (expected e.g. 2022-06-01 00:00:00, UTC)"
        )
    seconds = parsed.dt.tz_convert(None).to_numpy().astype("datetime64[s]").astype(np.int64)
    first_seen: dict[int, int] = {}
    for i, t in enumerate(seconds.tolist()):
        if t in first_seen:
            raise ConvertError(
                f"{path}, line {i + 2}, column {TIME!r}: duplicated hour {raw.iloc[i]!r}, "
                f"already on line {first_seen[t] + 2}; every hour must appear once"
            )
        first_seen[t] = i
    back = np.flatnonzero(np.diff(seconds) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise ConvertError(
            f"{path}, line {i + 2}, column {TIME!r}: {raw.iloc[i]!r} is earlier than "
            f"{raw.iloc[i - 1]!r} on line {i + 1}; rows must be in time order"
        )
    return seconds


def _window(path: Path, frame: pd.DataFrame, seconds: np.ndarray, start: int, end: int) -> slice:
    """The rows of ``[start, end)``, which must hold every hour once; a gap is named."""
    lo, hi = np.searchsorted(seconds, [start, end])
    expected = np.arange(start, end, STEP_S, dtype=np.int64)
    have = seconds[lo:hi]
    if have.size == expected.size and np.array_equal(have, expected):
        return slice(int(lo), int(hi))
    n = min(have.size, expected.size)
    differ = np.flatnonzero(have[:n] != expected[:n])
    k = int(differ[0]) if differ.size else n
    raw = frame[TIME]
    if k == have.size:  # the file stops before the window does
        last = (
            f"its last hour in the window is {raw.iloc[hi - 1]!r} on line {hi + 1}"
            if hi > lo
            else "it has no row in the window"
        )
        raise ConvertError(
            f"{path}: missing hour {_iso(expected[k])}: the window {_iso(start)} to {_iso(end)} "
            f"needs every hour and {last}"
        )
    row = int(lo) + k
    if k < expected.size and have[k] > expected[k]:
        before = f"follows {raw.iloc[row - 1]!r} on line {row + 1}" if row else "is the first row"
        raise ConvertError(
            f"{path}, line {row + 2}, column {TIME!r}: missing hour {_iso(expected[k])}: "
            f"{raw.iloc[row]!r} {before}; every hour of {_iso(start)} to {_iso(end)} must be there"
        )
    raise ConvertError(
        f"{path}, line {row + 2}, column {TIME!r}: {raw.iloc[row]!r} is not on the hourly grid "
        f"from {_iso(start)}; rows must be {STEP_S} s apart"
    )


def _values(path: Path, frame: pd.DataFrame, rows: slice) -> np.ndarray:
    """(direct, LCA) of ``rows`` as floats >= 0; the first bad cell in file order is named."""
    out = np.empty((rows.stop - rows.start, 2))
    first_bad: tuple[int, int] | None = None
    for j, column in enumerate((DIRECT, LCA)):
        text = frame[column].iloc[rows].str.strip()
        v = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
        bad = np.flatnonzero(~np.isfinite(v) | (v < 0.0))
        if bad.size and (first_bad is None or (int(bad[0]), j) < first_bad):
            first_bad = (int(bad[0]), j)
        out[:, j] = v
    if first_bad is not None:
        k, j = first_bad
        column = (DIRECT, LCA)[j]
        row = rows.start + k
        value = frame[column].iloc[row]
        kind = "a negative value" if out[k, j] < 0 else "not a number"
        raise ConvertError(
            f"{path}, line {row + 2}, column {column!r}: {kind} {value!r}; expected the carbon "
            "intensity in gCO₂eq/kWh, a finite number >= 0"
        )
    return out


def _zone_id(path: Path, frame: pd.DataFrame) -> str:
    ids = frame[ZONE].str.strip()
    zone = ids.iloc[0]
    other = np.flatnonzero((ids != zone).to_numpy())
    if not zone or other.size:
        i = int(other[0]) if zone else 0
        raise ConvertError(
            f"{path}, line {i + 2}, column {ZONE!r}: zone {ids.iloc[i]!r} differs from "
            f"{zone!r} on line 2; a file must hold one named zone"
        )
    return zone


def read_zone(path: Path, start: int, end: int) -> Zone:
    """One green-dcc zone file, checked, cut to ``[start, end)``."""
    frame = _read(path)
    zone = _zone_id(path, frame)
    rows = _window(path, frame, _times(path, frame), start, end)
    return Zone(zone, path, _values(path, frame, rows))


def convert(
    src: Path,
    folders: Sequence[str] = FOLDERS,
    year: int = YEAR,
    start: str = START,
    end: str = END,
) -> pd.DataFrame:
    """The zones of ``folders`` on ``[start, end)`` as one frame, columns as written out."""
    t0, t1 = _utc_seconds(start, "--start"), _utc_seconds(end, "--end")
    if t1 <= t0 or (t1 - t0) % STEP_S or t0 % STEP_S:
        raise ConvertError(
            f"--start {start} and --end {end} must be whole hours with --start before --end"
        )
    zones: list[Zone] = []
    for folder in folders:
        zone = read_zone(zone_file(src, folder, year), t0, t1)
        twin = next((z for z in zones if z.zone == zone.zone), None)
        if twin is not None:
            raise ConvertError(
                f"{zone.source} and {twin.source} both hold zone {zone.zone!r}; give each once"
            )
        zones.append(zone)
    out = pd.DataFrame({"timestamp": [_iso(t) for t in range(t0, t1, STEP_S)]})
    for zone in zones:
        out[f"{zone.zone}_direct"] = zone.values[:, 0]
        out[f"{zone.zone}_lca"] = zone.values[:, 1]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 ok, 2 bad input)."""
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(
        prog="python -m traces.tools.convert_carbon",
        description="Cut the flagship's calendar out of green-dcc's Electricity Maps hourly "
        "carbon intensity files into one CSV.",
    )
    parser.add_argument(
        "src", type=Path, help="green-dcc's data/carbon_intensity (or the checkout's root)"
    )
    parser.add_argument("--out", type=Path, default=here / "carbon_intensity_2022.csv")
    parser.add_argument(
        "--zones",
        nargs="+",
        default=list(FOLDERS),
        metavar="FOLDER",
        help=f"green-dcc zone folders, in column order (default: {' '.join(FOLDERS)})",
    )
    parser.add_argument("--year", type=int, default=YEAR, help=f"default {YEAR}")
    parser.add_argument("--start", default=START, help=f"first hour kept (default {START})")
    parser.add_argument("--end", default=END, help=f"end of the last hour kept (default {END})")
    args = parser.parse_args(argv)

    def work() -> str:
        frame = convert(args.src, args.zones, args.year, args.start, args.end)
        write_text(args.out, frame.to_csv(index=False, lineterminator="\n"))
        zones = [c[: -len("_direct")] for c in frame.columns if c.endswith("_direct")]
        return (
            f"wrote {args.out} ({len(frame)} rows, {frame['timestamp'].iloc[0]} to "
            f"{frame['timestamp'].iloc[-1]}) for zones {', '.join(zones)}"
        )

    return finish(work, args.out)


if __name__ == "__main__":
    sys.exit(main())
