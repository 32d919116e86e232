"""The statistics and rendering of a benchmark leaderboard: normalised scores over several tasks.

A benchmark runs every policy on the same paired episodes of several tasks (registered IDs).
TTAs of different tasks are not comparable (hours on one scenario are not hours on another), so
each task's TTAs are put on one scale before they are averaged:

    score = (mean TTA of zero − mean TTA of policy) / (mean TTA of zero − mean TTA of top)

with ``zero`` the reference heuristic (``PowerTrip``) and ``top`` the optimiser's feasible plan:
0 is PowerTrip, 1 the optimiser's plan, higher is better, above 1 beats the plan and below 0 is
slower than PowerTrip. The score is a share of the headroom the optimiser demonstrated, which is
what a learned policy is meant to close.

Across tasks the leaderboard reports, after Agarwal et al. 2021 ("Deep RL at the edge of the
statistical precipice"): the mean of the per-task scores, the interquartile mean (IQM) of the
pooled per-episode scores, both with 95% intervals from a bootstrap stratified by task, and a
performance profile (the fraction of episodes whose score exceeds a threshold τ).

The intervals follow ``powertrip_env.baselines.evaluate``: episodes that start on the same day share
its sun and wind, so the start day, not the episode, is what is resampled, and the draws are seeded
from the days (``_bootstrap_seed``), never from the TTAs, so a rerun is identical bit for bit and
every policy gets the same draws (a paired bootstrap). The input is one frame with a row per (task,
policy, episode) and the columns of ``COLUMNS``; episode ``e`` of a task is the same start time
for every policy. Nothing here runs an environment.
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

from powertrip_env.baselines.evaluation import REFERENCE
from powertrip_env.baselines.statistics import (
    BOOTSTRAP_RESAMPLES,
    _bootstrap_seed,
    day_bootstrap_ci95,
    start_days,
)
from powertrip_env.render import agg_figure, save_png

TOP = "Optimiser"
"""The default name of the rows of the optimiser's feasible plan (the normaliser's one)."""

COLUMNS = ("task", "policy", "episode", "start_time", "tta_h")
"""The columns ``episodes`` must have (others are ignored)."""

TASK_FACTS = ("headroom", "optimum_upper_h", "optimum_lower_h", "gap", "reference_never_beaten")
"""The per-task facts ``to_json`` requires from its caller, the last a bool, the others floats."""

PER_TASK_COLUMNS = (
    "task",
    "policy",
    "episodes",
    "days",
    "mean_tta_h",
    "ci95_lo_h",
    "ci95_hi_h",
    "score",
)

SCORE_COLUMNS = ("task", "policy", "episode", "start_time", "day", "tta_h", "score", "task_score")

# Thresholds τ of the performance profile: from "much slower than PowerTrip" (−1: as far below
# PowerTrip as the plan is above it) to "half the headroom again beyond the plan" (1.5).
PROFILE_TAUS = (-1.0, 1.5, 251)


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class _Task:
    """One task's paired episodes: every array is in episode order, ``tta`` in policy order."""

    name: str
    episodes: np.ndarray  # (E,) episode indices, ascending
    start_times: np.ndarray  # (E,) the start times as given
    days: np.ndarray  # (E,) UTC start day of each episode, the bootstrap's blocks
    labels: np.ndarray  # (G,) the distinct days, sorted
    block: np.ndarray  # (E,) index of each episode's day in ``labels``
    counts: np.ndarray  # (G,) episodes per day
    tta: np.ndarray  # (P, E) hours


@dataclass(frozen=True)
class _Board:
    """The checked input: the policies (in order of first appearance) and the tasks."""

    zero: str
    top: str
    policies: tuple[str, ...]
    tasks: tuple[_Task, ...]  # in order of first appearance, for display

    @property
    def iz(self) -> int:
        return self.policies.index(self.zero)

    @property
    def it(self) -> int:
        return self.policies.index(self.top)

    @property
    def canonical(self) -> tuple[_Task, ...]:
        """The tasks sorted by ID: the order of every computation, so that the order of the
        frame's rows never changes a number (the seed, the draws or a sum's rounding)."""
        return tuple(sorted(self.tasks, key=lambda t: t.name))


