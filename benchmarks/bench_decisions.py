"""Decisions per second: the candidate-set agent against MyopicOptimal, in the same process.

    python benchmarks/bench_decisions.py            # N = 10 to 16 and 32 (a few minutes)
    python benchmarks/bench_decisions.py --quick    # a rough look
    python benchmarks/bench_decisions.py --only "N = 10"   # the settings whose label says so

MyopicOptimal predicts all 2^m − 1 sets of the m available sites every round; the agent of
``agents/candidates.py`` predicts a pool of at most 4m + 1 sets twice and runs its network once.
Both are timed on the states of their own episodes (each plays its own decisions, so the states
are the ones it meets), through the same ``Policy.act`` a evaluation calls, after a warm-up; the
two sides alternate repeats so that a busy machine slows both alike, and the best repeat counts.
The agent's cost does not depend on its weights, so an untrained network of the shipped shape
stands in for a trained one. It prints a table and, last, one JSON object with every figure.

A measurement, not a test: timings depend on the machine, and CI does not assert them.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3 import PPO

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents.candidates import CandidatePolicy, CandidateSets
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import make_policy
from powertrip_env.scenario.sampling import SiteSampler


def _drawn(n: int) -> dict[str, Any]:
    """``PowerTrip-Random-v0`` arguments for catalogues of exactly ``n`` sites, unpadded."""
    return {"sites": SiteSampler(n_sites=(n, n)), "max_sites": n}


# (label, env ID, gym.make arguments)
SETTINGS: list[tuple[str, str, dict[str, Any]]] = [
    ("N = 10 (PowerTrip-v0)", "PowerTrip-v0", {}),
    # the measured track: the agent's slots are built on the telemetry's estimates, updated
    # every decision (agents/candidates.py, ``estimates_for``); MyopicOptimal plans as stated
    ("N = 10 (PowerTrip-Measured-v0)", "PowerTrip-Measured-v0", {}),
    # the moving track: the same estimates, on a world whose sites slow down and recover
    ("N = 10 (PowerTrip-Moving-v0)", "PowerTrip-Moving-v0", {}),
    *((f"N = {n} (drawn catalogues)", "PowerTrip-Random-v0", _drawn(n)) for n in (12, 14, 16)),
    ("N = 32 (PowerTrip-Large-v0)", "PowerTrip-Large-v0", {}),
]


def decision_timer(env: gym.Env, policy: Policy, decisions: int, seed: int) -> Callable[[], float]:
    """A timer of ``decisions`` calls of ``policy.act``, stepping the env with each decision."""

    def run() -> float:
        obs, info = env.reset(seed=seed)
        policy.reset(env)
        spent = 0.0
        for _ in range(decisions):
            start = time.perf_counter()
            action = policy.act(obs, info)
            spent += time.perf_counter() - start
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                obs, info = env.reset()
                policy.reset(env)
        return decisions / spent

    return run


def agent_policy(env_id: str, kwargs: dict[str, Any]) -> Policy:
    """A candidate agent of the shipped network shape (``agents/configs/ppo.yaml``)."""
    wrapped = CandidateSets(gym.make(env_id, **kwargs))
    arch = {"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation_fn": torch.nn.Tanh}
    model = PPO("MlpPolicy", wrapped, policy_kwargs=arch, device="cpu", seed=0)
    return CandidatePolicy(model, "candidates")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer decisions and repeats")
    parser.add_argument(
        "--only", default="", metavar="TEXT", help="the settings whose label contains TEXT"
    )
    args = parser.parse_args(argv)
    decisions, repeats = (100, 1) if args.quick else (400, 3)
    torch.set_num_threads(1)
    figures: dict[str, Any] = {}
    for label, env_id, kwargs in SETTINGS:
        if args.only not in label:
            continue
        env = gym.make(env_id, **kwargs)
        timers = {"agent": decision_timer(env, agent_policy(env_id, kwargs), decisions, 0)}
        env.reset(seed=0)
        n = env.unwrapped.decision_view().n_sites
        if n <= 16:
            myopic = make_policy("MyopicOptimal", n)
            timers["MyopicOptimal"] = decision_timer(env, myopic, decisions, 0)
        if env.unwrapped.decision_view().measured_track:  # the rule that estimates as it does
            adaptive = make_policy("AdaptiveHorizon", n)
            timers["AdaptiveHorizon"] = decision_timer(env, adaptive, decisions, 0)
        best = dict.fromkeys(timers, 0.0)
        for timer in timers.values():
            timer()  # warm-up: compiles the kernels, builds the subset matrices
        for _ in range(repeats):
            for name, timer in timers.items():
                best[name] = max(best[name], timer())
        row = {f"{name}_per_s": round(rate, 1) for name, rate in best.items()}
        if "MyopicOptimal" in best:
            row["agent_over_myopic"] = round(best["agent"] / best["MyopicOptimal"], 2)
        figures[label] = row
        env.close()
    print(f"{'setting':<30} {'agent/s':>10} {'MyopicOptimal/s':>16} {'ratio':>7}")
    for label, row in figures.items():
        myopic = row.get("MyopicOptimal_per_s")
        ratio = row.get("agent_over_myopic")
        print(
            f"{label:<30} {row['agent_per_s']:>10,.0f} "
            f"{'cannot run' if myopic is None else f'{myopic:,.0f}':>16} "
            f"{'-' if ratio is None else f'{ratio:.2f}x':>7}"
        )
    for label, row in figures.items():
        if "AdaptiveHorizon_per_s" in row:
            print(f"{label}: AdaptiveHorizon {row['AdaptiveHorizon_per_s']:,.0f}/s")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
