"""``powertrip scratch``: standard algorithms trained from scratch on the environment as it is,
on every task of the benchmark, with several seeds: their rows on each track's board and their
learning curves (docs/agents.md, "From scratch").

What a researcher arriving with an algorithm compares with is not the project's engineered
agents but the textbook ones on the raw task, as benchmarks that train from scratch report them
(Procgen, Craftax, the Open RL Benchmark). So each task is made with ``gym.make(ID)`` and its
registered defaults (train days, jitter, its own reward), vectorised by SB3's ``make_vec_env``
(``N_ENVS`` envs), and each algorithm of ``ALGOS`` keeps SB3's default hyperparameters but for
the rollout length (``ALGOS``' note): SB3's PPO with ``MlpPolicy`` on the raw ``MultiBinary``
action, sb3-contrib's MaskablePPO with the env's availability mask (``action_masks()``), and
SB3's A2C; ``recurrent_ppo`` (sb3-contrib's RecurrentPPO, an LSTM) on request. Every run has the
same budget of steps on every task. At each checkpoint a seed is evaluated on the benchmark's
paired test episodes (test days, no jitter, ``reset(seed=e)``; ``--curve-episodes`` of them for
the curve, ``--episodes`` at the end for the board), playing its deterministic action.

A run's files go to ``--out``: each job's episodes in ``runs/`` as it finishes (a stopped run
picks up where it was: jobs whose file exists are not run again), then ``scratch.csv`` (all
of them), ``scratch.md``, ``scratch.json`` and ``curves.png``. Scores are the board's: per task,
``(mean of PowerTrip − the agent's mean) / (PowerTrip's − the reference's)`` on the track's
measure, read from a finished ``powertrip benchmark --out DIR`` run on the same episodes
(``--board``). Each track's aggregate is the mean over its tasks of the mean over seeds, and the
interquartile mean over runs × tasks, with 95% intervals from the stratified bootstrap over runs
(resampling seeds within each task), as rliable reports them (Agarwal et al., NeurIPS '21).

    powertrip scratch --board results/benchmark --out results/scratch     # every task
    powertrip scratch --quick --board DIR --out DIR --env PowerTrip-v0     # CI's smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.atomic import write_text
from powertrip_env.harness.arguments import SUITE, add_env, add_no_progress
from powertrip_env.harness.evaluation.evaluate import run_episode
from powertrip_env.harness.models.policies import SB3Policy
from powertrip_env.harness.reports import benchmark
from powertrip_env.harness.reports.scores import iqm
from powertrip_env.harness.tracks import TRACKS, track_for
from powertrip_env.scenario import load_scenario
from powertrip_env.tasks import suite_ids, task_of

N_ENVS = 8  # make_vec_env's envs, as the from-scratch runs used
# The rollout of PPO and MaskablePPO: 256 steps of each of the 8 envs, 2,048 a update (SB3's
# default n_steps of 2,048 would make a budget of 50,000 steps three updates). A2C keeps its
# default (5 steps per env); the rest is SB3's and sb3-contrib's defaults.
ON_POLICY_STEPS = 256
ALGOS: dict[str, dict[str, Any]] = {
    "ppo": {"label": "PPO", "policy": "MlpPolicy", "kwargs": {"n_steps": ON_POLICY_STEPS}},
    "maskable_ppo": {
        "label": "MaskablePPO",
        "policy": "MlpPolicy",
        "kwargs": {"n_steps": ON_POLICY_STEPS},
    },
    "a2c": {"label": "A2C", "policy": "MlpPolicy", "kwargs": {}},
    "recurrent_ppo": {
        "label": "RecurrentPPO",
        "policy": "MlpLstmPolicy",
        "kwargs": {"n_steps": ON_POLICY_STEPS},
    },
}
DEFAULT_ALGOS = ("ppo", "maskable_ppo", "a2c")
STEPS = 50_000  # the budget of every run (docs/agents.md says what it buys)
CHECKPOINTS = 5  # evaluations along the way, the last at the end of the budget
CURVE_EPISODES = 5  # paired test episodes at the checkpoints before the last (30 at the last)
SEEDS = (0, 1, 2)
RESAMPLES = 2000  # of the bootstrap over runs
RUNS, CSV, MARKDOWN, JSON, CURVES = (
    "runs",
    "scratch.csv",
    "scratch.md",
    "scratch.json",
    "curves.png",
)
COMPACT = "scratch-tracks.md"  # one row per track and algorithm, for README


@dataclass(frozen=True)
class Job:
    """One algorithm trained with one seed on one task, and its evaluations."""

    task: str
    algo: str
    seed: int
    steps: int
    checkpoints: int
    curve_episodes: int
    episodes: int

    @property
    def file(self) -> str:
        """Its episodes' file, named by all of it: a run with another budget trains anew."""
        budget = f"{self.steps}x{self.checkpoints}_e{self.curve_episodes}-{self.episodes}"
        return f"{self.task}__{self.algo}__seed{self.seed}__{budget}.csv"


