"""A long random-action fuzz of every registered ID (``slow``: run it with ``-m slow``).

Over at least 1,000,000 environment steps, across every registered ID, both action modes and
both observation modes: every observation is finite and inside its space, every reward is
finite, and every ended episode reports ``tta_h`` no later than its time budget. Most steps go
through the native vector env (the same dynamics, many episodes per call); a share goes through
``gym.make`` with the full ``observation_space.contains`` check and the env checker's wrappers.
The selection probability of each episode is drawn at random, so episodes range from nearly
idle to all sites every round.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env

MODES = list(itertools.product(("multibinary", "multidiscrete"), ("flat", "dict")))
COMBOS = [(env_id, a, o) for env_id in powertrip_env.ENV_IDS for a, o in MODES]
TOTAL_STEPS = 1_000_000
SINGLE_STEPS = 2_000  # per combination through gym.make
NUM_ENVS = 64
VECTOR_STEPS = -(-(TOTAL_STEPS // len(COMBOS) - SINGLE_STEPS) // NUM_ENVS)  # vector calls each

pytestmark = pytest.mark.slow


def _leaves(obs):
    return obs.values() if isinstance(obs, dict) else [obs]


def _inside(obs, space) -> bool:
    """Every batched observation within the single space's bounds (vectorised)."""
    if isinstance(space, gym.spaces.Dict):
        return all(_inside(obs[k], space[k]) for k in space.spaces)
    return bool(np.all(obs >= space.low) and np.all(obs <= space.high))


@pytest.mark.parametrize(("env_id", "action_mode", "obs_mode"), COMBOS)
def test_random_actions_keep_every_step_finite_in_space_and_within_budget(
    env_id: str, action_mode: str, obs_mode: str
) -> None:
    rng = np.random.default_rng(abs(hash((env_id, action_mode, obs_mode))) % 2**32)
    steps = episodes = 0

    env = gym.make(env_id, action_mode=action_mode, obs_mode=obs_mode)
    budget_h = env.unwrapped.params.time_budget_s / 3600.0
    n = env.unwrapped.params.n_sites
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    p = rng.uniform(0.05, 0.95)
    for _ in range(SINGLE_STEPS):
        obs, reward, terminated, truncated, info = env.step((rng.random(n) < p).astype(np.int64))
        steps += 1
        assert env.observation_space.contains(obs)
        assert all(np.isfinite(leaf).all() for leaf in _leaves(obs))
        assert np.isfinite(reward)
        if terminated or truncated:
            assert info["tta_h"] <= budget_h + 1e-9
            assert info["elapsed_s"] <= budget_h * 3600.0 + 1e-6
            episodes += 1
            obs, _ = env.reset()
            p = rng.uniform(0.05, 0.95)
    env.close()

    vec = gym.make_vec(env_id, num_envs=NUM_ENVS, action_mode=action_mode, obs_mode=obs_mode)
    space = vec.single_observation_space
    obs, _ = vec.reset(seed=int(rng.integers(2**31)))
    probs = rng.uniform(0.05, 0.95, size=(NUM_ENVS, 1))
    for _ in range(VECTOR_STEPS):
        actions = (rng.random((NUM_ENVS, n)) < probs).astype(np.int64)
        obs, rewards, terminated, truncated, info = vec.step(actions)
        steps += NUM_ENVS
        assert _inside(obs, space)
        assert all(np.isfinite(leaf).all() for leaf in _leaves(obs))
        assert np.isfinite(rewards).all()
        ended = terminated | truncated  # tta_h is reported for every row, 0.0 before the end
        assert (info["tta_h"][ended] > 0.0).all() and (info["tta_h"] <= budget_h + 1e-9).all()
        episodes += int(ended.sum())
        restarted = ended
        probs[restarted] = rng.uniform(0.05, 0.95, size=(int(restarted.sum()), 1))
    vec.close()
    assert steps * len(COMBOS) >= TOTAL_STEPS
    print(f"{env_id} {action_mode} {obs_mode}: {steps} steps, {episodes} episodes ended")
