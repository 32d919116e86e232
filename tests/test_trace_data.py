"""Tests for the data in traces/: the shipped synthetic trace, the catalogues, the converter.

The statistical assertions are chosen so that the shipped file passes but a broken generator
(no diurnal cycle, diurnal cycle in UTC instead of local time, white noise, wrong level, no
events) fails. The figures they encode come from traces/README.md and docs/references.md.
"""

from __future__ import annotations

import csv
import gzip
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

from powertrip_env.scenario.power_data import clear_trace_cache, load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "traces"
SHIPPED = TRACES / "power_synthetic_2019.csv"
TRACE_START_S = 1_556_694_000  # 2019-05-01T07:00:00Z = 00:00 US/Pacific

GPU_TYPES = {"V100", "A100", "H100", "H200", "L4", "T4", "MI250X", "MI300X"}
REGIONS = {"north-america", "europe", "asia", "oceania", "south-america", "africa"}
SITE_COLUMNS = [
    "name",
    "region",
    "latitude",
    "longitude",
    "gpu",
    "gpu_count",
    "capacity_kw",
    "pue",
    "wan_gbps",
    "data_share",
    "trace_column",
]


generate = importlib.import_module("traces.tools.generate")
convert_google = importlib.import_module("traces.tools.convert_google")


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def shipped():
    clear_trace_cache()
    return load_trace(SHIPPED)


@pytest.fixture(scope="module")
def large() -> list[dict[str, str]]:
    return read_csv(TRACES / "sites_large.csv")


@pytest.fixture(scope="module")
def default() -> list[dict[str, str]]:
    return read_csv(TRACES / "sites_default.csv")


@pytest.fixture(scope="module")
def gpus() -> dict[str, dict[str, str]]:
    return {row["name"]: row for row in read_csv(TRACES / "gpus.csv")}


# --- the shipped synthetic trace ------------------------------------------------------------


def test_regenerating_gives_the_shipped_file_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "regen.csv"
    assert generate.main(["--out", str(out)]) == 0
    assert out.read_bytes() == SHIPPED.read_bytes()


def test_generate_is_importable_and_seeded() -> None:
    stamps, columns, values = generate.generate(generate.SEED)
    assert stamps[0] == "2019-05-01T07:00:00Z" and stamps[-1] == "2019-06-01T06:55:00Z"
    assert len(stamps) == 8928 and values.shape == (8928, len(columns))
    _, _, again = generate.generate(generate.SEED)
    np.testing.assert_array_equal(values, again)
    _, _, other = generate.generate(generate.SEED + 1)
    assert not np.array_equal(values, other)


def test_stats_option_prints_a_row_per_column(tmp_path: Path, capsys) -> None:
    assert generate.main(["--out", str(tmp_path / "s.csv"), "--stats"]) == 0
    out = capsys.readouterr().out
    assert "diurnal" in out and "lag1" in out
    assert re.search(r"^ALL\s+0\.\d{4}", out, re.MULTILINE)
    assert "syn_council_bluffs" in out


def test_shipped_text_format() -> None:
    lines = SHIPPED.read_text(encoding="ascii").splitlines()
    assert len(lines) == 1 + 8928
    assert lines[0].startswith("timestamp,")
    assert lines[1].startswith("2019-05-01T07:00:00Z,")
    value = re.compile(r"^(0\.\d{4}|1\.0000)$")
    for line in lines[1::97]:  # a spread of rows
        stamp, *cells = line.split(",")
        assert stamp.endswith("Z")
        assert all(value.match(c) for c in cells), line


def test_shipped_grid(shipped) -> None:
    assert shipped.n_rows == 31 * 288
    assert shipped.interval_s == 300
    assert shipped.timestamps_s[0] == TRACE_START_S


def test_shipped_levels_match_published_range(shipped) -> None:
    u = shipped.util
    assert 0.6 <= u.mean() <= 0.8  # docs/references.md: typical 0.4-0.9, our target mean ~0.7
    inside = np.mean((u >= 0.4) & (u <= 0.9))
    assert inside >= 0.95
    means = u.mean(axis=0)
    assert means.min() >= 0.55 and means.max() <= 0.82
    assert means.max() - means.min() >= 0.08  # sites differ


