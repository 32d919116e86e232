"""Scenario loading (powertrip_env/scenario/) and the errors a malformed scenario gives.

docs/scenarios.md: every malformed scenario raises ``ScenarioError`` (a ``ValueError``) whose
message names the file, the field, the bad value and what is allowed. The tests below assert on
those message parts, not only on the exception type.
"""

from __future__ import annotations

import copy
import math
import os
import tomllib
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import GPU_CSV, dump_toml, scenario_doc, site, write_trace

import powertrip_env
from powertrip_env import ScenarioError, TraceError, load_scenario, scenario_names
from powertrip_env.episodes import EpisodeStarts
from powertrip_env.scenario import scenario_path
from powertrip_env.scenario.extends import TIED_FIELDS
from powertrip_env.simulation import load_simulation

NAMED_SITE_COUNTS = {"default": 10, "lora": 8, "kws": 8, "emnist": 8, "llm-full": 8, "large": 32}
# Rows of each shipped scenario's calendar: the synthetic 2019 trace has 31 days of 5-minute
# rows; the flagship's is where its grid trace (shifted to local time), PV and forecasts meet.
CALENDAR_ROWS = {
    "default": 8257,
    "lora": 31 * 288,
    "kws": 31 * 288,
    "emnist": 31 * 288,
    "llm-full": 31 * 288,
    "large": 31 * 288,
}


# --------------------------------------------------------------------------- helpers


