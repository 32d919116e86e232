"""Tests for powertrip_env.harness.reports.leaderboard: normalised scores computed by hand, the IQM
against ``scipy.stats.trim_mean``'s rule, the stratified day bootstrap (exact ranges with two days,
pairing, determinism), refusals, and the Markdown, JSON and PNG outputs, with each policy's
success beside its score and the mark of one that never finished (as README's table, the ID
pages and ``powertrip evaluate``'s summary show them)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from powertrip_env.harness.evaluation.statistics import day_bootstrap_ci95, start_days
from powertrip_env.harness.reports import leaderboard, measures
from powertrip_env.harness.reports.leaderboard import (
    performance_profile,
    profile_fractions,
    to_json,
    to_markdown,
)
from powertrip_env.harness.reports.measures import TASK_FACTS
from powertrip_env.harness.reports.scores import (
    SCORE_COLUMNS,
    aggregate,
    iqm,
    normalised_scores,
    per_task_table,
)
from powertrip_env.harness.tracks import KNOWN

ZERO, TOP = "PowerTrip", "Optimiser"

# Two tasks, four episodes each on two start days (episodes 0, 1 on the 28th, 2, 3 on the 29th).
TOY = {
    "A-v0": {"PowerTrip": [10, 12, 14, 16], "Optimiser": [6, 8, 8, 10], "Greedy": [9, 11, 12, 12]},
    "B-v0": {
        "PowerTrip": [20, 20, 24, 24],
        "Optimiser": [10, 12, 14, 16],
        "Greedy": [22, 22, 22, 23],
    },
}
TOY_STARTS = [
    "2022-06-28T03:00:00+00:00",
    "2022-06-28T15:00:00+00:00",
    "2022-06-29T03:00:00+00:00",
    "2022-06-29T15:00:00+00:00",
]
# By hand: A: zero mean 13, top mean 8, denominator 5; Greedy mean 11 -> 2 / 5 = 0.4.
#          B: zero mean 22, top mean 13, denominator 9; Greedy mean 22.25 -> -0.25 / 9 = -1/36.
GREEDY_A, GREEDY_B = 0.4, -1.0 / 36.0
GREEDY_EPISODES = {"A-v0": [0.8, 0.4, 0.2, 0.2], "B-v0": [0.0, 0.0, 0.0, -1.0 / 9.0]}


def frame(
    tasks: dict[str, dict[str, list[float]]], starts: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    rows = []
    for task, policies in tasks.items():
        times = (starts or {}).get(task, TOY_STARTS)
        for policy, values in policies.items():
            for e, v in enumerate(values):
                rows.append(
                    {
                        "task": task,
                        "policy": policy,
                        "episode": e,
                        "start_time": times[e],
                        "tta_h": float(v),
                        "success": True,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def toy() -> pd.DataFrame:
    return frame(TOY)


@pytest.fixture(scope="module")
def larger() -> pd.DataFrame:
    """Three tasks, 12 episodes on 4 days; the plan is 40% faster on every episode, so every
    resample has a positive denominator."""
    rng = np.random.default_rng(7)
    rows = []
    for t, task in enumerate(("PowerTrip-v0", "PowerTrip-LoRA-v0", "Toy-v0")):
        for e in range(12):
            day = e // 3
            base = (5.0 + 2.0 * t) * (1.0 + 0.15 * day) + rng.normal(0.0, 0.3)
            values = {
                ZERO: base,
                TOP: 0.6 * base,
                "Greedy": 0.8 * base + rng.normal(0.0, 0.4),
                "Slow": 1.1 * base + rng.normal(0.0, 0.4),
            }
            for policy, v in values.items():
                rows.append(
                    {
                        "task": task,
                        "policy": policy,
                        "episode": e,
                        "start_time": f"2022-07-{10 + day:02d}T{6 + e % 3:02d}:00:00Z",
                        "tta_h": v,
                        "success": True,
                    }
                )
    return pd.DataFrame(rows)


def _trim_mean_reference(x: list[float]) -> float:
    """scipy.stats.trim_mean(x, 0.25), written out: int(0.25 n) cut from each sorted end."""
    s = sorted(x)
    cut = int(0.25 * len(s))
    kept = s[cut : len(s) - cut]
    return sum(kept) / len(kept)


# --------------------------------------------------------------------------- scores


def test_task_scores_by_hand(toy: pd.DataFrame) -> None:
    table = per_task_table(toy, ZERO, TOP)
    got = {(r.task, r.policy): r for r in table.itertuples(index=False)}
    assert got["A-v0", "Greedy"].score == pytest.approx(GREEDY_A, abs=1e-12)
    assert got["B-v0", "Greedy"].score == pytest.approx(GREEDY_B, abs=1e-12)
    assert got["A-v0", "Greedy"].mean_tta_h == 11.0
    assert got["B-v0", "Greedy"].mean_tta_h == 22.25
    for task in TOY:
        assert got[task, ZERO].score == 0.0
        assert got[task, TOP].score == 1.0
    # sorted by score, best first: in B PowerTrip (0) is above Greedy (-1/36)
    assert list(table.loc[table["task"] == "A-v0", "policy"]) == [TOP, "Greedy", ZERO]
    assert list(table.loc[table["task"] == "B-v0", "policy"]) == [TOP, ZERO, "Greedy"]
    assert set(table["episodes"]) == {4} and set(table["days"]) == {2}


def test_per_task_interval_is_the_evaluation_day_bootstrap(toy: pd.DataFrame) -> None:
    table = per_task_table(toy, ZERO, TOP)
    row = table[(table["task"] == "B-v0") & (table["policy"] == "Greedy")].iloc[0]
    expected = day_bootstrap_ci95(TOY["B-v0"]["Greedy"], start_days(TOY_STARTS))
    assert (row.ci95_lo_h, row.ci95_hi_h) == expected
    # two days: the interval is the range of the day means, 22 and 22.5
    assert expected == pytest.approx((22.0, 22.5))


def test_per_episode_scores_use_the_task_means(toy: pd.DataFrame) -> None:
    scores = normalised_scores(toy, ZERO, TOP)
    assert list(scores.columns) == list(SCORE_COLUMNS)
    assert len(scores) == 2 * 3 * 4
    for task, expected in GREEDY_EPISODES.items():
        rows = scores[(scores["task"] == task) & (scores["policy"] == "Greedy")]
        assert list(rows["episode"]) == [0, 1, 2, 3]
        np.testing.assert_allclose(rows["score"], expected, atol=1e-12)
        # the mean of the per-episode scores is the task score
        assert rows["score"].mean() == pytest.approx(rows["task_score"].iloc[0], abs=1e-12)
    zero_a = scores[(scores["task"] == "A-v0") & (scores["policy"] == ZERO)]["score"]
    np.testing.assert_allclose(zero_a, [0.6, 0.2, -0.2, -0.6], atol=1e-12)  # (13 - x) / 5
    assert list(scores["day"].iloc[:4]) == ["2022-06-28", "2022-06-28", "2022-06-29", "2022-06-29"]


def test_row_order_and_extra_columns_do_not_matter(toy: pd.DataFrame) -> None:
    shuffled = toy.sample(frac=1.0, random_state=3).assign(seed=1)
    a = normalised_scores(toy, ZERO, TOP)
    b = normalised_scores(shuffled, ZERO, TOP)
    key = ["task", "policy", "episode"]
    pd.testing.assert_frame_equal(
        a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True)
    )
    assert aggregate(toy, ZERO, TOP) == aggregate(shuffled, ZERO, TOP)


# --------------------------------------------------------------------------- IQM


def test_iqm_of_0_to_99_is_trim_mean() -> None:
    assert iqm(np.arange(100)) == 49.5  # mean of 25..74
    assert iqm(np.arange(100)[::-1]) == 49.5


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0, 1, 2, 3, 100], 2.0),  # int(1.25) = 1 cut each end: mean(1, 2, 3)
        ([5, -1, 2, 8, 0, 3], 2.5),  # cut 1: mean(0, 2, 3, 5)
        ([1, 2, 9], 4.0),  # cut 0: the plain mean
        ([7.5], 7.5),
        ([-3, 4, 1, 1, 10, 2, 2, 50], 2.25),  # sorted -3 1 | 1 2 2 4 | 10 50
    ],
)
def test_iqm_by_hand(values: list[float], expected: float) -> None:
    assert iqm(values) == pytest.approx(expected, abs=1e-12)


def test_iqm_matches_trim_mean_rule_for_every_small_size() -> None:
    rng = np.random.default_rng(0)
    for n in range(1, 30):
        x = rng.standard_cauchy(n)
        assert iqm(x) == pytest.approx(_trim_mean_reference(list(x)), rel=1e-12, abs=1e-12)


def test_iqm_refuses_empty_and_nan() -> None:
    with pytest.raises(ValueError, match="no values"):
        iqm([])
    with pytest.raises(ValueError, match="finite"):
        iqm([1.0, math.nan, 2.0])


def test_aggregate_point_estimates_by_hand(toy: pd.DataFrame) -> None:
    agg = aggregate(toy, ZERO, TOP)
    assert list(agg) == [ZERO, TOP, "Greedy"]
    assert set(agg["Greedy"]) >= {"mean", "iqm", "ci95", "iqm_ci95"}
    assert agg["Greedy"]["mean"] == pytest.approx((GREEDY_A + GREEDY_B) / 2, abs=1e-12)  # 13.4/72
    # pooled per-episode: -1/9, 0, 0, 0, 0.2, 0.2, 0.4, 0.8; cut 2 -> mean(0, 0, 0.2, 0.2)
    assert agg["Greedy"]["iqm"] == pytest.approx(0.1, abs=1e-12)
    # Optimiser's pooled scores 0.6, 2/3, 8/9, 1, 1, 10/9, 4/3, 1.4 -> mean(8/9, 1, 1, 10/9) = 1
    assert agg[TOP]["iqm"] == pytest.approx(1.0, abs=1e-12)
    assert agg[ZERO]["mean"] == 0.0 and agg[TOP]["mean"] == 1.0


# --------------------------------------------------------------------------- bootstrap


def _toy_resample_stats(policy: str) -> tuple[list[float], list[float]]:
    """Mean score and IQM of ``policy`` on every combination of drawn days, by brute force."""
    day_sets = [(0, 0), (0, 1), (1, 1)]  # (1, 0) is the same multiset as (0, 1)
    eps_of_day = {0: [0, 1], 1: [2, 3]}
    means, iqms = [], []
    for picks in itertools.product(day_sets, repeat=len(TOY)):
        task_scores, pooled = [], []
        for task, days in zip(TOY, picks, strict=True):
            eps = [e for d in days for e in eps_of_day[d]]
            tta = {p: [TOY[task][p][e] for e in eps] for p in TOY[task]}
            zm = sum(tta[ZERO]) / len(eps)
            den = zm - sum(tta[TOP]) / len(eps)
            task_scores.append((zm - sum(tta[policy]) / len(eps)) / den)
            pooled += [(zm - x) / den for x in tta[policy]]
        means.append(sum(task_scores) / len(task_scores))
        iqms.append(_trim_mean_reference(pooled))
    return means, iqms


def test_bootstrap_interval_is_the_range_of_the_resamples_with_two_days(toy) -> None:
    """With two days a task has three distinct resamples; the extreme combination of the two
    tasks is drawn 1 time in 16 (far above 2.5%), so the interval is exactly the range of the
    brute-forced statistics: for the mean, (0.25 - 2/9) / 2 = 1/72 to (0.5 + 1/6) / 2 = 1/3."""
    agg = aggregate(toy, ZERO, TOP)
    assert agg["Greedy"]["ci95"] == pytest.approx([1.0 / 72.0, 1.0 / 3.0], abs=1e-12)
    means, iqms = _toy_resample_stats("Greedy")
    assert agg["Greedy"]["ci95"] == pytest.approx([min(means), max(means)], abs=1e-12)
    assert agg["Greedy"]["iqm_ci95"] == pytest.approx([min(iqms), max(iqms)], abs=1e-12)


def test_a_one_day_task_is_held_fixed(toy: pd.DataFrame) -> None:
    """A on one day: its score stays 0.4, and B's three resamples give -2/9, -1/36 and 1/6."""
    one_day = [
        "2022-06-28T01:00:00Z",
        "2022-06-28T02:00:00Z",
        "2022-06-28T03:00:00Z",
        "2022-06-28T04:00:00Z",
    ]
    agg = aggregate(frame(TOY, {"A-v0": one_day}), ZERO, TOP)
    lo, hi = (0.4 - 2.0 / 9.0) / 2.0, (0.4 + 1.0 / 6.0) / 2.0
    assert agg["Greedy"]["ci95"] == pytest.approx([lo, hi], abs=1e-12)