def test_diurnal_cycle_peaks_in_local_afternoon(shipped, large) -> None:
    lon = np.array([float(s["longitude"]) for s in large])
    idx = shipped.column_indices([s["trace_column"] for s in large])
    utc_h = (shipped.timestamps_s - shipped.timestamps_s[0]) / 3600.0 + 7.0
    local_h = np.mod(utc_h[:, None] + lon[None, :] / 15.0, 24.0)
    u = shipped.util[:, idx]
    afternoon = np.where((local_h >= 13) & (local_h < 18), u, np.nan)
    night = np.where((local_h >= 1) & (local_h < 6), u, np.nan)
    gap = np.nanmean(afternoon, axis=0) - np.nanmean(night, axis=0)
    assert np.all(gap > 0.02), gap
    # Amplitude of the mean-by-local-hour profile, as in traces/README.md: ~0.04-0.15.
    bins = np.floor(local_h).astype(int)
    for j in range(u.shape[1]):
        profile = np.bincount(bins[:, j], u[:, j], 24) / np.bincount(bins[:, j], minlength=24)
        assert 0.03 <= profile.max() - profile.min() <= 0.16


def test_noise_is_autocorrelated_and_level_drifts(shipped) -> None:
    u = shipped.util
    a, b = u[:-1] - u[:-1].mean(0), u[1:] - u[1:].mean(0)
    lag1 = (a * b).sum(0) / np.sqrt((a * a).sum(0) * (b * b).sum(0))
    assert np.all(lag1 > 0.85)
    daily = u.reshape(31, 288, -1).mean(axis=1)
    assert np.all(daily.max(0) - daily.min(0) > 0.02)


def test_rare_dips_and_surges(shipped) -> None:
    u = shipped.util
    p5 = np.percentile(u, 5, axis=0)
    assert np.all(u.min(axis=0) < p5 - 0.04)  # every column has dips below its usual range
    saturated = u >= 1.0
    assert saturated.any(axis=0).sum() >= u.shape[1] // 3  # surges exist ...
    assert saturated.mean() < 0.002  # ... and are rare


# --- catalogues -----------------------------------------------------------------------------


def test_gpu_catalogue(gpus) -> None:
    with (TRACES / "gpus.csv").open(encoding="utf-8") as fh:
        assert fh.readline().strip() == "name,tflops_bf16,power_w,memory_gb,source"
    assert set(gpus) == GPU_TYPES
    for row in gpus.values():
        assert float(row["tflops_bf16"]) > 0 and float(row["power_w"]) > 0
        assert float(row["memory_gb"]) > 0 and row["source"].strip()
    assert float(gpus["H100"]["tflops_bf16"]) == 989 and float(gpus["H100"]["power_w"]) == 700
    assert float(gpus["A100"]["memory_gb"]) == 80 and float(gpus["V100"]["memory_gb"]) == 32


@pytest.mark.parametrize("name", ["sites_large.csv", "sites_default.csv"])
def test_site_catalogue_well_formed(name: str, gpus, shipped) -> None:
    with (TRACES / name).open(encoding="utf-8") as fh:
        assert fh.readline().strip().split(",") == SITE_COLUMNS
    sites = read_csv(TRACES / name)
    assert len({s["name"] for s in sites}) == len(sites)
    assert len({s["trace_column"] for s in sites}) == len(sites)
    shares = [float(s["data_share"]) for s in sites]
    assert all(x > 0 for x in shares)
    assert abs(sum(shares) - 1.0) < 1e-9
    shipped.column_indices([s["trace_column"] for s in sites], source=name)
    fracs = []
    for s in sites:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", s["name"]), s["name"]
        assert s["region"] in REGIONS
        assert -90 <= float(s["latitude"]) <= 90 and -180 <= float(s["longitude"]) <= 180
        assert s["gpu"] in gpus
        assert int(s["gpu_count"]) > 0
        pue = float(s["pue"])
        assert 1.08 <= pue <= 1.6  # docs/references.md: Google fleet 1.10, industry average 1.57
        assert 2 <= float(s["wan_gbps"]) <= 10
        per_gpu_kw = float(gpus[s["gpu"]]["power_w"]) * 1.8 * pue / 1000.0
        # Share of GPUs the headroom powers at the typical utilisation 0.7 (docs/data.md).
        fracs.append(float(s["capacity_kw"]) * 0.3 / per_gpu_kw / int(s["gpu_count"]))
    assert min(fracs) >= 0.35 and max(fracs) <= 0.95
    assert min(fracs) < 0.5 and max(fracs) > 0.8  # some sites power-starved, some not


