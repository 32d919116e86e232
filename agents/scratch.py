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

from powertrip_env.agents.scratch_report import (
    COMPACT,
    CSV,
    CURVES,
    JSON,
    LABELS,
    MARKDOWN,
    RUNS,
    board_means,
    compact_markdown,
    curves_figure,
    rule_scores,
    summarise,
    task_scores,
    to_markdown,
)
from powertrip_env.atomic import write_text
from powertrip_env.harness.arguments import (
    SUITE,
    add_env,
    add_episodes,
    add_no_progress,
    add_seed,
    non_negative_int,
    positive_int,
)
from powertrip_env.harness.evaluation.evaluate import run_episode
from powertrip_env.harness.models.policies import SB3Policy
from powertrip_env.harness.tracks import measure_of
from powertrip_env.tasks import suite_ids

N_ENVS = 8  # make_vec_env's envs, as the from-scratch runs used
# The rollout of PPO and MaskablePPO: 256 steps of each of the 8 envs, 2,048 a update (SB3's
# default n_steps of 2,048 would make a budget of 50,000 steps three updates). A2C keeps its
# default (5 steps per env); the rest is SB3's and sb3-contrib's defaults.
ON_POLICY_STEPS = 256
ALGOS: dict[str, dict[str, Any]] = {
    "ppo": {"policy": "MlpPolicy", "kwargs": {"n_steps": ON_POLICY_STEPS}},
    "maskable_ppo": {
        "policy": "MlpPolicy",
        "kwargs": {"n_steps": ON_POLICY_STEPS},
    },
    "a2c": {"policy": "MlpPolicy", "kwargs": {}},
    "recurrent_ppo": {
        "policy": "MlpLstmPolicy",
        "kwargs": {"n_steps": ON_POLICY_STEPS},
    },
}
DEFAULT_ALGOS = ("ppo", "maskable_ppo", "a2c")
STEPS = 50_000  # the budget of every run (docs/agents.md says what it buys)
CHECKPOINTS = 5  # evaluations along the way, the last at the end of the budget
CURVE_EPISODES = 5  # paired test episodes at the checkpoints before the last (30 at the last)
SEEDS = (0, 1, 2)


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
    episode_seed: int = 0  # episode e is reset with episode_seed + e, as the board's are

    @property
    def file(self) -> str:
        """Its episodes' file, named by all of it: a run with another budget trains anew."""
        budget = f"{self.steps}x{self.checkpoints}_e{self.curve_episodes}-{self.episodes}"
        if self.episode_seed:
            budget += f"_s{self.episode_seed}"
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
    policy = SB3Policy(model, LABELS[job.algo])
    rows = []
    for e in range(count):
        row, _ = run_episode(env, policy, job.episode_seed + e)
        row.pop("seed")  # the episode's reset seed: episode_seed + its number
        rows.append({"episode": e, **row})
    frame = pd.DataFrame(rows)
    frame["value"] = measure_of(job.task, env, frame)
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
        "--seeds",
        type=non_negative_int,
        nargs="+",
        default=list(SEEDS),
        help="training seeds (default: 0 1 2)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=STEPS,
        help=f"the budget of every run (default: {STEPS:,})",
    )
    parser.add_argument(
        "--checkpoints",
        type=positive_int,
        default=CHECKPOINTS,
        help=f"evaluations along each run (default: {CHECKPOINTS})",
    )
    add_episodes(parser, 30, "paired test episodes at the end")
    add_seed(parser, "episode e of the evaluation is reset with seed + e, as the board's were")
    parser.add_argument(
        "--curve-episodes",
        type=positive_int,
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
        type=positive_int,
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
        Job(
            task,
            algo,
            seed,
            args.steps,
            args.checkpoints,
            args.curve_episodes,
            args.episodes,
            args.seed,
        )
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
