"""How much each policy explores on the measured track: the table of docs/agents.md.

    python benchmarks/exploration.py --model runs/PowerTrip-Measured-v0-ppo-0/best_model.zip

On ``PowerTrip-Measured-v0`` a site's speed is known only once it has trained, so every policy
decides, by rule or by what it learnt, when to try a site it has not measured; each try costs a
join. This plays the saved agent and the adaptive rules on the same test episodes (episode e
resets with seed e, with the scenario's jitter, as ``powertrip evaluate`` plays them) and counts,
per episode, the sites each ever requests, how often its set changes, how many sites it adds,
and how many sites drawn faster than stated (throughput factor above 1.05, read through the
clairvoyant door, for the count only) it never tries. About a minute on two cores.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents.candidates import CandidatePolicy
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import make_policy

RULES = ("ExploringHorizon", "AdaptiveHorizon", "AdaptiveMPC")
FAST = 1.05  # a site drawn at least 5% faster than stated


def play(env_id: str, policy: Policy, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """One test episode: the (rounds, N) sets the policy requested, the sites' drawn throughput
    factors and the episode's TTA in hours."""
    env = gym.make(env_id, split="test")
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    drawn = env.unwrapped.clairvoyant().drawn().throughput
    sets, done = [], False
    while not done:
        action = policy.act(obs, info)
        sets.append(np.asarray(action, dtype=bool))
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    env.close()
    return np.array(sets), np.asarray(drawn), float(info["tta_h"])


def counts(sets: np.ndarray, drawn: np.ndarray) -> dict[str, float]:
    """What one episode's requested sets say about exploring."""
    used = sets.any(axis=0)
    return {
        "sites ever tried": float(used.sum()),
        "set changes": float((sets[1:] != sets[:-1]).any(axis=1).sum()),
        "sites added": float((sets[1:] & ~sets[:-1]).sum()),
        "fast sites never tried": float(((drawn > FAST) & ~used).sum()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a saved candidate-set agent (.zip)")
    parser.add_argument("--env", default="PowerTrip-Measured-v0")
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args(argv)
    from stable_baselines3 import PPO

    n_sites = gym.make(args.env).unwrapped.n_sites
    policies: dict[str, Policy] = {
        "agent": CandidatePolicy(PPO.load(args.model, device="cpu"), "agent"),
        **{name: make_policy(name, n_sites) for name in RULES},
    }
    print(
        "| policy | sites ever tried | set changes | sites added | fast sites never tried "
        "| TTA (h) |\n|---|---:|---:|---:|---:|---:|"
    )
    for name, policy in policies.items():
        rows, tta = [], []
        for seed in range(args.episodes):
            sets, drawn, hours = play(args.env, policy, seed)
            rows.append(counts(sets, drawn))
            tta.append(hours)
        mean = {k: np.mean([r[k] for r in rows]) for k in rows[0]}
        cells = " | ".join(f"{v:.2f}" for v in mean.values())
        print(f"| {name} | {cells} | {np.mean(tta):.2f} |")


if __name__ == "__main__":
    main()
