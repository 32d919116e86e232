"""Evaluate site-selection policies and saved agents on identical episodes.

Every policy (and every saved SB3 agent) runs the same episodes: episode ``e`` starts with
``env.reset(seed=seed + e)``, which fixes both the start time in the trace and the jitter
stream, because the environment derives both from its seed and no policy touches it.
Differences between policies are therefore paired, episode by episode, which is what makes a
few dozen episodes enough to rank them.

Command line::

    powertrip evaluate --env PowerTrip-v0 --policies all --episodes 30
    powertrip evaluate --policies PowerTrip,AllSites --model runs/ppo.zip --algo ppo
    powertrip evaluate --scenario my_sites.toml --episodes 10

writes ``episodes.csv``, ``summary.md``, ``tta.png`` and ``accuracy_vs_time.png`` to ``--out``
(default ``results/<env>-<split>``, or ``results/<env>-<scenario stem>-<split>`` with
``--scenario``) as one set, and prints the summary. A ``--out`` that holds an earlier run's files
is refused unless ``--force``, which replaces them once the new set is complete. Bad arguments
(unknown policy or environment, a broken scenario or trace, a missing or incompatible model, a
model that could only be loaded by running code stored in it, a used or unwritable output
folder) exit with code 2 and a message, before any episode runs.

A model file is code: SB3 pickles the policy class and other objects into its zips, and
unpickling runs whatever the file names. Models are loaded without unpickling anything in them
(``powertrip_env.baselines.models``, which also says how a policy class of ``agents`` is found
without this package importing it); an RLlib checkpoint is loaded by Ray, which unpickles, so
evaluate only checkpoints you trust.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from gymnasium.envs.registration import registry

import powertrip_env
from powertrip_env.atomic import (
    OutputDirError,
    check_output_dir,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.models import ALGOS, EvaluationError, load_agent, model_label
from powertrip_env.baselines.registry import REFERENCES, default_policy_names, make_policy
from powertrip_env.episodes import SPLITS
from powertrip_env.errors import ScenarioError, TraceError
from powertrip_env.render import agg_figure, has_matplotlib, save_png
from powertrip_env.scenario import scenario_names
from powertrip_env.scenario.power_data import iso_utc

EPISODE_COLUMNS = (
    "policy",
    "episode",
    "seed",
    "start_time",
    "tta_h",
    "success",
    "rounds",
    "energy_kwh",
    "mean_sites",
    "comm_share",
    "comm_s",
    "active_s",
)
SUMMARY_COLUMNS = (
    "policy",
    "episodes",
    "mean_tta_h",
    "ci95_tta_h",  # half the width of [ci95_lo_h, ci95_hi_h]
    "ci95_lo_h",
    "ci95_hi_h",
    "median_tta_h",
    "success_rate",
    "mean_rounds",
    "mean_energy_kwh",
    "mean_sites",
    "vs_powertrip_pct",
)
REFERENCE = "PowerTrip"
_CURVE_POINTS = 200

# Resamples of the day bootstrap of every 95% CI (``day_bootstrap_ci95``). With 2,000 the
# Monte Carlo error of the 2.5th and 97.5th percentiles is about 0.06 standard errors of the
# mean, small beside the interval's own approximation with a handful of days.
BOOTSTRAP_RESAMPLES = 2000


# --------------------------------------------------------------------------- statistics


def start_days(start_times: Sequence[str] | pd.Series) -> np.ndarray:
    """The UTC calendar day (``"YYYY-MM-DD"``) of each ISO start time, the blocks of the CI.

    Episodes that start on the same day share that day's sun and wind, so they are not
    independent draws; the day is the unit the bootstrap resamples. Raises ``ValueError`` for a
    missing or unreadable time rather than inventing a block for it.
    """
    times = pd.to_datetime(pd.Series(start_times, dtype=object), utc=True, format="ISO8601")
    if times.isna().any():
        raise ValueError("every episode needs a start time to group it by day")
    return times.dt.strftime("%Y-%m-%d").to_numpy(dtype=str)


def _bootstrap_seed(labels: np.ndarray, counts: np.ndarray) -> int:
    """A seed from the days and their episode counts, never from the TTAs.

    Every policy of one evaluation ran the same start times, so every policy gets the same
    resampled days (a paired bootstrap), and a rerun of the same episodes gets the same
    interval bit for bit. ``hashlib`` is stable across processes, unlike ``hash``.
    """
    text = ",".join(f"{day}:{n}" for day, n in zip(labels, counts, strict=True))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def day_bootstrap_ci95(
    values: Sequence[float] | np.ndarray,
    days: Sequence[str] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """95% percentile interval of the mean of ``values`` from a block bootstrap over ``days``.

    Episodes are grouped by their start day; each resample draws as many days as there are,
    with replacement, keeps every episode of a drawn day (whole blocks), and takes the mean
    TTA of the episodes drawn. The interval is the 2.5th and 97.5th percentiles of those means.
    A t-interval over episodes would treat the 30 test episodes of PowerTrip-v0 as independent
    although they start on about 7 days and share each day's weather, and overstate precision.

    The draws are reproducible: the seed comes from the days (``_bootstrap_seed``) and the
    indices from the raw output of PCG64, whose stream NumPy keeps fixed across versions
    (``Generator`` methods may change), reduced modulo the number of days (a bias of order
    days / 2**64).

    With few days the interval is itself approximate and, if anything, too narrow: the
    bootstrap variance of a mean of G equal days is (G - 1) / G of the usual estimate, and its
    percentiles carry no small-sample (t with G - 1 degrees of freedom) correction. For 7 days
    a cluster t-interval would be about 1.35 times as wide. With three equal days the interval
    is simply the range of the day means. Read it as what the days allow, not as exact.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two distinct days, where the data hold
        no information on how the mean varies from day to day.
    """
    x = np.asarray(values, dtype=np.float64)
    labels, block, counts = np.unique(np.asarray(days, dtype=str), return_inverse=True,
                                      return_counts=True)  # fmt: skip
    if x.shape[0] != block.shape[0]:
        raise ValueError(f"{x.shape[0]} values but {block.shape[0]} days")
    if labels.shape[0] < 2:
        return math.nan, math.nan
    # Sums of deviations from one episode's value: an exact zero when every TTA is the same.
    sums = np.bincount(block, weights=x - x[0], minlength=labels.shape[0])
    raw = np.random.PCG64(_bootstrap_seed(labels, counts)).random_raw((resamples, labels.size))
    drawn = (raw % np.uint64(labels.size)).astype(np.intp)
    means = x[0] + sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def ci95_half_width(
    values: Sequence[float] | np.ndarray,
    days: Sequence[str] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> float:
    """Half the width of ``day_bootstrap_ci95``: the ``±`` of the tables; NaN with one day."""
    low, high = day_bootstrap_ci95(values, days, resamples=resamples)
    return (high - low) / 2.0


# --------------------------------------------------------------------------- the result


@dataclass
class Evaluation:
    """Per-episode results, per-policy summary and accuracy curves of one evaluation."""

    env_id: str
    split: str
    episodes: pd.DataFrame  # columns EPISODE_COLUMNS
    summary: pd.DataFrame  # one row per policy, PowerTrip first if present; SUMMARY_COLUMNS
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    scenario: str = ""  # the scenario file run instead of the ID's own, if one was given

    @property
    def title(self) -> str:
        """What ran, for headings: the ID, and the scenario file when it is not the ID's own."""
        return f"{self.env_id} on {self.scenario}" if self.scenario else self.env_id

    def to_markdown(self) -> str:
        """The summary as a Markdown table with the notes a reader needs to interpret it."""
        n_eps = int(self.episodes["episode"].nunique()) if len(self.episodes) else 0
        n_days = len(set(start_days(self.episodes["start_time"]))) if len(self.episodes) else 0
        head = (
            "| policy | episodes | mean TTA (h) | 95% CI (h) | median TTA (h) | success | "
            "rounds | energy (kWh) | sites/round | vs PowerTrip |"
        )
        lines = [
            f"# {self.title}: {n_eps} paired episodes, {self.split} split",
            "",
            head,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in self.summary.itertuples(index=False):
            ci = _fmt(row.ci95_tta_h, ".3f")  # "–" when undefined (one start day)
            lines.append(
                f"| {row.policy} | {row.episodes} | {row.mean_tta_h:.3f} | "
                f"{ci if ci == '–' else '±' + ci} | {row.median_tta_h:.3f} | "
                f"{row.success_rate:.0%} | {row.mean_rounds:.1f} | "
                f"{_energy(row.mean_energy_kwh)} | {row.mean_sites:.2f} | "
                f"{_fmt(row.vs_powertrip_pct, '+.1f', '%')} |"
            )
        lines += [
            "",
            "- TTA is the wall-clock time to the target accuracy. An unsuccessful episode counts "
            "at the time budget, so a mean over failures is a lower bound on their true TTA.",
            _ci_note(n_days),
            "- Every policy ran the same start times and jitter streams (episode e uses seed "
            "seed + e), so differences are paired.",
            f"- vs PowerTrip: change of mean TTA relative to {REFERENCE} (negative is faster).",
            "- sites/round: effective sites per non-idle round.",
        ]
        return "\n".join(lines) + "\n"


def _ci_note(n_days: int) -> str:
    """The notes line on the CI column: the method and how many independent days it had."""
    days = f"{n_days} distinct start day{'s' if n_days != 1 else ''}"
    if n_days < 2:
        return (
            f"- 95% CI: undefined (–): the episodes start on {days}, and the interval is a "
            "block bootstrap over start days, which needs at least two."
        )
    return (
        "- 95% CI: ± half the width of the 95% percentile interval of the mean TTA from a block "
        f"bootstrap over start days ({days}, UTC; {BOOTSTRAP_RESAMPLES:,} resamples of whole "
        "days with replacement, seeded from the days). Episodes that start on the same day "
        "share its weather, so the days, not the episodes, are the independent draws."
    )


def _energy(kwh: float) -> str:
    return f"{kwh:.1f}" if kwh >= 10 else f"{kwh:.3g}"


def _fmt(value: float, spec: str, suffix: str = "") -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:{spec}}{suffix}"