def two_site_doc() -> dict[str, Any]:
    return scenario_doc(
        [
            site("site-a", "ca", data_share=0.6),
            site("site-b", "cb", gpu="G200", gpu_count=4, data_share=0.4, latitude=50.0),
        ]
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder holding the GPU catalogue and trace that ``two_site_doc`` names."""
    (tmp_path / "gpus.csv").write_text(GPU_CSV, encoding="utf-8")
    write_trace(tmp_path / "trace.csv", {"ca": 0.5, "cb": 0.25})
    return tmp_path


def write(folder: Path, doc: dict[str, Any] | str, name: str = "mine.toml") -> Path:
    path = folder / name
    path.write_text(doc if isinstance(doc, str) else dump_toml(doc), encoding="utf-8")
    return path


def load_error(path: Path, error: type[Exception] = ScenarioError) -> str:
    with pytest.raises(error) as info:
        load_scenario(path)
    return str(info.value)


def assert_mentions(message: str, *parts: str) -> None:
    for part in parts:
        assert part in message, f"{part!r} not in error message: {message}"


# --------------------------------------------------------------------------- named scenarios


def test_scenario_error_is_a_value_error_exported_by_the_package():
    assert issubclass(powertrip_env.ScenarioError, ValueError)
    assert issubclass(powertrip_env.TraceError, ValueError)


def test_every_named_scenario_ships():
    assert set(NAMED_SITE_COUNTS) <= set(scenario_names())


@pytest.mark.parametrize(("name", "n_sites"), NAMED_SITE_COUNTS.items())
def test_named_scenario_loads_with_its_sites(name, n_sites):
    scenario = load_scenario(name)
    assert scenario.n_sites == n_sites
    assert len({s.name for s in scenario.sites}) == n_sites
    assert sum(s.data_share for s in scenario.sites) == pytest.approx(1.0, abs=1e-6)
    assert all(s.gpu in scenario.gpus for s in scenario.sites)
    wl = scenario.workload
    assert 0 <= wl.a0 < wl.a_target < wl.a_max <= 1
    assert scenario.trace_file.is_file()


@pytest.mark.parametrize(("name", "n_sites"), NAMED_SITE_COUNTS.items())
def test_named_scenario_sites_find_their_trace_columns(name, n_sites):
    params = load_simulation(name).params
    assert params.n_sites == n_sites
    assert params.trace_rows == CALENDAR_ROWS[name]


def test_flagship_scenario_is_ten_solar_sites_on_real_power_data():
    scenario = load_scenario("default")
    sim = load_simulation("default")
    assert scenario.n_sites == 10
    assert scenario.sites_source.endswith("sites_solar.csv")
    assert all(s.pv_kw > 0 and s.pv_column and s.utc_offset_h is not None for s in scenario.sites)
    assert scenario.trace.file.name == "google_cella_2019.csv"
    assert scenario.trace.pv_file.name == "solcast_pv_2022.csv"
    assert scenario.trace.pv_forecast_file.name == "solcast_pv_forecast_2022.csv.gz"
    assert (scenario.trace.shift_days, scenario.trace.utc_offset_h) == (1133, -4.0)
    assert scenario.episode.time_budget_h == 48.0
    assert scenario.workload.model_bytes == 2.2e9
    assert scenario.network.join_fixed_s == 300.0
    assert scenario.network.hub == "berlin"
    # the calibration (docs/calibration.md): a ring all-reduce over 0.5-1.5 Gb/s links, joins
    # that fetch the 16-byte-per-parameter training state, equal steps
    assert scenario.network.allreduce == "ring"
    assert {s.wan_gbps for s in scenario.sites} <= {0.5, 1.0, 1.5}
    assert scenario.workload.state_bytes == 16 * scenario.workload.parameters == 17.6e9
    assert scenario.workload.round_mode == "fixed_quota"
    assert sim.power.t0_s == 1_654_646_400  # 2022-06-08T00:00:00Z
    assert sim.power.horizons > 1  # real forecasts, not persistence
    # the sun sets: every site has rows with less power than its peak and rows with PV in them
    assert (sim.power.available_w.min(axis=0) < sim.power.available_w.max(axis=0)).all()


def test_lora_scenario_spans_four_continents_and_four_gpu_types():
    scenario = load_scenario("lora")
    assert len({s.region for s in scenario.sites}) >= 4
    assert len({s.gpu for s in scenario.sites}) >= 4
    assert scenario.network.hub in {s.name for s in scenario.sites}
    assert scenario.hub_index == [s.name for s in scenario.sites].index(scenario.network.hub)


def test_large_scenario_extends_lora_with_32_sites():
    lora, large = load_scenario("lora"), load_scenario("large")
    assert large.workload == lora.workload
    assert large.network.hub_gbps == 25.0
    assert large.network.join_fixed_s == lora.network.join_fixed_s
    assert len({s.region for s in large.sites}) >= 6


def test_llm_full_keeps_lora_sites_and_replaces_the_workload():
    lora, full = load_scenario("lora"), load_scenario("llm-full")
    full_path = Path(full.source)
    assert full.sites == lora.sites
    assert full.workload.model_bytes == 2.64e9  # docs/references.md: 1.32e9 params in bf16
    with full_path.open("rb") as fh:
        written = tomllib.load(fh)
    assert full.episode.time_budget_h == written["episode"]["time_budget_h"]
    assert full.workload.local_steps == written["workload"]["local_steps"]
    assert full.episode.server_overhead == lora.episode.server_overhead


def test_emnist_has_uneven_data_shares_and_non_iid_data():
    kws, emnist = load_scenario("kws"), load_scenario("emnist")
    assert [s.data_share for s in emnist.sites] == [0.30, 0.05, 0.05, 0.25, 0.05, 0.15, 0.10, 0.05]
    assert [s.name for s in emnist.sites] == [s.name for s in kws.sites]
    assert emnist.workload.non_iid > 0


# --------------------------------------------------------------------------- users' files


def test_user_file_with_inline_sites_loads(folder):
    path = write(folder, two_site_doc())
    scenario = load_scenario(path)
    a, b = scenario.sites
    assert (a.name, a.gpu, a.gpu_count, a.capacity_kw, a.pue) == ("site-a", "G100", 16, 5.25, 1.25)
    assert (b.name, b.gpu, b.gpu_count, b.data_share) == ("site-b", "G200", 4, 0.4)
    assert b.latitude == 50.0
    assert scenario.gpus["G200"].power_w == 200.0
    assert scenario.trace_file == (folder / "trace.csv").resolve()
    assert scenario.hub_index == 0
    assert scenario.workload.mfu == 0.5
    # fields left out take the documented defaults
    assert scenario.network.base_ms == 2.0
    assert scenario.network.route_factor == 1.5
    assert scenario.network.fiber_km_per_ms == 204.0
    assert scenario.episode.idle_s == 0.0
    assert scenario.episode.train_days == (1, 1)
    assert scenario.episode.test_days == (2, 2)
    assert path.name in scenario.source


def test_user_file_with_inline_sites_builds_a_simulation(folder):
    params = load_simulation(write(folder, two_site_doc())).params
    assert params.n_sites == 2
    assert params.interval_s == 300.0


def test_user_file_may_put_the_hub_at_an_extra_location(folder):
    doc = two_site_doc()
    doc["sites"]["hub"] = {"name": "exchange", "latitude": 10.0, "longitude": 20.0}
    scenario = load_scenario(write(folder, doc))
    assert scenario.hub_index == -1
    assert (scenario.network.hub, scenario.network.hub_latitude) == ("exchange", 10.0)
    assert scenario.network.hub_longitude == 20.0


def test_user_file_can_extend_lora(tmp_path):
    text = (
        'extends = "lora"\nname = "mine"\n[workload]\nmfu = 0.3\n[episode]\ntime_budget_h = 6.0\n'
    )
    scenario = load_scenario(write(tmp_path, text))
    lora = load_scenario("lora")
    assert scenario.name == "mine"
    assert scenario.sites == lora.sites
    assert scenario.workload.mfu == 0.3
    assert scenario.workload.flops_per_sample == lora.workload.flops_per_sample
    assert scenario.episode.time_budget_h == 6.0
    assert scenario.episode.h_ref_h == lora.episode.h_ref_h
    assert scenario.network == lora.network
    assert scenario.trace_file == lora.trace_file  # the base's data files stay findable
    assert load_simulation(tmp_path / "mine.toml").params.n_sites == 8


def test_data_shares_list_replaces_the_catalogue_shares(tmp_path):
    shares = [0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    text = f'extends = "lora"\n[sites]\ndata_shares = {shares}\n'
    scenario = load_scenario(write(tmp_path, text))
    lora = load_scenario("lora")
    assert [s.data_share for s in scenario.sites] == shares
    assert [s.capacity_kw for s in scenario.sites] == [s.capacity_kw for s in lora.sites]
    assert scenario.network.hub == lora.network.hub


def test_data_shares_list_applies_to_inline_sites(folder):
    doc = two_site_doc()
    doc["sites"]["data_shares"] = [0.25, 0.75]
    scenario = load_scenario(write(folder, doc))
    assert [s.data_share for s in scenario.sites] == [0.25, 0.75]


# --------------------------------------------------------------------------- bad input


def test_missing_scenario_file_names_the_path(tmp_path):
    path = tmp_path / "nowhere.toml"
    assert_mentions(load_error(path), "nowhere.toml", "not found")


def test_unknown_scenario_name_lists_the_named_ones():
    with pytest.raises(ScenarioError) as info:
        load_scenario("no-such-scenario")
    assert_mentions(str(info.value), "no-such-scenario", "default", "kws", ".toml")


def test_invalid_toml_names_the_file(folder):
    path = write(folder, 'name = "x"\n[workload\nmfu = 0.4\n')
    assert_mentions(load_error(path), path.name, "not valid TOML")


def test_empty_scenario_file_is_reported_as_empty(folder):
    path = write(folder, "")
    assert_mentions(load_error(path), path.name, "empty")


def test_missing_required_field_names_table_and_field(folder):
    doc = two_site_doc()
    del doc["workload"]["mfu"]
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "[workload]", "'mfu'", "missing")


def test_missing_required_site_field_names_the_site_table(folder):
    doc = two_site_doc()
    del doc["sites"]["site"][1]["capacity_kw"]
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "sites.site #2", "'capacity_kw'", "missing")


@pytest.mark.parametrize(
    ("table", "key", "value", "shown", "allowed"),
    [
        ("workload", "mfu", "high", "'high'", "must be a number"),
        ("workload", "mfu", True, "True", "must be a number"),
        ("workload", "site_batch", 2.5, "2.5", "must be an integer"),
        ("network", "join_fixed_s", [1, 2], "[1, 2]", "must be a number"),
        ("workload", "name", 7, "7", "string"),
    ],
)
def test_wrong_type_names_field_value_and_expected_type(folder, table, key, value, shown, allowed):
    doc = two_site_doc()
    doc[table][key] = value
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, f"[{table}]", f"'{key}'", shown, allowed)


def test_string_where_a_site_number_is_expected_is_reported(folder):
    doc = two_site_doc()
    doc["sites"]["site"][0]["capacity_kw"] = "lots"
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "'capacity_kw'", "'lots'", "number")


def test_non_finite_number_is_rejected(folder):
    path = write(folder, dump_toml(two_site_doc()).replace("mfu = 0.5", "mfu = nan"))
    assert_mentions(load_error(path), path.name, "'mfu'", "nan", "finite")


def _set_workload(doc, key, value):
    doc["workload"][key] = value


def _set_site(doc, key, value):
    doc["sites"]["site"][0][key] = value


def _set_episode(doc, key, value):
    doc["episode"][key] = value


@pytest.mark.parametrize(
    ("setter", "key", "value", "allowed"),
    [
        (_set_workload, "mfu", 1.7, "<= 1"),
        (_set_workload, "mfu", 0.0, "> 0"),
        (_set_site, "pue", 0.5, ">= 1"),
        (_set_site, "gpu_count", -4, ">= 1"),
        (_set_site, "latitude", 95.0, "<= 90"),
        (_set_site, "capacity_kw", 0.0, "> 0"),
        (_set_episode, "time_budget_h", -1.0, "> 0"),
        (_set_episode, "jitter_sigma", 2.0, "<= 1"),
    ],
)
def test_value_out_of_range_names_field_value_and_bound(folder, setter, key, value, allowed):
    doc = two_site_doc()
    setter(doc, key, value)
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, f"'{key}'", f"= {value!r}", allowed)


def test_unknown_gpu_type_lists_the_catalogue(folder):
    doc = two_site_doc()
    doc["sites"]["site"][1]["gpu"] = "Z100"
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "site-b", "'gpu'", "'Z100'", "G100", "G200")


def test_site_trace_column_missing_from_trace_is_a_trace_error_naming_the_column(folder):
    doc = two_site_doc()
    doc["sites"]["site"][1]["trace_column"] = "no_such_column"
    path = write(folder, doc)
    load_scenario(path)  # the scenario alone is well formed: the trace is read later
    with pytest.raises(TraceError) as info:
        load_simulation(path)
    assert isinstance(info.value, ValueError)
    # the file the typo is in, the site, the field, the value, and the columns there are
    assert_mentions(
        str(info.value),
        path.name,
        "site 'site-b'",
        "'trace_column'",
        "'no_such_column'",
        "trace.csv",
        "ca",
    )


def test_trace_column_typo_in_a_sites_csv_names_the_csv_and_the_site(folder):
    csv = folder / "my_sites.csv"
    csv.write_text(
        "name,region,latitude,longitude,gpu,gpu_count,capacity_kw,pue,wan_gbps,data_share,"
        "trace_column\nsite-a,europe,50,8,G100,16,5.25,1.25,10,0.5,ca\n"
        "site-b,europe,51,9,G100,16,5.25,1.25,10,0.5,cx\n",
        encoding="utf-8",
    )
    doc = two_site_doc()
    del doc["sites"]["site"]
    doc["sites"]["catalogue"] = "my_sites.csv"
    path = write(folder, doc)
    with pytest.raises(TraceError) as info:
        load_simulation(path)
    assert_mentions(str(info.value), "my_sites.csv", "site 'site-b'", "'cx'", "ca, cb")


def test_time_budget_longer_than_a_split_is_a_scenario_error_naming_the_split(folder):
    doc = two_site_doc()
    doc["episode"]["time_budget_h"] = 30.0  # each split is one day
    path = write(folder, doc)
    load_scenario(path)  # well formed on its own: the split's length is known with the data
    with pytest.raises(ScenarioError) as info:
        EpisodeStarts(load_simulation(path), "train")
    assert_mentions(str(info.value), path.name, "train split", "time_budget_h", "30.0")


def test_data_shares_not_summing_to_one_are_rejected(folder):
    doc = two_site_doc()
    doc["sites"]["site"][1]["data_share"] = 0.3
    path = write(folder, doc)
    message = load_error(path)
    assert_mentions(message, str(path), "field 'data_share'", "sums to 0.9", "sum to 1")
    assert_mentions(message, "within 0.001 of 1")


def _twelve_sites(folder: Path, share: float, *, as_list: bool = False) -> Path:
    """Twelve inline sites at ``share`` each, in the sites or in [sites] data_shares."""
    write_trace(folder / "trace.csv", {f"c{i}": 0.5 for i in range(12)})
    doc = scenario_doc([site(f"s{i}", f"c{i}", data_share=share) for i in range(12)])
    if as_list:
        for entry in doc["sites"]["site"]:
            entry["data_share"] = 1.0 / 12
        doc["sites"]["data_shares"] = [share] * 12
    return write(folder, doc)


@pytest.mark.parametrize("as_list", [False, True], ids=["site-fields", "data_shares-list"])
def test_data_shares_within_a_thousandth_of_one_are_normalised_with_one_warning(folder, as_list):
    """Twelve sites at 0.083333 sum to 0.999996: rounded decimals, not a mistake."""
    path = _twelve_sites(folder, 0.083333, as_list=as_list)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scenario = load_scenario(path)
    shares = [s.data_share for s in scenario.sites]
    assert sum(shares) == 1.0 and math.fsum(shares) == 1.0
    assert shares == [shares[0]] * 12
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert caught[0].category is UserWarning
    assert_mentions(str(caught[0].message), str(path), "'data_share", "0.999996", "normalised")
    with pytest.warns(UserWarning, match="0.999996") as again:  # loading again says it again
        assert load_simulation(path).params.n_sites == 12
    assert len(again) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cached simulation: not loaded, not warned again
        gym.make("PowerTrip-v0", scenario=str(path)).reset(seed=0)


@pytest.mark.parametrize("total", [0.9, 0.998, 1.0011])
def test_data_shares_off_by_more_than_a_thousandth_are_refused(folder, total):
    path = _twelve_sites(folder, total / 12)
    message = load_error(path)
    assert_mentions(message, str(path), "field 'data_share'", f"sums to {total:g}")
    assert_mentions(message, "must sum to 1", "within 0.001 of 1")


def test_data_shares_within_a_millionth_of_one_are_used_as_written(folder):
    """Decimals that sum to 1 up to rounding (default's ten 0.1 sum to 0.9999999999999999)."""
    doc = two_site_doc()
    doc["sites"]["site"][1]["data_share"] = 0.3999995
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scenario = load_scenario(write(folder, doc))
        default = load_scenario("default")
    assert [s.data_share for s in scenario.sites] == [0.6, 0.3999995]
    assert [s.data_share for s in default.sites] == [0.1] * 10


def test_data_shares_list_not_summing_to_one_is_rejected(folder):
    doc = two_site_doc()
    doc["sites"]["data_shares"] = [0.7, 0.7]
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "data_share", "1.4", "sum to 1")


def test_data_shares_list_of_wrong_length_is_rejected(folder):
    doc = two_site_doc()
    doc["sites"]["data_shares"] = [1.0]
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "'data_shares'", "[1.0]", "2 numbers")


