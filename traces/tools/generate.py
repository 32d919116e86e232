"""Generate the shipped SYNTHETIC power trace, ``traces/power_synthetic_2019.csv``.

Why a generator beside the real data: the project ships five real Google PDUs
(``google_cella_2019.csv``), all from one cell in one time zone, with the narrow, slow swings of
real spare capacity. Stress scenarios want more: one column per site on four continents, with a
local diurnal shape, dips and surges that make a site unavailable. This script draws one utilisation
column per site of ``sites_large.csv`` from a fixed seed, shaped to match the published statistics
of Google's traces (docs/references.md, "Google power traces"): 31 days of 5-minute windows starting
2019-05-01 00:00 US Pacific (= 07:00 UTC), values mostly 0.4-0.9 with a mean near 0.7, hourly means
that move by a few hundredths over a day (0.694-0.759 for one PDU). The data are NOT measurements;
say so wherever they are used.

Each column is the sum of

* a level ``m`` drawn in [0.60, 0.78] (the fleet-wide mean is then ~0.69);
* a diurnal cycle in the site's local solar time (longitude / 15 hours from UTC) that peaks in
  the local afternoon (14:00-17:00) with a peak-to-trough amplitude drawn in [0.04, 0.14]; a
  second harmonic keeps nights flat and afternoons peaked, as office/batch load does;
* a slightly lower weekend level (-0.01);
* slow drift: an hourly random walk smoothed over a day, scaled to a standard deviation of
  0.015-0.040, so the level wanders over days;
* AR(1) noise at the 5-minute step (phi 0.80-0.95, standard deviation 0.010-0.022);
* rare short dips (2-5 per column per month, 10-60 minutes, 0.08-0.30 lower), like maintenance
  or a drained cluster;
* rarer short surges (0-2 per column per month, 5-30 minutes) that saturate the power domain:
  the core of a surge is exactly 1.0 with shoulders at 0.95-0.99. In the environment's model the
  headroom ``capacity_kw * (1 - u)`` is then zero, so a surge makes the site temporarily
  UNAVAILABLE (no GPU can be powered).

The sum is clipped to [0, 1] and written with exactly 4 decimals. Only ``Generator.random`` and
``Generator.standard_normal`` are used (their streams have been stable across NumPy releases),
and every value is quantised to 1e-4 before it is written, so ``python -m traces.tools.generate``
rewrites the shipped file byte for byte.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from powertrip_env.atomic import write_bytes

HERE = Path(__file__).resolve().parents[1]  # traces/, where the data lives
DEFAULT_OUT = HERE / "power_synthetic_2019.csv"
DEFAULT_SITES = HERE / "sites_large.csv"

SEED = 20190501
# Google's 2019 trace starts 2019-05-01 00:00 US/Pacific (PDT, UTC-7) = 07:00 UTC
# (docs/references.md).
START = datetime(2019, 5, 1, 7, 0, 0, tzinfo=UTC)
STEP_S = 300  # 5-minute windows, as in powerdata_2019
DAYS = 31
ROWS_PER_DAY = 86_400 // STEP_S  # 288
N_ROWS = DAYS * ROWS_PER_DAY  # 8,928, the row count per PDU of powerdata_2019

# Every value is an integer number of 1e-4 steps; this table turns them into text fast.
_QUANTUM = 10_000
_TEXT = np.array([f"{k / _QUANTUM:.4f}" for k in range(_QUANTUM + 1)], dtype=object)


def read_sites(path: str | os.PathLike[str] = DEFAULT_SITES) -> tuple[list[str], np.ndarray]:
    """Return the trace column names and longitudes (degrees east) of a site catalogue.

    The longitude sets each column's local solar time, so the diurnal peak lands in the site's
    own afternoon; the catalogue order fixes the column order of the trace.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the site catalogue ({exc.strerror})") from exc
    if not rows:
        raise ValueError(f"{path}: the site catalogue has no sites")
    for key in ("trace_column", "longitude"):
        if key not in rows[0]:
            raise ValueError(f"{path}: the site catalogue has no '{key}' column")
    columns: list[str] = []
    lons: list[float] = []
    for line, row in enumerate(rows, start=2):
        col = (row["trace_column"] or "").strip()
        if not col or col in columns:
            raise ValueError(
                f"{path}, line {line}: trace_column {col!r} is empty or repeated; "
                "each site needs its own column"
            )
        try:
            lon = float(row["longitude"])
        except (TypeError, ValueError):
            raise ValueError(
                f"{path}, line {line}, column longitude: {row['longitude']!r} is not a number"
            ) from None
        if not -180.0 <= lon <= 180.0:
            raise ValueError(f"{path}, line {line}, column longitude: {lon} is outside [-180, 180]")
        columns.append(col)
        lons.append(lon)
    return columns, np.asarray(lons, dtype=np.float64)


