"""Tune ``CarbonPlanner``'s margin on train days: the sweep behind ``TUNED_MARGIN``.

    python benchmarks/carbon_planner_tune.py --episodes 20
    python benchmarks/carbon_planner_tune.py --env PowerTrip-Carbon-v2 --margins 0,0.1,0.2

``CarbonPlanner`` (``baselines/carbon_planner.py``) plans the progress still needed × (1 +
margin) before the deadline: its pace is judged at the current progress, which each round
teaches less as training goes on, and the LP switches sets between blocks for free, so a plan
at margin 0 is optimistic. This plays the planner at every margin and ``CarbonGreedy`` (the
shipped greedy rule, for scale) on the same paired train episodes (episode e resets with seed
e, never a test day), without jitter as the carbon rules' reserve was swept
(docs/carbon.md), and prints each one's mean carbon cost (kg: grid carbon, plus
``carbon_ref_kg`` for a missed deadline), its grid carbon, its share of deadlines met and its
paired difference to the best margin with its standard error. The deadline is the task's own
(``--env``), never written here. About a minute per margin for 20 episodes.
"""

from __future__ import annotations

import argparse
import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.carbon_planner import CarbonPlanner
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg
from powertrip_env.harness.evaluation.evaluate import evaluate

MARGINS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
REFERENCE = "CarbonGreedy"


def cell_name(margin: float) -> str:
    return f"margin={margin:g}"


def grid(margins: list[float]) -> list[Policy]:
    """A ``CarbonPlanner`` for every margin, named by it."""
    out = []
    for margin in margins:
        policy = CarbonPlanner(margin=margin)
        policy.name = cell_name(margin)
        out.append(policy)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-Carbon-v2")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--margins", default=",".join(f"{m:g}" for m in MARGINS))
    parser.add_argument("--jitter", action="store_true", help="with the episodes' jitter")
    args = parser.parse_args(argv)
    margins = [float(m) for m in args.margins.split(",")]
    result = evaluate(
        args.env,
        [REFERENCE, *grid(margins)],
        episodes=args.episodes,
        split="train",
        env_kwargs={"jitter": bool(args.jitter)},
        progress=False,
    )
    frame = result.episodes
    # the task's price of a missed deadline, as its scenario states it
    stated = SimpleNamespace(
        carbon_ref_kg=gym.make(args.env).unwrapped.scenario.episode.carbon_ref_kg
    )
    frame = frame.assign(cost_kg=carbon_cost_from_kg(stated, frame["carbon_kg"], frame["success"]))
    cost = frame.pivot(index="episode", columns="policy", values="cost_kg")
    carbon = frame.pivot(index="episode", columns="policy", values="carbon_kg")
    success = frame.pivot(index="episode", columns="policy", values="success").astype(bool)
    names = [cell_name(m) for m in margins]
    best = min(names, key=lambda name: cost[name].mean())
    jitter = "with" if args.jitter else "without"
    print(f"{args.env}: {args.episodes} train episodes {jitter} jitter")
    print("| policy | carbon cost (kg) | grid carbon (kg) | in time | vs best (± s.e.) |")
    print("|---|---:|---:|---:|---:|")
    for name in [REFERENCE, *names]:
        diff = cost[name] - cost[best]
        se = float(np.std(diff) / math.sqrt(len(diff)))
        print(
            f"| {name} | {cost[name].mean():.1f} | {carbon[name].mean():.1f} | "
            f"{success[name].mean():.0%} | {diff.mean():+.1f} ± {se:.1f} |"
        )
    print(f"\nbest: {best} at {cost[best].mean():.1f} kg")


if __name__ == "__main__":
    main()