# --------------------------------------------------------------------------- checks


def powertrip_env_ids() -> list[str]:
    """Registered Gymnasium IDs whose environment is ``PowerTripEnv``."""
    ids = [eid for eid, spec in registry.items() if spec.entry_point == powertrip_env.ENTRY_POINT]
    return sorted(ids, key=lambda eid: (eid not in powertrip_env.ENV_IDS, eid))


def _check_env_id(env_id: str) -> None:
    if env_id not in powertrip_env_ids():
        raise EvaluationError(
            f"unknown environment {env_id!r}; registered PowerTrip IDs: "
            f"{', '.join(powertrip_env_ids())}"
        )


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` for the tools: a bad scenario, trace or argument becomes one
    ``EvaluationError`` naming what was wrong, which the command lines print as one line."""
    try:
        return gym.make(env_id, **kwargs)
    except (ScenarioError, TraceError) as exc:
        raise EvaluationError(str(exc)) from None
    except (TypeError, ValueError, gym.error.Error) as exc:
        raise EvaluationError(f"cannot make {env_id} with {kwargs}: {exc}") from None


def report_parser(prog: str, description: str, episodes: int) -> argparse.ArgumentParser:
    """The arguments every report of one shipped ID shares: ``--env``, ``--episodes``, ``--seed``
    (checked by ``parse_report_args``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--env", default="PowerTrip-v0", help="registered ID (PowerTrip-v0)")
    parser.add_argument(
        "--episodes", type=int, default=episodes, help=f"paired test episodes ({episodes})"
    )
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    return parser


def parse_report_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """Parse, refusing an ID that is not shipped and fewer than one episode (exit 2)."""
    args = parser.parse_args(argv)
    if args.env not in powertrip_env.ENV_IDS:
        parser.error(
            f"argument --env: {args.env!r} is not one of {', '.join(powertrip_env.ENV_IDS)}"
        )
    if args.episodes < 1:
        parser.error(f"argument --episodes: {args.episodes} must be >= 1")
    return args


def report_cli(compute: Callable[[], dict[str, Any]], to_markdown: Callable[..., str]) -> int:
    """Run a report, print its table and, as the last line, its JSON; exit 2 on bad input."""
    try:
        report = compute()
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(report))
    print(json.dumps(report))
    return 0


def _check_out_dir(out_dir: Path, force: bool) -> None:
    """Refuse a results folder that holds an earlier run, or one that cannot be written.

    Checked before any episode runs, so a long evaluation does not fail at its end; nothing is
    created here (``write_outputs`` moves the finished set into place).
    """
    try:
        check_output_dir(out_dir, force=force)
    except OutputDirError as exc:
        raise EvaluationError(str(exc)) from None


# --------------------------------------------------------------------------- running


@dataclass
class _Entry:
    """A policy ready to run, with the env keyword arguments it needs."""

    label: str
    policy: Policy
    env_kwargs: dict[str, Any]


def run_episode(
    env: gym.Env, policy: Policy, seed: int
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray]]:
    """One episode of ``policy``: its CSV row (without policy/episode) and accuracy curve."""
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    start = iso_utc(info["trace_time"])
    hours = [0.0]
    acc = [float(env.unwrapped.state.accuracy[0])]
    sites: list[int] = []
    comm_s = busy_s = 0.0  # over the non-idle rounds
    width = env.action_space.shape[0]
    while True:
        action = policy.act(obs, info)
        if len(action) < width:  # a baseline acts on the N real sites of a padded env
            action = np.concatenate([action, np.zeros(width - len(action), action.dtype)])
        obs, _, terminated, truncated, info = env.step(action)
        hours.append(info["elapsed_s"] / 3600.0)
        acc.append(info["accuracy"])
        if not info["idle"]:
            sites.append(info["n_selected"])
            comm_s += float(info["comm_s"])
            busy_s += float(info["round_time_s"])
        if terminated or truncated:
            break
    row = {
        "seed": seed,
        "start_time": start,
        "tta_h": info["tta_h"],
        "success": bool(terminated),
        "rounds": int(info["rounds"]),
        "energy_kwh": float(info["energy_kwh"]),
        "mean_sites": float(np.mean(sites)) if sites else 0.0,
        "comm_share": comm_s / busy_s if busy_s > 0 else 0.0,  # of the non-idle rounds' time
        "comm_s": comm_s,  # the sums behind it, so that shares pool over episodes
        "active_s": busy_s,
    }
    return row, (np.asarray(hours), np.asarray(acc))


def _summarise(episodes: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """One row per policy; the CI is the day bootstrap of ``day_bootstrap_ci95``."""
    rows = []
    for label in order:
        ep = episodes[episodes["policy"] == label]
        tta = ep["tta_h"].to_numpy(dtype=np.float64)
        low, high = day_bootstrap_ci95(tta, start_days(ep["start_time"]))
        rows.append(
            {
                "policy": label,
                "episodes": len(ep),
                "mean_tta_h": float(tta.mean()),
                "ci95_tta_h": (high - low) / 2.0,
                "ci95_lo_h": low,
                "ci95_hi_h": high,
                "median_tta_h": float(np.median(tta)),
                "success_rate": float(ep["success"].mean()),
                "mean_rounds": float(ep["rounds"].mean()),
                "mean_energy_kwh": float(ep["energy_kwh"].mean()),
                "mean_sites": float(ep["mean_sites"].mean()),
            }
        )
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS[:-1])
    ref = summary.loc[summary["policy"] == REFERENCE, "mean_tta_h"]
    if len(ref):
        summary["vs_powertrip_pct"] = 100.0 * (summary["mean_tta_h"] / float(ref.iloc[0]) - 1.0)
    else:
        summary["vs_powertrip_pct"] = math.nan
    return summary


def evaluate(
    env_id: str,
    policies: Sequence[str | Policy],
    *,
    episodes: int = 30,
    split: str = "test",
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    env_kwargs: Mapping[str, Any] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    force: bool = False,
) -> Evaluation:
    """Run policies and saved agents on the same episodes and summarise time-to-accuracy.

    Args:
        env_id: a registered PowerTrip ID, e.g. ``"PowerTrip-v0"``.
        policies: policy names (see ``registry.make_policy``; ``"all"`` expands to
            ``default_policy_names``, ``"references"`` to the clairvoyant references) or
            ``Policy`` instances.
        episodes: paired episodes per policy; episode e resets with ``seed + e``.
        split: ``"test"`` (held-out days, default), ``"train"`` or ``"all"``.
        seed: base seed of the episodes and of the randomised policies.
        models: ``(path, algo)`` pairs of saved SB3 agents, algo in ``ppo``, ``a2c``,
            ``maskable_ppo``; labelled by file stem. The env is made with the observation and
            action modes the agent was trained with.
        env_kwargs: extra ``gym.make`` arguments (e.g. ``scenario=...``, ``jitter=False``).
        out_dir: if given, write ``episodes.csv``, ``summary.md``, ``tta.png`` and
            ``accuracy_vs_time.png`` there, as a set (see ``write_outputs``). A folder that
            already holds files is refused before anything runs, unless ``force``.
        progress: show a progress bar on stderr (only when stderr is a terminal).
        force: replace the files of an earlier run in ``out_dir`` (all of them, once this
            run's set is complete).

    Returns:
        An ``Evaluation``. Raises ``EvaluationError`` (a ``ValueError``) for bad input, before
        running anything.
    """
    _check_env_id(env_id)
    if isinstance(episodes, bool) or not isinstance(episodes, int | np.integer) or episodes < 1:
        raise EvaluationError(f"episodes={episodes!r}: must be an integer >= 1")
    if split not in SPLITS:
        raise EvaluationError(f"split={split!r}: allowed {', '.join(SPLITS)}")
    base_kwargs = {**dict(env_kwargs or {}), "split": split}

    probe = make_env(env_id, **base_kwargs)
    n_sites = probe.unwrapped.params.n_sites
    scenario = Path(probe.unwrapped.scenario.source).name if "scenario" in base_kwargs else ""
    probe.close()

    entries = _entries(policies, models, n_sites, seed, env_id, base_kwargs)
    if not entries:
        raise EvaluationError("nothing to evaluate: give at least one policy or model")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        _check_out_dir(out, force)  # after the cheap checks, before the long run
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {e.label: [] for e in entries}
    bar = _progress_bar(len(entries) * episodes, progress)
    envs: dict[tuple[Any, ...], gym.Env] = {}  # one env per (obs_mode, action_mode, max_sites)
    try:
        for entry in entries:
            key = tuple(entry.env_kwargs.get(k) for k in ("obs_mode", "action_mode", "max_sites"))
            if key not in envs:
                envs[key] = gym.make(env_id, **entry.env_kwargs)
            env = envs[key]
            bar.set_postfix_str(entry.label)
            for e in range(episodes):
                row, curve = run_episode(env, entry.policy, seed + e)
                rows.append({"policy": entry.label, "episode": e, **row})
                curves[entry.label].append(curve)
                bar.update(1)
    finally:
        bar.close()
        for env in envs.values():
            env.close()

    frame = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    order = [e.label for e in entries]
    result = Evaluation(env_id, split, frame, _summarise(frame, order), curves, scenario)
    if out is not None:
        write_outputs(result, out, force=force)
    return result


def _entries(
    policies: Sequence[str | Policy],
    models: Sequence[tuple[str, str]],
    n_sites: int,
    seed: int,
    env_id: str,
    base_kwargs: dict[str, Any],
) -> list[_Entry]:
    """Resolve names, instances and models to runnable entries, PowerTrip first."""
    entries: list[_Entry] = []
    if isinstance(policies, str):
        policies = [policies]
    for item in policies:
        if isinstance(item, Policy):
            entries.append(_Entry(item.name, item, base_kwargs))
            continue
        names = {"all": default_policy_names(n_sites), "references": list(REFERENCES)}.get(
            item, [item]
        )
        for name in names:
            try:
                entries.append(_Entry(name, make_policy(name, n_sites, seed), base_kwargs))
            except ValueError as exc:
                raise EvaluationError(str(exc)) from None
    labels = [e.label for e in entries]
    for path, algo in models:
        label = model_label(path)
        if label in labels:
            label = f"{label}-{algo}"
        agent, kwargs = load_agent(path, algo, label, env_id, base_kwargs)
        entries.append(_Entry(label, agent, kwargs))
        labels.append(label)
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise EvaluationError(f"policy {label!r} appears twice; give each policy once")
        seen.add(label)
    entries.sort(key=lambda e: e.label != REFERENCE)  # stable: PowerTrip first, rest in order
    return entries


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_postfix_str(self, s: str) -> None: ...
    def close(self) -> None: ...


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty() or importlib.util.find_spec("tqdm") is None:
        return _NoBar()  # tqdm comes with the 'train' extra; a bare install runs without a bar
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, unit="episode", dynamic_ncols=True)


# --------------------------------------------------------------------------- outputs


def write_outputs(
    result: Evaluation, out_dir: str | os.PathLike[str], *, force: bool = False
) -> None:
    """``episodes.csv``, ``summary.md``, ``tta.png`` and ``accuracy_vs_time.png``, as a set.

    The files are written into a hidden folder beside ``out_dir`` that becomes ``out_dir`` only
    once all are written (``powertrip_env.atomic.result_dir``): a Ctrl-C half-way leaves the
    earlier results as they were, never a new ``episodes.csv`` beside an old summary. A
    ``out_dir`` that holds files is refused unless ``force``, which replaces them all.

    The plots need matplotlib (the ``train`` extra); without it they are left out with a note,
    so that evaluation runs on an install that has only the environment and RLlib.
    """
    try:
        with result_dir(out_dir, force=force) as tmp:
            _write_files(result, tmp)
    except OutputDirError as exc:
        raise EvaluationError(str(exc)) from None


def _write_files(result: Evaluation, folder: Path) -> None:
    write_text(folder / "episodes.csv", result.episodes.to_csv(index=False, lineterminator="\n"))
    write_text(folder / "summary.md", result.to_markdown())
    if not has_matplotlib():
        print(
            "note: matplotlib is not installed, so tta.png and accuracy_vs_time.png were not "
            "written (pip install 'powertrip-env[train]' adds it)",
            file=sys.stderr,
        )
        return
    for name, plot in (("tta.png", _plot_tta), ("accuracy_vs_time.png", _plot_accuracy)):
        save_png(plot(result), folder / name)


def _plot_tta(result: Evaluation) -> Any:
    """Box plot of TTA per policy with the mean and its 95% CI (day bootstrap) drawn over it."""
    labels = list(result.summary["policy"])
    data = [result.episodes.loc[result.episodes["policy"] == p, "tta_h"].to_numpy() for p in labels]
    fig = agg_figure(max(6.0, 0.7 * len(labels) + 2.0), 4.5, layout="constrained")
    ax = fig.add_subplot()
    pos = np.arange(1, len(labels) + 1)
    ax.boxplot(data, positions=pos, widths=0.6, showfliers=True)
    means = result.summary["mean_tta_h"].to_numpy()
    # The percentile interval need not be symmetric about the mean: draw its two ends.
    below = np.nan_to_num(means - result.summary["ci95_lo_h"].to_numpy()).clip(min=0.0)
    above = np.nan_to_num(result.summary["ci95_hi_h"].to_numpy() - means).clip(min=0.0)
    ax.errorbar(pos, means, yerr=[below, above], fmt="o", color="tab:red", capsize=4,
                label="mean and 95% CI")  # fmt: skip
    ax.set_xticks(pos, labels, rotation=40, ha="right")
    ax.set_ylabel("time to accuracy (h)")
    ax.set_title(f"{result.title}, {result.split} split: TTA per policy")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left")
    return fig


def mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """Mean accuracy over episodes on a common time grid.

    Accuracy is a step function of time (it changes at round ends), and an episode that ended
    keeps its final accuracy, so every episode has a value at every grid point.
    """
    values = []
    for hours, acc in curves:
        idx = np.searchsorted(hours, grid, side="right") - 1
        values.append(acc[np.clip(idx, 0, acc.shape[0] - 1)])
    return np.mean(values, axis=0)


def _plot_accuracy(result: Evaluation) -> Any:
    """Mean accuracy against wall-clock hours, one line per policy."""
    end = max((h[-1] for eps in result.curves.values() for h, _ in eps), default=1.0)
    grid = np.linspace(0.0, max(end, 1e-9), _CURVE_POINTS)
    fig = agg_figure(8.0, 5.0, layout="constrained")
    ax = fig.add_subplot()
    for label in result.summary["policy"]:
        if result.curves.get(label):
            ax.plot(grid, mean_curve(result.curves[label], grid), label=label, lw=1.5)
    ax.set_xlabel("wall-clock time (h)")
    ax.set_ylabel(f"mean accuracy over {int(result.episodes['episode'].nunique())} episodes")
    ax.set_title(f"{result.title}, {result.split} split: accuracy against time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2)
    return fig


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip evaluate",
        description="Compare site-selection policies and saved agents on paired episodes.",
    )
    parser.add_argument("--env", default="PowerTrip-v0", help="registered ID (PowerTrip-v0)")
    parser.add_argument(
        "--scenario",
        metavar="FILE_OR_NAME",
        default=None,
        help="run --env on this scenario: a TOML file or a shipped name (default: the ID's own)",
    )
    parser.add_argument(
        "--policies",
        default="all",
        help="comma-separated policy names, or 'all' (default) for the standard set",
    )
    parser.add_argument("--episodes", type=int, default=30, help="paired episodes (30)")
    parser.add_argument("--split", default="test", choices=SPLITS, help="trace days (test)")
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="saved SB3 agent (.zip), RLlib checkpoint folder (with --algo rllib), or "
        "'pretrained' for the shipped general agent (agents/pretrained); may repeat. A model "
        "file is code: give only files you trust",
    )
    parser.add_argument(
        "--algo",
        action="append",
        default=[],
        choices=sorted(ALGOS),
        help="algorithm of each --model, or one for all (ppo)",
    )
    parser.add_argument("--out", default=None, help="output folder (results/<env>-<split>)")
    parser.add_argument("--force", action="store_true", help="replace the results already in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _looks_like_a_scenario(env: str) -> bool:
    """Whether ``--env`` was given a scenario (a TOML file or shipped name) instead of an ID.

    Passing the scenario file as the environment is the natural first guess; the generic
    "unknown environment" message would not say that ``--scenario`` exists.
    """
    if env in powertrip_env_ids():
        return False
    return env.endswith(".toml") or env in scenario_names() or Path(env).is_file()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad arguments)."""
    parser = _parser()
    args = parser.parse_args(argv)
    algos = args.algo or ["ppo"]
    if args.model and len(algos) not in (1, len(args.model)):
        parser.error(f"give one --algo for all models or one per --model ({len(args.model)})")
    if not args.model and args.algo:
        parser.error("--algo needs --model")
    per_model = algos if len(algos) == len(args.model) else algos[:1] * len(args.model)
    models = list(zip(args.model, per_model, strict=True))
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if _looks_like_a_scenario(args.env):
        print(
            f"error: --env {args.env!r} looks like a scenario, but --env takes a registered "
            f"environment ID ({', '.join(powertrip_env_ids())}); give the scenario with "
            f"--scenario: --env PowerTrip-v0 --scenario {args.env}",
            file=sys.stderr,
        )
        return 2
    run = f"{args.env}-{Path(args.scenario).stem}" if args.scenario else args.env
    out = Path(args.out) if args.out else Path("results") / f"{run}-{args.split}"
    with stop_codes(EvaluationError) as stop:
        result = evaluate(
            args.env,
            policies,
            episodes=args.episodes,
            split=args.split,
            seed=args.seed,
            models=models,
            env_kwargs={"scenario": args.scenario} if args.scenario else None,
            out_dir=out,
            progress=not args.no_progress,
            force=args.force,
        )
    if stop.code:
        return stop.code
    print(result.to_markdown())
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
