"""The carbon tasks' deadlines, from the train days: 1.25x the Optimiser's mean time to accuracy
over the first 30 train episodes, played without jitter under a 48 h budget (so that no episode
is cut short), per carbon scenario.

The deadline must not come from the days a task is judged on: a rule or an agent tuned on the
train days would otherwise meet a looser deadline there than on the test days. This script
prints the train and the test means side by side, so the slack each split meets is on record
(docs/carbon.md, "The deadline").

    python benchmarks/carbon_deadline.py [--episodes 30] [--scenario carbon ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from powertrip_env.baselines.registry import make_policy
from powertrip_env.env import PowerTripEnv
from powertrip_env.harness.evaluation.evaluate import run_episode
from powertrip_env.scenario import load_scenario

SLACK = 1.25  # the deadline over the best time found (Wiesner et al., Middleware '21: slack)
OPEN_BUDGET_H = 48.0  # long enough that no episode of the Optimiser is cut


def optimiser_tta_h(scenario: str, split: str, episodes: int, seed: int = 0) -> np.ndarray:
    """The Optimiser's TTA (h) on ``episodes`` episodes of ``split`` (reset with seed + e)."""
    loaded = load_scenario(scenario)
    episode = dataclasses.replace(loaded.episode, time_budget_h=OPEN_BUDGET_H)
    env = PowerTripEnv(
        scenario=dataclasses.replace(loaded, episode=episode), jitter=False, split=split
    )
    policy = make_policy("Optimiser", env.unwrapped.params.n_sites, seed)
    out = []
    for e in range(episodes):
        row, _ = run_episode(env, policy, seed + e)
        out.append(float(row["tta_h"]))
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--scenario", nargs="+", default=["carbon", "carbon-measured"])
    args = parser.parse_args()
    for scenario in args.scenario:
        t0 = time.perf_counter()
        train = optimiser_tta_h(scenario, "train", args.episodes)
        test = optimiser_tta_h(scenario, "test", args.episodes)
        deadline = round(SLACK * float(train.mean()), 1)
        print(
            f"{scenario}: Optimiser mean TTA train {train.mean():.2f} h"
            f" (slowest {train.max():.2f}),"
            f" test {test.mean():.2f} h (slowest {test.max():.2f}); deadline {SLACK} x train mean"
            f" = {deadline:.1f} h: slack {deadline / train.mean():.3f} on train,"
            f" {deadline / test.mean():.3f} on test; test episodes over it by the Optimiser:"
            f" {int((test > deadline).sum())} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
