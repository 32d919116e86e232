"""CI's wheel stage: what a user gets from ``pip install powertrip-env`` (no extras), run from
a folder outside the checkout. Every registered ID is made, passes Gymnasium's ``check_env``
(both render modes included) and plays 100 steps of random actions."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

import powertrip_env

STEPS = 100


def main() -> int:
    where = Path(powertrip_env.__file__).resolve()
    checkout = Path(__file__).resolve().parents[1]
    if checkout in where.parents:
        print(f"wheel stage: powertrip_env was imported from the checkout ({where})")
        return 1
    ids = [k for k, spec in gym.registry.items() if spec.entry_point == powertrip_env.ENTRY_POINT]
    if set(powertrip_env.ENV_IDS) - set(ids):
        print(f"wheel stage: IDs not registered: {set(powertrip_env.ENV_IDS) - set(ids)}")
        return 1
    for env_id in ids:
        check_env(gym.make(env_id).unwrapped)
        env = gym.make(env_id)
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(STEPS):
            *_, terminated, truncated, _info = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        env.close()
        print(f"wheel stage: {env_id}: check_env passed, {STEPS} steps")
    print(f"wheel stage: {len(ids)} IDs from {where.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
