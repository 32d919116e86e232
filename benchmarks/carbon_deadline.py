"""The carbon tasks' deadlines, measured on both splits.

A carbon task sets each episode's deadline when it starts (``[episode] deadline_slack``,
``dynamics.params.episode_budgets``): the slack times an estimate of its time to accuracy,
``deadline_ref_h`` scaled by how much less compute the sites offered over the day before than
on the train days. ``deadline_ref_h`` is the Optimiser's mean time to accuracy over the first 30
train episodes, played without jitter and without a deadline that could cut them (48 h), which
this script prints. It then gives, per split, each episode's deadline over that best time
found: the slack the episodes meet, which must not depend on the days a task is judged on
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
from powertrip_env.units import s_to_h

OPEN_BUDGET_H = 48.0  # long enough that no episode of the Optimiser is cut


def optimiser_runs(
    scenario: str, split: str, episodes: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The Optimiser's TTA (h) on ``episodes`` episodes of ``split`` (reset with seed + e),
    without a deadline to cut them, and the deadline (h) each would have in the scenario as
    shipped. Both runs start where the shipped task does when its cap is ``OPEN_BUDGET_H``."""
    loaded = load_scenario(scenario)
    episode = dataclasses.replace(
        loaded.episode, time_budget_h=OPEN_BUDGET_H, deadline_slack=0.0, deadline_ref_h=0.0
    )
    env = PowerTripEnv(
        scenario=dataclasses.replace(loaded, episode=episode), jitter=False, split=split
    )
    shipped = PowerTripEnv(scenario=loaded, jitter=False, split=split).unwrapped.params
    policy = make_policy("Optimiser", env.unwrapped.params.n_sites, seed)
    tta, deadline = [], []
    for e in range(episodes):
        row, _ = run_episode(env, policy, seed + e)
        tta.append(float(row["tta_h"]))
        start_s = float(env.unwrapped.state.start_s[0])
        deadline.append(s_to_h(float(shipped.budget_at(start_s))))
    return np.array(tta), np.array(deadline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--scenario", nargs="+", default=["carbon", "carbon-measured"])
    args = parser.parse_args()
    for scenario in args.scenario:
        t0 = time.perf_counter()
        ep = load_scenario(scenario).episode
        print(
            f"{scenario}: deadline_slack {ep.deadline_slack:g}, deadline_ref_h"
            f" {ep.deadline_ref_h:g}, cap {ep.time_budget_h:g} h",
            flush=True,
        )
        for split in ("train", "test"):
            tta, deadline = optimiser_runs(scenario, split, args.episodes)
            slack = deadline / tta
            print(
                f"  {split}: Optimiser mean TTA {tta.mean():.2f} h (slowest {tta.max():.2f});"
                f" deadline mean {deadline.mean():.2f} h ({deadline.min():.2f}-"
                f"{deadline.max():.2f}); deadline over TTA mean {slack.mean():.3f}"
                f" (least {slack.min():.3f}); out of the Optimiser's reach:"
                f" {int((tta > deadline).sum())} of {tta.size}"
                f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