def test_old_join_s_field_says_it_was_renamed_join_fixed_s(folder):
    doc = two_site_doc()
    doc["network"].pop("join_fixed_s")
    doc["network"]["join_s"] = 30.0
    path = write(folder, doc)
    assert_mentions(
        load_error(path),
        str(path),
        "'join_s'",
        "renamed",
        "'join_fixed_s'",
        "model_bytes / wan_gbps",
    )


@pytest.mark.parametrize(
    ("where", "typo", "intended"),
    [("workload", "eta_locl", "eta_local"), ("network", "join_sec", "join_fixed_s")],
)
def test_unknown_field_is_named_with_the_allowed_ones(folder, where, typo, intended):
    doc = two_site_doc()
    doc[where][typo] = 1.0
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, f"[{where}]", typo, intended)


def test_unknown_field_in_a_site_table_is_named(folder):
    doc = two_site_doc()
    doc["sites"]["site"][0]["colour"] = "red"
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "sites.site #1", "colour", "capacity_kw")


SITE_HEADER = "name,region,latitude,longitude,gpu,gpu_count,capacity_kw,pue,wan_gbps,data_share,"


def _catalogue_doc(folder: Path, csv_text: str) -> Path:
    (folder / "my_sites.csv").write_text(csv_text, encoding="utf-8")
    doc = copy.deepcopy(two_site_doc())
    doc["sites"] = {"catalogue": "my_sites.csv", "hub": "site-a"}
    return write(folder, doc)


