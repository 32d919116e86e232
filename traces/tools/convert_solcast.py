"""Convert the Solcast 2022 PV data set (as Vessim and FedZero ship it) into PowerTrip's formats.

Why: a site with on-site solar adds ``pv_kw · s(t)`` to its available power, where ``s`` is the
PV output as a fraction of peak. FedZero (e-Energy '24) selects federated-learning clients from
exactly this data, with its real 5-65-minute forecasts, so the project ships both. The data is
MIT-licensed (© 2024 Philipp Wiesner, dos-group/vessim); ``traces/README.md`` keeps the
attribution.

Input, as distributed:

* actuals: ``datetime,<city>,...`` with ``datetime`` the END of a 5-minute period (naive UTC);
* forecasts: ``datetime,period_end,<city>,...``: the forecast issued at ``datetime`` for the
  5-minute period ending at ``period_end``, 13 periods (5-65 minutes ahead) per issue time.

Output:

* actuals, the project's trace format: ``timestamp,pv_<city>,...`` with ``timestamp`` the START
  of the period (ISO-8601 UTC), as every trace in ``traces/``;
* forecasts: ``issued,timestamp,pv_<city>,...``, one row per issue time and forecast period,
  ``timestamp`` again the period's start: horizon h is the period starting h steps after
  ``issued`` (h = 0 is the period that starts when the forecast is issued).

Columns are named ``pv_`` plus the city in lower case ASCII (``São Paulo`` -> ``pv_sao_paulo``).
Values are written exactly as read, after a check that they lie in [0, 1] and that the times
are regular; a bad file stops the conversion with the file, line and value, and exit status 2.
Outputs are written atomically; a ``.gz`` output is gzip-compressed with a zero timestamp, so
the same input gives the same bytes.

    python -m traces.tools.convert_solcast ACTUAL.csv FORECAST.csv.gz \\
        --out traces/solcast_pv_2022.csv --forecast-out traces/solcast_pv_forecast_2022.csv.gz
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from powertrip_env.atomic import write_bytes
from traces.tools.common import ConvertError, finish

STEP_S = 300


def column_name(city: str) -> str:
    """``pv_`` + the city folded to lower-case ASCII words joined by ``_``."""
    ascii_name = unicodedata.normalize("NFKD", city).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "_", ascii_name.lower()).strip("_")
    if not slug:
        raise ConvertError(f"column {city!r} gives an empty name")
    return f"pv_{slug}"


def _read(path: Path, time_columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, compression="infer")
    except (OSError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise ConvertError(f"{path}: cannot read ({exc})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ConvertError(f"{path}: not a readable CSV file ({exc})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in time_columns if c not in frame.columns]
    if missing or len(frame.columns) <= len(time_columns):
        raise ConvertError(
            f"{path}: expected columns {', '.join(time_columns)} and one column per city; "
            f"found {', '.join(frame.columns)}"
        )
    if frame.empty:
        raise ConvertError(f"{path}: the file has a header but no rows")
    return frame


def _times(path: Path, frame: pd.DataFrame, column: str) -> np.ndarray:
    """Naive-UTC (or offset) times -> int64 Unix seconds; the first bad one is reported."""
    parsed = pd.to_datetime(frame[column].str.strip(), utc=True, errors="coerce", format="ISO8601")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        i = int(bad[0])
        raise ConvertError(
            f"{path}, line {i + 2}, column {column!r}: cannot parse {frame[column].iloc[i]!r} "
            "as a time (expected e.g. 2022-06-08 00:05:00, UTC)"
        )
    return parsed.dt.tz_convert(None).to_numpy().astype("datetime64[s]").astype(np.int64)


def _values(
    path: Path, frame: pd.DataFrame, columns: Sequence[str], allow_empty: bool = False
) -> np.ndarray:
    """The city columns as floats in [0, 1]; empty cells become NaN where ``allow_empty``."""
    out = np.empty((len(frame), len(columns)))
    for j, name in enumerate(columns):
        text = frame[name].str.strip()
        v = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
        empty = (text == "").to_numpy() if allow_empty else np.zeros(len(v), dtype=bool)
        bad = np.flatnonzero(~empty & (~np.isfinite(v) | (v < 0.0) | (v > 1.0)))
        if bad.size:
            i = int(bad[0])
            raise ConvertError(
                f"{path}, line {i + 2}, column {name!r}: bad value {frame[name].iloc[i]!r}; "
                "expected the PV output as a fraction of peak, a number in [0, 1]"
            )
        out[:, j] = v
    return out


def _iso(seconds: np.ndarray) -> list[str]:
    return [f"{t}Z" for t in seconds.astype("datetime64[s]").astype(str)]


def convert_actual(path: Path) -> pd.DataFrame:
    """Actuals -> ``timestamp,pv_<city>...`` on a regular grid of period starts."""
    frame = _read(path, ("datetime",))
    cities = [c for c in frame.columns if c != "datetime"]
    end = _times(path, frame, "datetime")
    steps = np.diff(end)
    bad = np.flatnonzero(steps != STEP_S)
    if bad.size:
        i = int(bad[0]) + 1
        raise ConvertError(
            f"{path}, line {i + 2}, column 'datetime': {frame['datetime'].iloc[i]!r} is "
            f"{int(steps[i - 1])} s after the previous row; expected {STEP_S} s steps"
        )
    out = pd.DataFrame(_values(path, frame, cities), columns=[column_name(c) for c in cities])
    out.insert(0, "timestamp", _iso(end - STEP_S))
    return out


def convert_forecast(path: Path) -> pd.DataFrame:
    """Forecasts -> ``issued,timestamp,pv_<city>...``; every issue time has the same horizons."""
    frame = _read(path, ("datetime", "period_end"))
    cities = [c for c in frame.columns if c not in ("datetime", "period_end")]
    issued = _times(path, frame, "datetime")
    start = _times(path, frame, "period_end") - STEP_S
    lead = start - issued
    off = np.flatnonzero((lead < 0) | (lead % STEP_S != 0))
    if off.size:
        i = int(off[0])
        raise ConvertError(
            f"{path}, line {i + 2}: period ending {frame['period_end'].iloc[i]!r} does not "
            f"start a whole number of {STEP_S}-s steps after its issue time "
            f"{frame['datetime'].iloc[i]!r}"
        )
    horizons = np.unique(lead)
    expected = np.arange(horizons.size) * STEP_S
    times, counts = np.unique(issued, return_counts=True)
    uneven = np.flatnonzero(counts != horizons.size)
    if not np.array_equal(horizons, expected) or uneven.size:
        i = int(uneven[0]) if uneven.size else 0
        raise ConvertError(
            f"{path}: every issue time must forecast the same {horizons.size} consecutive "
            f"periods; the one issued at {_iso(times[i : i + 1])[0]} has {int(counts[i])}"
        )
    gaps = np.flatnonzero(np.diff(times) != STEP_S)
    if gaps.size:
        i = int(gaps[0])
        raise ConvertError(
            f"{path}: issue times must be {STEP_S} s apart; {_iso(times[i + 1 : i + 2])[0]} "
            f"follows {_iso(times[i : i + 1])[0]}"
        )
    order = np.lexsort((start, issued))
    values = _values(path, frame, cities, allow_empty=True)[order]
    _fill_missing(path, values.reshape(times.size, horizons.size, len(cities)))
    out = pd.DataFrame(values, columns=[column_name(c) for c in cities])
    out.insert(0, "timestamp", _iso(start[order]))
    out.insert(0, "issued", _iso(issued[order]))
    return out


def _fill_missing(path: Path, values: np.ndarray) -> None:
    """Fill empty forecast cells in place with what a reader had at that issue time.

    ``values`` is (issue, horizon, city). An empty cell takes the previous issue's forecast for
    the same period (one horizon further ahead), else the same issue's forecast for the period
    before: never a later issue's forecast, never an actual. Reported on stderr.
    """
    missing = np.argwhere(np.isnan(values))
    for i, h, c in missing:  # in issue order, so an earlier fill can serve a later one
        if i > 0 and h + 1 < values.shape[1] and np.isfinite(values[i - 1, h + 1, c]):
            values[i, h, c] = values[i - 1, h + 1, c]
        elif h > 0:
            values[i, h, c] = values[i, h - 1, c]
        else:
            raise ConvertError(
                f"{path}: issue {i + 1} has no value for its first period in city column "
                f"{c + 1} and no earlier forecast to fill it from"
            )
    if missing.size:
        print(
            f"note: {path}: {len(missing)} empty forecast value(s) filled from the previous "
            "issue's forecast for the same period",
            file=sys.stderr,
        )


def write(path: Path, frame: pd.DataFrame) -> None:
    """CSV with each value's shortest exact form, atomically; gzip (zero timestamp) for ``.gz``."""
    data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    if path.name.endswith(".gz"):
        buffer = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
            gz.write(data)
        data = buffer.getvalue()
    write_bytes(path, data)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status (0 ok, 2 bad input)."""
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(
        prog="python -m traces.tools.convert_solcast",
        description="Convert Solcast 2022 PV actuals and forecasts into PowerTrip's formats.",
    )
    parser.add_argument("actual", type=Path, help="actuals CSV: datetime,<city>,...")
    parser.add_argument("forecast", type=Path, help="forecasts CSV(.gz): datetime,period_end,...")
    parser.add_argument("--out", type=Path, default=here / "solcast_pv_2022.csv")
    parser.add_argument(
        "--forecast-out", type=Path, default=here / "solcast_pv_forecast_2022.csv.gz"
    )
    args = parser.parse_args(argv)

    def work() -> str:
        actual = convert_actual(args.actual)
        forecast = convert_forecast(args.forecast)
        if list(actual.columns[1:]) != list(forecast.columns[2:]):
            raise ConvertError(
                f"the actuals' cities {list(actual.columns[1:])} differ from the forecasts' "
                f"{list(forecast.columns[2:])}"
            )
        write(args.out, actual)
        write(args.forecast_out, forecast)
        return (
            f"wrote {args.out} ({len(actual)} rows) and {args.forecast_out} ({len(forecast)} "
            f"rows, {forecast['issued'].nunique()} issue times) for {len(actual.columns) - 1} sites"
        )

    return finish(work, args.out, args.forecast_out)


if __name__ == "__main__":
    sys.exit(main())
