"""The moving track's deployable baselines (``TrackingHorizon``, ``TrackingMPC``).

On ``PowerTrip-Moving-v0`` a site's speed and link change while the job runs. The tracking
estimator (``baselines.adaptive.TrackingEstimator``) jumps to a measurement that departs from
its estimate by more than the jitter explains, keeps each site's long-run level apart from its
current one, and lets an unmeasured site's belief return to that long-run level, so the rule
tries it again. These tests pin each of those, that it reduces to ``Estimator`` where nothing
moves, and that the registered rules play a moving episode to its end, reproducibly.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.adaptive import (
    TUNED_TRACKING,
    Adaptive,
    Estimates,
    Estimator,
    Tracking,
    TrackingEstimator,
)
from powertrip_env.baselines.lookahead import ForecastMPC, HorizonRule
from powertrip_env.baselines.registry import make_policy
from powertrip_env.units import h_to_s
from powertrip_env.view import DecisionView

HOUR = h_to_s(1.0)
TRACK = Tracking(threshold=3.0, tau_h=1.0)  # a band the tests can step across either way


@pytest.fixture(scope="module")
def start() -> DecisionView:
    """A moving episode's first decision view: nothing measured yet."""
    env = gym.make("PowerTrip-Moving-v0", split="train").unwrapped
    env.reset(seed=0)
    return env.decision_view()


def sigma(view: DecisionView) -> float:
    return view.scenario.episode.jitter_sigma


def measured(view: DecisionView, k: int, compute: dict[int, float], clock_s: float) -> DecisionView:
    """``view`` after round ``k`` measured the sites of ``compute`` (site -> compute ratio;
    their exchange as stated) and ended at ``clock_s``: the fields the estimators read."""
    ratio = view.measured_compute.copy()
    transfer = view.measured_transfer.copy()
    at = view.measured_round.copy()
    for i, r in compute.items():
        ratio[i], transfer[i], at[i] = r, 1.0, k
    return dataclasses.replace(
        view,
        measured_compute=ratio,
        measured_transfer=transfer,
        measured_round=at,
        rounds=k + 1,
        clock_s=clock_s,
    )


def tracker(view: DecisionView, tracking: Tracking = TRACK) -> TrackingEstimator:
    estimator = TrackingEstimator(tracking, 0.0, view.scenario.unknowns)
    estimator.reset(view.scenario)
    return estimator


def compute_log(estimator: Estimator, site: int) -> float:
    """The believed log of a site's compute time over stated (minus its log-speed)."""
    return -math.log(float(estimator.belief().throughput[site]))


def settled(view: DecisionView, tracking: Tracking = TRACK) -> tuple[TrackingEstimator, float]:
    """An estimator that measured site 0 as stated for five rounds, and the clock it is at."""
    estimator = tracker(view, tracking)
    clock = view.clock_s
    for k in range(5):
        clock += 300.0
        estimator.update(measured(view, k, {0: 1.0}, clock))
    return estimator, clock


def test_a_step_beyond_the_threshold_is_jumped_to_and_one_within_it_smoothed(start):
    s = sigma(start)
    assert s > 0.0
    beyond = math.exp(1.5 * TRACK.threshold * s)
    within = math.exp(0.5 * TRACK.threshold * s)

    estimator, clock = settled(start)
    estimator.update(measured(start, 5, {0: beyond}, clock + 300.0))
    assert compute_log(estimator, 0) == pytest.approx(math.log(beyond), abs=1e-12)

    smoothed, clock = settled(start)
    smoothed.update(measured(start, 5, {0: within}, clock + 300.0))
    assert compute_log(smoothed, 0) == pytest.approx(0.3 * math.log(within), abs=1e-12)
    # Estimator smooths both alike: only the jump is new
    plain = Estimator(0.0, start.scenario.unknowns)
    plain.reset(start.scenario)
    clock = start.clock_s
    for k in range(5):
        clock += 300.0
        plain.update(measured(start, k, {0: 1.0}, clock))
    plain.update(measured(start, 5, {0: beyond}, clock + 300.0))
    assert compute_log(plain, 0) == pytest.approx(0.3 * math.log(beyond), abs=1e-12)


def test_a_recovery_is_jumped_to_as_well(start):
    slow = math.exp(2.0 * TRACK.threshold * sigma(start))
    estimator, clock = settled(start)
    estimator.update(measured(start, 5, {0: slow}, clock + 300.0))
    estimator.update(measured(start, 6, {0: 1.0}, clock + 600.0))
    assert compute_log(estimator, 0) == pytest.approx(0.0, abs=1e-12)


def test_the_long_run_level_ignores_a_slowdown_and_takes_a_faster_reading(start):
    slow = math.exp(2.0 * TRACK.threshold * sigma(start))
    estimator, clock = settled(start)
    estimator.update(measured(start, 5, {0: slow}, clock + 300.0))
    assert estimator.base[0, 0] == pytest.approx(0.0, abs=1e-12)  # an event: not the draw
    assert estimator.log[0, 0] == pytest.approx(math.log(slow))

    # first measured in an event, then far faster: the long-run level was the event's
    first_slow = tracker(start)
    first_slow.update(measured(start, 0, {0: slow}, start.clock_s + 300.0))
    first_slow.update(measured(start, 1, {0: 1.0}, start.clock_s + 600.0))
    assert first_slow.base[0, 0] == pytest.approx(0.0, abs=1e-12)