def algorithm(algo: str) -> type:
    """The class that trains ``algo`` (a key of ``ALGOS``)."""
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "a2c":
        from stable_baselines3 import A2C

        return A2C
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "recurrent_ppo":
        return _binary_recurrent_ppo()
    raise ValueError(f"algo={algo!r}: allowed: {', '.join(ALGOS)}")


def _binary_recurrent_ppo() -> type:
    """sb3-contrib's RecurrentPPO with its rollout buffer keeping actions as float32.

    sb3-contrib 2.9's recurrent buffer keeps a ``MultiBinary`` action in the space's int8 and
    hands it to the Bernoulli's ``log_prob`` as it is, which torch refuses ("result type Float
    can't be cast to the desired output type Char"); SB3's own buffer casts it to float32 when
    it samples, which this one does when it stores."""
    from sb3_contrib import RecurrentPPO
    from sb3_contrib.common.recurrent.buffers import RecurrentRolloutBuffer

    class FloatActionBuffer(RecurrentRolloutBuffer):
        def reset(self) -> None:
            super().reset()
            self.actions = self.actions.astype(np.float32)

    class BinaryRecurrentPPO(RecurrentPPO):
        def _setup_model(self) -> None:
            super()._setup_model()
            made = self.rollout_buffer
            self.rollout_buffer = FloatActionBuffer(
                self.n_steps,
                self.observation_space,
                self.action_space,
                made.hidden_state_shape,
                self.device,
                gamma=self.gamma,
                gae_lambda=self.gae_lambda,
                n_envs=self.n_envs,
            )

    return BinaryRecurrentPPO


def checkpoints(steps: int, count: int) -> list[int]:
    """The step counts at which a run is evaluated: ``count`` evenly spaced, the last ``steps``."""
    if steps < 1 or count < 1:
        raise ValueError(f"steps={steps} and checkpoints={count}: both must be at least 1")
    return sorted({max(1, round(steps * (k + 1) / count)) for k in range(count)})


def run_job(job: Job, folder: Path) -> Path:
    """Train ``job``'s algorithm from scratch and evaluate it at each checkpoint; its episodes
    go to ``folder / job.file`` (written once, complete)."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    import powertrip_env  # noqa: F401  (registers the IDs in a fresh worker)

    torch.set_num_threads(1)  # each worker one core: the jobs run side by side
    spec = ALGOS[job.algo]
    venv = make_vec_env(job.task, n_envs=N_ENVS, seed=job.seed)
    model = algorithm(job.algo)(
        spec["policy"], venv, seed=job.seed, device="cpu", verbose=0, **spec["kwargs"]
    )
    test_env = gym.make(job.task, split="test", jitter=False)
    frames = []
    marks = checkpoints(job.steps, job.checkpoints)
    for k, mark in enumerate(marks):
        model.learn(mark - model.num_timesteps, reset_num_timesteps=k == 0)
        count = job.episodes if mark == marks[-1] else job.curve_episodes
        frames.append(_evaluate(model, test_env, count, job, int(model.num_timesteps)))
    venv.close()
    test_env.close()
    path = folder / job.file
    frame = pd.concat(frames, ignore_index=True)
    write_text(path, frame.to_csv(index=False))
    return path


def _evaluate(model: Any, env: Any, count: int, job: Job, steps: int) -> pd.DataFrame:
    """``model`` on the first ``count`` paired test episodes, scored on its track's measure."""
    policy = SB3Policy(model, ALGOS[job.algo]["label"])
    rows = []
    for e in range(count):
        row, _ = run_episode(env, policy, e)
        row.pop("seed")  # the episode's reset seed, which is its number here
        rows.append({"episode": e, **row})
    frame = pd.DataFrame(rows)
    track = track_for(job.task, env)
    frame["value"] = track.values(frame, env.unwrapped.params)
    frame.insert(0, "steps", steps)
    frame.insert(0, "seed", job.seed)
    frame.insert(0, "algo", job.algo)
    frame.insert(0, "task", job.task)
    return frame


