"""The rendering of a benchmark leaderboard: Markdown, JSON and the performance profile's PNG.

The numbers (normalised scores, IQM, the stratified day bootstrap) come from
``powertrip_env.harness.reports.scores``, whose docs define them; this module lays them out
(and counts the profile's fractions from the per-episode scores, and the share of episodes that
reached the target), so a change of wording or layout cannot change a number. The input is one
frame of paired episodes (``scores.COLUMNS`` and ``success``), computed once into a ``Board``
that every rendering reads. Nothing here runs an environment.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.harness.evaluation.results import (
    ZERO,
    never_finished,
    never_finished_mark,
)
from powertrip_env.harness.evaluation.statistics import BOOTSTRAP_RESAMPLES
from powertrip_env.harness.reports.measures import (
    TASK_NOTES_START,
    TIME,
    Measure,
    caption,
    never_note,
)
from powertrip_env.harness.reports.scores import (
    TOP,
    aggregate,
    normalised_scores,
    per_task_table,
)
from powertrip_env.render import agg_figure, save_png

# Thresholds τ of the performance profile: from "much slower than PowerTrip" (−1: as far below
# PowerTrip as the plan is above it) to "half the headroom again beyond the plan" (1.5).
PROFILE_TAUS = (-1.0, 1.5, 251)


# --------------------------------------------------------------------------- the profile


def profile_fractions(
    episodes: pd.DataFrame,
    zero: str = ZERO,
    top: str = TOP,
    taus: Sequence[float] | np.ndarray | None = None,
) -> pd.DataFrame:
    """The performance profile's numbers: per τ (index) and policy (column), the fraction of
    all episodes of all tasks whose per-episode score is strictly above τ.

    Episodes are pooled, as for the IQM, so a task weighs by its number of episodes (the same
    as averaging per task when every task has as many). A curve that lies above another for
    every τ beats it whatever threshold a reader cares about, which a single mean cannot show.
    """
    grid = np.linspace(*PROFILE_TAUS) if taus is None else np.asarray(taus, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all():
        raise ValueError("taus must be a non-empty sequence of finite numbers")
    scores = normalised_scores(episodes, zero, top)
    out = {}
    for policy, group in scores.groupby("policy", sort=False):
        x = np.sort(group["score"].to_numpy(dtype=np.float64))
        out[str(policy)] = 1.0 - np.searchsorted(x, grid, side="right") / x.size
    return pd.DataFrame(out, index=pd.Index(grid, name="tau"))


def performance_profile(
    episodes: pd.DataFrame,
    zero: str,
    top: str,
    path: str | os.PathLike[str],
    *,
    taus: Sequence[float] | np.ndarray | None = None,
    title: str | None = None,
) -> Path:
    """Draw the performance profile of ``profile_fractions`` as a PNG at ``path``; returns it.

    x: the score threshold τ (by default −1 to 1.5, with the normalisers' 0 and 1 marked); y:
    the fraction of episodes scoring above τ; one line per policy. Drawn off screen on
    matplotlib's Agg canvas (``powertrip_env.render.agg_figure`` imports matplotlib only when
    called) and written atomically, creating the folder if needed.
    """
    fractions = profile_fractions(episodes, zero, top, taus)
    n_tasks = int(pd.Series(episodes["task"]).nunique())
    fig = agg_figure(9.0, 4.8, layout="constrained")
    ax = fig.add_subplot()
    grid = fractions.index.to_numpy()
    # best first in the legend; 20 distinct colours and a second line style past them, so no
    # two policies share a look
    order = sorted(fractions.columns, key=lambda p: -float(fractions[p].mean()))
    from matplotlib import colormaps  # matplotlib is loaded by agg_figure already

    tab20 = colormaps["tab20"]
    for i, policy in enumerate(order):
        colour, style = tab20((2 * i) % 20 + (i // 10) % 2), ("-", "--", ":")[(i // 20) % 3]
        ax.plot(grid, fractions[policy].to_numpy(), label=policy, lw=1.6, color=colour, ls=style)
    for at, name in ((0.0, zero), (1.0, top)):
        if grid.min() <= at <= grid.max():
            ax.axvline(at, color="0.6", ls=":", lw=1.0)
            ax.text(at, 1.02, name, ha="center", va="bottom", fontsize="small", color="0.4")
    ax.set_xlim(grid.min(), grid.max())
    ax.set_ylim(0.0, 1.08)
    ax.set_xlabel(f"normalised score τ (0 = {zero}, 1 = {top})")
    ax.set_ylabel("fraction of episodes with score > τ")
    ax.set_title(title or f"Performance profile over {n_tasks} task{'s' * (n_tasks != 1)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    save_png(fig, path)
    return Path(path)


# --------------------------------------------------------------------------- the board


@dataclass(frozen=True)
class Board:
    """Every number of a leaderboard, computed once from its episodes.

    ``table`` is ``per_task_table`` of each task with a ``success`` column (the share of the
    task's episodes that reached the target), ``aggregate`` is ``aggregate`` over the policies
    that ran every task with ``success`` (the share over all their episodes) added, and
    ``left_out`` the policies it does not rank. The Markdown, the JSON, the track's board on
    docs/benchmark.md and README's lines on it are laid out from one ``Board``: the bootstraps
    run once, and they cannot disagree.
    """

    zero: str
    top: str
    resamples: int
    table: pd.DataFrame
    aggregate: dict[str, dict[str, Any]]
    left_out: tuple[str, ...]
    measure: Measure = TIME

    @property
    def tasks(self) -> list[str]:
        """The tasks in order of first appearance."""
        return list(dict.fromkeys(self.table["task"]))

    def ranked(self) -> list[tuple[str, dict[str, Any]]]:
        """The aggregate by mean score, best first (stable for ties)."""
        return sorted(self.aggregate.items(), key=lambda kv: -kv[1]["mean"])

    @property
    def marked(self) -> bool:
        """Whether any policy, in the aggregate or in a task, never finished."""
        rates = [*self.table["success"], *(row["success"] for row in self.aggregate.values())]
        return any(never_finished(rate) for rate in rates)


def _success(episodes: pd.DataFrame) -> pd.DataFrame:
    """``episodes``' ``task, policy, success`` with ``success`` as bools; ``ValueError`` when
    the column is missing or holds anything but booleans (or 0 and 1)."""
    if "success" not in episodes.columns:
        raise ValueError(
            "episodes lacks the column success (whether each episode reached the target "
            "accuracy), which the leaderboard shows beside every score"
        )
    flags = episodes["success"]
    if flags.isna().any() or not flags.isin([True, False]).all():
        raise ValueError("every success must be True or False")
    return pd.DataFrame(
        {
            "task": episodes["task"].astype(str).to_numpy(),
            "policy": episodes["policy"].astype(str).to_numpy(),
            "success": flags.astype(bool).to_numpy(),
        }
    )


def board(
    episodes: pd.DataFrame,
    zero: str = ZERO,
    top: str = TOP,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    aggregated: Mapping[str, Mapping[str, Any]] | None = None,
    measure: Measure = TIME,
) -> Board:
    """The ``Board`` of ``episodes`` (``scores.COLUMNS`` and ``success``). ``aggregated``
    takes the result of an earlier ``aggregate`` call on the same episodes, sparing a second
    bootstrap. ``measure`` says what the ``tta_h`` column holds (the statistics are the same
    for any lower-is-better measure: ``CARBON`` on the carbon tasks)."""
    flags = _success(episodes)
    per_task = flags.groupby(["task", "policy"], sort=False)["success"].mean()
    parts = [
        per_task_table(episodes[episodes["task"] == task], zero, top, resamples)
        for task in pd.unique(episodes["task"])
    ]  # each task on its own, so a task lists every policy that ran it
    table = pd.concat(parts, ignore_index=True)
    keys = pd.MultiIndex.from_frame(table[["task", "policy"]])
    table["success"] = per_task.reindex(keys).to_numpy(dtype=np.float64)
    common = episodes["policy"].isin(common_policies(episodes)).to_numpy()
    agg = (
        dict(aggregated)
        if aggregated is not None
        else aggregate(episodes[common], zero, top, resamples)
    )
    pooled = flags[common].groupby("policy", sort=False)["success"].mean()
    return Board(
        zero=zero,
        top=top,
        resamples=resamples,
        table=table,
        aggregate={str(p): {**row, "success": float(pooled[p])} for p, row in agg.items()},
        left_out=tuple(str(p) for p in pd.unique(episodes["policy"]) if p not in agg),
        measure=measure,
    )


def common_policies(episodes: pd.DataFrame) -> list[str]:
    """The policies that ran every task of ``episodes``, in order of first appearance: the only
    ones an aggregate over tasks can rank (MyopicOptimal, for one, cannot run above 16 sites)."""
    tasks = episodes.groupby("policy", sort=False)["task"].nunique()
    return [str(p) for p, n in tasks.items() if n == episodes["task"].nunique()]


def on_every_task(episodes: pd.DataFrame) -> pd.DataFrame:
    """The rows of the policies that ran every task (``common_policies``)."""
    return episodes[episodes["policy"].isin(common_policies(episodes))]


# --------------------------------------------------------------------------- Markdown


def _cell(value: float, spec: str = ".3f") -> str:
    return "–" if not np.isfinite(value) else f"{value:{spec}}"


def _interval(low: float, high: float) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return "[–]"
    return f"[{low:.3f}, {high:.3f}]"


def score_cell(score: float, success: float) -> str:
    """A task's score, marked when the policy never finished the task."""
    return f"{score:.3f}{never_finished_mark(success)}"


def aggregate_cells(row: Mapping[str, Any]) -> list[str]:
    """An aggregate row's cells: mean score [CI] (marked when the policy never finished), IQM
    [CI] and success."""
    return [
        f"{_cell(row['mean'])} {_interval(*row['ci95'])}{never_finished_mark(row['success'])}",
        f"{_cell(row['iqm'])} {_interval(*row['iqm_ci95'])}",
        f"{row['success']:.0%}",
    ]


def aggregate_heading(n_tasks: int) -> str:
    return f"Aggregate over {n_tasks} task{'s' * (n_tasks != 1)}"


def to_markdown(
    episodes: pd.DataFrame | Board,
    zero: str = ZERO,
    top: str = TOP,
    *,
    title: str = "Leaderboard",
    resamples: int = BOOTSTRAP_RESAMPLES,
    aggregated: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The leaderboard in Markdown: the aggregate table, then one table per task.

    The aggregate table (policy, mean score [95% CI], IQM [95% CI], success) comes first,
    sorted by mean score, best first; each task's table (policy, mean TTA h [95% CI], score,
    success) follows, sorted by score. A caption says what 0 and 1 are, since a normalised
    score means nothing without its ends, and the notes say how each interval was made. A score
    whose policy never finished is marked (``NEVER_FINISHED``): every failed episode counts at
    the time budget, so such policies share a score that would otherwise read as a tie.
    ``episodes`` is the frame of ``board`` or a ``Board`` made from it (whose own ``zero``,
    ``top`` and ``resamples`` then hold, the arguments unused).
    """
    b = (
        episodes
        if isinstance(episodes, Board)
        else board(episodes, zero, top, resamples=resamples, aggregated=aggregated)
    )
    lines = [f"# {title}", "", caption(b.zero, b.top, b.measure), "", *_aggregate_lines(b)]
    for task in b.tasks:
        lines += _task_lines(task, b.table[b.table["task"] == task], b.measure)
    start = TASK_NOTES_START if b.measure == TIME else f"Mean {b.measure.name} intervals"
    notes = (
        f"{start}: block bootstrap over the task's start days (as in `powertrip "
        "evaluate`); `[–]` with a single start day. success: the share of the task's episodes "
        "that reached the target accuracy."
    )
    if b.marked:
        notes += f" {never_note(b.measure)}"
    return "\n".join([*lines, "", notes]) + "\n"


def aggregate_notes(b: Board) -> list[str]:
    """The notes under the aggregate's table: how each column and interval was made."""
    lines = [
        "- mean score: the mean over tasks of the per-task scores (every task weighs the same).",
        "- IQM: the interquartile mean of the per-episode scores of all tasks pooled (the "
        "lowest and highest quarter dropped, as rliable's IQM); a per-episode score is (mean "
        f"{b.measure.name} of {b.zero} − the episode's {b.measure.name}) / the task's "
        "denominator.",
        f"- 95% CI: percentile interval from a bootstrap stratified by task ({b.resamples:,} "
        "resamples): within each task its start days are drawn with replacement and bring all "
        "their episodes for every policy, so the pairing is kept; seeded from the days. "
        "`[–]`: no task has two start days.",
        "- success: the share of the policy's episodes, over all tasks, that reached the target "
        f"accuracy; {b.measure.failed}.",
    ]
    if b.marked:
        lines.append(f"- {never_note(b.measure)}")
    if b.left_out:
        lines.append(
            f"- Not in the aggregate, as they did not run every task: {', '.join(b.left_out)}."
        )
    return lines


def _aggregate_lines(b: Board) -> list[str]:
    """The Markdown of the aggregate: its heading, its table by mean score (best first) and the
    notes on how each column and interval was made."""
    lines = [
        f"## {aggregate_heading(len(b.tasks))}",
        "",
        "| policy | mean score [95% CI] | IQM [95% CI] | success |",
        "|---|---:|---:|---:|",
    ]
    for policy, row in b.ranked():
        lines.append(f"| {policy} | " + " | ".join(aggregate_cells(row)) + " |")
    return [*lines, "", *aggregate_notes(b)]


def _task_lines(task: str, rows: pd.DataFrame, measure: Measure = TIME) -> list[str]:
    """The Markdown of one task: its heading, its episodes and days, and its table (``rows`` of
    ``Board.table``, already by score)."""
    first = rows.iloc[0]
    lines = [
        "",
        f"## {task}",
        "",
        f"{int(first['episodes'])} paired episodes on {int(first['days'])} start "
        f"day{'s' * (int(first['days']) != 1)}.",
        "",
        f"| policy | mean {measure.name} {measure.unit} [95% CI] | score | success |",
        "|---|---:|---:|---:|",
    ]
    for row in rows.itertuples(index=False):
        lines.append(
            f"| {row.policy} | {row.mean_tta_h:.3f} {_interval(row.ci95_lo_h, row.ci95_hi_h)}"
            f" | {score_cell(row.score, row.success)} | {row.success:.0%} |"
        )
    return lines


# --------------------------------------------------------------------------- JSON


def _finite(value: Any, where: str) -> float:
    """``value`` as a finite Python float, or an error naming ``where``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{where} is {value!r}, not a number")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{where} is {out}; the leaderboard's JSON holds only finite numbers")
    return out


def _plain(value: Any, where: str) -> Any:
    """``value`` made of Python types ``json.dumps`` writes, no NaN or infinity among them."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return _finite(value, where)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where} is a {type(value).__name__}, which JSON cannot hold")