def _board(episodes: pd.DataFrame, zero: str, top: str) -> _Board:
    """Check ``episodes`` and arrange it by task, policy and episode.

    Every check is one a leaderboard would otherwise get silently wrong: a missing column or
    policy, a duplicated or missing episode (the pairing breaks), start times that differ
    between policies for one episode index (they did not run the same episode), a TTA that is
    not a finite number. Every policy must have run every task, because a mean over a subset of
    tasks ranks the policy on easier or harder ground than the others.
    """
    if not isinstance(episodes, pd.DataFrame):
        raise TypeError(f"episodes must be a pandas DataFrame, not {type(episodes).__name__}")
    missing = [c for c in COLUMNS if c not in episodes.columns]
    if missing:
        raise ValueError(f"episodes lacks the column(s) {', '.join(missing)}")
    if len(episodes) == 0:
        raise ValueError("episodes has no rows")
    if zero == top:
        raise ValueError(f"zero and top are both {zero!r}: the scale needs two different ends")
    frame = episodes.loc[:, list(COLUMNS)].reset_index(drop=True).copy()
    blank = frame[["task", "policy", "episode", "start_time"]].isna().any(axis=1)
    if blank.any():
        raise ValueError(f"row {int(np.flatnonzero(blank)[0])} of episodes has an empty key")
    frame["task"] = frame["task"].astype(str)
    frame["policy"] = frame["policy"].astype(str)
    tta = pd.to_numeric(frame["tta_h"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(tta)
    if bad.any():
        row = frame.iloc[int(np.flatnonzero(bad)[0])]
        raise ValueError(
            f"tta_h of task {row['task']}, policy {row['policy']}, episode {row['episode']} is "
            f"{row['tta_h']!r}; every TTA must be a finite number of hours"
        )
    frame["tta_h"] = tta
    number = pd.to_numeric(frame["episode"], errors="coerce").to_numpy(dtype=np.float64)
    if not (np.isfinite(number) & (number == np.round(number))).all():
        raise ValueError("every episode index must be an integer")
    frame["episode"] = number.astype(np.int64)
    dup = frame.duplicated(["task", "policy", "episode"])
    if dup.any():
        row = frame.loc[dup].iloc[0]
        raise ValueError(
            f"task {row['task']}, policy {row['policy']}, episode {row['episode']} appears twice"
        )
    try:
        stamps = pd.to_datetime(frame["start_time"], utc=True, format="ISO8601")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unreadable start_time: {exc}") from None
    frame["_stamp"] = stamps
    spread = frame.groupby(["task", "episode"], sort=False)["_stamp"].nunique()
    if (spread > 1).any():
        task, episode = spread.index[int(np.flatnonzero(spread.to_numpy() > 1)[0])]
        raise ValueError(
            f"task {task}, episode {episode}: the policies' start times differ, so they did "
            "not run the same episode and cannot be paired"
        )

    policies = tuple(str(p) for p in pd.unique(frame["policy"]))
    tasks = []
    for name in pd.unique(frame["task"]):
        sub = frame[frame["task"] == name]
        present = set(sub["policy"])
        absent = [p for p in (zero, top, *policies) if p not in present]
        if absent:
            raise ValueError(
                f"task {name} has no episodes of {', '.join(dict.fromkeys(absent))}; every "
                f"task needs the normaliser's ends ({zero}, {top}) and every policy"
            )
        table = sub.pivot(index="policy", columns="episode", values="tta_h")
        table = table.reindex(index=list(policies), columns=sorted(table.columns))
        holes = table.isna().to_numpy()
        if holes.any():
            p, e = np.argwhere(holes)[0]
            raise ValueError(
                f"task {name}: policy {table.index[p]} lacks episode {table.columns[e]}, which "
                "other policies ran; the episodes must be paired"
            )
        times = sub[sub["policy"] == zero].set_index("episode")["start_time"]
        times = times.reindex(table.columns).to_numpy(dtype=object)
        days = start_days(times)
        labels, block, counts = np.unique(days, return_inverse=True, return_counts=True)
        tasks.append(
            _Task(
                name=str(name),
                episodes=table.columns.to_numpy(dtype=np.int64),
                start_times=times,
                days=days,
                labels=labels,
                block=block.astype(np.intp),
                counts=counts,
                tta=table.to_numpy(dtype=np.float64),
            )
        )
    return _Board(zero, top, policies, tuple(tasks))


# --------------------------------------------------------------------------- scores


@dataclass(frozen=True)
class _Scores:
    """One task's normalisation: the ends' mean TTAs and the scores."""

    zero_mean: float
    top_mean: float
    denominator: float
    score: np.ndarray  # (P,) per-task scores
    per_episode: np.ndarray  # (P, E)


def _scores(board: _Board, task: _Task) -> _Scores:
    """The task's scores; ``ValueError`` when the plan is not faster than PowerTrip.

    The numerator is the mean of the paired differences zero − policy, which is the difference
    of the means but exactly 0 for a policy that matches PowerTrip on every episode. A
    denominator <= 0 would turn the scale upside down (or divide by zero): the task has no
    headroom to measure against, and no number for it would mean what the leaderboard says.
    """
    zero_tta = task.tta[board.iz]
    gains = (zero_tta - task.tta).mean(axis=1)
    denominator = float(gains[board.it])
    zero_mean, top_mean = float(zero_tta.mean()), float(task.tta[board.it].mean())
    if not denominator > 0.0:
        raise ValueError(
            f"task {task.name}: the mean TTA of {board.top} ({top_mean:.6g} h) is not below "
            f"that of {board.zero} ({zero_mean:.6g} h), so the normalised score (0 = "
            f"{board.zero}, 1 = {board.top}) is undefined"
        )
    return _Scores(
        zero_mean=zero_mean,
        top_mean=top_mean,
        denominator=denominator,
        score=gains / denominator,
        per_episode=(zero_mean - task.tta) / denominator,
    )


def normalised_scores(
    episodes: pd.DataFrame, zero: str = REFERENCE, top: str = TOP
) -> pd.DataFrame:
    """Per-episode normalised scores, with each task's score beside them.

    One row per (task, policy, episode) with the columns ``SCORE_COLUMNS``. ``task_score`` is
    the policy's score on the task, (mean TTA of ``zero`` − mean TTA of the policy) / (mean TTA
    of ``zero`` − mean TTA of ``top``): 0 for ``zero``, 1 for ``top``, higher is better.

    ``score`` is one episode's: (mean TTA of ``zero`` − the episode's TTA) / the same
    denominator. It divides by the task's means rather than pairing each episode with zero's and
    top's TTAs of that episode, because an episode-wise denominator can be tiny or negative on
    an episode where the plan happens to gain little, and one such episode would dominate the
    IQM and the profile. With the task's means, the mean of a policy's per-episode scores is
    its task score (up to rounding), so the per-episode scores spread the task score out rather
    than measure something else. Note that ``zero``'s own per-episode scores are spread around
    0, not all 0: they show how much one PowerTrip episode differs from its task's mean.

    Raises ``ValueError`` for a task where ``top`` is not faster than ``zero`` on average
    (naming the task and both means), and for input that cannot be paired.
    """
    board = _board(episodes, zero, top)
    frames = []
    for task in board.tasks:
        scored = _scores(board, task)
        for p, policy in enumerate(board.policies):
            frames.append(
                pd.DataFrame(
                    {
                        "task": task.name,
                        "policy": policy,
                        "episode": task.episodes,
                        "start_time": task.start_times,
                        "day": task.days,
                        "tta_h": task.tta[p],
                        "score": scored.per_episode[p],
                        "task_score": float(scored.score[p]),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True).loc[:, list(SCORE_COLUMNS)]


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean after dropping the lowest and the highest quarter.

    This is rliable's IQM, ``scipy.stats.trim_mean(values, 0.25)`` (scipy is not a dependency):
    ``floor(n / 4)`` values are dropped at each end and none is interpolated, so with ``n`` not
    a multiple of 4 a little more than half the values are kept. Unlike the mean it is not
    carried off by a few extreme episodes, and unlike the median it uses half the data.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("the IQM of no values is undefined")
    if not np.isfinite(x).all():
        raise ValueError("the IQM needs finite values")
    return float(_iqm_rows(x[None, :])[0])


def _iqm_rows(x: np.ndarray) -> np.ndarray:
    """``iqm`` of each row of a 2-D array (sorted in place)."""
    x.sort(axis=1)
    n = x.shape[1]
    cut = n // 4  # == int(0.25 * n), trim_mean's cut
    return x[:, cut : n - cut].mean(axis=1)


# --------------------------------------------------------------------------- the bootstrap


def _check_resamples(resamples: int) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int | np.integer):
        raise TypeError(f"resamples={resamples!r}: must be an integer")
    if resamples < 1:
        raise ValueError(f"resamples={resamples}: must be >= 1")


def _bootstrap(board: _Board, resamples: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Resampled mean score and IQM of every policy, each ``(P, resamples)``.

    Stratified by task: each resample draws, for every task, as many of its start days as it
    has, with replacement, and keeps every episode of a drawn day for every policy (whole
    blocks, paired). The statistics are recomputed from scratch on the resampled episodes,
    normaliser included, since zero's and top's means are estimated from the same days:
    so ``zero``'s mean score is exactly 0 and ``top``'s exactly 1 on every resample, and so is
    that of a policy equal to either on every episode (their IQMs are not pinned: they are the
    trimmed means of per-episode scores spread around 0 and 1). A task with one start day is
    held fixed (there is nothing to resample), which makes the interval too narrow if most
    tasks have one day; with no task of two days or more there is no interval at all
    (``None``).

    The seed comes from every task's ID, days and episode counts (``_bootstrap_seed``, as for
    the per-task intervals), and the draws from PCG64's raw stream, as in
    ``day_bootstrap_ci95``. Adding or removing a policy changes no other policy's interval.
    """
    tasks = board.canonical
    if all(t.labels.size < 2 for t in tasks):
        return None
    names = np.array([f"{t.name}|{day}" for t in tasks for day in t.labels], dtype=str)
    seed = _bootstrap_seed(names, np.concatenate([t.counts for t in tasks]))
    raw = np.random.PCG64(seed).random_raw((resamples, names.size))
    iz, it, n_pol = board.iz, board.it, len(board.policies)
    rows = np.arange(resamples)[:, None]
    task_scores, zero_means, denominators, weights, ttas = [], [], [], [], []
    offset = 0
    for task in tasks:
        g = task.labels.size
        drawn = (raw[:, offset : offset + g] % np.uint64(g)).astype(np.intp)  # (B, g)
        offset += g
        n = task.counts[drawn].sum(axis=1)  # (B,) episodes in each resample
        zero_tta = task.tta[iz]
        # Day sums of the paired gains zero − policy: exactly 0 for a copy of zero. Summed by
        # indexing, not a matrix product, so identical rows give identical sums.
        gains = np.stack(
            [np.bincount(task.block, weights=zero_tta - row, minlength=g) for row in task.tta]
        )
        gains = gains[:, drawn].sum(axis=2) / n  # (P, B)
        denominator = gains[it]
        if not (denominator > 0.0).all():
            bad = int((denominator <= 0.0).sum())
            raise ValueError(
                f"task {task.name}: in {bad} of {resamples} resamples of its start days the "
                f"mean TTA of {board.top} is not below that of {board.zero}, so the normalised "
                "score is undefined there; the task's headroom is within its day-to-day noise"
            )
        task_scores.append(gains / denominator)
        deviation = np.bincount(task.block, weights=zero_tta - zero_tta[0], minlength=g)
        zero_mean = zero_tta[0] + deviation[drawn].sum(axis=1) / n  # (B,)
        multiplicity = np.zeros((resamples, g), dtype=np.int64)
        np.add.at(multiplicity, (np.broadcast_to(rows, drawn.shape), drawn), 1)
        e = task.block.size
        weights.append(multiplicity[:, task.block])  # (B, E) copies of each episode
        zero_means.append(np.repeat(zero_mean[:, None], e, axis=1))
        denominators.append(np.repeat(denominator[:, None], e, axis=1))
        ttas.append(task.tta)
    mean = np.mean(np.stack(task_scores), axis=0)  # (P, B)
    tta = np.concatenate(ttas, axis=1)  # (P, N)
    zm, den, w = (np.concatenate(a, axis=1) for a in (zero_means, denominators, weights))
    out = np.empty((n_pol, resamples))
    for b in range(resamples):
        pooled = np.repeat((zm[b] - tta) / den[b], w[b], axis=1)
        out[:, b] = _iqm_rows(pooled)
    return mean, out


def _percentiles(samples: np.ndarray | None, p: int) -> list[float]:
    if samples is None:
        return [math.nan, math.nan]
    low, high = np.percentile(samples[p], [2.5, 97.5])
    return [float(low), float(high)]


def aggregate(
    episodes: pd.DataFrame,
    zero: str = REFERENCE,
    top: str = TOP,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, dict[str, Any]]:
    """Each policy's scores over all tasks, with 95% intervals.

    Returns ``{policy: {"mean", "iqm", "ci95", "iqm_ci95"}}`` in order of first appearance:

    * ``mean``: the mean over tasks of the per-task scores, each task weighing the same
      whatever its number of episodes;
    * ``iqm``: the interquartile mean (``iqm``) of the per-episode scores of all tasks pooled,
      as rliable computes it over runs × tasks; robust to a task or a few episodes where a
      policy fails badly, which the mean is not;
    * ``ci95`` and ``iqm_ci95``: 2.5th and 97.5th percentiles over ``resamples`` of the
      stratified day bootstrap of ``_bootstrap``; ``[nan, nan]`` when no task has two start
      days. The normalisers' intervals are ``[0, 0]`` and ``[1, 1]`` by construction.

    A percentile interval need not contain the point estimate of a ratio or a trimmed mean,
    though with a few days per task it usually does. Values are plain Python floats.
    """
    _check_resamples(resamples)
    board = _board(episodes, zero, top)
    scored = {t.name: _scores(board, t) for t in board.tasks}
    tasks = board.canonical
    mean = np.mean(np.stack([scored[t.name].score for t in tasks]), axis=0)
    pooled = np.concatenate([scored[t.name].per_episode for t in tasks], axis=1)
    iqms = _iqm_rows(pooled.copy())
    samples = _bootstrap(board, resamples)
    mean_samples, iqm_samples = (None, None) if samples is None else samples
    return {
        policy: {
            "mean": float(mean[p]),
            "iqm": float(iqms[p]),
            "ci95": _percentiles(mean_samples, p),
            "iqm_ci95": _percentiles(iqm_samples, p),
        }
        for p, policy in enumerate(board.policies)
    }


def per_task_table(
    episodes: pd.DataFrame,
    zero: str = REFERENCE,
    top: str = TOP,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> pd.DataFrame:
    """One row per task and policy (``PER_TASK_COLUMNS``): mean TTA, its 95% CI, the score.

    The interval is ``powertrip_env.baselines.evaluate.day_bootstrap_ci95`` over the task's start
    days, the one every evaluation table reports, so a leaderboard's TTAs read the same as the
    summary of ``powertrip evaluate``; NaN with one start day. Tasks are in order of first
    appearance, and within a task the policies by score, best first (ties in order of first
    appearance).
    """
    _check_resamples(resamples)
    board = _board(episodes, zero, top)
    rows = []
    for task in board.tasks:
        scored = _scores(board, task)
        order = np.argsort(-scored.score, kind="stable")
        for p in order:
            low, high = day_bootstrap_ci95(task.tta[p], task.days, resamples=resamples)
            rows.append(
                {
                    "task": task.name,
                    "policy": board.policies[p],
                    "episodes": int(task.episodes.size),
                    "days": int(task.labels.size),
                    "mean_tta_h": float(task.tta[p].mean()),
                    "ci95_lo_h": low,
                    "ci95_hi_h": high,
                    "score": float(scored.score[p]),
                }
            )
    return pd.DataFrame(rows, columns=list(PER_TASK_COLUMNS))


# --------------------------------------------------------------------------- the profile


def profile_fractions(
    episodes: pd.DataFrame,
    zero: str = REFERENCE,
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


# --------------------------------------------------------------------------- rendering


def _cell(value: float, spec: str = ".3f") -> str:
    return "–" if not np.isfinite(value) else f"{value:{spec}}"


def _interval(low: float, high: float) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return "[–]"
    return f"[{low:.3f}, {high:.3f}]"


def common_policies(episodes: pd.DataFrame) -> list[str]:
    """The policies that ran every task of ``episodes``, in order of first appearance: the only
    ones an aggregate over tasks can rank (MyopicOptimal, for one, cannot run above 16 sites)."""
    tasks = episodes.groupby("policy", sort=False)["task"].nunique()
    return [str(p) for p, n in tasks.items() if n == episodes["task"].nunique()]


def _tables_by_task(episodes: pd.DataFrame, zero: str, top: str, resamples: int) -> pd.DataFrame:
    """``per_task_table`` of each task on its own, so a task lists every policy that ran it."""
    parts = [
        per_task_table(episodes[episodes["task"] == task], zero, top, resamples)
        for task in pd.unique(episodes["task"])
    ]
    return pd.concat(parts, ignore_index=True)


def on_every_task(episodes: pd.DataFrame) -> pd.DataFrame:
    """The rows of the policies that ran every task (``common_policies``)."""
    return episodes[episodes["policy"].isin(common_policies(episodes))]


def to_markdown(
    episodes: pd.DataFrame,
    zero: str = REFERENCE,
    top: str = TOP,
    *,
    title: str = "Leaderboard",
    resamples: int = BOOTSTRAP_RESAMPLES,
    aggregated: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The leaderboard in Markdown: the aggregate table, then one table per task.

    The aggregate table (policy, mean score [95% CI], IQM [95% CI]) comes first, sorted by mean
    score, best first; each task's table (policy, mean TTA h [95% CI], score) follows, sorted by
    score. A caption says what 0 and 1 are, since a normalised score means nothing without its
    ends, and the notes say how each interval was made. ``aggregated`` takes the result of an
    earlier ``aggregate`` call on the same episodes to spare a second bootstrap.
    """
    table = _tables_by_task(episodes, zero, top, resamples)
    agg = (
        dict(aggregated)
        if aggregated is not None
        else aggregate(on_every_task(episodes), zero, top, resamples)
    )
    tasks = list(dict.fromkeys(table["task"]))
    left_out = [p for p in pd.unique(episodes["policy"]) if p not in agg]
    ranked = sorted(agg.items(), key=lambda kv: -kv[1]["mean"])  # stable for ties
    lines = [
        f"# {title}",
        "",
        f"Normalised score per task: 0 = {zero}, 1 = {top} (the optimiser's feasible plan); "
        f"higher is better, above 1 beats the plan, below 0 is slower than {zero}. Score = "
        f"(mean TTA of {zero} − mean TTA of the policy) / (mean TTA of {zero} − mean TTA of "
        f"{top}) over the task's paired episodes.",
        "",
        f"## Aggregate over {len(tasks)} task{'s' * (len(tasks) != 1)}",
        "",
        "| policy | mean score [95% CI] | IQM [95% CI] |",
        "|---|---:|---:|",
    ]
    for policy, row in ranked:
        lines.append(
            f"| {policy} | {_cell(row['mean'])} {_interval(*row['ci95'])} | "
            f"{_cell(row['iqm'])} {_interval(*row['iqm_ci95'])} |"
        )
    lines += [
        "",
        "- mean score: the mean over tasks of the per-task scores (every task weighs the same).",
        "- IQM: the interquartile mean of the per-episode scores of all tasks pooled (the "
        "lowest and highest quarter dropped, as rliable's IQM); a per-episode score is (mean TTA "
        f"of {zero} − the episode's TTA) / the task's denominator.",
        f"- 95% CI: percentile interval from a bootstrap stratified by task ({resamples:,} "
        "resamples): within each task its start days are drawn with replacement and bring all "
        "their episodes for every policy, so the pairing is kept; seeded from the days. "
        "`[–]`: no task has two start days.",
    ]
    if left_out:
        lines.append(
            f"- Not in the aggregate, as they did not run every task: {', '.join(left_out)}."
        )
    for task in tasks:
        rows = table[table["task"] == task]
        first = rows.iloc[0]
        lines += [
            "",
            f"## {task}",
            "",
            f"{int(first['episodes'])} paired episodes on {int(first['days'])} start "
            f"day{'s' * (int(first['days']) != 1)}.",
            "",
            "| policy | mean TTA h [95% CI] | score |",
            "|---|---:|---:|",
        ]
        for row in rows.itertuples(index=False):
            lines.append(
                f"| {row.policy} | {row.mean_tta_h:.3f} {_interval(row.ci95_lo_h, row.ci95_hi_h)}"
                f" | {row.score:.3f} |"
            )
    lines += [
        "",
        "Mean TTA intervals: block bootstrap over the task's start days (as in "
        "`powertrip evaluate`); `[–]` with a single start day.",
    ]
    return "\n".join(lines) + "\n"


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
    episodes: pd.DataFrame,
    zero: str = REFERENCE,
    top: str = TOP,
    *,
    task_facts: Mapping[str, Mapping[str, Any]],
    resamples: int = BOOTSTRAP_RESAMPLES,
    aggregated: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The leaderboard as a dict ``json.dumps`` writes as is::

        {"tasks": {ID: {"headroom", "optimum_upper_h", "optimum_lower_h", "gap",
                        "reference_never_beaten", "episodes", "days",
                        "policies": {name: {"tta_h", "score"}}}},
         "aggregate": {name: {"mean", "iqm", "ci95", "iqm_ci95"}},
         "normaliser": {"zero", "top"}, "resamples"}

    ``task_facts`` gives every task's ``TASK_FACTS`` (what the caller knows of the optimum,
    which these statistics do not); any other keys of a task's facts are copied too. Facts of
    tasks that are not in ``episodes`` are ignored. Every number is a plain Python float, int
    or bool: a NaN or infinity raises ``ValueError`` rather than being written, since strict
    JSON readers refuse it (so do the intervals with no task of two start days). Policies are
    listed by score, best first; the aggregate in order of first appearance.
    """
    table = _tables_by_task(episodes, zero, top, resamples)
    agg = (
        dict(aggregated)
        if aggregated is not None
        else aggregate(on_every_task(episodes), zero, top, resamples)
    )
    if any(not np.isfinite(v) for row in agg.values() for v in row["ci95"]):
        raise ValueError(
            "the aggregate's 95% intervals are undefined (no task has episodes on two start "
            "days, so there is nothing to resample) and JSON holds only finite numbers; run "
            "episodes that start on at least two days"
        )
    tasks: dict[str, Any] = {}
    for task, rows in table.groupby("task", sort=False):
        facts = task_facts.get(str(task))
        if facts is None:
            raise ValueError(f"task_facts has no entry for task {task}")
        absent = [k for k in TASK_FACTS if k not in facts]
        if absent:
            raise ValueError(f"task_facts[{task!r}] lacks {', '.join(absent)}")
        flag = facts["reference_never_beaten"]
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"task_facts[{task!r}].reference_never_beaten is {flag!r}, not a bool")
        entry: dict[str, Any] = {
            k: _plain(v, f"task_facts[{task!r}].{k}") for k, v in facts.items()
        }
        for key in TASK_FACTS[:-1]:
            entry[key] = _finite(facts[key], f"task_facts[{task!r}].{key}")
        entry["reference_never_beaten"] = bool(flag)
        entry["episodes"] = int(rows["episodes"].iloc[0])
        entry["days"] = int(rows["days"].iloc[0])
        entry["policies"] = {
            str(r.policy): {
                "tta_h": _finite(r.mean_tta_h, f"{task}.{r.policy}.tta_h"),
                "score": _finite(r.score, f"{task}.{r.policy}.score"),
            }
            for r in rows.itertuples(index=False)
        }
        tasks[str(task)] = entry
    return {
        "tasks": tasks,
        "aggregate": _plain(
            {
                str(p): {k: v[k] for k in ("mean", "iqm", "ci95", "iqm_ci95")}
                for p, v in agg.items()
            },
            "aggregate",
        ),
        "normaliser": {"zero": zero, "top": top},
        "resamples": int(resamples),
    }
