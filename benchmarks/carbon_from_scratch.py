"""SB3's PPO from scratch on a carbon task, as a new user would run it: ``PPO("MlpPolicy")`` on
the raw action, 8 envs, a budget of steps, then the benchmark's paired test episodes without
jitter. Prints the share of episodes in time, the grid carbon and the carbon cost per seed
(docs/carbon.md, "Learning from scratch").

    python benchmarks/carbon_from_scratch.py [--env PowerTrip-Carbon-v2] [--steps 100000]
        [--seeds 0 1 2] [--shaping progress] [--episodes 30]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg


def run(
    env_id: str,
    steps: int,
    seed: int,
    shaping: str | None,
    episodes: int,
    env_kwargs: dict,
    n_envs: int = 8,
    ppo_kwargs: dict | None = None,
) -> dict[str, float]:
    """Train one seed, then play ``episodes`` test episodes (reset with seeds 0, 1, ...)."""
    kwargs = {**env_kwargs, **({"shaping": shaping} if shaping else {})}
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=kwargs)
    t0 = time.perf_counter()
    model = PPO("MlpPolicy", venv, seed=seed, verbose=0, device="cpu", **(ppo_kwargs or {}))
    model.learn(steps)
    trained_s = time.perf_counter() - t0
    env = gym.make(env_id, split="test", jitter=False, **env_kwargs)
    params = env.unwrapped.params
    carbon, success = [], []
    for e in range(episodes):
        obs, info = env.reset(seed=e)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        carbon.append(float(info["carbon_kg"]))
        success.append(bool(info["success"]))
    cost = carbon_cost_from_kg(params, np.array(carbon), np.array(success))
    return {
        "in_time": float(np.mean(success)),
        "carbon_kg": float(np.mean(carbon)),
        "cost_kg": float(np.mean(cost)),
        "train_s": trained_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-Carbon-v2")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--shaping", default=None)
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument(
        "--carbon-obs",
        choices=("on", "off", "registered"),
        default="registered",
        help="the carbon observation: as the ID registers it, or forced",
    )
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--gamma", type=float, default=None, help="PPO's (default: SB3's)")
    args = parser.parse_args()
    ppo_kwargs = {} if args.gamma is None else {"gamma": args.gamma}
    env_kwargs = {} if args.carbon_obs == "registered" else {"carbon_obs": args.carbon_obs == "on"}
    rows = []
    for seed in args.seeds:
        row = run(
            args.env,
            args.steps,
            seed,
            args.shaping,
            args.episodes,
            env_kwargs,
            args.n_envs,
            ppo_kwargs,
        )
        rows.append(row)
        print(
            f"{args.env} shaping={args.shaping} seed {seed}: in time {row['in_time']:.0%}, "
            f"grid carbon {row['carbon_kg']:.1f} kg, carbon cost {row['cost_kg']:.1f} kg "
            f"(trained in {row['train_s']:.0f} s)",
            flush=True,
        )
    print(
        f"mean over {len(rows)} seeds: in time {np.mean([r['in_time'] for r in rows]):.0%}, "
        f"carbon cost {np.mean([r['cost_kg'] for r in rows]):.1f} kg"
    )


if __name__ == "__main__":
    main()
