"""``powertrip room`` (harness/reports/room.py): a measured task's room, split and swept."""

from __future__ import annotations

import json

import pytest

from powertrip_env.harness.reports import room


def test_the_rooms_come_from_the_means() -> None:
    mean = {
        "HorizonRule": 30.0,
        "ForecastMPC": 29.0,
        "AdaptiveHorizon": 28.0,
        "AdaptiveMPC": 27.5,
        "ExploringHorizon": 28.5,
        "Informed": 27.0,
        "InformedMPC": 27.2,
        **{room.told_name(k): 30.0 for k in room.TOLD},
    }
    mean[room.told_name("throughput")] = 27.6  # closes 80% of HorizonRule's 3 h
    out = room.rooms(mean)
    assert out["stated_room"] == pytest.approx(29.0 / 27.0)
    assert out["learnable_room"] == pytest.approx(27.5 / 27.0)
    assert out["recovered"] == pytest.approx(1.5 / 2.0)
    assert out["told_share"] == pytest.approx(
        {"throughput": 0.8, "links": 0.0, "joins": 0.0, "job": 0.0}
    )


def test_the_command_reports_the_task_and_a_sweep(capsys) -> None:
    argv = ["--episodes", "2", "--no-jitter", "--sweep", "slow_probability=0"]
    assert room.main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    shipped, swept = report["settings"]
    assert shipped["field"] == "shipped" and swept == {**swept, "field": "slow_probability"}
    assert swept["value"] == 0.0 and report["jitter"] is False
    for s in report["settings"]:
        assert set(s["mean_tta_h"]) >= {"HorizonRule", "AdaptiveMPC", "InformedMPC"}
        assert s["learnable_room"] > 0.0 and set(s["told_share"]) == set(room.TOLD)
    # fewer outliers: the sites are faster as drawn, so the rules are too
    assert swept["mean_tta_h"]["Informed"] != shipped["mean_tta_h"]["Informed"]
    assert "| slow_probability = 0 |" in out


def test_a_known_task_or_a_bad_sweep_is_refused(capsys) -> None:
    assert room.main(["--env", "PowerTrip-v0", "--episodes", "2"]) == 2
    assert "draws no unknowns" in capsys.readouterr().err
    for bad, says in (
        ("pace=0.1", "FIELD one of"),
        ("slow_probability=x", "must be numbers"),
        ("slow_probability=-1", ">= 0"),
        ("slow_probability", "FIELD one of"),
    ):
        with pytest.raises(SystemExit) as info:
            room.main(["--sweep", bad])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --sweep: {bad!r}" in err and says in err, err
