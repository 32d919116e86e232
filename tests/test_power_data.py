"""Tests for powertrip_env.scenario.power_data: validation messages, caching, read-only arrays,
day splits.

Every bad-input test checks the exception type and that the message names the file, the column,
the line (line 1 = header, first data row = line 2) and the bad value, because the project
promises errors a user can act on without reading a traceback (docs/scenarios.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from powertrip_env.errors import TraceError
from powertrip_env.scenario.power_data import (
    GridCsv,
    PowerTrace,
    clear_trace_cache,
    find_columns,
    iso_utc,
    load_trace,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "traces" / "power_synthetic_2019.csv"

HEADER = "timestamp,a_pdu1,b_pdu2"
GOOD_ROWS = [
    "2019-05-01T07:00:00Z,0.5000,0.7000",
    "2019-05-01T07:05:00Z,0.5100,0.7100",
    "2019-05-01T07:10:00Z,0.5200,0.7200",
    "2019-05-01T07:15:00Z,0.5300,0.7300",
]


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_trace_cache()
    yield
    clear_trace_cache()


def write(tmp_path: Path, name: str, lines: list[str] | str) -> Path:
    path = tmp_path / name
    text = lines if isinstance(lines, str) else "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def with_row(index: int, row: str) -> list[str]:
    """The good file with data row ``index`` (0-based; it is on line index + 2) replaced."""
    rows = list(GOOD_ROWS)
    rows[index] = row
    return [HEADER, *rows]


def error_for(path: Path) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert isinstance(info.value, ValueError)  # TraceError subclasses ValueError
    return str(info.value)


def assert_names(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in message: {message}"


# --- good input ---------------------------------------------------------------------------


def test_good_file_loads_with_utc_seconds_and_regular_step(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "good.csv", [HEADER, *GOOD_ROWS]))
    assert isinstance(trace, PowerTrace)
    assert trace.columns == ("a_pdu1", "b_pdu2")
    assert trace.interval_s == 300
    assert trace.n_rows == 4
    assert trace.n_days == pytest.approx(4 * 300 / 86400)
    assert trace.timestamps_s.dtype == np.int64
    assert trace.timestamps_s[0] == 1_556_694_000  # 2019-05-01T07:00:00Z
    assert trace.util.dtype == np.float64 and trace.util.shape == (4, 2)
    np.testing.assert_allclose(trace.util[:, 0], [0.50, 0.51, 0.52, 0.53])
    assert trace.path == str((tmp_path / "good.csv").resolve())


def test_iso_utc_prints_times_as_the_trace_files_write_them(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "good.csv", [HEADER, *GOOD_ROWS]))
    assert [iso_utc(t) for t in trace.timestamps_s] == [row.split(",")[0] for row in GOOD_ROWS]
    assert iso_utc(0) == "1970-01-01T00:00:00Z"
    assert iso_utc(1_556_668_800.9) == "2019-05-01T00:00:00Z"  # fractions are dropped
    assert iso_utc(np.float32(86_400)) == "1970-01-02T00:00:00Z"


def test_offsets_are_converted_and_naive_times_taken_as_utc(tmp_path: Path) -> None:
    rows = [
        "2019-05-01T00:00:00-07:00,0.1",  # 07:00 UTC
        "2019-05-01 07:05:00,0.2",  # naive: UTC
        "2019-05-01T09:10:00+02:00,0.3",  # 07:10 UTC
    ]
    trace = load_trace(write(tmp_path, "tz.csv", ["timestamp,x", *rows]))
    assert trace.timestamps_s.tolist() == [1_556_694_000, 1_556_694_300, 1_556_694_600]


def test_trailing_blank_lines_are_tolerated(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "trail.csv", "\n".join([HEADER, *GOOD_ROWS]) + "\n\n\n"))
    assert trace.n_rows == 4


def test_integer_values_are_accepted(tmp_path: Path) -> None:
    rows = ["2019-05-01T07:00:00Z,0,1", "2019-05-01T07:05:00Z,1,0"]
    trace = load_trace(write(tmp_path, "ints.csv", [HEADER, *rows]))
    assert trace.util.tolist() == [[0.0, 1.0], [1.0, 0.0]]


# --- bad input: one test per case -----------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    msg = error_for(tmp_path / "nowhere_trace.csv")
    assert_names(msg, "nowhere_trace.csv", "cannot read")


def test_unreadable_path_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "dir_trace.csv").mkdir()
    msg = error_for(tmp_path / "dir_trace.csv")
    assert_names(msg, "dir_trace.csv", "not a regular file")


def test_undecodable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "binary_trace.csv"
    path.write_bytes(b"\xff\xfe\x00\x81garbage\x00\n\x90\x91")
    msg = error_for(path)
    assert_names(msg, "binary_trace.csv", "cannot read")


def test_empty_file(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "empty_trace.csv", ""))
    assert_names(msg, "empty_trace.csv", "empty")


def test_header_only(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "header_only.csv", [HEADER]))
    assert_names(msg, "header_only.csv", "no data rows")


def test_missing_timestamp_column(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "no_ts.csv", ["time,a_pdu1,b_pdu2", *GOOD_ROWS]))
    assert_names(msg, "no_ts.csv", "line 1", "'timestamp'", "time, a_pdu1")


def test_no_trace_columns(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "only_ts.csv", ["timestamp", "2019-05-01T07:00:00Z"]))
    assert_names(msg, "only_ts.csv", "line 1", "no data columns", "'timestamp'")


def test_duplicate_column_names(tmp_path: Path) -> None:
    lines = ["timestamp,a_pdu1,a_pdu1", *GOOD_ROWS]
    msg = error_for(write(tmp_path, "dupe_cols.csv", lines))
    assert_names(msg, "dupe_cols.csv", "line 1", "duplicate", "'a_pdu1'")


def test_unparseable_timestamp(tmp_path: Path) -> None:
    lines = with_row(2, "2019-05-01T07:1O:00Z,0.5,0.5")  # letter O, on line 4
    msg = error_for(write(tmp_path, "bad_time.csv", lines))
    assert_names(msg, "bad_time.csv", "line 4", "'timestamp'", "'2019-05-01T07:1O:00Z'", "ISO-8601")


def test_empty_timestamp(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "blank_time.csv", with_row(1, ",0.5,0.5")))
    assert_names(msg, "blank_time.csv", "line 3", "'timestamp'", "''")


def test_non_increasing_timestamps(tmp_path: Path) -> None:
    lines = with_row(3, "2019-05-01T07:10:00Z,0.5,0.5")  # repeats line 4's time on line 5
    msg = error_for(write(tmp_path, "repeat_time.csv", lines))
    assert_names(
        msg, "repeat_time.csv", "line 5", "'timestamp'", "'2019-05-01T07:10:00Z'", "increase"
    )


def test_decreasing_timestamps(tmp_path: Path) -> None:
    lines = with_row(2, "2019-05-01T06:00:00Z,0.5,0.5")
    msg = error_for(write(tmp_path, "back_time.csv", lines))
    assert_names(msg, "back_time.csv", "line 4", "'2019-05-01T06:00:00Z'", "increase")


def test_irregular_step(tmp_path: Path) -> None:
    lines = with_row(3, "2019-05-01T07:25:00Z,0.5,0.5")  # 15 min after the previous row
    msg = error_for(write(tmp_path, "gap_time.csv", lines))
    assert_names(
        msg, "gap_time.csv", "line 5", "'timestamp'", "'2019-05-01T07:25:00Z'", "900 s", "300 s"
    )


def test_fractional_seconds(tmp_path: Path) -> None:
    lines = with_row(1, "2019-05-01T07:05:00.5Z,0.5,0.5")
    msg = error_for(write(tmp_path, "frac_time.csv", lines))
    assert_names(msg, "frac_time.csv", "line 3", "'2019-05-01T07:05:00.5Z'", "whole seconds")


def test_single_row(tmp_path: Path) -> None:
    msg = error_for(write(tmp_path, "one_row.csv", [HEADER, GOOD_ROWS[0]]))
    assert_names(msg, "one_row.csv", "one data row")


def test_empty_cell(tmp_path: Path) -> None:
    lines = with_row(2, "2019-05-01T07:10:00Z,0.52,")
    msg = error_for(write(tmp_path, "empty_cell.csv", lines))
    assert_names(msg, "empty_cell.csv", "line 4", "'b_pdu2'", "''", "[0, 1]")


def test_nan_cell(tmp_path: Path) -> None:
    lines = with_row(1, "2019-05-01T07:05:00Z,NaN,0.71")
    msg = error_for(write(tmp_path, "nan_cell.csv", lines))
    assert_names(msg, "nan_cell.csv", "line 3", "'a_pdu1'", "'NaN'", "[0, 1]")


def test_blank_line_inside(tmp_path: Path) -> None:
    lines = [HEADER, GOOD_ROWS[0], "", *GOOD_ROWS[1:]]
    msg = error_for(write(tmp_path, "blank_line.csv", lines))
    assert_names(msg, "blank_line.csv", "line 3", "blank line")


def test_non_numeric_value(tmp_path: Path) -> None:
    lines = with_row(3, "2019-05-01T07:15:00Z,0.53,high")
    msg = error_for(write(tmp_path, "word_cell.csv", lines))
    assert_names(msg, "word_cell.csv", "line 5", "'b_pdu2'", "'high'", "not a number")


def test_boolean_column_is_rejected(tmp_path: Path) -> None:
    rows = ["2019-05-01T07:00:00Z,True,0.5", "2019-05-01T07:05:00Z,False,0.5"]
    msg = error_for(write(tmp_path, "bool_cell.csv", [HEADER, *rows]))
    assert_names(msg, "bool_cell.csv", "line 2", "'a_pdu1'", "'True'", "not a number")


def test_value_above_one(tmp_path: Path) -> None:
    lines = with_row(0, "2019-05-01T07:00:00Z,1.25,0.7")
    msg = error_for(write(tmp_path, "too_high.csv", lines))
    assert_names(msg, "too_high.csv", "line 2", "'a_pdu1'", "'1.25'", "outside [0, 1]")


def test_value_below_zero(tmp_path: Path) -> None:
    lines = with_row(2, "2019-05-01T07:10:00Z,0.52,-0.01")
    msg = error_for(write(tmp_path, "too_low.csv", lines))
    assert_names(msg, "too_low.csv", "line 4", "'b_pdu2'", "'-0.01'", "outside [0, 1]")


def test_first_bad_cell_in_file_order_is_reported(tmp_path: Path) -> None:
    rows = list(GOOD_ROWS)
    rows[1] = "2019-05-01T07:05:00Z,0.51,7"  # line 3, second column
    rows[2] = "2019-05-01T07:10:00Z,x,0.72"  # line 4, first column
    msg = error_for(write(tmp_path, "two_bad.csv", [HEADER, *rows]))
    assert_names(msg, "line 3", "'b_pdu2'", "'7'")


def test_ragged_row(tmp_path: Path) -> None:
    lines = with_row(1, "2019-05-01T07:05:00Z,0.5,0.5,0.5")
    msg = error_for(write(tmp_path, "ragged.csv", lines))
    assert_names(msg, "ragged.csv", "malformed CSV", "line 3")


# --- column lookup and day splits -----------------------------------------------------------


def test_column_indices_and_missing_column_message(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "cols.csv", [HEADER, *GOOD_ROWS]))
    assert trace.column_indices(["b_pdu2", "a_pdu1", "b_pdu2"]).tolist() == [1, 0, 1]
    assert trace.column_indices([]).shape == (0,)
    with pytest.raises(TraceError) as info:
        trace.column_indices(["a_pdu1", "a_pdu7"], source="my_scenario.toml, site tokyo")
    assert_names(
        str(info.value), "'a_pdu7'", "cols.csv", "my_scenario.toml, site tokyo", "a_pdu1", "b_pdu2"
    )


def test_cache_returns_identical_object(tmp_path: Path) -> None:
    path = write(tmp_path, "cached.csv", [HEADER, *GOOD_ROWS])
    first = load_trace(path)
    assert load_trace(str(path)) is first
    assert load_trace(tmp_path / "." / "cached.csv") is first  # same resolved path
    clear_trace_cache()
    assert load_trace(path) is not first


def test_cache_reloads_a_changed_file(tmp_path: Path) -> None:
    path = write(tmp_path, "changing.csv", [HEADER, *GOOD_ROWS])
    first = load_trace(path)
    write(tmp_path, "changing.csv", [HEADER, *GOOD_ROWS[:3]])
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = load_trace(path)
    assert second is not first and second.n_rows == 3


def test_arrays_are_read_only(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "ro.csv", [HEADER, *GOOD_ROWS]))
    assert not trace.util.flags.writeable
    assert not trace.timestamps_s.flags.writeable
    with pytest.raises(ValueError):
        trace.util[0, 0] = 0.9
    with pytest.raises(ValueError):
        trace.timestamps_s[0] = 0
    with pytest.raises(AttributeError):
        trace.interval_s = 60  # type: ignore[misc]


def test_shipped_trace_loads() -> None:
    trace = load_trace(SHIPPED)
    assert len(trace.columns) >= 32
    assert trace.n_rows == 8928
    assert trace.interval_s == 300
    assert trace.n_days == pytest.approx(31.0)
    assert trace.timestamps_s[0] == 1_556_694_000
    assert load_trace(SHIPPED) is trace


# --- the public reader other loaders share (carbon_data) ----------------------------------


def test_grid_csv_reads_a_regular_grid_of_any_values(tmp_path: Path) -> None:
    path = write(
        tmp_path, "any.csv", ["timestamp,x", "2019-05-01T07:00:00Z,-3", "2019-05-01T08:00:00Z,7"]
    )
    grid = GridCsv(path)
    assert grid.names == ["timestamp", "x"]
    rows = grid.rows()
    times = grid.times(rows["timestamp"])
    assert times.tolist() == [1556694000, 1556697600]
    assert grid.step(rows["timestamp"], times) == 3600
    assert grid.cell(3, 1) == "7"  # the values are the caller's to check: -3 is not refused
    backwards = ["timestamp,x", "2019-05-01T07:00:00Z,1", "2019-05-01T06:00:00Z,1"]
    grid = GridCsv(write(tmp_path, "backwards.csv", backwards))
    rows = grid.rows()
    with pytest.raises(TraceError, match=r"line 3, column 'timestamp'.*not later than"):
        grid.step(rows["timestamp"], grid.times(rows["timestamp"]))


def test_find_columns_takes_a_bare_string_as_one_name_and_words_a_miss_as_told() -> None:
    assert find_columns(("a", "bc"), "bc", str).tolist() == [1]
    assert find_columns(("a", "bc"), ["bc", "a"], str).tolist() == [1, 0]
    with pytest.raises(TraceError, match=r"^no zone 'b' here$"):
        find_columns(("a", "bc"), ["a", "b"], lambda name: f"no zone {name!r} here")
