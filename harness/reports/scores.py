"""The statistics of a benchmark leaderboard: normalised scores over several tasks, their IQM
and their stratified day bootstrap; ``powertrip_env.harness.reports.leaderboard`` renders them.

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

The intervals follow ``powertrip_env.harness.evaluation.evaluate``: episodes that start on the same
day share
its sun and wind, so the start day, not the episode, is what is resampled, and the draws are seeded
from the days (``bootstrap_seed``), never from the TTAs, so a rerun is identical bit for bit and
every policy gets the same draws (a paired bootstrap). The input is one frame with a row per (task,
policy, episode) and the columns of ``COLUMNS``; episode ``e`` of a task is the same start time
for every policy. Nothing here runs an environment or draws anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.harness.evaluation.results import ZERO
from powertrip_env.harness.evaluation.statistics import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_seed,
    day_bootstrap_ci95,
    start_days,
)

TOP = "Optimiser"
"""The default name of the rows of the optimiser's feasible plan (the normaliser's one)."""

COLUMNS = ("task", "policy", "episode", "start_time", "tta_h")
"""The columns ``episodes`` must have (others are ignored)."""

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
    frame = _checked_frame(episodes, zero, top)
    policies = tuple(str(p) for p in pd.unique(frame["policy"]))
    tasks = tuple(
        _task(str(name), frame[frame["task"] == name], policies, zero, top)
        for name in pd.unique(frame["task"])
    )
    return _Board(zero, top, policies, tasks)


def _checked_frame(episodes: pd.DataFrame, zero: str, top: str) -> pd.DataFrame:
    """``episodes``' columns of ``COLUMNS`` as a fresh frame, with every row-level check of
    ``_board`` done (keys, TTAs, episode indices, duplicates, start times that pair) and the
    start times parsed into ``_stamp``; the per-task checks are ``_task``'s."""
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
    return frame


def _task(name: str, sub: pd.DataFrame, policies: tuple[str, ...], zero: str, top: str) -> _Task:
    """One task's rows of the checked frame arranged by policy and episode; ``ValueError``
    when a policy (the normaliser's ends above all) or an episode of the pairing is missing."""
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
    return _Task(
        name=name,
        episodes=table.columns.to_numpy(dtype=np.int64),
        start_times=times,
        days=days,
        labels=labels,
        block=block.astype(np.intp),
        counts=counts,
        tta=table.to_numpy(dtype=np.float64),
    )


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


def normalised_scores(episodes: pd.DataFrame, zero: str = ZERO, top: str = TOP) -> pd.DataFrame:
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
    return float(_iqm_rows(x[None, :].copy())[0])  # sorted in place: never the caller's array


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

    The seed comes from every task's ID, days and episode counts (``bootstrap_seed``, as for
    the per-task intervals), and the draws from PCG64's raw stream, as in
    ``day_bootstrap_ci95``. Adding or removing a policy changes no other policy's interval.
    """
    tasks = board.canonical
    if all(t.labels.size < 2 for t in tasks):
        return None
    names = np.array([f"{t.name}|{day}" for t in tasks for day in t.labels], dtype=str)
    seed = bootstrap_seed(names, np.concatenate([t.counts for t in tasks]))
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
    zero: str = ZERO,
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
    zero: str = ZERO,
    top: str = TOP,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> pd.DataFrame:
    """One row per task and policy (``PER_TASK_COLUMNS``): mean TTA, its 95% CI, the score.

    The interval is ``powertrip_env.harness.evaluation.statistics.day_bootstrap_ci95`` over the
    task's start days, the one every evaluation table reports, so a leaderboard's TTAs read the
    same as the summary of ``powertrip evaluate``; NaN with one start day. Tasks are in order of
    first appearance, and within a task the policies by score, best first (ties in order of
    first appearance).
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