def run_all(jobs: Sequence[Job], folder: Path, workers: int, progress: bool) -> pd.DataFrame:
    """Every job whose file ``folder / RUNS`` lacks, ``workers`` at a time; then all of them."""
    runs = folder / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    todo = [job for job in jobs if not (runs / job.file).is_file()]
    t0 = time.perf_counter()
    if todo:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(run_job, job, runs) for job in todo]
            for done, future in enumerate(futures, 1):
                path = future.result()
                if progress:
                    print(
                        f"[{done}/{len(todo)}] {path.name} ({time.perf_counter() - t0:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    return pd.concat([pd.read_csv(runs / job.file) for job in jobs], ignore_index=True)


# --------------------------------------------------------------------------- scoring


def board_means(folder: Path) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """A finished benchmark's episodes (the scored policies', on each track's measure in
    ``value``) and its tasks' facts."""
    episodes, facts, _ = benchmark.read_run(folder)
    scored = benchmark.scored(episodes).copy()
    scored["value"] = [
        row[TRACKS[facts[row["task"]]["track"]].measure.key] for _, row in scored.iterrows()
    ]
    return scored, facts


def task_scores(played: pd.DataFrame, board: pd.DataFrame, facts: dict) -> pd.DataFrame:
    """Each (task, algo, seed, steps)'s score on the board's scale, and its success rate.

    The agent's episodes must be the board's (the same start times), or the two are not paired
    and the command says which task differs."""
    rows = []
    for (task, steps, algo, seed), part in played.groupby(["task", "steps", "algo", "seed"]):
        track = TRACKS[facts[task]["track"]]
        on_board = board[board["task"] == task]
        zero = on_board[on_board["policy"] == track.zero].set_index("episode")
        top = on_board[on_board["policy"] == track.top].set_index("episode")
        mine = part.set_index("episode")
        if not set(mine.index) <= set(zero.index):
            raise ValueError(
                f"{task}: episodes {sorted(set(mine.index) - set(zero.index))} are not on the "
                f"board (it has {len(zero)}): run the benchmark with at least as many episodes"
            )
        starts = zero.loc[mine.index, "start_time"].astype(str)
        if (starts != mine["start_time"].astype(str)).any():
            raise ValueError(f"{task}: the agent's episodes start elsewhere than the board's")
        z, t = float(zero["value"].mean()), float(top["value"].mean())
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
    for task, on_board in board.groupby("task", sort=False):
        track = TRACKS[facts[task]["track"]]
        means = on_board.groupby("policy")["value"].mean()
        z, t = float(means[track.zero]), float(means[track.top])
        for policy, value in means.items():
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
        for algo in [algo for algo in ALGOS if algo in set(part["algo"])]:
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
        for algo in [algo for algo in ALGOS if algo in set(here["algo"])]:
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
                f"| {ALGOS[algo]['label']} | {agg['mean']:.3f} [{agg['ci95'][0]:.3f}, "
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
                f"| {name} | {ALGOS[algo]['label']} | {agg['mean']:.3f} [{agg['ci95'][0]:.3f}, "
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
    colours = dict(zip(ALGOS, ("tab:blue", "tab:orange", "tab:green", "tab:purple"), strict=True))
    for ax, task in zip(axes.flat, tasks, strict=False):
        entry = summary["tasks"][task]
        for algo, run in entry["algos"].items():
            c = run["curve"]
            ax.plot(c["steps"], c["mean"], color=colours[algo], label=ALGOS[algo]["label"])
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


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip scratch",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env(parser, [], ids=SUITE, repeat=True, default_text="every suite task")
    parser.add_argument(
        "--algo",
        nargs="+",
        choices=list(ALGOS),
        default=list(DEFAULT_ALGOS),
        help=f"the algorithms (default: {' '.join(DEFAULT_ALGOS)})",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=list(SEEDS), help="training seeds (default: 0 1 2)"
    )
    parser.add_argument(
        "--steps", type=int, default=STEPS, help=f"the budget of every run (default: {STEPS:,})"
    )
    parser.add_argument(
        "--checkpoints",
        type=int,
        default=CHECKPOINTS,
        help=f"evaluations along each run (default: {CHECKPOINTS})",
    )
    parser.add_argument(
        "--episodes", type=int, default=30, help="paired test episodes at the end (default: 30)"
    )
    parser.add_argument(
        "--curve-episodes",
        type=int,
        default=CURVE_EPISODES,
        help=f"paired test episodes at the other checkpoints (default: {CURVE_EPISODES})",
    )
    parser.add_argument(
        "--board",
        type=Path,
        required=True,
        help="a finished `powertrip benchmark --out DIR` run on as many "
        "episodes at least: its scores' PowerTrip and reference",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results/scratch"),
        help="the run's folder; a stopped run goes on where it was",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="runs side by side, one core each (default: the cores)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI's smoke run: 2,048 steps, 2 checkpoints, 2 episodes, 2 seeds",
    )
    add_no_progress(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Train, evaluate and score; prints the Markdown and, as its last line, the JSON."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.checkpoints, args.episodes, args.curve_episodes = 2048, 2, 2, 2
        args.seeds = args.seeds[:2]
    for flag, value in (
        ("--steps", args.steps),
        ("--checkpoints", args.checkpoints),
        ("--episodes", args.episodes),
        ("--curve-episodes", args.curve_episodes),
        ("--jobs", args.jobs),
    ):
        if value < 1:
            parser.error(f"{flag} {value}: must be at least 1")
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds {args.seeds}: each seed once")
    try:
        board, facts = board_means(args.board)
    except ValueError as exc:
        parser.error(f"--board {str(args.board)!r}: {exc}")
    tasks = args.env or [task for task in suite_ids() if task in facts]
    missing = [task for task in tasks if task not in facts]
    if missing:
        parser.error(f"--board {str(args.board)!r} has no {', '.join(missing)}: benchmark them")
    jobs = [
        Job(task, algo, seed, args.steps, args.checkpoints, args.curve_episodes, args.episodes)
        for task in tasks
        for algo in args.algo
        for seed in args.seeds
    ]
    played = run_all(jobs, args.out, args.jobs, progress=not args.no_progress)
    scores = task_scores(played, board[board["task"].isin(tasks)], facts)
    rules = rule_scores(board[board["task"].isin(tasks)], facts)
    summary = summarise(scores, rules, facts, tasks)
    summary["budget"] = {
        "steps": args.steps,
        "seeds": list(args.seeds),
        "n_envs": N_ENVS,
        "algos": {a: ALGOS[a] for a in args.algo},
        "episodes": args.episodes,
        "curve_episodes": args.curve_episodes,
    }
    markdown = to_markdown(summary, args.steps, args.seeds)
    write_text(args.out / CSV, played.to_csv(index=False))
    write_text(args.out / MARKDOWN, markdown)
    write_text(args.out / COMPACT, compact_markdown(summary))
    write_text(args.out / JSON, json.dumps(summary) + "\n")
    curves_figure(summary, args.out / CURVES)
    print(markdown)
    print(json.dumps(summary["aggregate_by_track"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
