"""Grid carbon intensity: the shipped file, its loader and its converter.

The shipped file's values are checked against rows of green-dcc's Electricity Maps CSVs read by
hand (file and line given beside each), so a converter that shifted the hours, swapped the
direct and life-cycle columns or mixed up zones fails. Every bad input must be refused with a
message that names the file, the line, the column and the value.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from powertrip_env.errors import TraceError
from powertrip_env.scenario.carbon_data import CarbonIntensity, check_covers, load_carbon

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "traces" / "carbon_intensity_2022.csv"
ZONES = ("DE", "ZA", "IN-WE", "US-CAL-CISO", "AU-NSW", "BR-CS")
START_S = 1_654_041_600  # 2022-06-01T00:00:00Z, 7 days before the Solcast window
SOLCAST_S = 1_654_646_400  # 2022-06-08T00:00:00Z
HOUR = 3600

convert_carbon = importlib.import_module("traces.tools.convert_carbon")


@pytest.fixture(scope="module")
def shipped() -> CarbonIntensity:
    return load_carbon(SHIPPED)


# --- the shipped file ------------------------------------------------------------------------


def test_shipped_shape_zones_and_calendar(shipped: CarbonIntensity) -> None:
    assert shipped.zones == ZONES
    assert shipped.step_s == HOUR
    assert shipped.direct.shape == shipped.lca.shape == (864, 6)  # 36 days x 24 h
    assert shipped.timestamps_s.dtype == np.float64
    assert shipped.timestamps_s[0] == START_S
    assert shipped.end_s == SOLCAST_S + 29 * 86_400  # the Solcast window's end, 2022-07-07
    np.testing.assert_array_equal(np.diff(shipped.timestamps_s), HOUR)
    assert not shipped.direct.flags.writeable and not shipped.lca.flags.writeable
    assert load_carbon(SHIPPED) is shipped  # cached: every env shares one copy


@pytest.mark.parametrize(
    ("row", "zone", "direct", "lca"),
    [
        # DE-LU/2022/DE-LU_2022_hourly.csv line 3626: 2022-06-01 00:00:00,...,DE,557.82,641.83
        (0, "DE", 557.82, 641.83),
        # line 4094 of each 2022 file: 2022-06-20 12:00:00 (row 19 * 24 + 12 = 468)
        (468, "ZA", 636.75, 706.92),
        (468, "IN-WE", 686.7, 744.55),
        (468, "US-CAL-CISO", 185.59, 246.9),
        (468, "AU-NSW", 610.64, 677.4),
        # BR-SP/2022/BR-SP_2022_hourly.csv line 4489: 2022-07-06 23:00:00,...,BR-CS,74.1,110.1
        (863, "BR-CS", 74.1, 110.1),
    ],
)
def test_shipped_values_match_the_source_rows(
    shipped: CarbonIntensity, row: int, zone: str, direct: float, lca: float
) -> None:
    (j,) = shipped.zone_indices([zone])
    assert shipped.direct[row, j] == direct
    assert shipped.lca[row, j] == lca


def test_shipped_values_are_plausible(shipped: CarbonIntensity) -> None:
    # Direct emissions of real grids lie between a hydro-rich grid's tens and coal's ~1,000
    # gCO2eq/kWh; the life-cycle figure adds upstream emissions, so it is never the smaller.
    assert shipped.direct.min() > 40 and shipped.direct.max() < 800
    assert (shipped.lca >= shipped.direct).all()
    assert (shipped.lca <= shipped.direct * 1.8).all()
    means = dict(zip(shipped.zones, shipped.direct.mean(axis=0), strict=True))
    assert means["BR-CS"] < means["US-CAL-CISO"] < means["DE"] < means["ZA"]  # hydro ... coal
    assert shipped.direct[:, shipped.zone_indices(["DE"])[0]].std() > 50  # wind and sun move it


def test_shipped_covers_the_flagship_calendar_and_its_week_of_history(
    shipped: CarbonIntensity,
) -> None:
    check_covers(shipped, SOLCAST_S - 7 * 86_400, SOLCAST_S + 29 * 86_400, "flagship")
    with pytest.raises(
        TraceError,
        match=r"flagship: .*carbon_intensity_2022\.csv covers "
        r"2022-06-01T00:00:00Z to 2022-07-07T00:00:00Z, not the calendar "
        r"2022-05-31T22:00:00Z .*starts 2 h after",
    ):
        check_covers(shipped, START_S - 2 * HOUR, START_S + HOUR, "flagship")
    with pytest.raises(TraceError, match=r"ends 1 h before"):
        check_covers(shipped, SOLCAST_S, shipped.end_s + HOUR, "flagship")


def test_zone_indices_names_the_zones_available(shipped: CarbonIntensity) -> None:
    assert shipped.zone_indices(["BR-CS", "DE"]).tolist() == [5, 0]
    assert shipped.zone_indices("ZA").tolist() == [1]
    with pytest.raises(TraceError) as err:
        shipped.zone_indices(["DE-LU"], source="my.toml, site 'berlin'")
    message = str(err.value)
    assert message.startswith("my.toml, site 'berlin': zone 'DE-LU' not found")
    assert "carbon_intensity_2022.csv" in message
    assert "DE, ZA, IN-WE, US-CAL-CISO, AU-NSW, BR-CS" in message


# --- the loader refuses bad files --------------------------------------------------------------

GOOD = [
    "timestamp,DE_direct,DE_lca,ZA_direct,ZA_lca",
    "2022-06-01T00:00:00Z,500.5,600.25,690,740",
    "2022-06-01T01:00:00Z,510.5,610.25,691,741",
    "2022-06-01T02:00:00Z,520.5,620.25,692,742",
    "2022-06-01T03:00:00Z,530.5,630.25,693,743",
]


def _write(tmp_path: Path, lines: list[str], name: str = "carbon.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _edit(line: int, text: str) -> list[str]:
    """GOOD with file line ``line`` (1 = header) replaced."""
    lines = list(GOOD)
    lines[line - 1] = text
    return lines


def test_a_good_small_file_loads(tmp_path: Path) -> None:
    carbon = load_carbon(_write(tmp_path, GOOD))
    assert carbon.zones == ("DE", "ZA")
    assert carbon.step_s == HOUR
    np.testing.assert_array_equal(carbon.direct[:, 1], [690, 691, 692, 693])
    np.testing.assert_array_equal(carbon.lca[:, 0], [600.25, 610.25, 620.25, 630.25])


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param(
            [*GOOD[:3], *GOOD[4:]],  # 02:00 missing
            ["line 4", "'timestamp'", "'2022-06-01T03:00:00Z'", "7200 s after the previous row",
             "3600 s"],
            id="gap",
        ),
        pytest.param(
            [*GOOD[:3], GOOD[2], *GOOD[3:]],
            ["line 4", "'timestamp'", "'2022-06-01T01:00:00Z'", "not later than", "line 3"],
            id="duplicated-hour",
        ),
        pytest.param(
            _edit(4, "2022-06-01T02:30:00Z,520.5,620.25,692,742"),
            ["line 4", "'timestamp'", "'2022-06-01T02:30:00Z'", "5400 s after the previous row",
             "regular grid"],
            id="irregular-step",
        ),
        pytest.param(
            _edit(3, "not-a-time,510.5,610.25,691,741"),
            ["line 3", "'timestamp'", "'not-a-time'", "ISO-8601"],
            id="bad-time",
        ),
        pytest.param(
            _edit(4, "2022-06-01T02:00:00Z,520.5,620.25,-3.5,742"),
            ["line 4", "'ZA_direct'", "'-3.5'", "negative", "finite number >= 0"],
            id="negative",
        ),
        pytest.param(
            _edit(3, "2022-06-01T01:00:00Z,510.5,n/a g,691,741"),
            ["line 3", "'DE_lca'", "'n/a g'", "not a number", "gCO₂eq/kWh"],
            id="non-numeric",
        ),
        pytest.param(
            _edit(5, "2022-06-01T03:00:00Z,530.5,630.25,693,NaN"),
            ["line 5", "'ZA_lca'", "'NaN'", "empty or NaN", "finite number >= 0"],
            id="nan",
        ),
        pytest.param(
            _edit(2, "2022-06-01T00:00:00Z,,600.25,690,740"),
            ["line 2", "'DE_direct'", "''", "empty or NaN"],
            id="empty",
        ),
        pytest.param(
            _edit(3, "2022-06-01T01:00:00Z,510.5,inf,691,741"),
            ["line 3", "'DE_lca'", "'inf'", "not finite"],
            id="infinite",
        ),
        pytest.param(
            # the first bad cell in file order is reported, whichever column it is in
            [*GOOD[:2], "2022-06-01T01:00:00Z,510.5,610.25,691,-2", GOOD[3],
             "2022-06-01T03:00:00Z,-1,630.25,693,743"],
            ["line 3", "'ZA_lca'", "'-2'"],
            id="first-bad-cell-in-file-order",
        ),
        pytest.param(
            ["timestamp,DE_direct,ZA_direct,ZA_lca", *(r.rsplit(",", 4)[0] + ",1,2,3"
                                                       for r in GOOD[1:])],
            ["line 1", "zone 'DE'", "no column 'DE_lca'"],
            id="missing-zone-column",
        ),
        pytest.param(
            ["timestamp,DE_direct,DE_lca,DE_percent", *(r.rsplit(",", 4)[0] + ",1,2,3"
                                                         for r in GOOD[1:])],
            ["line 1", "'DE_percent'", "'<zone>_direct'", "'<zone>_lca'"],
            id="stray-column",
        ),
        pytest.param(
            GOOD[:2],
            ["only one data row", "time step"],
            id="one-row",
        ),
    ],
)  # fmt: skip
def test_bad_files_are_refused_naming_file_line_column_and_value(
    tmp_path: Path, lines: list[str], expected: list[str]
) -> None:
    path = _write(tmp_path, lines)
    with pytest.raises(TraceError) as err:
        load_carbon(path)
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    assert message.startswith(str(path)), message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"no-such\.csv: cannot read carbon intensity"):
        load_carbon(tmp_path / "no-such.csv")


# --- the converter -----------------------------------------------------------------------------

SOURCE_HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
    "Data Estimated,Data Estimation Method"
)


def _source_rows(zone: str, hours: range = range(8), base: float = 100.0) -> list[str]:
    return [
        f"2022-06-01 {h:02d}:00:00,Somewhere,Some zone,{zone},{base + h},{base + h + 50.25},"
        "50.0,40.0,a grid operator,false,"
        for h in hours
    ]


def _source(src: Path, folder: str, rows: list[str]) -> Path:
    path = src / folder / "2022" / f"{folder}_2022_hourly.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([SOURCE_HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def _convert(src: Path, out: Path, *folders: str) -> int:
    return convert_carbon.main(
        [
            str(src),
            "--out",
            str(out),
            "--zones",
            *folders,
            "--start",
            "2022-06-01T02:00:00Z",
            "--end",
            "2022-06-01T06:00:00Z",
        ]
    )


def test_converter_cuts_the_window_and_names_columns_by_zone_id(tmp_path: Path) -> None:
    src, out = tmp_path / "carbon_intensity", tmp_path / "out.csv"
    _source(src, "DE-LU", _source_rows("DE"))
    _source(src, "BR-SP", _source_rows("BR-CS", base=60.0))
    assert _convert(src, out, "DE-LU", "BR-SP") == 0
    assert out.read_text(encoding="utf-8").splitlines() == [
        "timestamp,DE_direct,DE_lca,BR-CS_direct,BR-CS_lca",
        "2022-06-01T02:00:00Z,102.0,152.25,62.0,112.25",
        "2022-06-01T03:00:00Z,103.0,153.25,63.0,113.25",
        "2022-06-01T04:00:00Z,104.0,154.25,64.0,114.25",
        "2022-06-01T05:00:00Z,105.0,155.25,65.0,115.25",
    ]
    carbon = load_carbon(out)  # the loader reads what the converter writes
    assert carbon.zones == ("DE", "BR-CS")
    assert carbon.timestamps_s[0] == START_S + 2 * HOUR


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        pytest.param(
            [r for r in _source_rows("DE") if "04:00" not in r],
            ["line 6", "missing hour 2022-06-01T04:00:00Z", "'2022-06-01 05:00:00'",
             "follows '2022-06-01 03:00:00' on line 5"],
            id="gap",
        ),
        pytest.param(
            _source_rows("DE", range(4)) + _source_rows("DE", range(3, 8)),
            ["line 6", "duplicated hour '2022-06-01 03:00:00'", "already on line 5"],
            id="duplicated-hour",
        ),
        pytest.param(
            _source_rows("DE", range(5)),
            ["missing hour 2022-06-01T05:00:00Z", "'2022-06-01 04:00:00' on line 6"],
            id="ends-early",
        ),
        pytest.param(
            [r.replace("103.0", "n/a") for r in _source_rows("DE")],
            ["line 5", "(direct)", "not a number 'n/a'", ">= 0"],
            id="non-numeric",
        ),
        pytest.param(
            [r.replace("154.25", "-154.25") for r in _source_rows("DE")],
            ["line 6", "(LCA)", "negative value '-154.25'"],
            id="negative",
        ),
        pytest.param(
            [r.replace("105.0", "") for r in _source_rows("DE")],
            ["line 7", "(direct)", "not a number ''"],
            id="empty",
        ),
        pytest.param(
            _source_rows("DE", range(3)) + _source_rows("DEU", range(3, 8)),
            ["line 5", "'Zone Id'", "zone 'DEU' differs from 'DE'"],
            id="two-zones",
        ),
    ],
)  # fmt: skip
def test_converter_refuses_bad_sources_naming_file_line_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[str], expected: list[str]
) -> None:
    src, out = tmp_path / "carbon_intensity", tmp_path / "out.csv"
    out.write_text("earlier contents\n", encoding="utf-8")
    bad = _source(src, "DE-LU", rows)
    assert _convert(src, out, "DE-LU") == 2
    message = capsys.readouterr().err
    assert message.startswith(f"error: {bad}"), message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"
    assert out.read_text(encoding="utf-8") == "earlier contents\n"  # nothing half-written
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_converter_refuses_a_missing_zone_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "carbon_intensity"
    _source(src, "DE-LU", _source_rows("DE"))
    assert _convert(src, tmp_path / "out.csv", "DE-LU", "HK") == 2
    assert "HK/2022/HK_2022_hourly.csv: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


def test_a_converter_that_cannot_write_names_the_file_and_exits_2(tmp_path: Path, capsys) -> None:
    """The converters share their command line's end (traces/tools/common.finish): an output the
    OS refuses is named with its reason, no traceback, exit status 2, and nothing is written."""
    src = tmp_path / "carbon_intensity"
    _source(src, "DE-LU", _source_rows("DE"))
    out = tmp_path / "taken"
    out.mkdir()  # a folder where the file should go
    assert _convert(src, out, "DE-LU") == 2
    err = capsys.readouterr().err
    assert str(out) in err and err.startswith("error: ") and "Traceback" not in err
    assert out.is_dir() and not any(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["carbon_intensity", "taken"]
    assert _convert(src, tmp_path / "out.csv", "DE-LU") == 0
    assert capsys.readouterr().err.startswith(f"wrote {tmp_path / 'out.csv'} (4 rows")