def test_site_catalogue_csv_loads(folder):
    path = _catalogue_doc(
        folder,
        SITE_HEADER + "trace_column\n"
        "site-a,europe,50,8,G100,16,5.25,1.25,10,0.5,ca\n"
        "site-b,asia,35,139,G200,8,6.0,1.5,5,0.5,cb\n",
    )
    scenario = load_scenario(path)
    assert [s.name for s in scenario.sites] == ["site-a", "site-b"]
    assert scenario.sites[1].capacity_kw == 6.0
    assert scenario.sites[1].gpu_count == 8


SITE_ROWS = "".join(
    (
        "site-a,europe,50,8,G100,16,5.25,1.25,10,0.5,ca\n",
        "site-b,asia,35,139,G200,8,6.0,1.5,5,0.5,cb\n",
    )
)


def test_sites_csv_with_utf8_bom_loads(folder):
    """Excel's "CSV UTF-8" writes a byte-order mark before the first column name."""
    csv_text = "\ufeff" + SITE_HEADER + "trace_column\n" + SITE_ROWS
    scenario = load_scenario(_catalogue_doc(folder, csv_text))
    assert (folder / "my_sites.csv").read_bytes().startswith(b"\xef\xbb\xbfname,")
    assert [s.name for s in scenario.sites] == ["site-a", "site-b"]


