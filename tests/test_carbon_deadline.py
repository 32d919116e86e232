"""The carbon tasks' deadline per episode (``[episode] deadline_slack``,
``dynamics.params.episode_budgets``): set at the start from the past only, the one the kernel
cuts rounds at, the observation's time left and the view's budget, and its scenario errors.

Every test says in a comment which mistake it catches.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.dynamics.features import CARBON_JOB_FEATURES, N_CARBON_JOB
from powertrip_env.dynamics.layout import CUM_SAMPLES, RATE
from powertrip_env.dynamics.params import episode_budgets
from powertrip_env.errors import ScenarioError
from powertrip_env.scenario import load_scenario
from powertrip_env.scenario.power import site_power
from powertrip_env.units import S_PER_DAY, h_to_s

ID = "PowerTrip-Carbon-v2"


@pytest.fixture(scope="module")
def carbon_env() -> gym.Env:
    return gym.make(ID, split="test", jitter=False)


def test_each_episode_has_its_own_deadline_under_the_cap(carbon_env: gym.Env) -> None:
    # catches: one deadline for every episode again (the v1 tasks'), or one past the cap
    p = carbon_env.unwrapped.params
    budgets = []
    for seed in range(6):
        carbon_env.reset(seed=seed)
        view = carbon_env.unwrapped.decision_view()
        budgets.append(view.time_budget_s)
        state = carbon_env.unwrapped.state
        assert view.time_budget_s == pytest.approx(float(state.budget_s[0]))
        assert view.time_budget_s == pytest.approx(float(p.budget_at(state.start_s[0])))
    assert len(set(np.round(budgets, 3))) > 1
    assert max(budgets) <= p.time_budget_s


def test_the_deadline_grows_as_the_past_day_had_less_compute(carbon_env: gym.Env) -> None:
    # catches: the estimate scaled the wrong way (more past compute, later deadline), or read
    # something else than the day before: budget · C(k) is one constant wherever the cap and the
    # slack leave it alone
    p = carbon_env.unwrapped.params
    scenario = carbon_env.unwrapped.scenario
    day = round(S_PER_DAY / p.interval_s)
    cum = p.table[:, CUM_SAMPLES].sum(axis=1)
    k = np.arange(day, p.trace_rows)
    past = (cum[k] - cum[k - day]) / (day * p.interval_s)
    budget = p.budget_s[k]
    free = budget < p.time_budget_s
    product = budget[free] * past[free]
    assert product == pytest.approx(np.full(product.shape, product[0]), rel=1e-9)
    assert free.sum() > 0.5 * free.size
    assert scenario.episode.deadline_slack == 1.25


def test_the_deadline_reads_no_row_after_the_start() -> None:
    # catches: an estimate that looks ahead (the coming day's compute would be a future actual):
    # every row after a test day's row is scrambled, and its deadline does not move
    scenario = load_scenario("carbon")
    power = site_power(scenario)
    p = gym.make(ID, split="test", jitter=False).unwrapped.params
    first, _ = power.day_rows(*scenario.episode.test_days, "test_days")
    k = first + 37
    table = p.table.copy()
    rng = np.random.default_rng(0)
    table[k + 1 :, CUM_SAMPLES] = rng.uniform(0.0, 1e12, table[k + 1 :, CUM_SAMPLES].shape)
    table[k + 1 :, RATE] = rng.uniform(0.0, 1e6, table[k + 1 :, RATE].shape)
    scrambled = episode_budgets(scenario.episode, power, table)
    assert scrambled[k] == p.budget_s[k]
    assert scrambled[k + 1] != p.budget_s[k + 1]  # the scramble did reach the rows after k


def test_rounds_are_cut_at_the_episodes_own_deadline(carbon_env: gym.Env) -> None:
    # catches: the kernel cutting at the cap (the scenario's time_budget_h) instead of the
    # episode's deadline, or info's elapsed time and TTA on a miss reading the cap
    carbon_env.reset(seed=3)
    budget = carbon_env.unwrapped.decision_view().time_budget_s
    assert budget < carbon_env.unwrapped.params.time_budget_s
    idle = np.zeros(carbon_env.action_space.shape, dtype=carbon_env.action_space.dtype)
    while True:
        _, _, terminated, truncated, info = carbon_env.step(idle)
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert info["elapsed_s"] == pytest.approx(budget)
    assert info["tta_h"] == pytest.approx(budget / 3600.0)


def test_the_time_left_is_observed_against_the_episodes_deadline(carbon_env: gym.Env) -> None:
    # catches: the time-left column normalised by the cap, which would tell an agent it has
    # more time than it has
    obs, _ = carbon_env.reset(seed=1)
    n = carbon_env.unwrapped.params.n_sites
    at = obs.shape[0] - N_CARBON_JOB
    assert obs[at + CARBON_JOB_FEATURES.index("time_left")] == pytest.approx(1.0)
    budget = carbon_env.unwrapped.decision_view().time_budget_s
    obs, _, _, _, info = carbon_env.step(np.ones(n, dtype=np.int8))
    left = obs[at + CARBON_JOB_FEATURES.index("time_left")]
    assert left == pytest.approx(1.0 - info["elapsed_s"] / budget, rel=1e-5)


def test_the_known_tasks_keep_one_deadline() -> None:
    # catches: a deadline per episode leaking into the scenarios that do not ask for one
    env = gym.make("PowerTrip-v0", jitter=False)
    p = env.unwrapped.params
    assert np.all(p.budget_s == p.time_budget_s)
    for seed in range(3):
        env.reset(seed=seed)
        assert env.unwrapped.decision_view().time_budget_s == p.time_budget_s


@pytest.mark.parametrize(
    ("episode", "message"),
    [
        ("deadline_slack = 0.5\n", r"carbon-bad\.toml: \[episode\] field 'deadline_slack' = 0\.5"),
        (
            "deadline_slack = 1.2\ndeadline_ref_h = 0\n",
            r"'deadline_slack' = 1\.2 needs deadline_ref_h > 0",
        ),
        ("deadline_ref_h = -3\n", r"'deadline_ref_h' = -3"),
    ],
)
def test_a_bad_deadline_field_is_named(tmp_path: Path, episode: str, message: str) -> None:
    # catches: a slack below 1 or a slack without its reference taken silently
    path = tmp_path / "carbon-bad.toml"
    path.write_text(f'extends = "carbon"\n\n[episode]\n{episode}', encoding="utf-8")
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_a_shorter_cap_caps_every_deadline(tmp_path: Path) -> None:
    # catches: the cap ignored when a user shortens it under the inherited estimate
    path = tmp_path / "short.toml"
    path.write_text('extends = "carbon"\n\n[episode]\ntime_budget_h = 20.0\n', encoding="utf-8")
    env = gym.make(ID, scenario=str(path), split="test", jitter=False)
    assert np.all(env.unwrapped.params.budget_s <= h_to_s(20.0))
    env.reset(seed=0)
    assert env.unwrapped.decision_view().time_budget_s == pytest.approx(h_to_s(20.0))
    loaded = load_scenario(path)
    assert dataclasses.asdict(loaded.episode)["deadline_slack"] == 1.25