def to_json(
    episodes: pd.DataFrame | Board,
    zero: str = ZERO,
    top: str = TOP,
    *,
    task_facts: Mapping[str, Mapping[str, Any]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    aggregated: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The leaderboard as a dict ``json.dumps`` writes as is::

        {"tasks": {ID: {"optimiser_headroom", "optimum_upper_h", "optimum_lower_h", "gap",
                        "reference_never_beaten", "episodes", "days",
                        "policies": {name: {"tta_h", "score", "success", "never_finished"}}}},
         "aggregate": {name: {"mean", "iqm", "ci95", "iqm_ci95", "success", "never_finished"}},
         "normaliser": {"zero", "top"}, "resamples"}

    ``success`` is the share of the episodes (of the task; of every task in the aggregate) that
    reached the target, ``never_finished`` whether none did. ``task_facts`` gives every task's
    ``TASK_FACTS`` (what the caller knows of the optimum, which these statistics do not); any
    other keys of a task's facts are copied too. Facts of tasks that are not in ``episodes``
    are ignored. Every number is a plain Python float, int or bool: a NaN or infinity raises
    ``ValueError`` rather than being written, since strict JSON readers refuse it (so do the
    intervals with no task of two start days). Policies are listed by score, best first; the
    aggregate in order of first appearance. ``episodes`` is as for ``to_markdown``.
    """
    b = (
        episodes
        if isinstance(episodes, Board)
        else board(episodes, zero, top, resamples=resamples, aggregated=aggregated)
    )
    if any(not np.isfinite(v) for row in b.aggregate.values() for v in row["ci95"]):
        raise ValueError(
            "the aggregate's 95% intervals are undefined (no task has episodes on two start "
            "days, so there is nothing to resample) and JSON holds only finite numbers; run "
            "episodes that start on at least two days"
        )
    tasks = {
        str(task): _task_entry(str(task), rows, task_facts, b.measure)
        for task, rows in b.table.groupby("task", sort=False)
    }
    keys = ("mean", "iqm", "ci95", "iqm_ci95", "success")
    return {
        "tasks": tasks,
        "aggregate": _plain(
            {
                str(p): {**{k: v[k] for k in keys}, "never_finished": never_finished(v["success"])}
                for p, v in b.aggregate.items()
            },
            "aggregate",
        ),
        "normaliser": {"zero": b.zero, "top": b.top},
        "resamples": int(b.resamples),
    }


def _task_entry(
    task: str,
    rows: pd.DataFrame,
    task_facts: Mapping[str, Mapping[str, Any]],
    measure: Measure = TIME,
) -> dict[str, Any]:
    """One task's entry of ``to_json``: its checked facts, then its policies (``rows`` of
    ``Board.table``)."""
    facts = task_facts.get(task)
    if facts is None:
        raise ValueError(f"task_facts has no entry for task {task}")
    required = measure.facts
    absent = [k for k in required if k not in facts]
    if absent:
        raise ValueError(f"task_facts[{task!r}] lacks {', '.join(absent)}")
    flag = facts["reference_never_beaten"]
    if not isinstance(flag, bool | np.bool_):
        raise TypeError(f"task_facts[{task!r}].reference_never_beaten is {flag!r}, not a bool")
    entry: dict[str, Any] = {k: _plain(v, f"task_facts[{task!r}].{k}") for k, v in facts.items()}
    for key in required[:-1]:
        entry[key] = _finite(facts[key], f"task_facts[{task!r}].{key}")
    entry["reference_never_beaten"] = bool(flag)
    entry["episodes"] = int(rows["episodes"].iloc[0])
    entry["days"] = int(rows["days"].iloc[0])
    entry["policies"] = {
        str(r.policy): {
            measure.key: _finite(r.mean_tta_h, f"{task}.{r.policy}.{measure.key}"),
            "score": _finite(r.score, f"{task}.{r.policy}.score"),
            "success": float(r.success),
            "never_finished": never_finished(r.success),
        }
        for r in rows.itertuples(index=False)
    }
    return entry