def test_gpu_csv_with_utf8_bom_loads(folder):
    (folder / "bom_gpus.csv").write_text("\ufeff" + GPU_CSV, encoding="utf-8")
    doc = two_site_doc()
    doc["gpus"]["catalogue"] = "bom_gpus.csv"
    scenario = load_scenario(write(folder, doc))
    assert sorted(scenario.gpus) == ["G100", "G200"]
    assert scenario.gpus["G100"].tflops_bf16 == 100.0


def test_sites_csv_with_spaces_after_the_commas_loads(folder):
    header = SITE_HEADER.replace(",", ", ") + "trace_column\n"
    rows = SITE_ROWS.replace(",", ", ").replace("\n", " \n")
    scenario = load_scenario(_catalogue_doc(folder, header + rows))
    a, b = scenario.sites
    assert (a.name, a.region, a.gpu, a.trace_column) == ("site-a", "europe", "G100", "ca")
    assert (b.gpu_count, b.capacity_kw, b.pue, b.latitude) == (8, 6.0, 1.5, 35.0)


def test_gpu_csv_with_spaces_after_the_commas_loads(folder):
    (folder / "spaced_gpus.csv").write_text(GPU_CSV.replace(",", " , "), encoding="utf-8")
    doc = two_site_doc()
    doc["gpus"]["catalogue"] = "spaced_gpus.csv"
    scenario = load_scenario(write(folder, doc))
    assert sorted(scenario.gpus) == ["G100", "G200"]
    assert scenario.gpus["G200"].power_w == 200.0
    assert scenario.gpus["G200"].memory_gb == 32.0


def test_missing_column_message_shows_the_header_that_was_read(folder):
    """A semicolon-separated export reads as one long column; showing it makes that obvious."""
    header = SITE_HEADER.replace(",", ";") + "trace_column\n"
    path = _catalogue_doc(folder, header + SITE_ROWS.replace(",", ";"))
    assert_mentions(load_error(path), "my_sites.csv", "missing", "'name'", "name;region;")


def test_site_catalogue_missing_a_column_names_csv_and_column(folder):
    header = SITE_HEADER.replace("pue,", "") + "trace_column\n"
    path = _catalogue_doc(
        folder,
        header + "site-a,europe,50,8,G100,16,5.25,10,0.5,ca\n"
        "site-b,asia,35,139,G200,8,6,5,0.5,cb\n",
    )
    assert_mentions(load_error(path), "my_sites.csv", "'pue'", "missing")


def test_site_catalogue_non_numeric_value_names_csv_row_and_column(folder):
    path = _catalogue_doc(
        folder,
        SITE_HEADER + "trace_column\n"
        "site-a,europe,50,8,G100,16,5.25,1.25,10,0.5,ca\n"
        "site-b,asia,35,139,G200,8,lots,1.5,5,0.5,cb\n",
    )
    assert_mentions(load_error(path), "my_sites.csv", "row 3", "'capacity_kw'", "'lots'", "float")


def test_gpu_catalogue_with_non_positive_power_is_rejected(folder):
    (folder / "bad_gpus.csv").write_text(
        "name,tflops_bf16,power_w,memory_gb\nG100,100,100,16\nG200,200,-5,32\n", encoding="utf-8"
    )
    doc = two_site_doc()
    doc["gpus"]["catalogue"] = "bad_gpus.csv"
    path = write(folder, doc)
    assert_mentions(load_error(path), "bad_gpus.csv", "row 3", "'power_w'", "-5", "> 0")


