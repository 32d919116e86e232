"""The candidate-set agent on the measured track: its slots assume the online estimates.

On a scenario with ``[unknowns]`` the agent's slots are built under what the telemetry has
said so far (``baselines.adaptive.Estimates``, one ``Estimator`` per episode), not under the
stated values: ``CandidateSets``, ``CandidatePolicy`` and ``CandidateVecEnv`` each keep the
estimates (``agents.candidates.estimates_for``), so the last slot is ``AdaptiveHorizon``'s
choice. On the known track nothing changed: no estimates, the stated values' candidates.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env import load_scenario
from powertrip_env.agents.candidates import (
    N_FEATURES,
    N_SLOTS,
    CandidatePolicy,
    CandidateSets,
    build,
    estimates_for,
)
from powertrip_env.baselines.adaptive import NOISE_GRID, Estimates, Estimator
from powertrip_env.baselines.registry import make_policy

MEASURED = "PowerTrip-Measured-v0"
TUNED_SLOT = N_SLOTS - 1  # the tuned horizon rule's slot (dynamics.candidates.TUNED_RULE)


def _play_slot(env_id: str, slot: int, seed: int) -> tuple[list[np.ndarray], dict[str, Any]]:
    """An episode of ``CandidateSets`` playing ``slot`` every round: each round's set, and the
    last info."""
    env = CandidateSets(gym.make(env_id))
    env.reset(seed=seed)
    masks = []
    while True:
        masks.append(env.candidates.masks[slot].copy())
        *_, terminated, truncated, info = env.step(slot)
        if terminated or truncated:
            return masks, info


def _play_policy(env_id: str, name: str, seed: int) -> tuple[list[np.ndarray], dict[str, Any]]:
    """An episode of the registry's policy ``name``, played as the harness plays it."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    policy = make_policy(name, env.unwrapped.n_sites, seed=0)
    policy.reset(env)
    masks = []
    while True:
        action = np.asarray(policy.act(obs, info))
        masks.append(action != 0)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return masks, info


# --------------------------------------------------------------------------- the vector env


def test_the_candidate_vector_env_on_the_measured_track_is_a_dummy_vec_env() -> None:
    """``CandidateVecEnv`` keeps one estimator per sub-environment and restarts the ones whose
    episode ends: bit for bit a ``DummyVecEnv`` of ``CandidateSets``, whose reset starts its
    estimates again, through autoresets (a short step limit makes episodes end often)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from powertrip_env.agents.candidate_vec_env import CandidateVecEnv

    b, limit = 3, 12
    dummy = DummyVecEnv([lambda: CandidateSets(gym.make(MEASURED, max_episode_steps=limit))] * b)
    native = CandidateVecEnv(gym.make_vec(MEASURED, num_envs=b, max_episode_steps=limit))
    dummy.seed(31)
    native.seed(31)
    np.testing.assert_array_equal(dummy.reset(), native.reset())
    assert isinstance(native.estimates, Estimates) and len(native.estimates.estimators) == b
    assert all(isinstance(env.estimates, Estimates) for env in dummy.envs)
    rng = np.random.default_rng(4)
    ends = believed = 0
    for _ in range(40):
        actions = rng.integers(N_SLOTS, size=b)
        a, n_ = dummy.step(actions), native.step(actions)
        for x, y in zip(a[:3], n_[:3], strict=True):
            np.testing.assert_array_equal(x, y)
        for da, na in zip(a[3], n_[3], strict=True):
            assert da.keys() == na.keys()
            for key in da:
                np.testing.assert_array_equal(da[key], na[key], err_msg=key)
        for i, env in enumerate(dummy.envs):
            np.testing.assert_array_equal(native.masks[i], env.candidates.masks)
        # the slots assume the estimates, not the stated values (once something is measured)
        believed += int(not np.array_equal(native.vector.candidates().features, a[0]))
        ends += int(a[2].sum())
    assert ends >= 6, "too few autoresets to check the estimates restart"
    assert believed > 0, "the estimates never changed a candidate: the check shows nothing"


# --------------------------------------------------------------------------- the tuned slot


@pytest.mark.parametrize(
    ("env_id", "seed"),
    [(MEASURED, 0), (MEASURED, 2), ("PowerTrip-Wide-Measured-v0", 1)],
)
def test_playing_the_last_slot_is_adaptive_horizon(env_id: str, seed: int) -> None:
    """The last slot is the tuned horizon rule under the same estimates ``AdaptiveHorizon``
    plans with: played every round, it is ``AdaptiveHorizon``'s episode, round by round."""
    slots, slot_info = _play_slot(env_id, TUNED_SLOT, seed)
    rule, rule_info = _play_policy(env_id, "AdaptiveHorizon", seed)
    assert len(slots) == len(rule)
    for k, (x, y) in enumerate(zip(slots, rule, strict=True)):
        np.testing.assert_array_equal(x, y, err_msg=f"round {k}")
    assert slot_info["tta_h"] == rule_info["tta_h"]
    assert slot_info["elapsed_s"] == rule_info["elapsed_s"]
    # and not the stated values' rule: the estimates reached the slots
    stated, stated_info = _play_policy(env_id, "HorizonRule", seed)
    assert len(stated) != len(slots) or any(
        not np.array_equal(x, y) for x, y in zip(slots, stated, strict=True)
    )
    assert stated_info["elapsed_s"] != slot_info["elapsed_s"]


