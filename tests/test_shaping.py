"""``shaping="progress"``: a potential-based term beside the objective, which guides every round
and changes no return (Ng, Harada and Russell, ICML '99)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.registry import make_policy

ID = "PowerTrip-Carbon-v2"


def _episode(env: gym.Env, policy_name: str, seed: int) -> tuple[list[float], list[dict]]:
    obs, info = env.reset(seed=seed)
    policy = make_policy(policy_name, env.unwrapped.n_sites)
    policy.reset(env)
    rewards, infos = [], [info]
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        rewards.append(reward)
        infos.append(info)
        if terminated or truncated:
            return rewards, infos


@pytest.mark.parametrize(("env_id", "policy"), [(ID, "PowerTrip"), (ID, "AllSites"),
                                                ("PowerTrip-v0", "PowerTrip")])  # fmt: skip
def test_the_shaping_sums_to_nothing_so_the_return_is_the_objectives(env_id, policy) -> None:
    # catches: a potential not zeroed at the end (the return would gain 1 - TTA/T), a term
    # left out of the reward, or one the info reports apart from what the reward adds
    plain = gym.make(env_id, jitter=False)
    shaped = gym.make(env_id, jitter=False, shaping="progress")
    base, _ = _episode(plain, policy, seed=2)
    rewards, infos = _episode(shaped, policy, seed=2)
    assert len(rewards) == len(base)
    assert infos[0]["reward_shaping"] == 0.0  # reset's info has every term, at 0
    terms = [name for name in infos[-1] if name.startswith("reward_")]
    for reward, info in zip(rewards, infos[1:], strict=True):
        assert reward == pytest.approx(sum(info[name] for name in terms), abs=1e-12)
    assert math.isclose(sum(i["reward_shaping"] for i in infos[1:]), 0.0, abs_tol=1e-9)
    assert math.isclose(sum(rewards), sum(base), rel_tol=0.0, abs_tol=1e-9)


def test_an_idle_round_pays_for_its_time_and_a_fast_one_earns() -> None:
    env = gym.make(ID, jitter=False, shaping="progress")
    env.reset(seed=0)
    n = env.unwrapped.n_sites
    _, _, _, _, idle = env.step(np.zeros(n, dtype=np.int8))
    assert idle["reward_shaping"] < 0.0 and idle["reward_carbon"] <= 0.0
    _, infos = _episode(env, "PowerTrip", seed=0)
    assert max(i["reward_shaping"] for i in infos[1:-1]) > 0.0  # ahead of the deadline's pace


def test_the_vector_env_shapes_as_the_single_env() -> None:
    vec = gym.make_vec(ID, num_envs=2, jitter=False, shaping="progress")
    single = gym.make(ID, jitter=False, shaping="progress")
    _, vinfo = vec.reset(seed=[4, 5])
    assert list(vinfo["reward_shaping"]) == [0.0, 0.0]
    single.reset(seed=4)
    ones = np.ones((2, single.unwrapped.n_sites), dtype=np.int8)
    for _ in range(5):
        _, vr, _, _, vinfo = vec.step(ones)
        _, r, _, _, info = single.step(ones[0])
        assert vr[0] == r and vinfo["reward_shaping"][0] == info["reward_shaping"]


def test_an_unknown_shaping_is_refused_naming_it_the_choices_and_the_scenario() -> None:
    with pytest.raises(ValueError, match=r"shaping='speed'.*allowed: 'progress' or None.*'carbon'"):
        gym.make(ID, shaping="speed")
    with pytest.raises(ValueError, match=r"shaping='speed'"):
        gym.make_vec(ID, num_envs=2, shaping="speed")
