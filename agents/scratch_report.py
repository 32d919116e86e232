"""The scoring and the reports of ``powertrip scratch`` (``agents/scratch.py``): each run's
score on the board's scale, the aggregate over runs, the tables and the learning curves, and
reading a finished run back (``powertrip readme-tables --scratch-from``).

Scores are the board's: per task, ``(mean of PowerTrip − the agent's mean) / (PowerTrip's − the
reference's)`` on the track's measure, from a finished ``powertrip benchmark --out DIR`` run on
the same episodes. Each track's aggregate is the mean over its tasks of the mean over seeds, and
the interquartile mean over runs × tasks, with 95% intervals from the stratified bootstrap over
runs (resampling seeds within each task), as rliable reports them (Agarwal et al., NeurIPS '21).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.harness.reports import benchmark
from powertrip_env.harness.reports.scores import iqm
from powertrip_env.harness.tracks import TRACKS
from powertrip_env.scenario import load_scenario
from powertrip_env.tasks import task_of

# what the tables call each algorithm, in their order
LABELS = {
    "ppo": "PPO",
    "maskable_ppo": "MaskablePPO",
    "a2c": "A2C",
    "recurrent_ppo": "RecurrentPPO",
}
RESAMPLES = 2000  # of the bootstrap over runs
RUNS, CSV, MARKDOWN, JSON, CURVES = (
    "runs",
    "scratch.csv",
    "scratch.md",
    "scratch.json",
    "curves.png",
)
COMPACT = "scratch-tracks.md"  # one row per track and algorithm, for README


def board_means(folder: Path) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """A finished benchmark's episodes (the scored policies', on each track's measure in
    ``value``) and its tasks' facts."""
    episodes, facts, _ = benchmark.read_run(folder)
    scored = benchmark.scored(episodes).copy()
    for task, entry in facts.items():
        rows = scored["task"] == task
        scored.loc[rows, "value"] = scored.loc[rows, TRACKS[entry["track"]].measure.key]
    return scored, facts


def _ends(board: pd.DataFrame, facts: dict) -> dict[str, tuple[float, float]]:
    """Each task's score 0 and 1: the mean on its track's measure of the track's zero and top."""
    ends = {}
    for task, on_board in board.groupby("task", sort=False):
        track = TRACKS[facts[task]["track"]]
        value = on_board.set_index("policy")["value"]
        ends[task] = float(value[track.zero].mean()), float(value[track.top].mean())
    return ends


def task_scores(played: pd.DataFrame, board: pd.DataFrame, facts: dict) -> pd.DataFrame:
    """Each (task, algo, seed, steps)'s score on the board's scale, and its success rate.

    The agent's episodes must be the board's (the same start times), or the two are not paired
    and the command says which task differs."""
    rows = []
    ends = _ends(board, facts)
    for (task, steps, algo, seed), part in played.groupby(["task", "steps", "algo", "seed"]):
        track = TRACKS[facts[task]["track"]]
        on_board = board[board["task"] == task]
        zero = on_board[on_board["policy"] == track.zero].set_index("episode")
        mine = part.set_index("episode")
        if not set(mine.index) <= set(zero.index):
            raise ValueError(
                f"{task}: episodes {sorted(set(mine.index) - set(zero.index))} are not on the "
                f"board (it has {len(zero)}): run the benchmark with at least as many episodes"
            )
        starts = zero.loc[mine.index, "start_time"].astype(str)
        if (starts != mine["start_time"].astype(str)).any():
            raise ValueError(f"{task}: the agent's episodes start elsewhere than the board's")
        z, t = ends[task]
        rows.append(
            {
                "task": task,
                "track": track.name,
                "algo": algo,
                "seed": int(seed),
                "steps": int(steps),
                "episodes": len(mine),
                "value": float(mine["value"].mean()),
                "score": (z - float(mine["value"].mean())) / (z - t),
                "success": float(mine["success"].mean()),
            }
        )
    return pd.DataFrame(rows)


def rule_scores(board: pd.DataFrame, facts: dict) -> pd.DataFrame:
    """Each deployable rule's score per task on the board (its zero and top included)."""
    rows = []
    ends = _ends(board, facts)
    for task, on_board in board.groupby("task", sort=False):
        z, t = ends[task]
        for policy, value in on_board.groupby("policy")["value"].mean().items():
            rows.append({"task": task, "policy": policy, "score": (z - float(value)) / (z - t)})
    return pd.DataFrame(rows)


