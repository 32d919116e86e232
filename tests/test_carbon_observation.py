"""A carbon task's observation (``carbon_obs=True``): what the task is scored on, read from the
past alone, and nothing else changed.

The per-site columns depend only on the trace row and are precomputed
(``site_table._carbon_obs_table``): they must equal the forecasts ``predict_plan`` prices with
(``params.carbon_sources``), must not move when a later row's intensity does, and the job's
columns (written by the kernel) must equal the state they report. The known and measured
tasks' observations do not change, and a carbon observation asked of a scenario without a
carbon file is refused with a message that names the option.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env
from powertrip_env.dynamics import features as ft
from powertrip_env.dynamics.layout import G_PER_J, PV_W
from powertrip_env.dynamics.params import carbon_sources
from powertrip_env.dynamics.site_table import _carbon_obs_table
from powertrip_env.units import per_j_to_per_kwh

N_SITE, N_GLOBAL = ft.N_SITE_FEATURES, ft.N_GLOBAL


def _carbon_env(**kwargs):
    return gym.make("PowerTrip-Carbon-Measured-v2", carbon_obs=True, **kwargs)


def _split(obs: np.ndarray, n: int, per_site: int) -> tuple[np.ndarray, np.ndarray]:
    return obs[: n * per_site].reshape(n, per_site), obs[n * per_site :]


def test_the_columns_are_added_and_nothing_else_moves() -> None:
    # catches: a carbon column written over a feature or the telemetry, the job's columns in
    # the wrong place, a space whose shape or bounds disagree, or the plain task changed
    plain = gym.make("PowerTrip-Carbon-Measured-v2", carbon_obs=False)
    carbon = _carbon_env()
    n, tel = 6, ft.N_TELEMETRY
    assert plain.observation_space.shape == (n * (N_SITE + tel) + N_GLOBAL,)
    per_site = N_SITE + ft.N_CARBON_SITE + tel
    assert carbon.observation_space.shape == (n * per_site + N_GLOBAL + ft.N_CARBON_JOB,)
    a, _ = plain.reset(seed=4)
    b, _ = carbon.reset(seed=4)
    rng = np.random.default_rng(0)
    for step in range(40):
        sa, ga = _split(a, n, N_SITE + tel)
        sb, gb = _split(b, n, per_site)
        np.testing.assert_array_equal(sb[:, :N_SITE], sa[:, :N_SITE])
        np.testing.assert_array_equal(sb[:, N_SITE + ft.N_CARBON_SITE :], sa[:, N_SITE:])
        np.testing.assert_array_equal(gb[:N_GLOBAL], ga)
        row = int(carbon.unwrapped.decision_view().clock_s // carbon.unwrapped.params.interval_s)
        site_obs = carbon.unwrapped.params.site_obs
        np.testing.assert_array_equal(
            sb[:, N_SITE : N_SITE + ft.N_CARBON_SITE], site_obs[row, :, N_SITE:]
        )  # the carbon columns are the current row's
        assert carbon.observation_space.contains(b), step
        action = (rng.random(n) < 0.5).astype(np.int8)
        a, ra, *_ = plain.step(action)
        b, rb, *_ = carbon.step(action)
        assert ra == rb  # the observation changes nothing else


def test_the_site_columns_are_the_forecasts_predict_plan_prices_with() -> None:
    # catches: a window off by a row, a forecast from another day, the week's days miscounted,
    # an intensity in the wrong unit, or the PV share against the wrong draw
    env = _carbon_env()
    env.reset(seed=0)
    params = env.unwrapped.params
    day, per_h = 288, 12
    table = params.site_obs[..., N_SITE : N_SITE + ft.N_CARBON_SITE]
    g_per_kwh = per_j_to_per_kwh(params.table[:, G_PER_J])
    for row in (0, day - 1, day, 3 * day + 17, 9 * day + 200, 20 * day + 5):
        cols = table[row]
        np.testing.assert_allclose(
            cols[:, ft.FC_INTENSITY], np.minimum(g_per_kwh[row] / ft.INTENSITY_SCALE, 1), rtol=1e-6
        )
        for forecast, first in (("week", ft.FC_WEEK), ("yesterday", ft.FC_YESTERDAY)):
            src = carbon_sources(params, row, 24 * per_h + 1, forecast)  # (H, K)
            ahead = g_per_kwh[src].mean(axis=1) / ft.INTENSITY_SCALE  # (H, N)
            for w, (lo_h, hi_h) in enumerate(ft.CARBON_WINDOWS_H):
                want = ahead[round(lo_h * per_h) + 1 : round(hi_h * per_h) + 1].mean(axis=0)
                np.testing.assert_allclose(cols[:, first + w], want, rtol=1e-5, atol=1e-7)
        busy = params.powered[row] * params.gpu_wall_w
        share = np.where(busy > 0, params.pv_w[row] / np.where(busy > 0, busy, 1), 0)
        np.testing.assert_allclose(cols[:, ft.FC_PV_SHARE], np.clip(share, 0, 1), rtol=1e-6)
    assert table.min() >= 0.0 and table.max() <= 1.0


def test_the_site_columns_read_only_the_past() -> None:
    # catches: a forecast that peeks at a later row's intensity (ceil for floor, h for h - D)
    env = _carbon_env()
    env.reset(seed=0)
    params = env.unwrapped.params
    rows = params.rows
    g, pv = params.table[:rows, G_PER_J], params.table[:rows, PV_W]
    busy = params.powered * params.gpu_wall_w
    base = _carbon_obs_table(g, pv, busy, params.interval_s)
    rng = np.random.default_rng(1)
    for row in (5, 288, 4000, rows - 300):
        future = g.copy()
        future[row + 1 :] *= rng.uniform(0.2, 3.0, future[row + 1 :].shape)
        later_pv = pv.copy()
        later_pv[row + 1 :] *= 0.5
        moved = _carbon_obs_table(future, later_pv, busy, params.interval_s)
        np.testing.assert_array_equal(moved[: row + 1], base[: row + 1])
        assert not np.array_equal(moved[row + 1 :], base[row + 1 :])


def test_the_job_columns_are_the_state_they_report() -> None:
    # catches: time left from the wrong clock, carbon in the wrong unit, the pace of an idle
    # round (0) taken as the pace, or the columns not written at reset
    env = _carbon_env(jitter=False)
    obs, info = env.reset(seed=3)
    u = env.unwrapped
    budget, ref = float(u.state.budget_s[0]), u.params.carbon_ref_kg
    job = obs[-ft.N_CARBON_JOB :]
    np.testing.assert_allclose(job, [1.0, 1.0, 0.0])  # no pace yet: the work reads as 1
    prev_pace = 0.0
    for step in range(30):
        action = np.zeros(6, np.int8) if step % 5 == 4 else np.ones(6, np.int8)
        obs, _, terminated, truncated, info = env.step(action)
        job = obs[-ft.N_CARBON_JOB :]
        left = budget - info["elapsed_s"]
        assert job[ft.GC_TIME_LEFT] == pytest.approx(left / budget, rel=1e-5)
        assert job[ft.GC_CARBON] == pytest.approx(min(info["carbon_kg"] / ref, 1.0), rel=1e-5)
        view = u.decision_view()
        pace = float(u.state.last_pace[0])
        assert pace > 0.0
        need = view.progress_needed - view.surrogate_progress
        want = min(need / pace / left / ft.PACE_SCALE, 1.0)
        assert job[ft.GC_FINISH] == pytest.approx(want, rel=1e-4), step
        if step % 5 == 4:  # an idle round keeps the pace of the last that taught
            assert pace == pytest.approx(prev_pace)
        prev_pace = pace
        assert not (terminated or truncated)


def test_the_vector_env_and_the_dict_shape_agree_with_the_single_env() -> None:
    # catches: the vector env or the dict split laying out the carbon columns differently
    single = _carbon_env()
    venv = gym.make_vec("PowerTrip-Carbon-Measured-v2", num_envs=2, carbon_obs=True)
    as_dict = _carbon_env(obs_mode="dict", max_sites=8)
    a, _ = single.reset(seed=11)
    v, _ = venv.reset(seed=[11, 12])
    d, _ = as_dict.reset(seed=11)
    per_site = N_SITE + ft.N_CARBON_SITE + ft.N_TELEMETRY
    for _ in range(5):
        np.testing.assert_array_equal(v[0], a)
        sites, glob = _split(a, 6, per_site)
        np.testing.assert_array_equal(d["sites"][:6], sites)
        assert not d["sites"][6:].any()  # padded sites read as absent
        np.testing.assert_array_equal(d["global"], glob)
        assert as_dict.observation_space.contains(d)
        action = np.ones(6, np.int8)
        a, *_ = single.step(action)
        v, *_ = venv.step(np.stack([action, action]))
        d, *_ = as_dict.step(np.concatenate([action, np.zeros(2, np.int8)]))


def test_the_carbon_tasks_observe_it_and_no_other_task_does() -> None:
    # catches: a carbon ID registered without its observation, or another ID given it
    for env_id in powertrip_env.CARBON_SUITE_IDS:
        assert gym.spec(env_id).kwargs["carbon_obs"] is True
        assert gym.make(env_id).unwrapped.params.carbon_obs
    for env_id in (*powertrip_env.SUITE_IDS, *powertrip_env.MEASURED_SUITE_IDS):
        assert not gym.make(env_id).unwrapped.params.carbon_obs, env_id


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-Measured-v0"])
def test_a_carbon_observation_needs_a_carbon_file(env_id: str) -> None:
    with pytest.raises(ValueError, match=r"carbon_obs=True on scenario .*carbon_file"):
        gym.make(env_id, carbon_obs=True)
    with pytest.raises(ValueError, match=r"carbon_obs='yes': give True or False"):
        gym.make("PowerTrip-Carbon-v2", carbon_obs="yes")
    with pytest.raises(ValueError, match=r"carbon_obs=True on scenario"):
        gym.make_vec(env_id, num_envs=2, carbon_obs=True)