def test_data_file_not_found_names_field_and_places_looked(folder):
    doc = two_site_doc()
    doc["trace"]["file"] = "missing_trace.csv"
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "[trace]", "'file'", "missing_trace.csv")


def test_hub_that_is_not_a_site_lists_the_sites(folder):
    doc = two_site_doc()
    doc["sites"]["hub"] = "atlantis"
    path = write(folder, doc)
    assert_mentions(load_error(path), path.name, "'hub'", "'atlantis'", "site-a", "site-b")


@pytest.mark.parametrize(
    ("a0", "a_target", "a_max"), [(0.1, 0.95, 0.9), (0.5, 0.4, 0.9), (0.1, 0.9, 0.9)]
)
def test_accuracy_curve_must_satisfy_a0_below_target_below_max(folder, a0, a_target, a_max):
    doc = two_site_doc()
    doc["workload"].update(a0=a0, a_target=a_target, a_max=a_max)
    path = write(folder, doc)
    message = load_error(path)
    assert_mentions(message, path.name, "a_target", str(a_target), "a0 < a_target < a_max")


def test_extends_cycle_is_reported(tmp_path):
    write(tmp_path, 'extends = "b.toml"\nname = "a"\n', "a.toml")
    write(tmp_path, 'extends = "a.toml"\nname = "b"\n', "b.toml")
    assert_mentions(load_error(tmp_path / "a.toml"), "a.toml", "cycle")


def test_scenario_extending_itself_is_a_cycle(tmp_path):
    path = write(tmp_path, 'extends = "self.toml"\n', "self.toml")
    assert_mentions(load_error(path), "self.toml", "cycle")


def test_extends_of_a_missing_base_names_it(tmp_path):
    path = write(tmp_path, 'extends = "no_base.toml"\n')
    assert_mentions(load_error(path), "no_base.toml", "not found")


def test_extends_typo_names_the_key_the_file_and_the_shipped_scenarios(tmp_path):
    path = write(tmp_path, 'extends = "defualt"\n[episode]\ntime_budget_h = 2.0\n')
    message = load_error(path)
    assert_mentions(message, str(path), "'extends'", "'defualt'", "did you mean 'default'?")
    assert_mentions(message, *(repr(name) for name in scenario_names()))
    assert not message.startswith(str(tmp_path / "defualt"))  # not a path the user never wrote


def test_extends_of_an_unlike_name_lists_the_shipped_scenarios_without_a_guess(tmp_path):
    path = write(tmp_path, 'extends = "zzz"\n')
    message = load_error(path)
    assert_mentions(message, path.name, "'extends'", "'zzz'", "'default'", "'large'", ".toml")
    assert "did you mean" not in message


def test_extends_of_a_relative_file_resolves_next_to_the_scenario(tmp_path):
    write(tmp_path, 'extends = "lora"\nname = "base"\n[network]\njoin_fixed_s = 7.0\n', "base.toml")
    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "sub", 'extends = "../base.toml"\nname = "child"\n')
    scenario = load_scenario(path)
    assert (scenario.name, scenario.network.join_fixed_s) == ("child", 7.0)


def _inline_sites_extending_lora(folder: Path, hub: str | None) -> Path:
    """A scenario that extends lora but brings its own two sites, GPUs and trace."""
    doc = two_site_doc()
    sites: dict[str, Any] = {"site": doc["sites"]["site"]}
    if hub is not None:
        sites["hub"] = hub
    mine = {"extends": "lora", "gpus": doc["gpus"], "trace": doc["trace"], "sites": sites}
    return write(folder, mine)


def test_base_hub_is_not_inherited_by_own_sites_and_the_error_says_why(folder):
    """The base's hub names one of the base's sites: it is dropped with them, not kept."""
    path = _inline_sites_extending_lora(folder, hub=None)
    lora_hub = load_scenario("lora").network.hub
    message = load_error(path)
    assert_mentions(message, str(path), "[sites] field 'hub' is missing", repr(lora_hub))
    assert_mentions(message, str(scenario_path("lora")), "not inherited")
    assert_mentions(message, "[[sites.site]]", "set [sites] hub", "site-a", "site-b")


def test_restated_hub_among_inline_sites_loads_over_lora(folder):
    scenario = load_scenario(_inline_sites_extending_lora(folder, hub="site-b"))
    assert [s.name for s in scenario.sites] == ["site-a", "site-b"]
    assert (scenario.network.hub, scenario.hub_index) == ("site-b", 1)
    assert type(scenario.network.hub) is str
    assert scenario.workload == load_scenario("lora").workload


def test_inherited_hub_keeps_working_when_the_sites_are_inherited_too(tmp_path):
    scenario = load_scenario(write(tmp_path, 'extends = "large"\n[network]\njoin_fixed_s = 1.0\n'))
    large = load_scenario("large")
    assert (scenario.network.hub, scenario.hub_index) == (large.network.hub, large.hub_index)
    assert type(scenario.network.hub) is str


# --------------------------------------------------------------------------- what extends drops


