"""The online estimates, compiled with the kernel (``powertrip_env.dynamics.estimates``).

The adaptive rules and the candidate-set agent update their estimates of the unknowns before
every decision, so the update, the belief and the candidates built on it run as compiled passes
over a batch. These tests hold that path to a plain numpy statement of the same estimator (the
one the rules shipped with, kept here as the specification), check that the env's ``telemetry()``
is what the decision view shows, that building the candidates on the estimates in one pass
equals updating them and then passing the belief, and that bad beliefs are refused.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.adaptive import (
    NOISE_GRID,
    SMOOTHING,
    TUNED_TRACKING,
    Estimates,
    Tracking,
    estimator_for,
)
from powertrip_env.baselines.registry import make_policy
from powertrip_env.dynamics import EstimateRows
from powertrip_env.dynamics.formulas import noise_scale_array
from powertrip_env.units import s_to_h
from powertrip_env.view import DecisionView, UnknownFactors


class Reference:
    """The estimator in numpy, field by field, as ``baselines/adaptive.py`` first wrote it:
    smoothed log-ratios per site, the join as measured, the job's fit over every round kept,
    optimism for unmeasured sites, and with ``tracking`` the change detection, the long-run
    level and the decay of an unmeasured site's departure."""

    def __init__(self, scenario: Any, optimism: float, tracking: Tracking | None) -> None:
        n = scenario.n_sites
        self.wl, self.spreads, self.optimism, self.tracking = (
            scenario.workload,
            scenario.unknowns,
            optimism,
            tracking,
        )
        self.band = 0.0 if tracking is None else tracking.threshold * scenario.episode.jitter_sigma
        self.log, self.weight = np.zeros((3, n)), np.zeros((3, n))
        self.base, self.measured_s = np.zeros((2, n)), np.zeros((2, n))
        self.seen_round = np.full(n, -1)
        self.rows: list[np.ndarray] = []
        self.last: tuple[float, float] | None = None
        self.clock_s = 0.0

    def update(self, now: DecisionView) -> None:
        self.clock_s = now.clock_s
        fresh = now.measured_round > self.seen_round
        for f, ratio in enumerate((now.measured_compute, now.measured_transfer)):
            got = fresh & (ratio > 0.0)
            x = np.log(np.where(got, ratio, 1.0))
            first = got & (self.weight[f] == 0.0)
            level = self.log[f]
            if self.tracking is None:
                nxt = (1.0 - SMOOTHING) * level + SMOOTHING * x
                self.log[f] = np.where(first, x, np.where(got, nxt, level))
            else:
                base = self.base[f]
                smooth = (1.0 - SMOOTHING) * level + SMOOTHING * x
                nxt = np.where(np.abs(x - level) > self.band, x, smooth)
                base_smooth = (1.0 - SMOOTHING) * base + SMOOTHING * x
                base_next = np.where(
                    x < base - self.band, x, np.where(x > base + self.band, base, base_smooth)
                )
                self.log[f] = np.where(first, x, np.where(got, nxt, level))
                self.base[f] = np.where(first, x, np.where(got, base_next, base))
                self.measured_s[f] = np.where(got, now.clock_s, self.measured_s[f])
            self.weight[f] += got
        joined = now.measured_join != 1.0
        self.log[2] = np.where(joined, np.log(np.maximum(now.measured_join, 1e-9)), 0.0)
        self.weight[2] = joined
        self.seen_round = np.maximum(self.seen_round, now.measured_round)
        if self.last is not None and now.rounds > 0:
            before, batch = self.last
            gained = now.surrogate_progress - before
            if batch > 0.0 and gained > 0.0:
                eff = 1.0 / (1.0 + noise_scale_array(self.wl, before, NOISE_GRID) / batch)
                self.rows.append(np.log(gained / (self.wl.local_steps * self.wl.eta_local * eff)))
        self.last = None

    def played(self, now: DecisionView, mask: np.ndarray) -> None:
        batch = float(self.wl.site_batch * np.count_nonzero((mask > 0) & now.available))
        self.last = (now.surrogate_progress, batch)

    def belief(self) -> np.ndarray:
        log = self.log.copy()
        if self.tracking is not None:
            age_h = s_to_h(np.maximum(self.clock_s - self.measured_s, 0.0))
            log[:2] = self.base + (self.log[:2] - self.base) * np.exp(-age_h / self.tracking.tau_h)
        thr, transfer, join = np.exp(-log[0]), np.exp(log[1]), np.exp(log[2])
        if self.optimism > 0.0:
            s = self.spreads
            thr = np.where(self.weight[0] == 0.0, math.exp(self.optimism * s.throughput_sigma), thr)
            link = math.exp(-self.optimism * math.hypot(s.rtt_sigma, s.bandwidth_sigma))
            transfer = np.where(self.weight[1] == 0.0, link, transfer)
            join = np.where(self.weight[2] == 0.0, math.exp(-self.optimism * s.join_sigma), join)
        pace, noise = 1.0, 1.0
        if self.rows:
            resid = np.array(self.rows).T
            err = np.sum((resid - resid.mean(axis=1)[:, None]) ** 2, axis=1)
            at = int(np.argmin(err))
            pace, noise = float(np.exp(resid[at].mean())), float(NOISE_GRID[at])
        return UnknownFactors(pace, noise, thr, transfer, 1.0 / transfer, join).vector


CASES = [
    ("PowerTrip-Measured-v0", 0.0, None),
    ("PowerTrip-Measured-v0", 0.5, None),  # optimistic about the sites it has not measured
    ("PowerTrip-Moving-v0", 0.0, TUNED_TRACKING),
    ("PowerTrip-Moving-v0", 0.0, Tracking(threshold=3.0, tau_h=1.0)),  # a band readings cross
]


