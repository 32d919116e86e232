"""Properties of every registered environment under random seeds, modes and action sequences.

docs/model.md: every observation feature is scaled to a documented finite range and is never NaN
or inf; time only moves forward and never past the time budget; training never loses accuracy;
energy only accumulates; only selected sites drop out; a cut round teaches nothing.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import powertrip_env

ENV_IDS = list(powertrip_env.ENV_IDS)
_ENVS: dict[tuple[str, ...], gym.Env] = {}


def make_env(env_id: str, reward_mode: str, obs_mode: str, action_mode: str) -> gym.Env:
    """One env per configuration, reused across examples (each example resets it)."""
    key = (env_id, reward_mode, obs_mode, action_mode)
    if key not in _ENVS:
        _ENVS[key] = gym.make(
            env_id, reward_mode=reward_mode, obs_mode=obs_mode, action_mode=action_mode
        )
    return _ENVS[key]


def finite_obs(obs: Any) -> bool:
    if isinstance(obs, dict):
        return all(finite_obs(v) for v in obs.values())
    return bool(np.all(np.isfinite(obs)))


def non_finite_entries(info: dict[str, Any]) -> list[str]:
    """Names of info entries holding a NaN or an infinity."""
    bad = []
    for key, value in info.items():
        if isinstance(value, str | bool | np.bool_):
            continue
        array = np.asarray(value)
        if array.dtype.kind in "biuf" and not np.all(np.isfinite(array.astype(np.float64))):
            bad.append(key)
    return bad


class Checker:
    """Follows one episode and asserts the step-by-step invariants."""

    def __init__(self, env: gym.Env, obs: Any, info: dict[str, Any]) -> None:
        self.env = env
        scenario = env.unwrapped.scenario
        self.a0, self.target = scenario.workload.a0, scenario.workload.a_target
        self.budget_s = env.unwrapped.decision_view().time_budget_s  # the episode's own
        self.elapsed, self.accuracy, self.energy = 0.0, self.a0, 0.0
        self.check_obs(obs)
        assert not non_finite_entries(info), non_finite_entries(info)

    def check_obs(self, obs: Any) -> None:
        assert finite_obs(obs)
        assert self.env.observation_space.contains(obs), obs

    def step(self, action: np.ndarray) -> bool:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.last_info = info
        self.check_obs(obs)
        assert isinstance(reward, float) and math.isfinite(reward), reward
        assert not non_finite_entries(info), non_finite_entries(info)
        assert info["elapsed_s"] > self.elapsed, (info["elapsed_s"], self.elapsed)
        assert info["round_time_s"] > 0
        assert info["accuracy"] >= self.accuracy, (info["accuracy"], self.accuracy)
        assert info["energy_kwh"] >= self.energy, (info["energy_kwh"], self.energy)
        assert info["elapsed_s"] <= self.budget_s, info["elapsed_s"]
        if info["idle"]:
            assert info["round_energy_kwh"] == 0.0
        assert not (info["dropped"] & ~info["selected"]).any()
        if info["cut"]:
            assert info["accuracy"] == self.accuracy
            # the clock stops exactly at the deadline; elapsed = deadline − a fractional start
            assert info["elapsed_s"] == pytest.approx(self.budget_s, rel=0, abs=1e-6)
            assert truncated or terminated
        assert terminated == (info["accuracy"] >= self.target)
        self.elapsed, self.accuracy, self.energy = (
            info["elapsed_s"],
            info["accuracy"],
            info["energy_kwh"],
        )
        if terminated or truncated:
            assert "tta_h" in info
            expected_h = (info["elapsed_s"] if terminated else self.budget_s) / 3600.0
            assert info["tta_h"] == pytest.approx(expected_h)
            return True
        return False


def bits(value: int, n: int) -> np.ndarray:
    return np.array([(value >> i) & 1 for i in range(n)], dtype=np.int8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env_id=st.sampled_from(ENV_IDS),
    seed=st.integers(0, 2**31 - 1),
    reward_mode=st.sampled_from(["excess_gain", "gain_rate"]),
    obs_mode=st.sampled_from(["flat", "dict"]),
    action_mode=st.sampled_from(["multibinary", "multidiscrete"]),
    start_fraction=st.one_of(st.none(), st.floats(0.0, 1.0, exclude_max=True)),
    actions=st.lists(st.integers(0, 2**32 - 1), max_size=20),
    extra_steps=st.integers(0, 60),
    p_select=st.floats(0.0, 1.0),
)
def test_rollouts_stay_finite_inside_the_space_and_monotone(
    env_id, seed, reward_mode, obs_mode, action_mode, start_fraction, actions, extra_steps, p_select
):
    """Explicit actions first (hypothesis shrinks these), then random sets of density p_select."""
    env = make_env(env_id, reward_mode, obs_mode, action_mode)
    options = None
    if start_fraction is not None:  # anywhere in the trace, up to its very end
        sim = env.unwrapped.sim
        options = {"start_time": start_fraction * sim.power.rows * sim.params.interval_s}
    obs, info = env.reset(seed=seed, options=options)
    checker = Checker(env, obs, info)
    n = env.unwrapped.params.n_sites
    rng = np.random.default_rng(seed)
    masks = [bits(value, n) for value in actions]
    masks += [(rng.random(n) < p_select).astype(np.int8) for _ in range(extra_steps)]
    for mask in masks:
        if checker.step(mask):
            break


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env_id=st.sampled_from(ENV_IDS),
    seed=st.integers(0, 2**31 - 1),
    p_select=st.floats(0.0, 1.0),
    split=st.sampled_from(["train", "test"]),
)
def test_whole_episodes_of_random_actions_end_cleanly(env_id, seed, p_select, split):
    env = gym.make(env_id, split=split)
    obs, info = env.reset(seed=seed)
    checker = Checker(env, obs, info)
    rng = np.random.default_rng(seed)
    n = env.unwrapped.params.n_sites
    for _ in range(powertrip_env.MAX_EPISODE_STEPS):
        if checker.step((rng.random(n) < p_select).astype(np.int8)):
            return
    pytest.fail("the episode neither terminated nor truncated within max_episode_steps")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env_id=st.sampled_from(ENV_IDS),
    seed=st.integers(0, 2**31 - 1),
    actions=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=10),
)
def test_idle_rounds_leave_accuracy_unchanged(env_id, seed, actions):
    env = make_env(env_id, "excess_gain", "flat", "multibinary")
    env.reset(seed=seed)
    scenario = env.unwrapped.scenario
    n = scenario.n_sites
    accuracy = scenario.workload.a0
    for value in [*actions, 0]:
        _, reward, terminated, truncated, info = env.step(bits(value, n))
        if info["idle"]:
            assert info["accuracy"] == accuracy, (info["accuracy"], accuracy)
            assert reward == pytest.approx(
                -info["round_time_s"] / (scenario.episode.h_ref_h * 3600)
            )
        accuracy = info["accuracy"]
        if terminated or truncated:
            break


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env_id=st.sampled_from([*ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS]),
    extra=st.integers(0, 6),
    seed=st.integers(0, 2**31 - 1),
    obs_mode=st.sampled_from(["flat", "dict"]),
    p_select=st.floats(0.0, 1.0),
    steps=st.integers(1, 80),
)
def test_padded_and_drawn_catalogues_keep_every_invariant(
    env_id, extra, seed, obs_mode, p_select, steps
):
    """Random actions on every M-site slot: padded ones are ignored, real ones obey the model."""
    if env_id in powertrip_env.SAMPLED_ENV_IDS:
        env = gym.make(env_id, obs_mode=obs_mode)
    else:
        n_sites = powertrip_env.load_scenario(powertrip_env.ENV_IDS[env_id]).n_sites
        env = gym.make(env_id, obs_mode=obs_mode, max_sites=n_sites + extra)
    obs, info = env.reset(seed=seed)
    checker = Checker(env, obs, info)
    n, m = env.unwrapped.params.n_sites, env.action_space.shape[0]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        action = (rng.random(m) < p_select).astype(np.int8)
        done = checker.step(action)
        assert not checker.last_info["selected"][n:].any()
        assert checker.last_info["n_selected"] <= np.count_nonzero(action[:n])
        if done:
            break