def test_no_interval_without_two_days_anywhere() -> None:
    one_day = [f"2022-06-28T0{h}:00:00Z" for h in range(4)]
    episodes = frame(TOY, {task: one_day for task in TOY})
    agg = aggregate(episodes, ZERO, TOP)
    assert all(math.isnan(v) for v in agg["Greedy"]["ci95"] + agg["Greedy"]["iqm_ci95"])
    assert agg["Greedy"]["mean"] == pytest.approx((GREEDY_A + GREEDY_B) / 2)
    assert "[–]" in to_markdown(episodes, ZERO, TOP, aggregated=agg)
    facts = {task: _facts() for task in TOY}
    with pytest.raises(ValueError, match="two start days"):
        to_json(episodes, ZERO, TOP, task_facts=facts, aggregated=agg)


def test_interval_contains_the_estimate_and_is_deterministic(larger: pd.DataFrame) -> None:
    first = aggregate(larger, ZERO, TOP)
    again = aggregate(larger.sample(frac=1.0, random_state=1), ZERO, TOP)
    assert first == again  # bit for bit, whatever the row order
    for policy in ("Greedy", "Slow"):
        row = first[policy]
        lo, hi = row["ci95"]
        assert lo < row["mean"] < hi
        lo, hi = row["iqm_ci95"]
        assert lo < row["iqm"] < hi
    assert first["Greedy"]["mean"] > 0.2 and first["Slow"]["mean"] < -0.1
    assert first[ZERO]["ci95"] == [0.0, 0.0] and first[TOP]["ci95"] == [1.0, 1.0]