@pytest.mark.parametrize(("env_id", "optimism", "tracking"), CASES)
def test_the_compiled_estimates_are_the_numpy_estimator(env_id, optimism, tracking) -> None:
    """Over a train episode played by AdaptiveHorizon, the compiled estimator's belief is the
    numpy statement's after every round: the sites' factors to 1e-12, the job's pace to 1e-9
    (the running fit sums in another order) and the same noise factor of the grid."""
    env = gym.make(env_id, split="train").unwrapped
    obs, info = env.reset(seed=5)
    scenario = env.decision_view().scenario
    rule = make_policy("AdaptiveHorizon", env.n_sites, 0)
    rule.reset(env)
    estimator = estimator_for(optimism, scenario.unknowns, tracking)
    estimator.reset(scenario)
    reference = Reference(scenario, optimism, tracking)
    fitted = 0
    for _ in range(400):
        now = env.decision_view()
        estimator.update(now)
        reference.update(now)
        got, want = estimator.belief().vector, reference.belief()
        np.testing.assert_allclose(got[2:], want[2:], rtol=1e-12, atol=0.0)
        assert got[1] == want[1] and got[0] == pytest.approx(want[0], rel=1e-9)
        fitted = estimator.fitted
        assert fitted == len(reference.rows)
        action = rule.act(obs, info)
        estimator.played(action)
        reference.played(now, action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert fitted > 50
    assert np.any(got[2:] != 1.0)  # the telemetry moved it


def test_telemetry_is_what_the_decision_view_shows() -> None:
    env = gym.make("PowerTrip-Moving-v0").unwrapped
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(20):
        env.step((rng.random(env.n_sites) < 0.6).astype(np.int8))
        view, tel = env.decision_view(), env.telemetry()
        seen = np.stack(
            [view.measured_compute, view.measured_transfer, view.measured_join, view.measured_round]
        )
        np.testing.assert_array_equal(tel.seen[0], seen)
        assert tel.progress[0] == view.surrogate_progress and tel.rounds[0] == view.rounds
        assert tel.clock_s[0] == view.clock_s
        np.testing.assert_array_equal(tel.available[0], view.available)
    venv = gym.make_vec("PowerTrip-Measured-v0", num_envs=3)
    venv.reset(seed=2)
    venv.step(np.ones((3, 10), dtype=np.int8))
    tel = venv.unwrapped.telemetry()
    for i in range(3):
        view = venv.unwrapped.decision_view(i)
        np.testing.assert_array_equal(tel.seen[i, 0], view.measured_compute)
        np.testing.assert_array_equal(tel.available[i], view.available)
    # a copy: writing to it leaves the episode alone
    before = venv.unwrapped.decision_view(0).measured_compute.copy()
    tel.seen[:] = -7.0
    np.testing.assert_array_equal(venv.unwrapped.decision_view(0).measured_compute, before)


@pytest.mark.parametrize("tracking", [None, TUNED_TRACKING])
def test_candidates_on_the_estimates_in_one_pass_are_update_then_belief(tracking) -> None:
    """``Estimates.candidates`` folds the telemetry (and the sets played, which it is told at
    the next read) into its rows and builds on their beliefs in one pass; a twin that updates
    from ``telemetry()``, is told each set at once and passes its belief builds the same
    candidates and holds the same rows, bit for bit, across a restart."""
    venv = gym.make_vec("PowerTrip-Moving-v0", num_envs=3)
    vector = venv.unwrapped
    venv.reset(seed=3)
    scenario = vector.decision_view(0).scenario
    fused, twin = Estimates(scenario, 3, 0.5, tracking), Estimates(scenario, 3, 0.5, tracking)
    for k in range(120):
        one = fused.candidates(vector)
        beliefs = twin.update(vector.telemetry())
        two = vector.candidates(belief=beliefs)
        np.testing.assert_array_equal(one.masks, two.masks)
        np.testing.assert_array_equal(one.features, two.features)
        np.testing.assert_array_equal(fused.est, twin.est)
        chosen = one.masks[np.arange(3), (k % one.masks.shape[1])]
        fused.played(chosen)  # told at the next read
        for estimator, mask in zip(twin.estimators, chosen, strict=True):
            estimator.played(mask)  # told now, row by row
        _, _, terminated, truncated, _ = venv.step(chosen.astype(np.int8))
        done = terminated | truncated
        if k == 60:  # a restart, as after an episode's end: the played set is told first
            done = np.array([False, True, False])
        fused.restart(done)
        twin.restart(done)
    assert fused.estimators[0].fitted > 50 and fused.estimators[1].fitted < 70
    assert np.any(fused.estimators[2].weight > 0.0)  # they measured something


def test_a_belief_that_is_not_positive_and_finite_is_refused() -> None:
    env = gym.make("PowerTrip-Measured-v0").unwrapped
    env.reset(seed=0)
    belief = np.ones(2 + 4 * env.n_sites)
    for bad in (0.0, -1.0, math.nan, math.inf):
        belief[7] = bad
        with pytest.raises(ValueError, match="finite number > 0"):
            env.candidates(belief=belief)
        with pytest.raises(ValueError, match="finite number > 0"):
            env.predict_round(np.ones(env.n_sites, dtype=bool), belief=belief)
    est = Estimates(env.decision_view().scenario)
    rows = EstimateRows(est.cfg, est.consts, est.est, est.none_played)
    with pytest.raises(ValueError, match="not both"):
        env.candidates(belief=np.ones(2 + 4 * env.n_sites), estimates=rows)
