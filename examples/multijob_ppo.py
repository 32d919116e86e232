"""Train one PPO policy shared by every job of a multi-job task, and compare it with the rules.

    pip install -e ".[train,pettingzoo]"
    python examples/multijob_ppo.py                                # PowerTrip-MultiJob-v0
    python examples/multijob_ppo.py --steps 300000 --episodes 30   # longer, as the board's row
    python examples/multijob_ppo.py --candidates                   # pick among candidate sets

Reads top to bottom: the arguments, the training (Stable-Baselines3's PPO on
``powertrip_env.agents.multijob.TurnEnv``, which hands each job's round to the same network in
turn: independent learners with shared parameters; with ``--candidates`` the agent picks one of
a few sets built from the rules instead of each site), the saved model, and the paired comparison
on the task's test days with the joint rules (each job on its own with PowerTrip or
HorizonRule, and the central scheduler) and the alone bound, as ``powertrip multijob`` plays
them. Everything goes to ``--out``: ``ppo-shared.zip`` (or ``ppo-candidates.zip``) and the
board (``multijob.md``, ``multijob.json``, ``multijob-episodes.csv``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from powertrip_env import multijob
from powertrip_env.agents.multijob import train
from powertrip_env.baselines.multijob import LearnedCandidates
from powertrip_env.harness.multijob.board import markdown, run_task, write
from powertrip_env.harness.multijob.play import as_policy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=list(multijob.TASKS), default=multijob.DEFAULT_TASK)
    parser.add_argument("--steps", type=int, default=30_000, help="job-rounds of training")
    parser.add_argument("--episodes", type=int, default=5, help="paired test episodes")
    parser.add_argument(
        "--seed", type=int, default=0, help="training's seed (the test episodes are 0, 1, ...)"
    )
    parser.add_argument("--out", default="runs/multijob_ppo")
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="choose among candidate sets (HorizonRule's alone, the central scheduler's, ...)",
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.episodes < 1:
        parser.error(f"--steps {args.steps} and --episodes {args.episodes} must be at least 1")

    started = time.perf_counter()
    model = train(args.task, steps=args.steps, seed=args.seed, candidates=args.candidates)
    print(f"trained {args.steps} job-rounds in {time.perf_counter() - started:.0f} s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "PPO-candidates" if args.candidates else "PPO-shared"
    model.save(out / f"{name.lower()}.zip")
    agent = LearnedCandidates(model, name) if args.candidates else as_policy(model)
    frame = run_task(args.task, args.episodes, {name: agent})
    print(markdown(write(out, [frame])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