# --------------------------------------------------------------------------- the policy


class _Cycling:
    """A stand-in model: the slots in turn, one per call; it keeps what it was shown."""

    def __init__(self, order: tuple[int, ...]) -> None:
        self.order = order
        self.calls = 0
        self.seen: list[np.ndarray] = []

    def predict(self, obs, deterministic=True):
        assert obs.shape == (N_FEATURES,)
        self.seen.append(np.array(obs, copy=True))
        slot = self.order[self.calls % len(self.order)]
        self.calls += 1
        return np.array(slot), None


@pytest.mark.parametrize("env_id", [MEASURED, "PowerTrip-Wide-Measured-v0"])
def test_the_policy_chooses_among_the_wrappers_candidates(env_id: str) -> None:
    """``CandidatePolicy`` keeps the same estimates as ``CandidateSets``: the same features
    shown to the model and the same sets played, round by round, to the episode's end."""
    order = (TUNED_SLOT, 0, 5, 1, TUNED_SLOT, 9, 3)
    wrapped = CandidateSets(gym.make(env_id))
    obs_w, _ = wrapped.reset(seed=6)
    env = gym.make(env_id)
    obs, info = env.reset(seed=6)
    model = _Cycling(order)
    policy = CandidatePolicy(model, "cycling")
    policy.reset(env)
    assert isinstance(policy.estimates, Estimates)
    for k in range(2_000):
        slot = order[k % len(order)]
        expected = wrapped.candidates.masks[slot].copy()
        action = policy.act(obs, info)
        np.testing.assert_array_equal(model.seen[-1], obs_w, err_msg=f"round {k}")
        assert action.shape == env.action_space.shape
        np.testing.assert_array_equal(action != 0, expected, err_msg=f"round {k}")
        obs_w, _, done_w, cut_w, info_w = wrapped.step(slot)
        obs, _, terminated, truncated, info = env.step(action)
        assert (terminated, truncated) == (done_w, cut_w)
        assert info["elapsed_s"] == info_w["elapsed_s"]
        if terminated or truncated:
            break
    assert terminated or truncated, "the episode did not end"
    assert info["tta_h"] == info_w["tta_h"]


# --------------------------------------------------------------------------- the known track


