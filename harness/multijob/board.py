"""The multi-job track's board: every joint policy on the same test episodes of each task.

Per episode and policy: the jobs' mean TTA, the makespan (the last job's end from the first
arrival), Jain's fairness index over the jobs' slowdowns (each job's TTA over its TTA alone on
all the power under HorizonRule), the energy and the carbon. Per task: the bracket between the
alone bound and the hindsight reference (``JointHindsight``), whether the reference was
beaten by a contender in any episode (``reference_never_beaten``) and the bound by anything
(``bound_holds``), and the coordination room: the independent HorizonRule's mean TTA over the
coordinated rule's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env import multijob
from powertrip_env.atomic import write_text
from powertrip_env.baselines.multijob import joint_policy
from powertrip_env.harness.arguments import add_episodes, add_out, add_seed
from powertrip_env.harness.multijob.play import (
    BOUND,
    HINDSIGHT,
    alone,
    fits,
    hindsight,
    load_agent,
    play,
    task_env,
)
from powertrip_env.harness.tracks.track import bound_holds, never_beaten

RULES = ("Independent-PowerTrip", "Independent-HorizonRule", "Coordinated")
"""The joint rules every board plays: each job on its own (PowerTrip, the SoCC '25 rule; the
strongest single-job rule), and the central scheduler."""
COORDINATED = "Coordinated"
INDEPENDENT = "Independent-HorizonRule"
BOARD_FILE = "multijob.json"
EPISODES_FILE = "multijob-episodes.csv"
BOARD_KEY = "multijob"  # its board's key in the benchmark's leaderboard.json


def jain(values: np.ndarray) -> float:
    """Jain's fairness index of ``values`` (1: all equal; 1/K: one takes everything)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.sum() ** 2 / (values.size * np.square(values).sum()))


def episode_row(task: str, policy: str, episode: int, jobs: dict, yardstick: np.ndarray) -> dict:
    """One episode's scores from its per-job results (``MultiJobEnv.job_results``);
    ``yardstick`` (K,) each job's TTA alone, the slowdowns' denominators."""
    tta = jobs["tta_h"]
    return {
        "task": task,
        "policy": policy,
        "episode": episode,
        "mean_tta_h": float(tta.mean()),
        "makespan_h": float((jobs["arrival_h"] + tta).max()),
        "jain": jain(tta / yardstick),
        "energy_kwh": float(jobs["energy_kwh"].sum()),
        "carbon_kg": float(jobs["carbon_kg"].sum()),
        "jobs_succeeded": int(jobs["success"].sum()),
        "job_tta_h": " ".join(f"{x:.4f}" for x in tta),
        "played": policy,
    }


def run_task(
    task: str,
    episodes: int,
    agents: dict[str, Any] | None = None,
    rules: Sequence[str] = RULES,
    first: int = 0,
) -> pd.DataFrame:
    """Every rule (and each trained agent of ``agents``: a ``JointPolicy`` or a callable
    ``(agent, observation) -> action``), the hindsight reference and the alone bound on
    ``episodes`` test episodes of ``task``, paired: episode ``e`` is the reset from seed
    ``first + e`` for all of them."""
    env = task_env(task, jitter=False)  # as the benchmark plays: every measurement exact
    players: dict[str, Any] = {name: joint_policy(name) for name in rules} | dict(agents or {})
    rows = []
    for e in range(first, first + episodes):
        results = {name: play(env, player, e) for name, player in players.items()}
        best, best_name = hindsight(env, e, results)
        yardstick, bound = alone(env)
        for name, jobs in results.items():
            rows.append(episode_row(task, name, e, jobs, yardstick))
        rows.append({**episode_row(task, HINDSIGHT, e, best, yardstick), "played": best_name})
        lower = {**best, "tta_h": bound, "energy_kwh": np.zeros(bound.size)}
        lower["success"] = np.ones(bound.size, dtype=bool)  # a bound reaches every target
        row = episode_row(task, BOUND, e, {**lower, "carbon_kg": np.zeros(bound.size)}, bound)
        rows.append({**row, "energy_kwh": float("nan"), "carbon_kg": float("nan")})
    return pd.DataFrame(rows)


