"""The trade-off between time to accuracy and grid carbon on the carbon tasks, as one figure.

On the carbon track (``powertrip_env.CARBON_SUITE_IDS``) a policy is judged on two numbers, its
mean time to accuracy and the grid carbon it emitted, and neither alone ranks the policies: a
policy that waits for clean hours emits less and finishes later. So ``powertrip benchmark``
draws both. ``tradeoff_figure`` puts every policy of each task at (mean TTA, mean carbon), draws
the Pareto front of the references (what the clairvoyant plans show to be attainable) as a step
line, so a policy below or left of it does something the references do not, and marks the
task's deadline, past which an episode has failed. A policy that missed the deadline in some
episode is drawn hollow: its means mix finished and failed episodes and are not comparable with
those of a policy that always finished.

``means_of`` turns the benchmark's per-episode frame into the per-policy means the figure reads;
``pareto_front`` is the front itself, exposed because it is also the answer to "which policies
are worth a look". Nothing here runs an environment.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.render import agg_figure, save_png

POINT_COLUMNS = ("policy", "tta_h", "carbon_kg")
"""The columns ``pareto_front`` reads (others are carried along)."""

EPISODE_COLUMNS = ("task", "policy", "episode", "tta_h", "carbon_kg", "success")
"""The columns ``means_of`` reads: one row per (task, policy, episode)."""

MEANS_COLUMNS = ("task", "policy", "tta_h", "carbon_kg", "success")
"""The columns ``means_of`` returns, one row per (task, policy)."""

FIGURE_COLUMNS = (*MEANS_COLUMNS, "deadline_h")
"""The columns ``tradeoff_figure`` reads: ``MEANS_COLUMNS`` and the task's deadline."""

LABEL_ALL_UP_TO = 12
"""With ``label=None``, a panel with at most this many policies names every one; a fuller one
names only the references and the policies no other policy beats on both axes, since two dozen
names in one panel cover the points they name."""

PANEL_IN = (5.6, 4.4)  # one panel's width and height (inches); two panels to a row
REFERENCE_COLOUR, POLICY_COLOUR, DEADLINE_COLOUR = "#c44e52", "#4c72b0", "0.4"
LABEL_FONTSIZE = 6.5

# Where a name may sit, in points from its marker, in order of preference: beside it first,
# then above or below, then further out; the first that covers no other name or marker wins.
_OFFSETS: tuple[tuple[float, float, str, str], ...] = (
    (4, 3, "left", "bottom"),
    (4, -3, "left", "top"),
    (-4, 3, "right", "bottom"),
    (-4, -3, "right", "top"),
    (0, 6, "center", "bottom"),
    (0, -6, "center", "top"),
    (10, 10, "left", "bottom"),
    (10, -10, "left", "top"),
    (-10, 10, "right", "bottom"),
    (-10, -10, "right", "top"),
    (0, 16, "center", "bottom"),
    (0, -16, "center", "top"),
)
_MARKER_PX = 4.0  # half the side of the box a marker occupies, for the overlap test (pixels)


# --------------------------------------------------------------------------- the numbers


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """``ValueError`` naming every column of ``columns`` that ``frame`` lacks: a missing column
    would otherwise surface as a ``KeyError`` deep inside pandas, far from its cause."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks the column(s) {', '.join(missing)}")


def _keys(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """``ValueError`` when a key column has an empty cell: pandas' groupby drops such rows
    without a word, so a policy would go missing from its task."""
    for column in columns:
        if frame[column].isna().any():
            raise ValueError(f"{what}: column {column} has empty cells")


def _finite(frame: pd.DataFrame, column: str, what: str) -> np.ndarray:
    """``frame[column]`` as floats, or ``ValueError`` naming the column: a NaN would be skipped
    by a mean and compare false with everything, so a broken row would vanish without a word."""
    try:
        values = frame[column].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: column {column} is not numeric") from None
    bad = ~np.isfinite(values)
    if bad.any():
        named = ""
        if "policy" in frame.columns:
            policies = dict.fromkeys(map(str, frame["policy"].to_numpy()[bad]))
            named = f" (policies {', '.join(policies)})"
        raise ValueError(f"{what}: column {column} has {int(bad.sum())} non-finite value(s){named}")
    return values


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``points`` (columns ``policy, tta_h, carbon_kg``) that no other row beats on
    both (lower ``tta_h`` and lower ``carbon_kg``, at least one strictly), sorted by ``tta_h``.

    These are the policies a reader choosing between speed and carbon need look at: every other
    one is matched or beaten on both by one of them. Rows at the same point do not beat each
    other, so both stay; of two rows with the same ``tta_h`` only the lower carbon stays. Ties
    in ``tta_h`` are ordered by ``carbon_kg``, then by policy, so the order does not depend on
    the input's. The rows keep every column and their index labels (to find them in ``points``).
    ``ValueError`` for a missing column, a non-finite value, or rows of more than one task (a
    front across tasks compares hours and kilograms of different jobs).
    """
    _require(points, POINT_COLUMNS, "points")
    if "task" in points.columns and pd.Series(points["task"]).nunique(dropna=False) > 1:
        raise ValueError("points holds rows of more than one task: take the front of each task")
    tta = _finite(points, "tta_h", "points")
    carbon = _finite(points, "carbon_kg", "points")
    # at [j, i]: whether row j is no worse than row i on both, and better on one (n is a few
    # dozen policies, so the n x n comparison is the clearest way, not a cost)
    no_worse = (tta[:, None] <= tta[None, :]) & (carbon[:, None] <= carbon[None, :])
    better = (tta[:, None] < tta[None, :]) | (carbon[:, None] < carbon[None, :])
    beaten = (no_worse & better).any(axis=0)
    front = points.loc[~beaten]
    order = np.lexsort(
        (pd.Series(front["policy"]).astype(str).to_numpy(), carbon[~beaten], tta[~beaten])
    )
    return front.iloc[order]