def test_the_known_track_keeps_no_estimates_and_the_stated_candidates() -> None:
    env = gym.make("PowerTrip-v0")
    env.reset(seed=3)
    assert estimates_for(env.unwrapped) is None
    venv = gym.make_vec("PowerTrip-v0", num_envs=2)
    venv.reset(seed=3)
    assert estimates_for(venv.unwrapped, 2) is None

    wrapped = CandidateSets(gym.make("PowerTrip-v0"))
    obs, _ = wrapped.reset(seed=3)
    policy = CandidatePolicy(_Cycling((0,)), "keep")
    policy.reset(env)
    assert wrapped.estimates is None and policy.estimates is None
    rng = np.random.default_rng(8)
    for _ in range(25):
        stated = build(wrapped.env.unwrapped)
        np.testing.assert_array_equal(obs.view(np.int32), stated.features.view(np.int32))
        np.testing.assert_array_equal(wrapped.candidates.masks, stated.masks)
        obs, *_, terminated, truncated, _ = wrapped.step(int(rng.integers(N_SLOTS)))
        assert not (terminated or truncated)

    from powertrip_env.agents.candidate_vec_env import CandidateVecEnv

    native = CandidateVecEnv(gym.make_vec("PowerTrip-v0", num_envs=2))
    native.seed(3)
    first = native.reset()
    assert native.estimates is None
    np.testing.assert_array_equal(first, native.vector.candidates().features)


def test_estimates_for_on_the_measured_track() -> None:
    env = gym.make(MEASURED)
    env.reset(seed=0)
    one = estimates_for(env.unwrapped)
    assert isinstance(one, Estimates) and len(one.estimators) == 1
    venv = gym.make_vec(MEASURED, num_envs=3)
    venv.reset(seed=0)
    many = estimates_for(venv.unwrapped, 3)
    assert isinstance(many, Estimates) and len(many.estimators) == 3
    beliefs = many.update(venv.unwrapped.telemetry())
    assert beliefs.shape[0] == 3
    assert np.all(beliefs == 1.0)  # nothing measured yet: the stated values


# --------------------------------------------------------------------------- the estimator