def test_default_sites_are_in_large_and_diverse(default, large) -> None:
    assert len(default) == 8 and len(large) == 32
    by_name = {s["name"]: s for s in large}
    for s in default:
        other = by_name[s["name"]]
        for key in ("latitude", "longitude", "trace_column", "region"):
            assert s[key] == other[key], (s["name"], key)
    assert len({s["region"] for s in default}) >= 4
    assert len({s["gpu"] for s in default}) >= 4
    assert len({s["region"] for s in large}) >= 5
    assert {s["gpu"] for s in large} == GPU_TYPES
    mix = {s["name"]: (s["gpu"], int(s["gpu_count"])) for s in default}
    assert mix == {
        "us-central-iowa": ("H100", 64),
        "us-east-virginia": ("A100", 64),
        "us-west-oregon": ("H100", 32),
        "europe-west-belgium": ("MI250X", 48),
        "europe-north-finland": ("A100", 48),
        "asia-east-tokyo": ("H100", 48),
        "asia-southeast-singapore": ("V100", 64),
        "australia-sydney": ("A100", 32),
    }


def test_trace_columns_follow_large_catalogue_order(shipped, large) -> None:
    assert list(shipped.columns) == [s["trace_column"] for s in large]


# --- converter for the real Google data -----------------------------------------------------

GOOGLE_HEADER = (
    "time,cell,pdu,measured_power_util,production_power_util,"
    "bad_measurement_data,bad_production_power_data"
)


def _google_rows(cell: str, pdu: str, values: dict[int, float], bad: set[int]) -> list[str]:
    rows = []
    for k, v in values.items():
        time_us = 600_000_000 + k * 300_000_000  # window k after the trace start
        flag = "true" if k in bad else "false"
        rows.append(f"{time_us},{cell},{pdu},{v},{v * 0.9:.4f},{flag},false")
    return rows