def _extending(folder: Path, base: str, **tables: dict[str, Any]) -> Path:
    """A scenario that extends ``base`` with the given tables (own sites: the folder's GPUs)."""
    gpus = {"gpus": {"catalogue": "gpus.csv"}} if "sites" in tables else {}
    return write(folder, {"extends": base, **gpus, **tables})


def _own_sites(hub: str = "site-a", **extra: Any) -> dict[str, Any]:
    return {"site": two_site_doc()["sites"]["site"], "hub": hub, **extra}


def test_own_trace_file_drops_everything_that_described_the_base_trace(folder):
    """default's Google trace is in New York time, shifted onto 2022 and met by its PV data:
    none of that is true of a trace that replaced it (TOML could not unset it)."""
    path = _extending(folder, "default", sites=_own_sites(), trace={"file": "trace.csv"})
    scenario = load_scenario(path)
    trace = scenario.trace
    assert trace.file == (folder / "trace.csv").resolve()
    assert (trace.utc_offset_h, trace.shift_days) == (None, 0)
    assert (trace.pv_file, trace.pv_forecast_file) == (None, None)
    assert (scenario.episode.train_days, scenario.episode.test_days) == ((1, 21), (22, 31))
    assert scenario.workload == load_scenario("default").workload  # the rest is inherited


def test_own_trace_file_keeps_the_description_written_with_it(folder):
    trace = {
        "file": "trace.csv",
        "utc_offset_h": 2.0,
        "shift_days": 3,
        "train_days": [1, 1],
        "test_days": [2, 2],
    }
    sites = _own_sites()
    for entry in sites["site"]:
        entry["utc_offset_h"] = 1.0
    scenario = load_scenario(_extending(folder, "default", sites=sites, trace=trace))
    assert (scenario.trace.utc_offset_h, scenario.trace.shift_days) == (2.0, 3)
    assert (scenario.episode.train_days, scenario.episode.test_days) == ((1, 1), (2, 2))


def test_restating_the_base_trace_file_takes_it_without_its_time_zone(folder):
    trace = {"file": "google_cella_2019.csv"}
    scenario = load_scenario(_extending(folder, "default", sites=_own_sites(), trace=trace))
    default = load_scenario("default")
    assert scenario.trace.file == default.trace.file
    assert (scenario.trace.utc_offset_h, scenario.trace.shift_days) == (None, 0)


def test_inherited_time_zone_error_names_the_base_and_the_way_out(folder):
    path = _extending(folder, "default", sites=_own_sites())
    message = load_error(path)
    assert_mentions(message, str(path), "[trace] field 'utc_offset_h'", "-4.0", "site-a")
    assert_mentions(message, "inherited from", str(scenario_path("default")))
    assert_mentions(message, "[-12, 14]", "write [trace] file")


def test_inherited_solar_sites_are_told_why_the_base_pv_file_is_gone(folder):
    path = _extending(folder, "default", trace={"file": "trace.csv"})
    message = load_error(path)
    assert_mentions(message, str(path), "pv_kw > 0", "'pv_file'", "'solcast_pv_2022.csv'")
    assert_mentions(message, "not inherited", "[trace] file")


def test_own_pv_file_drops_the_base_forecasts_and_days_but_keeps_its_grid_trace(folder):
    scenario = load_scenario(_extending(folder, "default", trace={"pv_file": "trace.csv"}))
    default = load_scenario("default")
    assert scenario.trace.pv_file == (folder / "trace.csv").resolve()
    assert scenario.trace.pv_forecast_file is None
    assert (scenario.episode.train_days, scenario.episode.test_days) == ((1, 21), (22, 31))
    assert scenario.trace.file == default.trace.file
    assert (scenario.trace.utc_offset_h, scenario.trace.shift_days) == (-4.0, 1133)


def test_own_sites_drop_the_base_data_shares(folder):
    """emnist's eight data_shares are in the order of its own sites."""
    trace = two_site_doc()["trace"]
    scenario = load_scenario(_extending(folder, "emnist", sites=_own_sites(), trace=trace))
    assert [s.data_share for s in scenario.sites] == [0.6, 0.4]


def _base_with_rtts(folder: Path) -> None:
    doc = two_site_doc()
    doc["network"]["rtt_to_hub_ms"] = [5.0, 10.0]
    write(folder, doc, "base.toml")


def test_own_sites_drop_the_base_rtts(folder):
    _base_with_rtts(folder)
    sites = _own_sites()
    sites["site"][0]["longitude"] = 100.0
    scenario = load_scenario(write(folder, {"extends": "base.toml", "sites": sites}))
    assert scenario.network.rtt_to_hub_ms is None  # the distance model


def test_own_hub_drops_the_base_rtts(folder):
    """The RTTs were measured to the base's hub, site-a, not to site-b."""
    _base_with_rtts(folder)
    scenario = load_scenario(write(folder, {"extends": "base.toml", "sites": {"hub": "site-b"}}))
    assert (scenario.network.hub, scenario.hub_index) == ("site-b", 1)
    assert scenario.network.rtt_to_hub_ms is None


