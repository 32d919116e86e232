"""Tests for powertrip_env.harness.reports.tradeoff: the Pareto front on hand-made points (ties,
a dominated point, a single point, equal TTA), the per-policy means, the figure (a PNG of the
expected size, written atomically, naming the points its rule names) and its refusals of bad
input, each naming what is wrong."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from powertrip_env.harness.reports import tradeoff
from powertrip_env.harness.reports.tradeoff import (
    FIGURE_COLUMNS,
    LABEL_ALL_UP_TO,
    MEANS_COLUMNS,
    PANEL_IN,
    means_of,
    pareto_front,
    tradeoff_figure,
)

REFS = ("BestFixedSet", "Optimiser")


def points(*rows: tuple[str, float, float]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["policy", "tta_h", "carbon_kg"])


def front_of(*rows: tuple[str, float, float]) -> list[str]:
    return list(pareto_front(points(*rows))["policy"])


def means_frame(n_policies: int = 5, tasks: tuple[str, ...] = ("A-v0", "B-v0")) -> pd.DataFrame:
    """Per task: the two references on a front of their own, and policies on a line from fast
    and dirty to slow and clean, every third missing the deadline in some episode."""
    rows = []
    for k, task in enumerate(tasks):
        rows += [
            (task, "BestFixedSet", 6.0 + k, 150.0, 1.0),
            (task, "Optimiser", 5.0 + k, 160.0, 1.0),
        ]
        rows += [
            (task, f"P{i}", 7.0 + 0.3 * i + k, 140.0 - 3.0 * i, 0.5 if i % 3 == 0 else 1.0)
            for i in range(n_policies)
        ]
    frame = pd.DataFrame(rows, columns=list(MEANS_COLUMNS))
    frame["deadline_h"] = frame["task"].map({t: 9.0 + k for k, t in enumerate(tasks)})
    return frame


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def drawn(monkeypatch) -> list[Any]:
    """The figures ``tradeoff_figure`` saves, in order (it still writes them)."""
    seen: list[Any] = []
    original = tradeoff.save_png

    def spy(fig, path):
        seen.append(fig)
        original(fig, path)

    monkeypatch.setattr(tradeoff, "save_png", spy)
    return seen


def panels(fig) -> list[Any]:
    """The figure's panels: the axes with a title (a task's), not the switched-off spares."""
    return [ax for ax in fig.axes if ax.get_title()]


def named(ax) -> set[str]:
    """The policy names written in a panel (its annotations; the deadline's text is not one)."""
    from matplotlib.text import Annotation

    return {t.get_text() for t in ax.texts if isinstance(t, Annotation)}


# --------------------------------------------------------------------------- the front


def test_a_dominated_point_is_left_out_and_the_front_is_sorted_by_tta():
    assert front_of(("slow-clean", 9, 100), ("beaten", 8, 130), ("fast", 5, 120)) == [
        "fast",
        "slow-clean",
    ]
    # beaten on one axis only: not beaten
    assert front_of(("a", 5, 120), ("b", 6, 110), ("c", 7, 100)) == ["a", "b", "c"]


def test_ties_stay_and_equal_tta_keeps_the_lower_carbon():
    assert front_of(("twin-b", 5, 100), ("twin-a", 5, 100)) == ["twin-a", "twin-b"]  # a tie
    assert front_of(("dirty", 5, 120), ("clean", 5, 100), ("slow", 6, 90)) == ["clean", "slow"]
    assert front_of(("slow", 6, 100), ("fast", 5, 100)) == ["fast"]  # equal carbon
    # equal TTA on the front itself is impossible, so the order is TTA, then carbon, then name
    assert front_of(("z", 5, 100), ("a", 5, 100), ("m", 4, 110)) == ["m", "a", "z"]


def test_a_single_point_is_its_own_front_and_keeps_its_columns_and_label():
    one = pd.DataFrame(
        {"policy": ["only"], "tta_h": [3.0], "carbon_kg": [7.0], "success": [1.0]}, index=[42]
    )
    front = pareto_front(one)
    pd.testing.assert_frame_equal(front, one)
    assert pareto_front(one.iloc[:0]).empty


def test_the_front_refuses_what_it_would_get_wrong():
    with pytest.raises(ValueError, match="carbon_kg"):
        pareto_front(points(("a", 1, 2)).drop(columns="carbon_kg"))
    with pytest.raises(ValueError, match=r"tta_h has 1 non-finite value\(s\) \(policies b\)"):
        pareto_front(points(("a", 1, 2), ("b", np.nan, 1)))
    with pytest.raises(ValueError, match="more than one task"):
        pareto_front(points(("a", 1, 2), ("b", 2, 1)).assign(task=["A-v0", "B-v0"]))


# --------------------------------------------------------------------------- the means


def test_means_of_averages_each_policy_over_its_episodes_in_first_seen_order():
    episodes = pd.DataFrame(
        [
            ("B-v0", "Z", 0, 4.0, 10.0, True),
            ("B-v0", "Z", 1, 6.0, 30.0, False),
            ("B-v0", "A", 0, 5.0, 20.0, True),
            ("B-v0", "A", 1, 5.0, 20.0, True),
            ("A-v0", "Z", 0, 1.0, 2.0, True),
        ],
        columns=["task", "policy", "episode", "tta_h", "carbon_kg", "success"],
    )
    means = means_of(episodes.assign(extra="ignored"))
    assert list(means.columns) == list(MEANS_COLUMNS)
    assert list(zip(means["task"], means["policy"], strict=True)) == [
        ("B-v0", "Z"),
        ("B-v0", "A"),
        ("A-v0", "Z"),
    ]
    assert means["tta_h"].tolist() == [5.0, 5.0, 1.0]
    assert means["carbon_kg"].tolist() == [20.0, 20.0, 2.0]
    assert means["success"].tolist() == [0.5, 1.0, 1.0]


def test_means_of_refuses_means_over_different_episodes():
    base = pd.DataFrame(
        [
            ("A-v0", "X", 0, 1.0, 1.0, 1.0),
            ("A-v0", "Y", 0, 1.0, 1.0, 1.0),
            ("A-v0", "Y", 1, 1.0, 1.0, 1.0),
        ],
        columns=["task", "policy", "episode", "tta_h", "carbon_kg", "success"],
    )
    with pytest.raises(ValueError, match="policy Y played other episodes than X"):
        means_of(base)
    with pytest.raises(ValueError, match="has episode 0 twice"):
        means_of(pd.concat([base.iloc[:2], base.iloc[:1]]))
    with pytest.raises(ValueError, match=r"lacks the column.* success"):
        means_of(base.drop(columns="success"))
    with pytest.raises(ValueError, match="carbon_kg has 1 non-finite"):
        means_of(base.iloc[:2].assign(carbon_kg=[1.0, np.nan]))
    with pytest.raises(ValueError, match="success has values outside"):
        means_of(base.iloc[:2].assign(success=[1.0, 2.0]))


# --------------------------------------------------------------------------- the figure


def test_the_figure_is_written_atomically_one_panel_per_task(tmp_path, drawn):
    path = tmp_path / "out" / "tradeoff.png"
    assert tradeoff_figure(means_frame(), path, REFS) is None
    assert png_size(path) == (round(2 * PANEL_IN[0] * 120), round((PANEL_IN[1] + 0.4) * 120))
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["tradeoff.png"]  # no temporary
    [fig] = drawn
    assert [ax.get_title() for ax in panels(fig)] == ["A-v0", "B-v0"]
    for ax, deadline in zip(panels(fig), (9.0, 10.0), strict=True):
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert [tuple(line.get_xdata()) for line in dashed] == [(deadline, deadline)]
    before = path.read_bytes()
    tradeoff_figure(means_frame(), path, REFS)  # replaces the file, again leaving nothing else
    assert path.read_bytes() == before
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["tradeoff.png"]


def test_the_front_is_a_step_line_through_the_references_front(tmp_path, drawn):
    means = means_frame(tasks=("A-v0",))
    means.loc[means["policy"] == "BestFixedSet", "carbon_kg"] = 170.0  # now beaten by Optimiser
    tradeoff_figure(means, tmp_path / "f.png", REFS)
    [ax] = panels(drawn[0])
    [step] = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert step.get_drawstyle() == "steps-post"
    assert list(step.get_xdata()) == [5.0]  # Optimiser alone
    assert "BestFixedSet" in named(ax)  # a reference is named, on the front or not


def test_a_full_panel_names_the_references_the_front_and_the_asked_for(tmp_path, drawn):
    means = means_frame(n_policies=25, tasks=("A-v0",))
    means.loc[means["policy"] == "P24", ["tta_h", "carbon_kg"]] = [8.0, 200.0]  # beaten
    tradeoff_figure(means, tmp_path / "full.png", REFS)
    tradeoff_figure(means, tmp_path / "asked.png", REFS, label=["P24"])
    default, asked = (panels(fig)[0] for fig in drawn)
    rest = {f"P{i}" for i in range(24)}  # on the line, so on the front over every policy
    assert named(default) == {*REFS, *rest}
    assert named(asked) == {*REFS, *rest, "P24"}


def test_a_small_panel_names_every_policy_unless_told_otherwise(tmp_path, drawn):
    means = means_frame(n_policies=4, tasks=("A-v0",))
    means.loc[means["policy"] == "P3", ["tta_h", "carbon_kg"]] = [8.0, 200.0]  # beaten
    assert len(means) <= LABEL_ALL_UP_TO
    tradeoff_figure(means, tmp_path / "small.png", REFS)
    tradeoff_figure(means, tmp_path / "rule.png", REFS, label=())
    small, rule = (panels(fig)[0] for fig in drawn)
    assert named(small) == set(means["policy"])
    assert named(rule) == set(means["policy"]) - {"P3"}


@pytest.mark.parametrize("column", FIGURE_COLUMNS)
def test_a_missing_column_is_named_and_nothing_is_written(tmp_path, column):
    path = tmp_path / "tradeoff.png"
    with pytest.raises(ValueError, match=f"lacks the column\\(s\\) {column}"):
        tradeoff_figure(means_frame().drop(columns=column), path, REFS)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "references", "message"),
    [
        (lambda m: m.iloc[:0], REFS, "no rows"),
        (lambda m: m.assign(carbon_kg=np.nan), REFS, "carbon_kg has .* non-finite"),
        (lambda m: m.assign(success=1.5), REFS, "success has values outside"),
        (lambda m: m.assign(deadline_h=np.arange(len(m)) + 1.0), REFS, "several deadlines"),
        (lambda m: pd.concat([m, m.iloc[:1]]), REFS, "has policy BestFixedSet twice"),
        (lambda m: m, ("Optimser",), "references: no task has the policy.* Optimser"),
        (lambda m: m, "Optimiser", "not one string"),
    ],
)
def test_bad_means_are_refused_before_drawing(tmp_path, change, references, message):
    with pytest.raises(ValueError, match=message):
        tradeoff_figure(change(means_frame()), tmp_path / "tradeoff.png", references)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_label_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"label: no task has the policy.* Nobody"):
        tradeoff_figure(means_frame(), tmp_path / "tradeoff.png", REFS, label=["P1", "Nobody"])


def test_policies_that_missed_the_deadline_are_hollow(tmp_path, drawn):
    means = means_frame(n_policies=7, tasks=("A-v0", "B-v0", "C-v0"))  # a spare fourth axes
    tradeoff_figure(means, tmp_path / "f.png", REFS)
    for ax in panels(drawn[0]):
        sub = means[means["task"] == ax.get_title()]
        hollow = {
            tuple(xy)
            for c in ax.collections
            if len(c.get_facecolor()) == 0 and max(c.get_sizes(), default=0) < 90  # not a ring
            for xy in c.get_offsets().tolist()
        }
        late = sub[sub["success"] < 1.0]
        assert hollow == set(zip(late["tta_h"], late["carbon_kg"], strict=True))
        assert len(late) == 3  # P0, P3, P6
    assert sum(ax.axison for ax in drawn[0].axes) == 3