def test_more_resamples_are_a_different_but_close_draw(larger: pd.DataFrame) -> None:
    few = aggregate(larger, ZERO, TOP, resamples=500)["Greedy"]["ci95"]
    many = aggregate(larger, ZERO, TOP)["Greedy"]["ci95"]
    assert few != many
    assert few == pytest.approx(many, abs=0.05)
    with pytest.raises(ValueError, match="resamples"):
        aggregate(larger, ZERO, TOP, resamples=0)


def test_pairing_a_copy_of_powertrip_scores_exactly_zero(larger: pd.DataFrame) -> None:
    copy = larger[larger["policy"] == ZERO].assign(policy="Copy")
    twin = larger[larger["policy"] == TOP].assign(policy="Twin")
    agg = aggregate(pd.concat([larger, copy, twin], ignore_index=True), ZERO, TOP)
    assert agg["Copy"]["mean"] == 0.0
    assert agg["Copy"]["ci95"] == [0.0, 0.0]
    assert agg["Copy"]["iqm"] == agg[ZERO]["iqm"]
    assert agg["Copy"]["iqm_ci95"] == agg[ZERO]["iqm_ci95"]
    assert agg["Twin"]["mean"] == 1.0 and agg["Twin"]["ci95"] == [1.0, 1.0]
    table = per_task_table(pd.concat([larger, copy], ignore_index=True), ZERO, TOP)
    assert (table.loc[table["policy"] == "Copy", "score"] == 0.0).all()


