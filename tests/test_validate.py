"""Tests for powertrip_env.harness.calibration.validate's Kendall τ over the pairs real training
separates: pairs whose real mean TTAs have disjoint day-bootstrap 95% intervals."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from powertrip_env.harness.calibration.validate import (
    kendall_tau,
    main,
    separated_pairs,
    summarise,
    to_markdown,
)

DAYS = ["2022-06-28", "2022-06-29", "2022-06-30", "2022-07-01", "2022-07-02"]


def _frame(real: dict[str, list[float]], surrogate: dict[str, float]) -> pd.DataFrame:
    """Both learners' episodes: episode e of every policy starts on DAYS[e] (one a day), and
    the surrogate's TTA of a policy is the same in every episode."""
    rows = []
    for learner, tta in (("real", real), ("surrogate", {p: [v] * 5 for p, v in surrogate.items()})):
        for policy, values in tta.items():
            for e, (day, value) in enumerate(zip(DAYS, values, strict=True)):
                start = f"{day}T{6 + e:02d}:30:00Z"
                rows.append(
                    {
                        "learner": learner,
                        "policy": policy,
                        "episode": e,
                        "start_time": start,
                        "tta_h": value,
                    }
                )
    return pd.DataFrame(rows)


# A and B are tied within noise under real training; C and D are well apart from them and from
# each other. The surrogate swaps A and B and gets every other order right.
REAL = {
    "A": [10.0, 10.2, 9.9, 10.1, 10.0],
    "B": [10.1, 10.0, 10.2, 9.95, 10.05],
    "C": [20.0, 20.3, 19.8, 20.1, 20.2],
    "D": [30.0, 29.5, 30.4, 30.1, 29.9],
}
SURROGATE = {"A": 5.0, "B": 4.9, "C": 8.0, "D": 12.0}


def test_tau_over_separated_pairs_ignores_the_pair_tied_within_intervals():
    summary = summarise(_frame(REAL, SURROGATE), env_id="PowerTrip-Digits-v1")
    assert summary["kendall_tau"] == pytest.approx((5 - 1) / 6, abs=1e-4)  # A-B discordant
    assert summary["kendall_tau_separated"] == 1.0
    assert summary["separated_pairs"] == [
        ["A", "C"],
        ["A", "D"],
        ["B", "C"],
        ["B", "D"],
        ["C", "D"],
    ]
    assert summary["pairs"] == 6 and summary["start_days"] == 5 and summary["episodes"] == 5
    low_a, high_a = summary["policies"]["A"]["real_ci95_h"]
    low_b, high_b = summary["policies"]["B"]["real_ci95_h"]
    assert low_a <= high_b and low_b <= high_a  # the tied pair's intervals overlap
    json.dumps(summary, allow_nan=False)  # valid JSON: no NaN anywhere
    text = to_markdown(summary)
    assert "Kendall τ between the rankings: 0.667" in text
    assert "Kendall τ over the 5 of 6 pairs real training separates: 1.000" in text
    assert "block bootstrap over 5 distinct UTC start days" in text


def test_separated_pairs_are_listed_faster_first():
    summary = summarise(_frame({"D": REAL["D"], "A": REAL["A"]}, {"D": 1.0, "A": 2.0}), env_id="X")
    assert summary["separated_pairs"] == [["A", "D"]]
    assert summary["kendall_tau_separated"] == -1.0  # the surrogate has them the wrong way round


def test_tau_over_separated_pairs_is_undefined_when_no_pair_is_separated():
    real = {"A": REAL["A"], "B": REAL["B"]}
    summary = summarise(_frame(real, {"A": 5.0, "B": 4.9}), env_id="X")
    assert summary["separated_pairs"] == [] and summary["kendall_tau_separated"] is None
    assert "Kendall τ over separated pairs: undefined, as no pair is separated" in to_markdown(
        summary
    )


def test_tau_over_separated_pairs_is_undefined_when_the_surrogate_ties_them_all():
    real = {"A": REAL["A"], "C": REAL["C"]}
    summary = summarise(_frame(real, {"A": 48.0, "C": 48.0}), env_id="X")  # both at the budget
    assert summary["separated_pairs"] == [["A", "C"]] and summary["kendall_tau_separated"] is None
    assert "undefined, as the surrogate ties every one" in to_markdown(summary)


def test_tau_over_separated_pairs_is_undefined_with_one_start_day():
    frame = _frame(REAL, SURROGATE)
    frame["start_time"] = "2022-06-28T" + frame["start_time"].str[11:]  # every episode, one day
    summary = summarise(frame, env_id="X")
    assert summary["start_days"] == 1 and summary["kendall_tau_separated"] is None
    assert summary["separated_pairs"] == []
    assert all(v["real_ci95_h"] is None for v in summary["policies"].values())
    json.dumps(summary, allow_nan=False)
    text = to_markdown(summary)
    assert "Kendall τ over separated pairs: undefined. The episodes start on 1 UTC day" in text
    assert "| A | 10.0400 | – |" in text


def test_kendall_tau_counts_only_the_pairs_given():
    a, b = [1.0, 2.0, 3.0], [2.0, 1.0, 3.0]  # pair (0, 1) discordant, the others concordant
    assert kendall_tau(a, b) == pytest.approx(1 / 3)
    assert kendall_tau(a, b, [(0, 2), (1, 2)]) == 1.0
    assert kendall_tau(a, b, [(0, 1)]) == -1.0


def test_separated_pairs_need_disjoint_intervals():
    intervals = [(1.0, 2.0), (1.9, 3.0), (3.5, 4.0), (float("nan"), float("nan"))]
    assert separated_pairs(intervals) == [(0, 2), (1, 2)]  # touching or NaN separate nothing


def test_validate_command_reports_tau_over_separated_pairs(tmp_path, capsys):
    """A tiny real run (real training and the surrogate, 2 episodes each): a few seconds."""
    argv = ["--policies", "AllSites,TopPower-4", "--episodes", "2", "--out", str(tmp_path)]
    assert main([*argv, "--no-progress"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"kendall_tau", "kendall_tau_separated", "separated_pairs", "start_days"} <= set(last)
    frame = pd.read_csv(tmp_path / "validation.csv")
    assert last["start_days"] == frame["start_time"].str[:10].nunique()
    if last["start_days"] < 2 or not last["separated_pairs"]:
        assert last["kendall_tau_separated"] is None
    assert "Kendall τ over" in (tmp_path / "validation.md").read_text()
