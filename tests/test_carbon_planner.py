"""``CarbonPlanner`` and ``PerfectForecastPlanner`` (``baselines/carbon_planner.py``), the rows
they price (``env.forecast_rows``, ``Clairvoyant.rows``) and the carbon track's room chain
(``harness/tracks/carbon.py``).

Every test says in a comment which mistake it catches. The environments run without jitter,
so every number here is deterministic.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from future_rows import scrambled_future, twin_on

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.carbon_bound import carbon_bound_kg
from powertrip_env.baselines.carbon_planner import CarbonPlanner, PerfectForecastPlanner
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg
from powertrip_env.baselines.registry import (
    CARBON,
    CARBON_REFERENCES,
    NEEDS_CARBON,
    POLICIES,
    make_policy,
)
from powertrip_env.harness.evaluation.evaluate import run_episode
from powertrip_env.harness.tracks.carbon import CARBON as CARBON_TRACK
from powertrip_env.harness.tracks.carbon import carbon_chain, carbon_chain_lines

ID = "PowerTrip-Carbon-v2"


@pytest.fixture(scope="module")
def test_env() -> gym.Env:
    return gym.make(ID, split="test", jitter=False)


def test_the_planners_are_registered_where_they_belong() -> None:
    # catches: the clairvoyant reference listed as a deployable rule, the planner put on the
    # board while it trails CarbonGreedy on the train days (registry.CARBON says why), or either
    # run on a scenario without carbon
    assert "CarbonPlanner" not in CARBON and "CarbonPlanner" in NEEDS_CARBON
    assert "PerfectForecastPlanner" in NEEDS_CARBON
    assert "PerfectForecastPlanner" not in CARBON
    assert "PerfectForecastPlanner" in CARBON_REFERENCES
    assert "PerfectForecastPlanner" in CARBON_TRACK.references
    assert "PerfectForecastPlanner" in CARBON_TRACK.board_references
    assert isinstance(make_policy("CarbonPlanner", 6), CarbonPlanner)
    assert isinstance(POLICIES["PerfectForecastPlanner"](6, 0), PerfectForecastPlanner)
    assert "CLAIRVOYANT REFERENCE" in (PerfectForecastPlanner.__doc__ or "")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"margin": -0.1},
        {"margin": float("nan")},
        {"block_s": 0.0},
        {"source": "tomorrow"},
        {"carbon_forecast": "tomorrow"},
    ],
)
def test_bad_arguments_are_refused_with_a_clear_error(kwargs: dict) -> None:
    # catches: a negative margin (a plan that aims below the target) or a nonsense source taken
    # silently
    with pytest.raises(ValueError, match="CarbonPlanner"):
        CarbonPlanner(**kwargs)


def test_the_planners_meet_the_deadline(test_env) -> None:
    # catches: a plan that idles past the deadline (margin, reserve or pace miscounted), a
    # safety switch that does not fire, or a planner that never re-plans. Neither planner emits
    # less than CarbonGreedy (docs/carbon.md gives the numbers), so no carbon claim is made here
    deadline_h = test_env.unwrapped.scenario.episode.time_budget_h
    for seed in (0, 3):
        for name in ("CarbonPlanner", "PerfectForecastPlanner"):
            row, _ = run_episode(test_env, make_policy(name, 6), seed)
            assert row["success"] and row["tta_h"] < deadline_h, (name, seed, row)


def test_the_forecast_rows_are_the_true_rows_now_and_read_no_future_actual(test_env) -> None:
    # catches: forecast rows that read the trace's future (they would equal the true rows
    # ahead), a first row that is not the current one, or rows that stop short of the deadline
    env = test_env.unwrapped
    env.reset(seed=1)
    view = env.decision_view()
    fc, true = env.forecast_rows(), env.clairvoyant().rows()
    assert fc.rate.shape == true.rate.shape == (fc.start_s.size, view.n_sites)
    np.testing.assert_array_equal(fc.rate[0], view.rate)
    np.testing.assert_allclose(fc.pv_w[0], view.pv_w)  # a mean of the row taken 7 times
    np.testing.assert_allclose(fc.grid_g_per_kwh[0], view.grid_g_per_kwh)
    np.testing.assert_allclose(true.grid_g_per_kwh[0], view.grid_g_per_kwh)
    assert fc.start_s[0] <= view.clock_s < fc.start_s[0] + view.interval_s
    deadline = view.clock_s + view.time_budget_s - view.elapsed_s
    assert fc.start_s[-1] < deadline <= fc.start_s[-1] + view.interval_s
    assert not np.array_equal(fc.grid_g_per_kwh, true.grid_g_per_kwh)


def _first_decision_on(env, params, policy, planned: bool = False) -> np.ndarray:
    """``policy``'s decision now on a fork of ``env`` whose tables are ``params``; with
    ``planned``, the plan's choice before the safety switch (which reads only the present, so
    it can hide what the plan read)."""
    twin = twin_on(env, params)
    policy.reset(twin)
    if planned:
        now = twin.decision_view()
        sets = policy.candidate_sets(now)
        choice = policy.plan(now, sets, *policy.what_ifs(sets))
        return sets[choice] if choice >= 0 else np.zeros(now.n_sites, dtype=bool)
    return policy.act(None, {})


def test_the_planner_reads_no_future_actual_but_the_perfect_forecast_does(test_env) -> None:
    # catches: the deployable planner pricing its plan on the trace's future (its first decision
    # would move with it), and a check too weak to see it (the clairvoyant twin must move)
    env = test_env.unwrapped
    moved = 0
    for seed in range(3):
        env.reset(seed=seed)
        for k in range(4):
            scrambled = scrambled_future(env, 10 * seed + k)
            ours = _first_decision_on(env, env.params, CarbonPlanner(), planned=True)
            theirs = _first_decision_on(env, scrambled, CarbonPlanner(), planned=True)
            np.testing.assert_array_equal(ours, theirs)
            ours = _first_decision_on(env, env.params, CarbonPlanner())
            theirs = _first_decision_on(env, scrambled, CarbonPlanner())
            np.testing.assert_array_equal(ours, theirs)
            # the control: the same planner on the true rows, without the reserve (which can
            # leave no plan on time, and then both play the fastest set)
            reader = CarbonPlanner(source="true", reserve=0.0)
            true = _first_decision_on(env, env.params, reader, planned=True)
            reader = CarbonPlanner(source="true", reserve=0.0)
            other = _first_decision_on(env, scrambled, reader, planned=True)
            moved += not np.array_equal(true, other)
    assert moved > 0


def test_the_perfect_forecast_planner_never_beats_the_carbon_bound() -> None:
    # catches: a reference that books progress it does not make or emissions it does not pay
    # (the env plays its choices, so its cost is real), or a bound that is not one
    env = gym.make(ID, split="train", jitter=False)
    for seed in (0, 1):
        env.reset(seed=seed)
        bound = carbon_bound_kg(env.unwrapped)
        row, _ = run_episode(env, make_policy("PerfectForecastPlanner", 6), seed)
        cost = float(carbon_cost_from_kg(env.unwrapped.params, row["carbon_kg"], row["success"]))
        assert bound <= cost + 1e-9, (seed, bound, cost)


_MEANS = {
    "PowerTrip": 300.0,
    "CarbonGreedy": 160.0,
    "DeadlineHorizon": 200.0,
    "CarbonPlanner": 150.0,
    "PerfectForecastPlanner": 120.0,
    "CarbonOptimiser": 100.0,
    "BestFixedCarbon": 700.0,
}


def test_the_carbon_chain_splits_powertrip_to_the_clairvoyant_plan() -> None:
    # catches: shares that do not add up to the whole room, a best rule that is not the least
    # mean cost, a reference counted as a rule, or the learnable room upside down
    mean = pd.Series(_MEANS)
    chain = carbon_chain(mean, ["PowerTrip", "CarbonGreedy", "DeadlineHorizon", "CarbonPlanner"])
    assert [link["policy"] for link in chain["chain"]] == [
        "PowerTrip",
        "CarbonPlanner",
        "PerfectForecastPlanner",
        "CarbonOptimiser",
    ]
    shares = [link["share"] for link in chain["chain"][1:]]
    assert sum(shares) == pytest.approx(1.0)
    assert shares == pytest.approx([150 / 200, 30 / 200, 20 / 200])
    assert chain["best_rule"] == "CarbonPlanner"
    assert chain["learnable_room"] == pytest.approx(150.0 / 120.0)
    lines = carbon_chain_lines({ID: chain})
    assert any("CarbonPlanner 150.0 (75%)" in line and "1.250" in line for line in lines)
    assert carbon_chain_lines({ID: {"n_sites": 6}}) == []


def test_forecast_rows_refuses_anything_but_a_forecast(test_env) -> None:
    # catches: the public what-if handing out the true rows (None was the clairvoyant switch)
    env = test_env.unwrapped
    env.reset(seed=1)
    for bad in (None, "true", "tomorrow"):
        with pytest.raises(ValueError, match="allowed: yesterday, persistence, week"):
            env.forecast_rows(bad)