def test_adding_a_policy_changes_no_other_interval(larger: pd.DataFrame) -> None:
    without = aggregate(larger[larger["policy"] != "Slow"], ZERO, TOP)
    full = aggregate(larger, ZERO, TOP)
    for policy, row in without.items():
        assert full[policy] == row


# --------------------------------------------------------------------------- refusals


def test_non_positive_denominator_names_the_task_and_both_means() -> None:
    tasks = {t: dict(p) for t, p in TOY.items()}
    tasks["B-v0"][TOP] = list(tasks["B-v0"][ZERO])  # no headroom: denominator 0
    with pytest.raises(ValueError, match=r"B-v0.*Optimiser \(22 h\).*PowerTrip \(22 h\)"):
        normalised_scores(frame(tasks), ZERO, TOP)
    tasks["B-v0"][TOP] = [25, 25, 25, 25]  # slower than PowerTrip: negative
    for call in (normalised_scores, aggregate, per_task_table):
        with pytest.raises(ValueError, match=r"task B-v0.*25 h.*22 h"):
            call(frame(tasks), ZERO, TOP)


def test_a_resample_without_headroom_is_refused() -> None:
    """The plan is faster on average (denominator 1) but slower on the second day."""
    tasks = {"C-v0": {ZERO: [10, 10, 10, 10], TOP: [7, 7, 11, 11], "Greedy": [9, 9, 9, 9]}}
    assert per_task_table(frame(tasks), ZERO, TOP)["score"].max() == 1.0
    with pytest.raises(ValueError, match=r"C-v0: in \d+ of 2000 resamples"):
        aggregate(frame(tasks), ZERO, TOP)


def test_bad_input_is_refused(toy: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="tta_h"):
        aggregate(toy.drop(columns="tta_h"), ZERO, TOP)
    with pytest.raises(ValueError, match="both"):
        normalised_scores(toy, ZERO, ZERO)
    with pytest.raises(ValueError, match=r"A-v0 has no episodes of Optimiser"):
        normalised_scores(toy[~((toy["task"] == "A-v0") & (toy["policy"] == TOP))], ZERO, TOP)
    with pytest.raises(ValueError, match=r"A-v0 has no episodes of Greedy"):
        aggregate(toy[~((toy["task"] == "A-v0") & (toy["policy"] == "Greedy"))], ZERO, TOP)
    dropped = toy.drop(index=toy.index[(toy["policy"] == "Greedy") & (toy["episode"] == 2)][:1])
    with pytest.raises(ValueError, match="lacks episode 2"):
        normalised_scores(dropped, ZERO, TOP)
    moved = toy.copy()
    moved.loc[(moved["policy"] == "Greedy") & (moved["episode"] == 1), "start_time"] = (
        "2022-06-30T00:00:00Z"
    )
    with pytest.raises(ValueError, match="start times differ"):
        normalised_scores(moved, ZERO, TOP)
    broken = toy.copy()
    broken.loc[3, "tta_h"] = math.nan
    with pytest.raises(ValueError, match="finite"):
        aggregate(broken, ZERO, TOP)
    with pytest.raises(ValueError, match="appears twice"):
        normalised_scores(pd.concat([toy, toy.iloc[:1]]), ZERO, TOP)
    with pytest.raises(ValueError, match="no rows"):
        normalised_scores(toy.iloc[:0], ZERO, TOP)


# --------------------------------------------------------------------------- outputs