def over_runs(scores: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The mean over tasks of the mean over runs, and the IQM over runs × tasks, of a (tasks,
    runs) array, each with its 95% stratified bootstrap interval over runs (rliable's: each
    resample draws, per task, as many runs with replacement)."""
    rng = np.random.default_rng(seed)
    tasks, runs = scores.shape
    picks = rng.integers(0, runs, size=(resamples, tasks, runs))
    sampled = np.take_along_axis(np.broadcast_to(scores, (resamples, tasks, runs)), picks, 2)
    means = sampled.mean(axis=(1, 2))
    iqms = np.array([iqm(sample) for sample in sampled])
    return {
        "mean": float(scores.mean()),
        "ci95": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))],
        "iqm": iqm(scores),
        "iqm_ci95": [float(np.percentile(iqms, 2.5)), float(np.percentile(iqms, 97.5))],
    }


def summarise(
    scores: pd.DataFrame, rules: pd.DataFrame, facts: dict, tasks: Sequence[str]
) -> dict[str, Any]:
    """The run's JSON object: per task and algorithm the final scores by seed, per track and
    algorithm the aggregate over runs, per task the curve (mean, least and most over seeds at
    each checkpoint) and the best deployable rule's score; tasks in the order of ``tasks``."""
    final = scores[
        scores["steps"] == scores.groupby(["task", "algo", "seed"])["steps"].transform("max")
    ]
    out: dict[str, Any] = {"tasks": {}, "aggregate_by_track": {}}
    for task in tasks:
        part = final[final["task"] == task]
        track = TRACKS[facts[task]["track"]]
        deployable = set(track.rules(int(facts[task]["n_sites"]), _measured(task)))
        mine = rules[(rules["task"] == task) & rules["policy"].isin(deployable)]
        best = mine.loc[mine["score"].idxmax()]
        entry: dict[str, Any] = {
            "track": track.name,
            "best_rule": {"policy": str(best["policy"]), "score": float(best["score"])},
            "algos": {},
        }
        for algo in [algo for algo in LABELS if algo in set(part["algo"])]:
            runs = part[part["algo"] == algo]
            curve = scores[(scores["task"] == task) & (scores["algo"] == algo)]
            by_step = curve.groupby("steps")["score"]
            entry["algos"][algo] = {
                "score_by_seed": [float(v) for v in runs.sort_values("seed")["score"]],
                "success": float(runs["success"].mean()),
                "steps": int(runs["steps"].max()),
                "curve": {
                    "steps": [int(v) for v in by_step.mean().index],
                    "mean": [float(v) for v in by_step.mean()],
                    "least": [float(v) for v in by_step.min()],
                    "most": [float(v) for v in by_step.max()],
                },
            }
        out["tasks"][task] = entry
    for name in [name for name in TRACKS if name in set(final["track"])]:  # the boards' order
        tasks = [t for t, e in out["tasks"].items() if e["track"] == name]
        here = final[final["track"] == name]
        out["aggregate_by_track"][name] = {}
        for algo in [algo for algo in LABELS if algo in set(here["algo"])]:
            runs = here[here["algo"] == algo]
            table = runs.pivot(index="task", columns="seed", values="score").loc[tasks]
            if table.isna().any().any():
                continue  # not every seed on every task: no aggregate over runs
            out["aggregate_by_track"][name][algo] = {
                **over_runs(table.to_numpy()),
                "success": float(runs["success"].mean()),
                "runs": int(table.shape[1]),
            }
    return out


def _measured(task: str) -> bool:
    """Whether ``task``'s scenario draws unknowns: its deployable rules then include the
    adaptive ones (``Track.rules``)."""
    return bool(load_scenario(task_of(task).scenario).unknowns.drawn)


def to_markdown(summary: dict[str, Any], steps: int, seeds: Sequence[int]) -> str:
    """Each track's rows: the aggregate over runs of each algorithm, then each task's score
    (mean over seeds, least to most) beside the best deployable rule's."""
    lines = []
    for name, algos in summary["aggregate_by_track"].items():
        track = TRACKS[name]
        tasks = [t for t, e in summary["tasks"].items() if e["track"] == name]
        lines += [
            f"**{track.title}**: from scratch, {steps:,} steps, seeds "
            f"{', '.join(str(s) for s in seeds)} (0 = {track.zero}, 1 = {track.top})",
            "",
            "| algorithm | mean score [95% CI] | IQM [95% CI] | success | "
            + " | ".join(tasks)
            + " |",
            "|---|---:|---:|---:|" + "---:|" * len(tasks),
        ]
        for algo, agg in algos.items():
            cells = []
            for task in tasks:
                by_seed = summary["tasks"][task]["algos"][algo]["score_by_seed"]
                cells.append(f"{np.mean(by_seed):.3f} ({min(by_seed):.2f} to {max(by_seed):.2f})")
            lines.append(
                f"| {LABELS[algo]} | {agg['mean']:.3f} [{agg['ci95'][0]:.3f}, "
                f"{agg['ci95'][1]:.3f}] | {agg['iqm']:.3f} [{agg['iqm_ci95'][0]:.3f}, "
                f"{agg['iqm_ci95'][1]:.3f}] | {agg['success']:.0%} | " + " | ".join(cells) + " |"
            )
        best = [summary["tasks"][t]["best_rule"] for t in tasks]
        lines.append(
            "| best deployable rule | "
            f"{np.mean([b['score'] for b in best]):.3f} | | | "
            + " | ".join(f"{b['score']:.3f} ({b['policy']})" for b in best)
            + " |"
        )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def compact_markdown(summary: dict[str, Any]) -> str:
    """One row per track and algorithm (README's): the aggregate over runs, its success, and the
    track's best deployable rules' mean score beside it."""
    budget = summary["budget"]
    lines = [
        f"{budget['steps']:,} steps a run, seeds {', '.join(str(s) for s in budget['seeds'])}; "
        "mean score over the track's tasks [95% CI over runs]:",
        "",
        "| track | algorithm | mean score [95% CI] | IQM | success | best rules' mean |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, algos in summary["aggregate_by_track"].items():
        tasks = [e for e in summary["tasks"].values() if e["track"] == name]
        best = float(np.mean([e["best_rule"]["score"] for e in tasks]))
        for algo, agg in algos.items():
            lines.append(
                f"| {name} | {LABELS[algo]} | {agg['mean']:.3f} [{agg['ci95'][0]:.3f}, "
                f"{agg['ci95'][1]:.3f}] | {agg['iqm']:.3f} | {agg['success']:.0%} | {best:.3f} |"
            )
    return "\n".join(lines) + "\n"


def curves_figure(summary: dict[str, Any], path: Path) -> Path:
    """One panel per task: each algorithm's score against steps (mean over seeds, the band from
    the least to the most), PowerTrip at 0, the reference at 1 and the best rule dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary["tasks"])
    cols = min(5, len(tasks))
    rows = -(-len(tasks) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    colours = dict(zip(LABELS, ("tab:blue", "tab:orange", "tab:green", "tab:purple"), strict=True))
    for ax, task in zip(axes.flat, tasks, strict=False):
        entry = summary["tasks"][task]
        for algo, run in entry["algos"].items():
            c = run["curve"]
            ax.plot(c["steps"], c["mean"], color=colours[algo], label=LABELS[algo])
            ax.fill_between(c["steps"], c["least"], c["most"], color=colours[algo], alpha=0.2)
        best = entry["best_rule"]
        track = TRACKS[entry["track"]]
        ax.axhline(0.0, color="black", lw=0.8, label=track.zero)
        ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="reference")
        ax.axhline(best["score"], color="tab:red", lw=0.8, ls="--", label="best rule")
        ax.text(
            0.01,
            best["score"],
            f" {best['policy']}",
            transform=ax.get_yaxis_transform(),
            fontsize=6,
            color="tab:red",
            va="bottom",
        )
        ax.set_title(task, fontsize=8)
        ax.set_xlabel("steps", fontsize=7)
        ax.set_ylabel("score", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(tasks) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def read_scratch(folder: Path) -> tuple[dict[str, Any], str, str]:
    """A finished run's JSON object, its per-task Markdown and its one row per track and
    algorithm (``powertrip readme-tables --scratch-from``)."""
    names = (JSON, MARKDOWN, COMPACT, CURVES)
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"no {', '.join(missing)} in it: not a finished `powertrip scratch` run")
    summary = json.loads((folder / JSON).read_text(encoding="utf-8"))
    texts = [(folder / name).read_text(encoding="utf-8") for name in (MARKDOWN, COMPACT)]
    return summary, texts[0], texts[1]