def means_of(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per task and policy, the mean ``tta_h`` and ``carbon_kg`` over its episodes and the share
    of them that reached the target (``success``), from one row per (task, policy, episode)
    (``EPISODE_COLUMNS``); columns ``MEANS_COLUMNS``, in the order tasks and policies first
    appear (the benchmark's order, not the alphabet's).

    The means are compared across policies, so they must be over the same episodes: a
    ``ValueError`` when a (task, policy, episode) repeats or the policies of a task did not play
    the same episodes, as well as for a missing column, a non-finite TTA or carbon, or a
    ``success`` outside [0, 1]. (A failed episode's TTA is the time budget, which is finite.)
    """
    _require(episodes, EPISODE_COLUMNS, "episodes")
    _keys(episodes, ("task", "policy", "episode"), "episodes")
    frame = pd.DataFrame({c: episodes[c] for c in EPISODE_COLUMNS})
    frame["tta_h"] = _finite(frame, "tta_h", "episodes")
    frame["carbon_kg"] = _finite(frame, "carbon_kg", "episodes")
    success = _finite(frame, "success", "episodes")
    if ((success < 0.0) | (success > 1.0)).any():
        raise ValueError("episodes: column success has values outside [0, 1]")
    frame["success"] = success
    repeated = frame.duplicated(["task", "policy", "episode"])
    if repeated.any():
        task, policy, episode = frame.loc[repeated, ["task", "policy", "episode"]].iloc[0]
        raise ValueError(f"episodes: task {task}, policy {policy} has episode {episode} twice")
    for task, sub in frame.groupby("task", sort=False):
        played = sub.groupby("policy", sort=False)["episode"].agg(frozenset)
        if played.nunique() > 1:
            first = played.iloc[0]
            odd = next(p for p, eps in played.items() if eps != first)
            raise ValueError(
                f"episodes: task {task}: policy {odd} played other episodes than "
                f"{played.index[0]}, so their means are not comparable"
            )
    means = frame.groupby(["task", "policy"], sort=False)[["tta_h", "carbon_kg", "success"]]
    return means.mean().reset_index()[list(MEANS_COLUMNS)]


# --------------------------------------------------------------------------- the figure


def _check_means(
    means: pd.DataFrame, references: Sequence[str], label: Sequence[str] | None
) -> None:
    """Every check ``tradeoff_figure`` makes before drawing, so a bad frame fails with a
    sentence rather than as a wrong picture."""
    _require(means, FIGURE_COLUMNS, "means")
    _keys(means, ("task", "policy"), "means")
    if means.empty:
        raise ValueError("means has no rows: nothing to draw")
    if isinstance(references, str) or (label is not None and isinstance(label, str)):
        raise ValueError("references and label are sequences of policy names, not one string")
    for column in ("tta_h", "carbon_kg", "success", "deadline_h"):
        _finite(means, column, "means")
    success = means["success"].to_numpy(dtype=np.float64)
    if ((success < 0.0) | (success > 1.0)).any():
        raise ValueError("means: column success has values outside [0, 1]")
    if (means["deadline_h"].to_numpy(dtype=np.float64) <= 0.0).any():
        raise ValueError("means: column deadline_h has values that are not positive")
    repeated = means.duplicated(["task", "policy"])
    if repeated.any():
        task, policy = means.loc[repeated, ["task", "policy"]].iloc[0]
        raise ValueError(f"means: task {task} has policy {policy} twice")
    deadlines = means.groupby("task", sort=False)["deadline_h"].nunique()
    if (deadlines > 1).any():
        raise ValueError(f"means: task {deadlines.index[deadlines > 1][0]} has several deadlines")
    known = set(means["policy"].astype(str))
    for what, names in (("references", references), ("label", () if label is None else label)):
        unknown = [str(n) for n in names if str(n) not in known]
        if unknown:  # in no task at all: a misspelt name would otherwise draw no front or label
            raise ValueError(f"{what}: no task has the policy(ies) {', '.join(unknown)}")


def _limits(values: np.ndarray, pad: tuple[float, float]) -> tuple[float, float]:
    """An axis range around ``values`` with fractions ``pad`` of their span below and above
    (space for the names); a single value gets a range around it rather than a zero span."""
    low, high = float(values.min()), float(values.max())
    span = high - low or max(abs(high) * 0.1, 1.0)
    return low - pad[0] * span, high + pad[1] * span


def _place_labels(fig: Any, ax: Any, named: pd.DataFrame, every: pd.DataFrame) -> None:
    """Name the rows of ``named`` (columns ``policy, tta_h, carbon_kg``) beside their markers,
    each at the first offset of ``_OFFSETS`` where it covers no name already placed, no marker
    of ``every`` and stays inside the axes; where none is free, at the offset covering least.

    A greedy search, not an optimal one, but with the small font it keeps two dozen names
    legible where fixed offsets pile them onto each other. It runs after the figure is drawn
    once, so the layout (and so every pixel position) is final; the names are kept out of the
    layout (``set_in_layout(False)``) so they cannot move it when the figure is saved.
    """
    from matplotlib.transforms import Bbox  # matplotlib is loaded by agg_figure already

    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    xy = ax.transData.transform(every[["tta_h", "carbon_kg"]].to_numpy(dtype=np.float64))
    taken = [
        Bbox.from_extents(x - _MARKER_PX, y - _MARKER_PX, x + _MARKER_PX, y + _MARKER_PX)
        for x, y in xy
    ]
    taken += [text.get_window_extent(renderer) for text in ax.texts]  # the deadline's
    for row in named.itertuples(index=False):
        point = (float(row.tta_h), float(row.carbon_kg))
        best: tuple[float, Any, Any] | None = None
        for dx, dy, ha, va in _OFFSETS:
            text = ax.annotate(
                str(row.policy),
                point,
                xytext=(dx, dy),
                textcoords="offset points",
                ha=ha,
                va=va,
                fontsize=LABEL_FONTSIZE,
                color="0.15",
            )
            text.set_in_layout(False)
            box = text.get_window_extent(renderer)
            cost = sum(_overlap(box, other) for other in taken)
            # a name cut off by the axes is worse than one touching another
            cost += 4.0 * (box.width * box.height - _overlap(box, inside))
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, text, box)
            else:
                text.remove()
            if cost == 0.0:
                break
        assert best is not None  # _OFFSETS is not empty
        taken.append(best[2])


def _overlap(a: Any, b: Any) -> float:
    """The area (pixels²) two boxes share."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return float(w * h) if w > 0 and h > 0 else 0.0


def tradeoff_figure(
    means: pd.DataFrame,
    path: str | os.PathLike[str],
    references: Sequence[str],
    *,
    label: Sequence[str] | None = None,
) -> None:
    """Draw each task's trade-off between mean TTA and mean grid carbon as a PNG at ``path``.

    One panel per task (two to a row): every policy of ``means`` (``FIGURE_COLUMNS``, one row
    per task and policy, as ``means_of`` gives with the task's ``deadline_h`` joined on) at its
    mean TTA (h, x) and mean grid carbon (kg, y); the Pareto front of the rows whose policy is
    in ``references`` as a step line through its ringed points, which bounds what the
    references show attainable (a policy below or left of it beats them on one axis at no cost
    on the other); a policy that missed the deadline in some episode (``success`` < 1) hollow,
    since its means mix failed episodes in; the episodes' mean deadline as a vertical dashed line.

    Naming two dozen points in one panel hides them, so a panel names: the references, the
    references' front, the front over every policy of the panel (``pareto_front``: the policies
    worth a look) and the policies of ``label``. With ``label=None`` a panel of at most
    ``LABEL_ALL_UP_TO`` policies names every one; ``label=()`` names only the references and
    the two fronts.
    Names are small and set beside their points where they cover no other name or marker.

    Drawn off screen on matplotlib's Agg canvas (``powertrip_env.render.agg_figure``) and
    written atomically (``save_png``), creating the folder if needed, as the benchmark's other
    figures. ``ValueError`` for a missing column (named), no rows, a non-finite number, a
    ``success`` outside [0, 1], a task with two deadlines or a policy twice, or a name in
    ``references`` or ``label`` that no task has (a misspelt reference would draw no front).
    """
    _check_means(means, references, label)
    refs = {str(name) for name in references}
    extra = None if label is None else {str(name) for name in label}
    frame = means.assign(policy=means["policy"].astype(str))
    tasks = list(dict.fromkeys(frame["task"]))
    ncols = min(len(tasks), 2)
    nrows = math.ceil(len(tasks) / ncols)
    fig = agg_figure(PANEL_IN[0] * ncols, PANEL_IN[1] * nrows + 0.4, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(tasks) :]:
        ax.set_axis_off()
    to_name = [
        _panel(ax, str(task), frame[frame["task"] == task], refs, extra)
        for ax, task in zip(axes, tasks, strict=False)
    ]
    fig.legend(handles=_legend(), loc="outside lower center", ncols=3, fontsize=7, frameon=False)
    fig.canvas.draw()  # the layout, final before the names are placed in pixels
    for ax, named, sub in to_name:
        _place_labels(fig, ax, named, sub)
    save_png(fig, path)


def _panel(
    ax: Any, task: str, sub: pd.DataFrame, refs: set[str], extra: set[str] | None
) -> tuple[Any, pd.DataFrame, pd.DataFrame]:
    """One task's panel (``tradeoff_figure``): its points, the references' front and the
    deadline; returns what ``_place_labels`` names in it, the most telling first."""
    deadline = float(sub["deadline_h"].iloc[0])
    is_ref = sub["policy"].isin(refs).to_numpy()
    finished = sub["success"].to_numpy(dtype=np.float64) >= 1.0
    for ref, marker, colour, size in (
        (False, "o", POLICY_COLOUR, 22),
        (True, "D", REFERENCE_COLOUR, 26),
    ):
        for done in (True, False):
            rows = sub[(is_ref == ref) & (finished == done)]
            ax.scatter(
                rows["tta_h"],
                rows["carbon_kg"],
                s=size,
                marker=marker,
                linewidths=1.0,
                facecolors=colour if done else "none",
                edgecolors=colour,
                zorder=3,
            )
    front = pareto_front(sub[is_ref]) if is_ref.any() else sub.iloc[:0]
    if len(front):
        ax.step(
            front["tta_h"],
            front["carbon_kg"],
            where="post",
            color=REFERENCE_COLOUR,
            lw=1.2,
            alpha=0.8,
            zorder=2,
        )
        ax.scatter(
            front["tta_h"],
            front["carbon_kg"],
            s=90,
            marker="o",
            facecolors="none",
            edgecolors=REFERENCE_COLOUR,
            linewidths=1.0,
            zorder=2,
        )
    ax.axvline(deadline, color=DEADLINE_COLOUR, ls="--", lw=1.0, zorder=1)
    ax.text(
        deadline,
        0.99,
        " mean deadline",
        transform=ax.get_xaxis_transform(),
        ha="left",
        va="top",
        fontsize=7,
        color=DEADLINE_COLOUR,
    )
    ax.set_xlim(*_limits(np.append(sub["tta_h"].to_numpy(dtype=np.float64), deadline), (0.08, 0.2)))
    ax.set_ylim(*_limits(sub["carbon_kg"].to_numpy(dtype=np.float64), (0.1, 0.12)))
    ax.set_title(task, fontsize=9)
    ax.set_xlabel("mean time to accuracy (h)", fontsize=8)
    ax.set_ylabel("mean grid carbon (kg CO₂e)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    # the most telling names first, so they get the free places: references, then the
    # panel's front, then the asked-for ones
    named = list(sub.loc[is_ref, "policy"]) + list(front["policy"])
    named += list(pareto_front(sub)["policy"])
    if extra is None and len(sub) <= LABEL_ALL_UP_TO:
        named += list(sub["policy"])
    named += [p for p in sub["policy"] if extra and p in extra]
    order = list(dict.fromkeys(named))
    return ax, sub.set_index("policy").loc[order].reset_index(), sub


def _legend() -> list[Any]:
    """The figure's legend: what each kind of mark and line means."""
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], ls="", marker="o", color=POLICY_COLOUR, markersize=5,
               label="policy: in time in every episode"),
        Line2D([], [], ls="", marker="o", markerfacecolor="none", color=POLICY_COLOUR,
               markersize=5, label="missed the deadline in some episode (hollow)"),
        Line2D([], [], ls="", marker="D", color=REFERENCE_COLOUR, markersize=5,
               label="reference"),
        Line2D([], [], color=REFERENCE_COLOUR, lw=1.2, marker="o", markerfacecolor="none",
               markersize=8, label="references' Pareto front"),
        Line2D([], [], color=DEADLINE_COLOUR, ls="--", lw=1.0, label="deadline"),
    ]  # fmt: skip