def facts(frame: pd.DataFrame) -> dict[str, Any]:
    """A task's board from its episodes (``run_task``)."""
    task = str(frame["task"].iloc[0])
    spec = multijob.TASKS[task]
    mean = frame.groupby("policy")[["mean_tta_h", "makespan_h", "jain", "energy_kwh"]].mean()
    carbon = frame.groupby("policy")["carbon_kg"].mean()
    has_carbon = bool(multijob.MultiJobEnv.base_has_carbon(spec))  # else no intensity to count
    cost = frame.pivot(index="episode", columns="policy", values="mean_tta_h")
    contenders = [p for p in cost.columns if p not in (HINDSIGHT, BOUND)]
    policies = {
        name: {
            "mean_tta_h": float(row["mean_tta_h"]),
            "makespan_h": float(row["makespan_h"]),
            "jain": None if name == BOUND else float(row["jain"]),
            "energy_kwh": None if name == BOUND else float(row["energy_kwh"]),
            "carbon_kg": None if name == BOUND or not has_carbon else float(carbon[name]),
        }
        for name, row in mean.iterrows()
    }
    played = frame.loc[frame["policy"] == HINDSIGHT, "played"].value_counts()
    upper, lower = float(mean.loc[HINDSIGHT, "mean_tta_h"]), float(mean.loc[BOUND, "mean_tta_h"])
    return {
        "track": "multijob",
        "jobs": list(spec.jobs),
        "allocation": spec.allocation,
        "mean_interarrival_s": spec.mean_interarrival_s,
        "episodes": int(cost.shape[0]),
        "policies": policies,
        "bracket_h": [lower, upper],
        "gap": upper / lower,
        "reference": HINDSIGHT,
        "reference_played": {str(k): int(v) for k, v in played.items()},
        "bound": BOUND,
        "reference_never_beaten": never_beaten(cost, HINDSIGHT, contenders),
        "bound_holds": bound_holds(cost, BOUND),
        "coordination_room": float(mean.loc[INDEPENDENT, "mean_tta_h"])
        / float(mean.loc[COORDINATED, "mean_tta_h"]),
    }


def board(frames: Sequence[pd.DataFrame]) -> dict[str, Any]:
    """The track's board: each task's facts, by task."""
    return {str(f["task"].iloc[0]): facts(f) for f in frames}


def markdown(summary: dict[str, Any]) -> str:
    """The board as Markdown tables, one per task."""
    lines = []
    for task, f in summary.items():
        low, high = f["bracket_h"]
        lines += [
            f"### {task}",
            "",
            f"Jobs {', '.join(f['jobs'])}; allocation {f['allocation']}; {f['episodes']} test "
            f"episodes. Bracket [{low:.2f}, {high:.2f}] h (gap {f['gap']:.3f}); coordination "
            f"room {f['coordination_room']:.3f}; reference never beaten: "
            f"{f['reference_never_beaten']}; bound holds: {f['bound_holds']}.",
            "",
            "| policy | mean TTA (h) | makespan (h) | Jain | energy (kWh) |",
            "|---|---:|---:|---:|---:|",
        ]
        ranked = sorted(f["policies"].items(), key=lambda kv: kv[1]["mean_tta_h"])
        for name, p in ranked:
            energy = "–" if p["energy_kwh"] is None else f"{p['energy_kwh']:,.0f}"
            fair = "–" if p["jain"] is None else f"{p['jain']:.3f}"
            lines.append(
                f"| {name} | {p['mean_tta_h']:.2f} | {p['makespan_h']:.2f} | {fair} | {energy} |"
            )
        lines.append("")
    return "\n".join(lines)