def test_an_unmeasured_site_s_belief_decays_to_its_long_run_level_with_age(start):
    slow = math.exp(2.0 * TRACK.threshold * sigma(start))
    estimator, clock = settled(start)
    clock += 300.0
    estimator.update(measured(start, 5, {0: slow}, clock))
    jumped = math.log(slow)
    assert compute_log(estimator, 0) == pytest.approx(jumped)

    beliefs = []
    for age_h in (0.5, 1.0, 2.0, 8.0):
        # later rounds that measured another site only: site 0's last measurement ages
        estimator.update(measured(start, 6 + len(beliefs), {1: 1.0}, clock + age_h * HOUR))
        beliefs.append(compute_log(estimator, 0))
        weight = math.exp(-age_h / TRACK.tau_h)
        assert beliefs[-1] == pytest.approx(jumped * weight, rel=1e-9)
    assert all(a > b for a, b in itertools.pairwise(beliefs))
    assert beliefs[-1] < 0.01 * jumped  # back at the draw: the rule may try it again
    # Estimator keeps the last estimate for ever
    assert estimator.log[0, 0] == pytest.approx(jumped)


def test_a_site_never_measured_stays_as_stated(start):
    estimator, clock = settled(start)
    estimator.update(measured(start, 5, {}, clock + 10 * HOUR))
    belief = estimator.belief()
    assert np.all(belief.throughput[1:] == 1.0) and np.all(belief.rtt[1:] == 1.0)


def play_views(env_id: str, seed: int, rounds: int) -> list[DecisionView]:
    """The decision views of one episode played by AdaptiveHorizon (at most ``rounds``)."""
    env = gym.make(env_id, split="train").unwrapped
    policy = make_policy("AdaptiveHorizon", env.n_sites, 0)
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    views = []
    for _ in range(rounds):
        views.append(env.decision_view())
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            break
    return views


def test_on_a_world_that_holds_still_the_belief_is_estimator_s():
    """The measured track draws each site once: nothing moves. With a band the jitter never
    crosses the tracking estimator's belief is ``Estimator``'s exactly; with a narrow one it
    departs where a stray reading was jumped to, by no more than that reading's departure."""
    views = play_views("PowerTrip-Measured-v0", seed=1, rounds=150)
    plain = Estimator(0.0, views[0].scenario.unknowns)
    plain.reset(views[0].scenario)
    wide = tracker(views[0], Tracking(threshold=8.0, tau_h=TRACK.tau_h))
    narrow = tracker(views[0], TRACK)
    s = sigma(views[0])
    for view in views:
        for estimator in (plain, wide, narrow):
            estimator.update(view)
        want = plain.belief().vector
        np.testing.assert_allclose(wide.belief().vector, want, rtol=1e-12, atol=0.0)
        apart = np.abs(np.log(narrow.belief().vector / want))
        assert np.max(apart) < 2.0 * TRACK.threshold * s
        mask = np.zeros(view.n_sites, dtype=bool)
        mask[np.flatnonzero(view.available)[:2]] = True
        for estimator in (plain, wide, narrow):
            estimator.played(mask)
    # the job's pace and noise are fitted alike: nothing there tracks
    assert narrow.pace_noise() == plain.pace_noise()


def play(policy: Any, env_id: str, seed: int) -> tuple[float, list[bytes]]:
    env = gym.make(env_id, split="train").unwrapped
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    actions = []
    while True:
        action = policy.act(obs, info)
        actions.append(np.asarray(action).tobytes())
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return float(info["tta_h"]), actions


def test_tracking_horizon_plays_a_moving_episode_to_the_end_reproducibly():
    n = gym.make("PowerTrip-Moving-v0").unwrapped.n_sites
    first = play(make_policy("TrackingHorizon", n, 0), "PowerTrip-Moving-v0", seed=2)
    again = play(make_policy("TrackingHorizon", n, 0), "PowerTrip-Moving-v0", seed=2)
    assert math.isfinite(first[0]) and first[0] > 0.0
    assert first == again
    policy = make_policy("TrackingHorizon", n, 0)
    play(policy, "PowerTrip-Moving-v0", seed=3)
    assert play(policy, "PowerTrip-Moving-v0", seed=2) == first  # reset forgets the last


def test_the_registry_builds_the_tracking_rules_on_the_tuned_lookahead_rules():
    horizon = make_policy("TrackingHorizon", 10, 0)
    mpc = make_policy("TrackingMPC", 10, 0)
    assert isinstance(horizon, Adaptive) and isinstance(horizon.inner, HorizonRule)
    assert isinstance(mpc, Adaptive) and isinstance(mpc.inner, ForecastMPC)
    assert horizon.tracking == mpc.tracking == TUNED_TRACKING
    assert make_policy("AdaptiveHorizon", 10, 0).tracking is None
    assert isinstance(horizon.estimator, TrackingEstimator)


def test_tracking_mpc_plays_a_moving_episode():
    n = gym.make("PowerTrip-Moving-v0").unwrapped.n_sites
    tta, actions = play(make_policy("TrackingMPC", n, 0), "PowerTrip-Moving-v0", seed=0)
    assert math.isfinite(tta) and len(actions) > 10


def test_the_agents_estimates_can_track_too(start):
    estimates = Estimates(start.scenario, batch=2, tracking=TRACK)
    assert all(isinstance(e, TrackingEstimator) for e in estimates.estimators)
    assert not any(isinstance(e, TrackingEstimator) for e in Estimates(start.scenario).estimators)