def _old_pace_noise(workload: Any, rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """The direct fit ``Estimator.pace_noise`` replaced: every row rebuilt at every call."""
    if not rows:
        return 1.0, 1.0
    table = np.array(rows)
    before, batch, gained = table[:, 0], table[:, 1], table[:, 2]
    wl = workload
    growth = (1.0 + before / wl.noise_p_b) ** wl.noise_gamma
    best = (math.inf, 1.0, 1.0)
    for noise in NOISE_GRID:
        eff = 1.0 / (1.0 + wl.noise_b0 * noise * growth / batch)
        stated = wl.local_steps * wl.eta_local * eff
        resid = np.log(gained / stated)
        pace = float(np.exp(resid.mean()))
        err = float(np.sum((resid - np.log(pace)) ** 2))
        if err < best[0] - 1e-12:
            best = (err, pace, float(noise))
    return best[1], best[2]


# the flagship's job (noise_gamma = 1) and Digits' (noise_gamma = 0.2337), measured
JOBS = {
    "measured": 'extends = "measured"\n',
    "digits": 'extends = "digits"\n[unknowns]\npace_sigma = 0.1\nnoise_sigma = 0.2\n',
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_the_running_pace_and_noise_fit_is_the_direct_fit(tmp_path: Path, job: str) -> None:
    """The estimates keep, per noise factor, the running mean and squared deviations of the
    rounds' residuals (Welford's), so a fit costs the grid and not the rounds: after every
    round its pace is the direct fit's over every row to 1e-12 and its noise factor the same
    one of the grid, over a long episode and again from nothing after a reset. Rows come only
    from rounds that requested a powered site and made progress."""
    path = tmp_path / f"{job}.toml"
    path.write_text(JOBS[job], encoding="utf-8")
    assert load_scenario(path).unknowns.drawn
    env = gym.make("PowerTrip-v0", scenario=str(path), jitter=False).unwrapped
    env.reset(seed=0)
    start = env.decision_view()
    assert start.measured_track
    n = start.n_sites
    wl = start.scenario.workload
    rng = np.random.default_rng(len(JOBS[job]))
    estimator = Estimator()
    for episode in range(2):
        estimator.reset(start.scenario)
        assert estimator.pace_noise() == (1.0, 1.0) == _old_pace_noise(wl, [])
        rows: list[tuple[float, float, float]] = []
        progress = 0.0
        for k in range(300 if episode == 0 else 20):
            now = dataclasses.replace(start, rounds=k, surrogate_progress=progress)
            estimator.update(now)
            assert estimator.fitted == len(rows)
            pace, noise = estimator.pace_noise()
            want_pace, want_noise = _old_pace_noise(wl, rows)
            assert noise == want_noise and pace == pytest.approx(want_pace, rel=1e-12), (episode, k)
            mask = rng.random(n) < 0.6
            mask[int(rng.integers(n))] = True
            if k % 17 == 5:
                mask[:] = False  # no site: no batch, no row
            estimator.played(mask)
            batch = float(wl.site_batch * np.count_nonzero(mask & now.available))
            after = progress
            if batch > 0.0 and k % 23 != 11:  # else no progress: no row
                # rounds far apart on the curve: the progress crosses a few noise_p_b
                after += rng.uniform(0.2, 2.0) * wl.noise_p_b / 40.0
                # the row as the estimator reads it: the difference of two views' progress
                rows.append((progress, batch, after - progress))
            progress = after
        estimator.update(dataclasses.replace(start, rounds=k + 1, surrogate_progress=progress))
        assert estimator.fitted == len(rows)
        got = estimator.pace_noise()
        want = _old_pace_noise(wl, rows)
        assert got[1] == want[1] and got[0] == pytest.approx(want[0], rel=1e-12)
        assert math.isfinite(got[0]) and got[0] > 0.0 and got[1] in NOISE_GRID
        if episode == 0:
            assert len(rows) > 250 and len({r[1] for r in rows}) > 3


def test_estimates_played_before_update_is_refused() -> None:
    env = gym.make(MEASURED)
    env.reset(seed=0)
    view = env.unwrapped.decision_view()
    estimates = Estimates(view.scenario, 2)
    masks = np.ones((2, view.n_sites), dtype=bool)
    with pytest.raises(RuntimeError, match="update"):
        estimates.played(masks)
    telemetry = env.unwrapped.telemetry()
    estimates.update(telemetry)
    estimates.played(masks)
    with pytest.raises(RuntimeError, match="update"):
        estimates.played(masks)  # each update is for one round's sets
    estimates.update(telemetry)
    estimates.restart(np.array([False, True]))
    with pytest.raises(RuntimeError, match="update"):
        estimates.played(masks)  # a restarted episode has no view yet


def test_the_slots_read_the_telemetry_not_the_draw(tmp_path: Path, monkeypatch) -> None:
    """Two episodes that start alike but draw different worlds get the same slots until
    telemetry tells them apart, and building the slots never opens the clairvoyant door."""
    from powertrip_env.env import PowerTripEnv

    wider = tmp_path / "wider.toml"
    wider.write_text('extends = "measured"\n[unknowns]\nthroughput_sigma = 0.4\njoin_sigma = 0.5\n')
    envs = [
        CandidateSets(gym.make("PowerTrip-v0", scenario=scenario))
        for scenario in ("measured", str(wider))
    ]
    features = [env.reset(seed=5)[0] for env in envs]
    draws = [env.unwrapped.clairvoyant().drawn().vector for env in envs]
    assert not np.array_equal(*draws)
    assert np.array_equal(*features)  # nothing measured yet: the draw changes nothing

    def door(self: Any) -> Any:
        raise AssertionError("the candidate slots opened the clairvoyant door")

    monkeypatch.setattr(PowerTripEnv, "clairvoyant", door)
    last = N_SLOTS - 1
    for _ in range(5):
        steps = [env.step(last) for env in envs]
    # the same slot, different worlds: the rounds measured differ, and so do the estimates
    assert not np.array_equal(steps[0][0], steps[1][0])