def test_inherited_sites_and_hub_keep_the_base_rtts_and_shares(folder):
    _base_with_rtts(folder)
    text = 'extends = "base.toml"\n[network]\njoin_fixed_s = 1.0\n'
    scenario = load_scenario(write(folder, text))
    assert scenario.network.rtt_to_hub_ms == (5.0, 10.0)
    assert [s.data_share for s in scenario.sites] == [0.6, 0.4]


def test_a_chain_inherits_a_middle_base_trace_with_its_own_time_zone(folder):
    sites = _own_sites()
    for entry in sites["site"]:
        entry["utc_offset_h"] = 1.0
    trace = {"file": "trace.csv", "utc_offset_h": 2.0, "train_days": [1, 1], "test_days": [2, 2]}
    write(
        folder,
        {"extends": "default", "gpus": {"catalogue": "gpus.csv"}, "sites": sites, "trace": trace},
        "middle.toml",
    )
    child = load_scenario(write(folder, 'extends = "middle.toml"\n'))
    assert (child.trace.utc_offset_h, child.trace.shift_days) == (2.0, 0)
    own = load_scenario(write(folder, {"extends": "middle.toml", "trace": {"file": "trace.csv"}}))
    assert own.trace.utc_offset_h is None
    assert (own.episode.train_days, own.episode.test_days) == ((1, 21), (22, 31))


def test_docs_list_the_fields_extends_drops():
    """docs/scenarios.md's table of what extends leaves out is TIED_FIELDS."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text("utf-8")
    rows = [line for line in docs.splitlines() if line.startswith("| `[")]
    for (table, key), tied in TIED_FIELDS.items():
        own = "`[[sites.site]]`" if (table, key) == ("sites", "site") else f"`[{table}] {key}`"
        row = next((r for r in rows if own in r.split("|")[1]), None)
        assert row is not None, f"docs/scenarios.md: no row for {own}"
        for _, field in tied:
            if {key, field} == {"catalogue", "site"}:
                assert "the other of the two" in row
            else:
                assert f"{field}`" in row.split("|")[2], f"{field} missing from the {own} row"


# --------------------------------------------------------------------------- simulation cache


def rewrite(path: Path, text: str) -> None:
    """Write ``text`` and move the modification time on, as a later edit would."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def powered_now(path: Path) -> list[int]:
    env = gym.make("PowerTrip-v0", scenario=str(path))
    return env.unwrapped.params.powered[0].astype(int).tolist()


def test_unchanged_scenario_files_share_one_simulation(folder):
    path = _catalogue_doc(folder, SITE_HEADER + "trace_column\n" + SITE_ROWS)
    assert load_simulation(path) is load_simulation(path)


def test_editing_the_sites_csv_after_a_make_is_seen_by_the_next_make(folder):
    path = _catalogue_doc(folder, SITE_HEADER + "trace_column\n" + SITE_ROWS)
    # site-a: 5.25 kW at u = 0.5 -> 10 G100s; site-b: 6 kW at u = 0.25 -> 4.5 kW / 600 W -> 7
    assert powered_now(path) == [10, 7]
    rewrite(
        folder / "my_sites.csv",
        SITE_HEADER + "trace_column\n" + SITE_ROWS.replace("G100,16,5.25", "G100,16,2.5"),
    )
    assert powered_now(path) == [5, 7]  # 1.25 kW -> 5 GPUs
    rewrite(
        folder / "my_sites.csv",
        SITE_HEADER + "trace_column\n" + SITE_ROWS.replace("G100,16,5.25", "G100,-16,5.25"),
    )
    with pytest.raises(ScenarioError, match="gpu_count"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_editing_the_trace_after_a_make_is_seen_by_the_next_make(folder):
    path = _catalogue_doc(folder, SITE_HEADER + "trace_column\n" + SITE_ROWS)
    assert powered_now(path) == [10, 7]
    trace = folder / "trace.csv"
    rewrite(trace, trace.read_text(encoding="utf-8").replace(",0.500000,", ",0.800000,"))
    assert powered_now(path) == [4, 7]  # 5.25 kW · 0.2 = 1,050 W -> 4 GPUs
    rewrite(trace, trace.read_text(encoding="utf-8").replace(",0.800000,", ",1.500000,", 1))
    with pytest.raises(TraceError, match=r"1\.5.*\[0, 1\]"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_editing_a_base_scenario_after_a_make_is_seen_by_the_next_make(tmp_path):
    base = write(
        tmp_path, 'extends = "lora"\nname = "base"\n[network]\njoin_fixed_s = 7.0\n', "base.toml"
    )
    child = write(tmp_path, 'extends = "base.toml"\nname = "child"\n', "child.toml")
    first = gym.make("PowerTrip-v0", scenario=str(child)).unwrapped.params.join_s
    rewrite(base, base.read_text(encoding="utf-8").replace("7.0", "70.0"))
    second = gym.make("PowerTrip-v0", scenario=str(child)).unwrapped.params.join_s
    np.testing.assert_allclose(second - first, 63.0)
    rewrite(base, base.read_text(encoding="utf-8").replace("70.0", "-1.0"))
    with pytest.raises(ScenarioError, match="join_fixed_s"):
        gym.make("PowerTrip-v0", scenario=str(child))