def test_profile_fractions_by_hand(toy: pd.DataFrame) -> None:
    got = profile_fractions(toy, ZERO, TOP, taus=[-0.05, 0.1, 0.3, 1.5])
    # Greedy's pooled scores: -1/9, 0, 0, 0, 0.2, 0.2, 0.4, 0.8
    assert list(got["Greedy"]) == [7 / 8, 4 / 8, 2 / 8, 0.0]
    # Optimiser's lowest is 0.6, its highest 1.4
    assert list(got[TOP]) == [1.0, 1.0, 1.0, 0.0]
    # strictly above: PowerTrip's 0.6 in A is not above 0.6
    assert profile_fractions(toy, ZERO, TOP, taus=[0.6])[ZERO].iloc[0] == 0.0
    default = profile_fractions(toy, ZERO, TOP)
    assert default.index[0] == -1.0 and default.index[-1] == 1.5
    assert (np.diff(default.to_numpy(), axis=0) <= 0).all()  # never increases with τ


def test_performance_profile_writes_a_png(toy: pd.DataFrame, tmp_path) -> None:
    path = performance_profile(toy, ZERO, TOP, tmp_path / "new" / "profile.png")
    assert path == tmp_path / "new" / "profile.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_markdown_has_sorted_tables_and_the_caption(toy: pd.DataFrame) -> None:
    text = to_markdown(toy, ZERO, TOP, title="Toy board")
    assert text.startswith("# Toy board\n")
    assert "0 = PowerTrip, 1 = Optimiser (the optimiser's feasible plan)" in text
    assert "## Aggregate over 2 tasks" in text and "## A-v0" in text and "## B-v0" in text
    b_table = text.split("## B-v0")[1]
    rows = [line.split("|")[1].strip() for line in b_table.splitlines() if line.startswith("| ")]
    assert rows[1:] == [TOP, ZERO, "Greedy"]
    assert "| Greedy | 22.250 [22.000, 22.500] | -0.028 | 100% |" in b_table
    assert "| Greedy | 0.186 [0.014, 0.333] | 0.100 [" in text
    aggregate_rows = text.split("## Aggregate")[1].split("## A-v0")[0]
    order = [ln.split("|")[1].strip() for ln in aggregate_rows.splitlines() if ln.startswith("| ")]
    assert order[1:] == [TOP, "Greedy", ZERO]
    assert to_markdown(toy, ZERO, TOP, title="Toy board") == text


def _readme_rows(scores: str) -> dict[str, list[str]]:
    return {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|\n").split("|")[1:]]
        for line in scores.splitlines()
        if line.startswith("| ")
    }


def test_readme_scores_put_each_task_score_beside_the_aggregate(toy: pd.DataFrame) -> None:
    """README's leaderboard (``board_scores``) is laid out from the same ``Board`` as the
    benchmark's Markdown, not parsed from it: a policy's row holds its aggregate cells and the
    score its task tables give it; the bracket, the caption and the notes come along, the hours
    do not."""
    from maintainers.readme_tables import board_scores

    board = leaderboard.board(toy, ZERO, TOP)
    text = to_markdown(board, title="Toy board")
    facts = {task: _facts(n_sites=4) for task in TOY}
    scores = board_scores(board, facts, KNOWN)
    assert scores.startswith("| task | sites | optimiser headroom |")
    assert "| A-v0 | 4 | 1.250 | 7.50 | 8.00 | 0.062 | True |" in scores
    assert measures.caption(ZERO, TOP) in scores and measures.caption(ZERO, TOP) in text
    rows = _readme_rows(scores)
    assert rows["policy"] == ["mean score [95% CI]", "IQM [95% CI]", "success", "A-v0", "B-v0"]
    assert rows["Greedy"][0].startswith("0.186 [0.014, 0.333]")
    assert rows["Greedy"][2] == "100%"
    assert rows["Greedy"][4] == "-0.028"  # as B-v0's own table scores it
    assert "| Greedy | 22.250 [22.000, 22.500] | -0.028 | 100% |" in text
    names = list(rows)
    assert names[names.index("policy") + 1 :] == [TOP, "Greedy", ZERO]  # the aggregate's order
    assert "22.250" not in scores and "- mean score:" in scores and "- success:" in scores
    assert measures.NEVER_FINISHED not in scores + text  # every policy finished


# Two policies that reach the target in no episode: both count at the budget everywhere, so
# their scores tie; HalfWay finishes every episode of A and none of B.
BUDGET = {"A-v0": 30.0, "B-v0": 40.0}


@pytest.fixture
def with_failures(toy: pd.DataFrame) -> pd.DataFrame:
    extra = []
    for task, budget in BUDGET.items():
        for e, start in enumerate(TOY_STARTS):
            row = {"task": task, "episode": e, "start_time": start, "tta_h": budget}
            extra += [
                {**row, "policy": "Stuck", "success": False},
                {**row, "policy": "AlsoStuck", "success": False},
            ]
            if task == "A-v0":
                extra.append({**row, "policy": "HalfWay", "tta_h": 9.0, "success": True})
            else:
                extra.append({**row, "policy": "HalfWay", "success": False})
    return pd.concat([toy, pd.DataFrame(extra)], ignore_index=True)


