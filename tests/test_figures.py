"""Tests for the figures ``powertrip evaluate`` writes beyond the box plots: the timeline of one
episode (``timeline.png``, ``powertrip_env.harness.evaluation.timeline``) and each episode's TTA
against
PowerTrip's (``tta_paired.png``, ``powertrip_env.harness.evaluation.figures.paired_figure``)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powertrip_env.errors import EvaluationError
from powertrip_env.harness.evaluation import figures, timeline_figure
from powertrip_env.harness.evaluation import timeline as timeline_module
from powertrip_env.harness.evaluation.evaluate import evaluate, main, summary_table
from powertrip_env.harness.evaluation.results import EPISODE_COLUMNS, Evaluation

POLICIES = ["PowerTrip", "AllSites", "TopPower-1", "RandomK"]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, read from its header; fails if the file is not a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def pixels(size_in: tuple[float, float], dpi: int) -> tuple[int, int]:
    return round(size_in[0] * dpi), round(size_in[1] * dpi)


def _argv(scenario: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--scenario",
        str(scenario),
        "--policies",
        ",".join(POLICIES),
        "--episodes",
        "3",
        "--seed",
        "5",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


@pytest.fixture
def drawn_timelines(monkeypatch) -> list[timeline_module.Timeline]:
    """The timelines ``evaluate`` hands to the figure, in the order it drew them."""
    seen: list[timeline_module.Timeline] = []
    original = figures.FIGURES["timeline.png"]

    def spy(result: Evaluation):
        seen.append(result.timeline)
        return original(result)

    monkeypatch.setitem(figures.FIGURES, "timeline.png", spy)
    return seen


def test_evaluate_writes_the_timeline_and_the_paired_figure(
    small_scenario, tmp_path, drawn_timelines, capsys
):
    out = tmp_path / "out"
    assert main(_argv(small_scenario, out)) == 0
    capsys.readouterr()
    assert {"timeline.png", "tta_paired.png"} <= {p.name for p in out.iterdir()}
    size = timeline_figure.timeline_size(n_sites=4, n_policies=len(POLICIES))
    assert png_size(out / "timeline.png") == pixels(size, timeline_figure.DPI)
    assert png_size(out / "tta_paired.png") == pixels(figures.PAIRED_SIZE_IN, figures.PAIRED_DPI)
    [drawn] = drawn_timelines
    assert (drawn.seed, drawn.episode) == (5, 0)  # the first episode unless --timeline says


def test_timeline_seed_picks_the_episode_and_matches_its_row(
    small_scenario, tmp_path, drawn_timelines, capsys
):
    out = tmp_path / "out"
    assert main(_argv(small_scenario, out, "--timeline", "7")) == 0
    capsys.readouterr()
    [drawn] = drawn_timelines
    assert (drawn.seed, drawn.episode) == (7, 2)
    frame = pd.read_csv(out / "episodes.csv")
    rows = frame[frame["seed"] == 7].set_index("policy")
    assert [run.label for run in drawn.runs] == POLICIES
    for run in drawn.runs:  # the rounds drawn are the episode evaluated, round for round
        row = rows.loc[run.label]
        assert run.tta_h == pytest.approx(row["tta_h"], rel=1e-12, abs=1e-12), run.label
        assert run.success == row["success"] and len(run.start_h) == row["rounds"]
        busy = run.selected.any(axis=1)
        assert run.selected[busy].sum(axis=1).mean() == pytest.approx(row["mean_sites"])
    assert drawn.start_time == rows["start_time"].iloc[0]
    assert len(drawn.site_names) == drawn.power_share.shape[1] == 4


def test_joins_and_drop_outs_follow_the_rounds(small_scenario):
    """A join is a site that trains without having completed the round before (the decision
    view's ``joined``); a drop-out is a started site whose power failed (``info["dropped"]``)."""
    kw = {"env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    result = evaluate("PowerTrip-v0", POLICIES, episodes=1, seed=5, **kw)
    timeline = result.timeline
    assert timeline is not None and timeline.seed == 5
    for run in timeline.runs:
        before = np.vstack([np.zeros((1, run.selected.shape[1]), bool), run.completed[:-1]])
        np.testing.assert_array_equal(run.joins, run.selected & ~before)
        assert not (run.dropped & ~run.selected).any()
        np.testing.assert_allclose(run.start_h[1:], run.end_h[:-1])  # rounds follow each other
        assert run.start_h[0] == 0.0 and np.all(run.end_h > run.start_h)
    assert sum(int(run.dropped.sum()) for run in timeline.runs) > 0  # the scenario has some
    assert np.all((timeline.power_share >= 0) & (timeline.power_share <= 1))
    assert timeline.power_h[0] == 0.0 and np.all(np.diff(timeline.power_h) > 0)
    assert timeline.power_h[-1] >= max(run.end_h[-1] for run in timeline.runs) - 1.0 / 12


@pytest.mark.parametrize("value", ["99", "4", "-1"])
def test_a_timeline_seed_outside_the_run_is_refused_before_anything_runs(
    value, small_scenario, tmp_path, monkeypatch, capsys
):
    import powertrip_env.harness.evaluation.evaluate as evaluate_module

    monkeypatch.setattr(evaluate_module, "run_episode", lambda *a: pytest.fail("ran"))
    out = tmp_path / "out"
    assert main(_argv(small_scenario, out, "--timeline", value)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"timeline seed {value} " in err and "must be 5 to 7" in err and "seed + e" in err
    assert not out.exists()


def test_a_timeline_seed_that_is_no_integer_is_refused(small_scenario, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(_argv(small_scenario, tmp_path / "out", "--timeline", "first"))
    assert info.value.code == 2
    assert "argument --timeline: invalid int value: 'first'" in capsys.readouterr().err
    kw = {"env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    for bad in (True, 5.0, "5"):
        with pytest.raises(EvaluationError, match=r"timeline seed .* must be 5$"):
            evaluate("PowerTrip-v0", ["AllSites"], episodes=1, seed=5, timeline=bad, **kw)


# --------------------------------------------------------------------------- the paired figure


def _evaluation(tta: dict[str, list[float]], success: dict[str, list[bool]]) -> Evaluation:
    days = ["2022-06-28T03:00:00Z", "2022-06-29T03:00:00Z", "2022-06-30T03:00:00Z"]
    rows = [
        {
            "policy": p,
            "episode": e,
            "seed": e,
            "start_time": days[e],
            "tta_h": x,
            "success": success[p][e],
            "rounds": 10,
            "energy_kwh": 1.0,
            "mean_sites": 2.0,
            "comm_share": 0.1,
            "comm_s": 1.0,
            "active_s": 10.0,
        }
        for p, values in tta.items()
        for e, x in enumerate(values)
    ]
    frame = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    return Evaluation("PowerTrip-v0", "test", frame, summary_table(frame, list(tta)))


def test_paired_figure_shows_each_episode_against_powertrip():
    tta = {"PowerTrip": [20.0, 25.0, 30.0], "AllSites": [22.0, 24.0, 48.0], "RandomK": [48.0] * 3}
    ok = {"PowerTrip": [True] * 3, "AllSites": [True, True, False], "RandomK": [False] * 3}
    fig = figures.paired_figure(_evaluation(tta, ok))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "PowerTrip's TTA in the episode (h)"
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "AllSites: slower in 2, faster in 1 of 3" in texts
    assert "RandomK: slower in 3, faster in 0 of 3" in texts
    assert not any(t.startswith("PowerTrip:") for t in texts)  # PowerTrip is the x axis
    points = np.vstack([c.get_offsets() for c in ax.collections])  # filled and hollow
    assert sorted(map(tuple, points.tolist())) == sorted(
        (x, y)
        for p in ("AllSites", "RandomK")
        for x, y in zip(tta["PowerTrip"], tta[p], strict=True)
    )
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x0 < 20.0 and x1 > 30.0 and y0 < 20.0 and y1 > 48.0


def test_paired_figure_without_powertrip_pairs_against_the_first_policy():
    tta = {"AllSites": [22.0, 24.0, 48.0], "TopPower-1": [30.0, 20.0, 40.0]}
    fig = figures.paired_figure(_evaluation(tta, {p: [True] * 3 for p in tta}))
    label = fig.axes[0].get_xlabel()
    assert label.startswith("AllSites's TTA") and "PowerTrip was not evaluated" in label
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "TopPower-1: slower in 1, faster in 2 of 3" in texts


def test_one_policy_still_gets_a_paired_figure_saying_there_is_nothing_to_pair():
    fig = figures.paired_figure(
        _evaluation({"PowerTrip": [20.0, 25.0, 30.0]}, {"PowerTrip": [True] * 3})
    )
    assert any("nothing to pair" in t.get_text() for t in fig.axes[0].texts)