def summary_markdown(summary: dict[str, Any]) -> str:
    """The board in one table, a line per task: the rules, the reference, the bound, the best
    trained agent, and the coordination room."""
    lines = [
        "| task | jobs | Independent-PowerTrip | Independent-HorizonRule | Coordinated | "
        "best agent | JointHindsight | Alone-Bound | coordination room |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    known = {*RULES, HINDSIGHT, BOUND}
    for task, f in summary.items():
        p = f["policies"]
        agents = sorted((v["mean_tta_h"], k) for k, v in p.items() if k not in known)
        best = f"{agents[0][1]} {agents[0][0]:.2f}" if agents else "–"
        cells = [f"{p[name]['mean_tta_h']:.2f}" for name in (*RULES, HINDSIGHT, BOUND)]
        lines.append(
            f"| {task} | {len(f['jobs'])} | {' | '.join(cells[:3])} | {best} | "
            f"{' | '.join(cells[3:])} | {f['coordination_room']:.3f} |"
        )
    episodes = {f["episodes"] for f in summary.values()}
    return "\n".join(
        [
            f"The jobs' mean TTA (h) over {', '.join(map(str, sorted(episodes)))} paired test "
            "episodes a task; the coordination room is the independent HorizonRule's over the "
            "coordinated rule's.",
            "",
            *lines,
        ]
    )


def read_episodes(folders: Sequence[Path]) -> list[pd.DataFrame]:
    """The episodes of finished runs (``multijob-episodes.csv`` in each folder), one frame per
    task; a task two runs both hold is refused (which run's would stand is not clear)."""
    frames: dict[str, pd.DataFrame] = {}
    for folder in folders:
        path = Path(folder) / EPISODES_FILE
        if not path.is_file():
            raise ValueError(
                f"{path} not found: give the --out folder of a `powertrip multijob` run"
            )
        for task, frame in pd.read_csv(path).groupby("task", sort=False):
            if task in frames:
                raise ValueError(f"{path}: task {task!r} is in an earlier run too; merge each once")
            frames[str(task)] = frame.reset_index(drop=True)
    return list(frames.values())


def read_board(folder: Path) -> dict[str, Any]:
    """A finished run's board (``multijob.json`` in ``folder``); a clear error if there is none."""
    path = Path(folder) / BOARD_FILE
    if not path.is_file():
        raise ValueError(f"{path} not found: give the --out folder of a `powertrip multijob` run")
    return json.loads(path.read_text())


def write(folder: Path, frames: Sequence[pd.DataFrame]) -> dict[str, Any]:
    """Write the board (``multijob.json``, ``multijob.md``, ``multijob-episodes.csv``) into
    ``folder``, and add it to the benchmark's ``leaderboard.json`` there under ``"multijob"``
    when one is there; returns the board."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = board(frames)
    episodes = pd.concat(frames, ignore_index=True).to_csv(index=False)
    write_text(folder / EPISODES_FILE, episodes)
    write_text(folder / BOARD_FILE, json.dumps(summary, indent=1) + "\n")
    write_text(folder / "multijob.md", markdown(summary))
    benchmark = folder / "leaderboard.json"
    if benchmark.exists():
        data = json.loads(benchmark.read_text())
        data[BOARD_KEY] = summary
        write_text(benchmark, json.dumps(data) + "\n")
    return summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="powertrip multijob", description=__doc__)
    parser.add_argument(
        "--task",
        action="append",
        choices=list(multijob.TASKS),
        default=None,
        help="a multi-job task (repeat for several; default: every registered one)",
    )
    add_episodes(parser, 30)
    add_seed(parser, "the first episode's seed; episode e is the reset from seed + e")
    add_out(
        parser,
        None,
        what="folder for multijob.json (and a benchmark's leaderboard.json)",
        required=True,
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar="DIR",
        help="make one board of finished runs' episodes (each --out of a run) instead of playing",
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=MODEL.zip",
        help="a shared-parameter PPO agent saved by examples/multijob_ppo.py (raw or "
        "candidate-set), as a row NAME",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    agents = {}
    for given in args.agent:
        name, sep, path = given.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise SystemExit(
                f"powertrip multijob: --agent {given!r}: give NAME=MODEL.zip, a saved file"
            )
        agents[name] = load_agent(path, name)
    tasks = args.task or list(multijob.TASKS)
    for name, agent in agents.items():
        unfit = [task for task in tasks if not fits(agent, task)]
        if unfit and not args.merge:
            raise SystemExit(
                f"powertrip multijob: --agent {name}: it was trained on another number of sites "
                f"than {', '.join(unfit)} has; name its task with --task"
            )
    if args.merge:
        try:
            frames = read_episodes(args.merge)
        except ValueError as exc:
            raise SystemExit(f"powertrip multijob --merge: {exc}") from None
    else:
        frames = [run_task(task, args.episodes, agents, first=args.seed) for task in tasks]
    summary = write(Path(args.out), frames)
    print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