def timestamps(n_rows: int = N_ROWS) -> list[str]:
    """UTC ISO-8601 timestamps (with ``Z``) of the 5-minute grid from START."""
    return [
        (START + timedelta(seconds=STEP_S * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for i in range(n_rows)
    ]


def local_hours(n_rows: int, longitudes: np.ndarray) -> np.ndarray:
    """Local solar hour of day in [0, 24) for every row and site, shape (n_rows, n_sites).

    Solar time (UTC + longitude / 15 h) is used rather than civil time zones: it needs no tz
    database, and human and batch load follow the sun more closely than the clock anyway.
    """
    utc_h = START.hour + START.minute / 60 + np.arange(n_rows) * (STEP_S / 3600.0)
    return np.mod(utc_h[:, None] + longitudes[None, :] / 15.0, 24.0)


def _smoothed_walk(rng: np.random.Generator, n_rows: int, n_cols: int) -> np.ndarray:
    """Zero-mean, unit-std slow drift: an hourly random walk averaged over a day."""
    hours = n_rows * STEP_S // 3600 + 1
    walk = np.cumsum(rng.standard_normal((hours, n_cols)), axis=0)
    kernel = np.ones(24) / 24.0
    padded = np.concatenate([np.repeat(walk[:1], 12, 0), walk, np.repeat(walk[-1:], 11, 0)])
    smooth = np.stack([np.convolve(padded[:, c], kernel, mode="valid") for c in range(n_cols)], 1)
    smooth -= smooth.mean(axis=0)
    smooth /= smooth.std(axis=0)
    t_h = np.arange(n_rows) * (STEP_S / 3600.0)
    return np.stack([np.interp(t_h, np.arange(hours), smooth[:, c]) for c in range(n_cols)], 1)


def generate(
    seed: int = SEED, sites_path: str | os.PathLike[str] = DEFAULT_SITES
) -> tuple[list[str], list[str], np.ndarray]:
    """Draw the synthetic trace: (timestamps, column names, utilisation array (8928, C)).

    The values are already quantised to 4 decimals, so what a caller gets here is exactly what
    ``write_csv`` writes and a loader reads back. All random draws happen in a fixed order from
    one ``default_rng(seed)``, which is what makes the output reproducible.
    """
    columns, lons = read_sites(sites_path)
    n, c = N_ROWS, len(columns)
    rng = np.random.default_rng(seed)

    def uniform(lo: float, hi: float) -> np.ndarray:
        return lo + (hi - lo) * rng.random(c)

    level = uniform(0.60, 0.78)
    amplitude = uniform(0.04, 0.14)
    peak_h = uniform(14.0, 17.0)
    drift_sd = uniform(0.015, 0.040)
    phi = uniform(0.80, 0.95)
    noise_sd = uniform(0.010, 0.022)

    hour = local_hours(n, lons)
    x = 2.0 * np.pi * (hour - peak_h[None, :]) / 24.0
    # cos x + cos(2x)/4 spans [-0.75, 1.25]: a range of 2, mean 0 over a day, peak at peak_h.
    diurnal = amplitude[None, :] * (np.cos(x) + 0.25 * np.cos(2.0 * x)) / 2.0

    # Weekend (local): 2019-05-01 was a Wednesday, weekday index 2 with Monday = 0.
    local_day = np.floor(
        (START.hour + np.arange(n)[:, None] * STEP_S / 3600.0 + lons[None, :] / 15.0) / 24.0
    )
    weekend = np.mod(local_day + START.weekday(), 7) >= 5
    weekly = np.where(weekend, -0.01, 0.0)

    drift = drift_sd[None, :] * _smoothed_walk(rng, n, c)

    shocks = rng.standard_normal((n, c)) * (noise_sd * np.sqrt(1.0 - phi**2))[None, :]
    noise = np.empty((n, c))
    noise[0] = rng.standard_normal(c) * noise_sd
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + shocks[i]

    util = level[None, :] + diurnal + weekly + drift + noise

    # Rare events. Counts, starts, lengths and sizes come from uniforms drawn in a fixed order.
    n_dips = 2 + np.floor(4 * rng.random(c)).astype(int)  # 2-5 per month
    n_surges = np.floor(3 * rng.random(c)).astype(int)  # 0-2 per month
    for j in range(c):
        for _ in range(n_dips[j]):
            start, length_u, depth_u = rng.random(3)
            length = 2 + int(11 * length_u)  # 2-12 steps = 10-60 minutes
            s = int(start * (n - length))
            util[s : s + length, j] -= 0.08 + 0.22 * depth_u
        for _ in range(n_surges[j]):
            start, length_u, shoulder_u = rng.random(3)
            length = 1 + int(6 * length_u)  # 1-6 steps = 5-30 minutes
            s = int(start * (n - length))
            util[s : s + length, j] = 1.0
            if length >= 3:  # ramp in and out through 0.95-0.99
                shoulder = 0.95 + 0.04 * shoulder_u
                util[s, j] = util[s + length - 1, j] = shoulder

    util = np.clip(util, 0.0, 1.0)
    quantised = np.rint(util * _QUANTUM) / _QUANTUM
    return timestamps(n), columns, quantised


def write_csv(
    path: str | os.PathLike[str],
    stamps: Sequence[str],
    columns: Sequence[str],
    values: np.ndarray,
) -> None:
    """Write ``timestamp,<columns...>`` with 4-decimal values, atomically.

    The file appears under its final name only when complete (temp file in the same directory,
    then ``os.replace``), so an interrupted run never leaves a truncated trace behind.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(stamps), len(columns)):
        raise ValueError(
            f"values have shape {values.shape}, expected ({len(stamps)}, {len(columns)})"
        )
    if not np.all((values >= 0.0) & (values <= 1.0)):
        raise ValueError("values must lie in [0, 1]")
    codes = np.rint(values * _QUANTUM).astype(np.int64)
    text = _TEXT[codes]
    lines = ["timestamp," + ",".join(columns)]
    lines.extend(f"{ts},{','.join(row)}" for ts, row in zip(stamps, text.tolist(), strict=True))
    payload = ("\n".join(lines) + "\n").encode("ascii")

    write_bytes(path, payload)


def stats_rows(
    columns: Sequence[str], values: np.ndarray, hours: np.ndarray
) -> list[tuple[str, list[float]]]:
    """Per-column summary used to compare the trace with the published figures.

    ``hours`` is the local hour of each value (same shape as ``values``); the diurnal amplitude
    is the max minus min of the mean-by-hour profile, the figure docs/references.md quotes for one
    Google PDU (hourly means 0.694-0.759 on a day).
    """
    out: list[tuple[str, list[float]]] = []
    hour_bin = np.floor(hours).astype(int) % 24
    for j, name in enumerate(columns):
        v = values[:, j]
        profile = np.bincount(hour_bin[:, j], weights=v, minlength=24) / np.maximum(
            np.bincount(hour_bin[:, j], minlength=24), 1
        )
        a, b = v[:-1] - v[:-1].mean(), v[1:] - v[1:].mean()
        denom = np.sqrt((a * a).sum() * (b * b).sum())
        lag1 = float((a * b).sum() / denom) if denom > 0 else float("nan")
        p5, p95 = np.percentile(v, [5, 95])
        out.append(
            (name, [v.mean(), v.min(), v.max(), p5, p95, profile.max() - profile.min(), lag1])
        )
    return out


def format_stats(columns: Sequence[str], values: np.ndarray, hours: np.ndarray) -> str:
    """A plain-text table of ``stats_rows`` plus an ALL row over every value."""
    head = ["column", "mean", "min", "max", "p5", "p95", "diurnal", "lag1"]
    rows = stats_rows(columns, values, hours)
    width = max(len(head[0]), *(len(name) for name, _ in rows), len("ALL"))
    lines = [f"{head[0]:<{width}} " + " ".join(f"{h:>7}" for h in head[1:])]
    for name, nums in rows:
        lines.append(f"{name:<{width}} " + " ".join(f"{x:7.4f}" for x in nums))
    flat = values.ravel()
    p5, p95 = np.percentile(flat, [5, 95])
    diurnals = [nums[5] for _, nums in rows]
    lags = [nums[6] for _, nums in rows]
    lines.append(
        f"{'ALL':<{width}} "
        + " ".join(
            f"{x:7.4f}"
            for x in (
                flat.mean(),
                flat.min(),
                flat.max(),
                p5,
                p95,
                np.mean(diurnals),
                np.mean(lags),
            )
        )
    )
    inside = np.mean((flat >= 0.4) & (flat <= 0.9))
    lines.append(
        f"{len(columns)} columns x {values.shape[0]} rows; {inside:.1%} of values in [0.4, 0.9]; "
        f"column means {min(r[1][0] for r in rows):.3f}-{max(r[1][0] for r in rows):.3f}; "
        f"diurnal amplitude {min(diurnals):.3f}-{max(diurnals):.3f} "
        "(ALL row: diurnal and lag1 are column averages)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the trace (default: the shipped file) and optionally print stats."""
    parser = argparse.ArgumentParser(
        description="Write the SYNTHETIC Google-like power trace (see traces/README.md)."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output CSV path")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    parser.add_argument(
        "--sites", type=Path, default=DEFAULT_SITES, help="site catalogue (sites_large.csv)"
    )
    parser.add_argument("--stats", action="store_true", help="print per-column statistics")
    args = parser.parse_args(argv)
    try:
        stamps, columns, values = generate(args.seed, args.sites)
        write_csv(args.out, stamps, columns, values)
        _, lons = read_sites(args.sites)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.out} ({len(stamps)} rows x {len(columns)} columns, seed {args.seed})",
        file=sys.stderr,
    )
    if args.stats:
        print(format_stats(columns, values, local_hours(len(stamps), lons)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