def test_the_board_shows_success_and_marks_a_policy_that_never_finished(with_failures) -> None:
    """A policy with success 0 in every episode is marked beside its score, in the aggregate
    and in each task, and the mark is defined under the tables; one that always finishes shows
    100% (1.0 in the JSON); one that fails on a task only is marked on that task only."""
    mark = measures.NEVER_FINISHED
    board = leaderboard.board(with_failures, ZERO, TOP)
    text = to_markdown(board, title="Board")
    agg = {
        line.split("|")[1].strip(): line
        for line in text.split("## A-v0")[0].splitlines()
        if line.startswith("| ")
    }
    assert agg["policy"] == "| policy | mean score [95% CI] | IQM [95% CI] | success |"
    for stuck in ("Stuck", "AlsoStuck"):
        _, mean_cell, _, success = (c.strip() for c in agg[stuck].strip("| ").split("|"))
        assert mean_cell.endswith(f"] {mark}") and success == "0%"
    assert mark not in agg["Greedy"] and agg["Greedy"].endswith("| 100% |")
    assert mark not in agg["HalfWay"] and agg["HalfWay"].endswith("| 50% |")
    b_table = text.split("## B-v0")[1]
    stuck_b = (40.0 - 22.0) / -9.0  # (zero - policy) / denominator
    assert f"| Stuck | 40.000 [40.000, 40.000] | {stuck_b:.3f} {mark} | 0% |" in b_table
    assert f"| HalfWay | 40.000 [40.000, 40.000] | -2.000 {mark} | 0% |" in b_table
    assert "| HalfWay | 9.000 [9.000, 9.000] | 0.800 | 100% |" in text.split("## B-v0")[0]
    assert f"- {measures.NEVER_FINISHED_NOTE}" in text  # under the aggregate
    assert text.rstrip("\n").endswith(measures.NEVER_FINISHED_NOTE)  # under the tasks

    out = to_json(board, task_facts={task: _facts() for task in TOY})
    assert out["aggregate"]["Stuck"]["success"] == 0.0
    assert out["aggregate"]["Stuck"]["never_finished"] is True
    assert out["aggregate"]["Greedy"]["success"] == 1.0
    assert out["aggregate"]["Greedy"]["never_finished"] is False
    assert out["aggregate"]["HalfWay"]["success"] == 0.5
    assert out["aggregate"]["HalfWay"]["never_finished"] is False
    b = out["tasks"]["B-v0"]["policies"]
    assert b["HalfWay"]["success"] == 0.0 and b["HalfWay"]["never_finished"] is True
    assert out["tasks"]["A-v0"]["policies"]["HalfWay"]["never_finished"] is False
    assert b["Stuck"]["never_finished"] is True and b["Greedy"]["success"] == 1.0
    # the scores are the same numbers whether success is there or not
    assert out["aggregate"]["Stuck"]["mean"] == out["aggregate"]["AlsoStuck"]["mean"]


def test_readme_scores_mark_a_policy_that_never_finished(with_failures) -> None:
    from maintainers.readme_tables import board_scores

    mark = measures.NEVER_FINISHED
    board = leaderboard.board(with_failures, ZERO, TOP)
    scores = board_scores(board, {task: _facts(n_sites=4) for task in TOY}, KNOWN)
    rows = _readme_rows(scores)
    assert rows["Stuck"][0].endswith(f"] {mark}") and rows["Stuck"][2] == "0%"
    assert all(cell.endswith(f" {mark}") for cell in rows["Stuck"][3:])  # each task's score
    assert rows["HalfWay"][2] == "50%" and mark not in "".join(rows["HalfWay"][:4])
    assert rows["HalfWay"][4] == f"-2.000 {mark}"  # B-v0, where it never finished
    assert rows["Greedy"][2] == "100%" and mark not in "".join(rows["Greedy"])
    assert f"- {measures.NEVER_FINISHED_NOTE}" in scores


def test_the_board_needs_each_episode_s_success(toy: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="lacks the column success"):
        leaderboard.board(toy.drop(columns="success"), ZERO, TOP)
    broken = toy.astype({"success": object})
    broken.loc[2, "success"] = None
    with pytest.raises(ValueError, match="True or False"):
        to_markdown(broken, ZERO, TOP)
    # 0 and 1, as a CSV may hold them, are read as False and True
    assert to_markdown(toy.assign(success=1), ZERO, TOP) == to_markdown(toy, ZERO, TOP)