@pytest.fixture()
def google_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two PDUs in the real schema: one plain CSV, one gzip, 20 windows each.

    a/pdu6: window 3 is flagged bad (value 0.99 must vanish), windows 7-8 are missing (short
    gap, interpolated). cellb/pdu1: windows 10-14 are missing (long gap, carried forward).
    """
    a = {k: round(0.5 + 0.01 * k, 4) for k in range(20) if k not in (7, 8)}
    a[3] = 0.99
    b = {k: round(0.8 - 0.01 * k, 4) for k in range(20) if not 10 <= k <= 14}
    plain = tmp_path / "in" / "cella_pdu6.csv"
    plain.parent.mkdir()
    rows_a = _google_rows("a", "pdu6", a, bad={3})
    plain.write_text("\n".join([GOOGLE_HEADER, *reversed(rows_a)]) + "\n", encoding="utf-8")
    zipped = tmp_path / "in" / "cellb_pdu1.csv.gz"
    with gzip.open(zipped, "wt", encoding="utf-8") as fh:
        fh.write("\n".join([GOOGLE_HEADER, *_google_rows("cellb", "pdu1", b, set())]) + "\n")
    return plain, zipped


def test_convert_google_files(tmp_path: Path, google_files, capsys) -> None:
    out = tmp_path / "out" / "real.csv"
    rc = convert_google.main([*map(str, google_files), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    trace = load_trace(out)
    assert trace.columns == ("a_pdu6", "cellb_pdu1")
    assert trace.timestamps_s[0] == TRACE_START_S
    assert out.read_text().splitlines()[1].startswith("2019-05-01T07:00:00Z,")
    assert trace.interval_s == 300 and trace.n_rows == 20
    a = trace.util[:, 0]
    assert a[3] == pytest.approx(0.53)  # flagged 0.99 dropped, then interpolated
    assert a[7] == pytest.approx(0.57) and a[8] == pytest.approx(0.58)  # short gap
    b = trace.util[:, 1]
    assert np.allclose(b[10:15], 0.71)  # long gap: last value carried forward
    assert "cellb_pdu1" in err and "5 missing" in err
    assert "2019-05-01T07:50:00Z" in err and "2019-05-01T08:10:00Z" in err
    assert "a_pdu6" not in err  # the short gaps are not reported


def test_convert_google_directory_input(tmp_path: Path, google_files, capsys) -> None:
    out = tmp_path / "dir.csv"
    assert convert_google.main([str(google_files[0].parent), "--out", str(out)]) == 0
    assert load_trace(out).columns == ("a_pdu6", "cellb_pdu1")


def test_convert_google_max_gap_option(tmp_path: Path, google_files, capsys) -> None:
    out = tmp_path / "gap.csv"
    assert convert_google.main([*map(str, google_files), "--out", str(out), "--max-gap", "5"]) == 0
    b = load_trace(out).util[:, 1]
    np.testing.assert_allclose(b[9:16], [0.71, 0.70, 0.69, 0.68, 0.67, 0.66, 0.65], atol=1e-6)
    assert "cellb_pdu1" not in capsys.readouterr().err


def test_convert_google_missing_column(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "no_cell.csv"
    bad.write_text("time,pdu,measured_power_util,bad_measurement_data\n600000000,pdu1,0.5,false\n")
    out = tmp_path / "never.csv"
    assert convert_google.main([str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no_cell.csv" in err and "'cell'" in err and "cella_pdu6.csv" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_convert_google_reduced_schema_takes_cell_and_pdu_from_the_file_name(
    tmp_path: Path, capsys
) -> None:
    # The shape of the copies the project ships from: no cell, no flags, pdu sometimes missing.
    (tmp_path / "cella_pdu6.csv").write_text(
        "index,time,pdu,measured_power_util\n0,600000000,pdu6,0.659\n1,900000000,pdu6,0.657\n"
    )
    (tmp_path / "cella_pdu10.csv").write_text(
        "index,time,measured_power_util\n0,600000000,0.699\n1,900000000,0.696\n"
    )
    out = tmp_path / "cella.csv"
    assert (
        convert_google.main(
            [str(tmp_path / "cella_pdu6.csv"), str(tmp_path / "cella_pdu10.csv"), "--out", str(out)]
        )
        == 0
    )
    trace = load_trace(out)
    assert trace.columns == ("cella_pdu6", "cella_pdu10")
    np.testing.assert_array_equal(trace.util, [[0.659, 0.699], [0.657, 0.696]])
    assert "no 'bad_measurement_data' column" in capsys.readouterr().err


def test_convert_google_bad_value(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "too_high.csv"
    rows = _google_rows("a", "pdu1", {0: 0.5, 1: 1.5}, set())
    bad.write_text("\n".join([GOOGLE_HEADER, *rows]) + "\n")
    assert convert_google.main([str(bad), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "too_high.csv" in err and "line 3" in err and "measured_power_util" in err
    assert "'1.5'" in err and "[0, 1]" in err


def test_convert_google_unparseable_time_and_empty_file(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad_time.csv"
    bad.write_text(f"{GOOGLE_HEADER}\nsoon,a,pdu1,0.5,0.4,false,false\n")
    assert convert_google.main([str(bad), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "bad_time.csv" in err and "line 2" in err and "'time'" in err and "'soon'" in err
    empty = tmp_path / "empty.csv.gz"
    with gzip.open(empty, "wt") as fh:
        fh.write("")
    assert convert_google.main([str(empty), "--out", str(tmp_path / "x.csv")]) == 2
    assert "empty.csv.gz" in capsys.readouterr().err
