"""The carbon rules' reserve, swept on a carbon task's train days: the share of the time left a
rule keeps against its predicted pace being optimistic (``baselines.carbon.TUNED_RESERVE``).

For each rule and reserve, the first ``--episodes`` train episodes without jitter: the mean
grid carbon, the mean carbon cost (a miss priced at the task's ``carbon_ref_kg``) and the
deadlines met. The reserve that ships is the one with the least carbon cost here; the test days
are not looked at (docs/carbon.md, "The carbon rules").

    python benchmarks/carbon_reserve.py [--env PowerTrip-Carbon-v2] [--episodes 20]
        [--reserves 0 0.05 0.1 0.2]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.carbon import CarbonGreedy, DeadlineHorizon, FedZeroExcess
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg
from powertrip_env.harness.evaluation.evaluate import run_episode

RULES = {"CarbonGreedy": CarbonGreedy, "DeadlineHorizon": DeadlineHorizon,
         "FedZeroExcess": FedZeroExcess}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-Carbon-v2")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--reserves", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2])
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    args = parser.parse_args()
    env = gym.make(args.env, split="train", jitter=False)
    params = env.unwrapped.params
    for name in args.rules:
        for reserve in args.reserves:
            t0 = time.perf_counter()
            rows = [run_episode(env, RULES[name](reserve=reserve), e)[0] for e in
                    range(args.episodes)]  # fmt: skip
            kg = np.array([row["carbon_kg"] for row in rows])
            met = np.array([bool(row["success"]) for row in rows])
            cost = carbon_cost_from_kg(params, kg, met)
            print(
                f"{args.env} {name} reserve {reserve:g}: carbon {kg.mean():.1f} kg, cost"
                f" {np.mean(cost):.1f} kg, in time {int(met.sum())}/{met.size}"
                f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