def _facts(**extra: object) -> dict[str, object]:
    return {
        "optimiser_headroom": np.float64(1.25),
        "optimum_upper_h": 8.0,
        "optimum_lower_h": np.float32(7.5),
        "gap": 0.0625,
        "reference_never_beaten": np.bool_(True),
        **extra,
    }


def _types(value: object) -> set[type]:
    if isinstance(value, dict):
        return {str} | set().union(*(_types(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_types(v) for v in value))
    return {type(value)}


def test_json_has_the_required_shape_and_plain_types(toy: pd.DataFrame) -> None:
    facts = {"A-v0": _facts(note="cut", runs=np.int64(3)), "B-v0": _facts(), "Unused-v0": {}}
    out = to_json(toy, ZERO, TOP, task_facts=facts)
    json.dumps(out, allow_nan=False)
    assert _types(out) <= {str, float, bool, int}
    assert set(out) >= {"tasks", "aggregate"}
    assert list(out["tasks"]) == ["A-v0", "B-v0"]
    a = out["tasks"]["A-v0"]
    assert set(a) >= {*TASK_FACTS, "policies"}
    assert type(a["optimiser_headroom"]) is float and type(a["optimum_lower_h"]) is float
    assert a["reference_never_beaten"] is True
    assert a["note"] == "cut" and a["runs"] == 3 and type(a["runs"]) is int
    assert list(a["policies"]) == [TOP, "Greedy", ZERO]
    assert a["policies"]["Greedy"] == {
        "tta_h": 11.0,
        "score": pytest.approx(0.4, abs=1e-12),
        "success": 1.0,
        "never_finished": False,
    }
    assert type(a["policies"]["Greedy"]["tta_h"]) is float
    greedy = out["aggregate"]["Greedy"]
    assert set(greedy) >= {"mean", "iqm", "ci95"}
    assert greedy["mean"] == pytest.approx(13.4 / 72) and len(greedy["ci95"]) == 2
    assert all(type(v) is float for v in greedy["ci95"])


def test_json_refuses_nan_and_missing_facts(toy: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"B-v0.*gap is nan"):
        to_json(toy, ZERO, TOP, task_facts={"A-v0": _facts(), "B-v0": _facts(gap=math.nan)})
    with pytest.raises(ValueError, match="no entry for task B-v0"):
        to_json(toy, ZERO, TOP, task_facts={"A-v0": _facts()})
    partial = _facts()
    del partial["optimiser_headroom"]
    with pytest.raises(ValueError, match="lacks optimiser_headroom"):
        to_json(toy, ZERO, TOP, task_facts={"A-v0": partial, "B-v0": _facts()})
    with pytest.raises(TypeError, match="not a bool"):
        to_json(
            toy,
            ZERO,
            TOP,
            task_facts={"A-v0": _facts(reference_never_beaten="yes"), "B-v0": _facts()},
        )
    with pytest.raises(ValueError, match="inf"):
        to_json(toy, ZERO, TOP, task_facts={"A-v0": _facts(extra=math.inf), "B-v0": _facts()})


def test_a_policy_missing_from_a_task_is_listed_but_not_aggregated() -> None:
    """MyopicOptimal cannot run above 16 sites: its task tables keep it, the aggregate and the
    profile (over the policies that ran every task) leave it out and say so."""
    rows = []
    for task, times in (
        ("A", ("2022-06-29T00:00:00Z", "2022-06-30T00:00:00Z")),
        ("B", ("2022-07-01T00:00:00Z", "2022-07-02T00:00:00Z")),
    ):
        for e, start in enumerate(times):
            for policy, tta in (("PowerTrip", 30.0), ("Optimiser", 20.0), ("Rule", 25.0 + e)):
                rows.append((task, policy, e, start, tta, True))
        if task == "A":
            rows += [(task, "Myopic", e, start, 22.0, True) for e, start in enumerate(times)]
    columns = ["task", "policy", "episode", "start_time", "tta_h", "success"]
    frame = pd.DataFrame(rows, columns=columns)
    assert leaderboard.common_policies(frame) == ["PowerTrip", "Optimiser", "Rule"]
    assert set(leaderboard.on_every_task(frame)["policy"]) == {"PowerTrip", "Optimiser", "Rule"}
    facts = {
        t: {
            "optimiser_headroom": 1.1,
            "optimum_upper_h": 20.0,
            "optimum_lower_h": 19.0,
            "gap": 1.05,
            "reference_never_beaten": True,
        }
        for t in ("A", "B")
    }
    out = leaderboard.to_json(frame, "PowerTrip", "Optimiser", task_facts=facts, resamples=50)
    assert out["tasks"]["A"]["policies"]["Myopic"]["score"] == pytest.approx(0.8)
    assert "Myopic" not in out["tasks"]["B"]["policies"]
    assert "Myopic" not in out["aggregate"]
    assert out["aggregate"]["Rule"]["mean"] == pytest.approx(0.45)
    text = leaderboard.to_markdown(frame, "PowerTrip", "Optimiser", resamples=50)
    assert "Not in the aggregate, as they did not run every task: Myopic." in text


def test_readme_tables_lays_out_a_finished_run_from_its_data(with_failures, tmp_path, capsys):
    """``readme-tables --leaderboard-from DIR`` builds both blocks from the run's episodes and
    JSON, as the run itself would (so README shows success and the mark too), and refuses a
    folder whose JSON its episodes do not give again."""
    import maintainers.readme_tables as readme_tables
    from powertrip_env.harness.reports import benchmark
    from powertrip_env.harness.tracks import time

    bound = with_failures[with_failures["policy"] == ZERO].assign(
        policy=time.BOUND, tta_h=1.0, success=True
    )
    frame = pd.concat([with_failures, bound], ignore_index=True)
    facts = {task: _facts(n_sites=4, bound_holds=True) for task in TOY}
    markdown, summary = benchmark.report(frame, facts)
    run = tmp_path / "run"
    run.mkdir()
    benchmark.write_run(run, frame, markdown, summary)
    names = (readme_tables.LEADERBOARD, readme_tables.SCORES)
    blocks = "".join(f"<!-- results:{n} -->\nold\n<!-- /results:{n} -->\n" for n in names)
    readme = tmp_path / "README.md"
    readme.write_text(blocks, encoding="utf-8")
    argv = ["--readme", str(readme), "--tables", "leaderboard", "--leaderboard-from", str(run)]
    assert readme_tables.main(argv) == 0
    text = readme.read_text(encoding="utf-8")
    scores = readme_tables.board_scores(leaderboard.board(benchmark.scored(frame)), facts, KNOWN)
    assert readme_tables.board_block(markdown) in text and scores in text
    assert f"| Stuck | 30.000 [30.000, 30.000] | -3.400 {measures.NEVER_FINISHED} | 0% |" in text
    profile = tmp_path / "docs" / "leaderboard-profile.png"
    assert profile.read_bytes() == (run / benchmark.PROFILE).read_bytes()

    saved = json.loads((run / benchmark.BOARD_JSON).read_text(encoding="utf-8"))
    saved["aggregate"]["Greedy"]["mean"] += 1e-9
    (run / benchmark.BOARD_JSON).write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        readme_tables.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "not one run's" in err and "differ in aggregate" in err


def test_an_id_page_quotes_its_task_with_the_notes_that_read_it(with_failures) -> None:
    """``docs_envs.board_section`` copies a task's table out of the block ``readme-tables``
    writes, with the caption and the task notes, the mark's definition among them."""
    from maintainers.docs_envs import board_section
    from maintainers.readme_tables import board_block

    block = board_block(to_markdown(with_failures, ZERO, TOP))
    for task in TOY:
        section = "\n".join(board_section(task, block))
        assert "| policy | mean TTA h [95% CI] | score | success |" in section
        assert section.count("| Stuck |") == 1 and "## " not in section
        assert measures.caption(ZERO, TOP) in section
        assert section.rstrip().endswith(measures.NEVER_FINISHED_NOTE)
    assert "| HalfWay | 9.000" not in "\n".join(board_section("B-v0", block))  # A's row


def test_evaluate_s_summary_marks_a_policy_that_never_finished_as_the_board_does() -> None:
    """``powertrip evaluate``'s summary shows success beside the mean TTA and marks, with the
    board's mark, the policies that reached the target in no episode, saying so under it."""
    from powertrip_env.harness.evaluation.evaluate import summary_table
    from powertrip_env.harness.evaluation.results import EPISODE_COLUMNS, Evaluation

    rows = []
    for policy, tta, success in (("PowerTrip", 20.0, True), ("Stuck", 48.0, False),
                                 ("Sometimes", 30.0, None)):  # fmt: skip
        for e in range(4):
            row = dict.fromkeys(EPISODE_COLUMNS, 1.0)
            row.update(
                policy=policy,
                episode=e,
                seed=e,
                start_time=TOY_STARTS[e],
                tta_h=tta,
                success=e < 2 if success is None else success,
            )
            rows.append(row)
    episodes = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    order = ["PowerTrip", "Stuck", "Sometimes"]
    text = Evaluation("Toy-v0", "test", episodes, summary_table(episodes, order)).to_markdown()
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line[:2] == "| "}
    mark = measures.NEVER_FINISHED
    assert f"| 48.000 {mark} |" in lines["Stuck"] and "| 0% |" in lines["Stuck"]
    assert mark not in lines["Sometimes"] and "| 50% |" in lines["Sometimes"]
    assert mark not in lines["PowerTrip"] and "| 100% |" in lines["PowerTrip"]
    assert f"- {mark} never finished:" in text
    without = episodes[episodes["policy"] != "Stuck"]
    summary = summary_table(without, ["PowerTrip", "Sometimes"])
    assert mark not in Evaluation("Toy-v0", "test", without, summary).to_markdown()
