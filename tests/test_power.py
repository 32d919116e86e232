"""Available power on one calendar (powertrip_env/scenario/power.py), and forecasts in
predict_round.

``A_i(t) = capacity_kw · (1 − u(t + shift_i)) + pv_kw · s(t)``: the grid trace ``u`` is replayed
on the calendar shifted by ``shift_days`` and, with UTC offsets, into each site's local time; the
PV trace ``s`` and the PV forecasts are on the calendar as recorded. The calendar is the stretch
every file covers for every site. The toy numbers are those of ``scenario_files``: a G100 costs
250 W at the wall, a site of 5.25 kW at u = 0.5 has 2,625 W, 10 GPUs, 600 s per round.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import INTERVAL_S, ROWS_PER_DAY, T0_UNIX, site, write_scenario, write_trace

from powertrip_env import ScenarioError, TraceError, dynamics, load_scenario
from powertrip_env.env import PowerTripEnv
from powertrip_env.scenario.power import site_power
from powertrip_env.simulation import load_simulation

DAY_S = 86_400
HOUR_ROWS = 3600 // INTERVAL_S


def power_of(path) -> object:
    return site_power(load_scenario(path))


def grid_value(rows: np.ndarray) -> np.ndarray:
    """A utilisation that tells which grid row was read: 0.1 + row / 10,000."""
    return 0.1 + rows / 10_000.0


# --------------------------------------------------------------------------- A_i(t)


def test_pv_adds_pv_kw_times_the_pv_fraction(tmp_path):
    s = [0.0, 0.25, 0.5, 1.0]
    path = write_scenario(
        tmp_path,
        [site("sun", "ca", pv_kw=2.0, pv_column="p"), site("grid", "cb")],
        {"ca": 0.5, "cb": 0.5},
        pv={"p": s},
    )
    power = power_of(path)
    assert power.t0_s == T0_UNIX and power.interval_s == INTERVAL_S
    np.testing.assert_allclose(power.available_w[:4, 0], 2625.0 + 2000.0 * np.array(s))
    np.testing.assert_allclose(power.available_w[:4, 1], 2625.0)  # no PV: the grid part only
    np.testing.assert_allclose(power.peak_w, [5250.0 + 2000.0, 5250.0])
    # GPUs follow: 2,625 W -> 10, 3,125 W -> 12, 3,625 W -> 14, 4,625 W -> 16 (all it has)
    params = load_simulation(path).params
    assert params.powered[:4, 0].tolist() == [10, 12, 14, 16]


def test_pv_alone_powers_a_site_with_no_grid_headroom(tmp_path):
    path = write_scenario(
        tmp_path, [site("sun", "ca", pv_kw=5.25, pv_column="p")], {"ca": 1.0}, pv={"p": [0.0, 0.5]}
    )
    params = load_simulation(path).params
    assert params.powered[:2, 0].tolist() == [0, 10]
    assert params.available[:2, 0].tolist() == [False, True]


def test_grid_trace_is_read_in_each_sites_local_time(tmp_path):
    # The trace was recorded at UTC−4; "east" is at UTC+2, so at each moment it reads the value
    # recorded 6 hours later (its local time of day). "west" is in the recording's time zone.
    path = write_scenario(
        tmp_path,
        [site("west", "g", utc_offset_h=-4.0), site("east", "g", utc_offset_h=2.0)],
        {"g": grid_value},
        trace={"utc_offset_h": -4.0},
    )
    power = power_of(path)
    lead = 6 * HOUR_ROWS
    # calendar: where both readings exist, from the trace's start to 6 h before its end
    assert power.t0_s == T0_UNIX
    assert power.rows == 2 * ROWS_PER_DAY - lead
    k = np.arange(power.rows)
    np.testing.assert_allclose(power.available_w[:, 0], 5250.0 * (1 - grid_value(k)), rtol=1e-9)
    np.testing.assert_allclose(
        power.available_w[:, 1], 5250.0 * (1 - grid_value(k + lead)), rtol=1e-9
    )


def test_without_a_trace_offset_sites_read_the_grid_trace_in_utc(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("west", "g", utc_offset_h=-4.0), site("east", "g", utc_offset_h=2.0)],
        {"g": grid_value},
    )
    power = power_of(path)
    assert power.rows == 2 * ROWS_PER_DAY
    np.testing.assert_array_equal(power.available_w[:, 0], power.available_w[:, 1])


def test_shift_days_replays_the_grid_trace_later_on_the_pv_calendar(tmp_path):
    # PV recorded from day 3; the grid trace, from day 1, is replayed 2 days later to meet it
    path = write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=1.0, pv_column="p")],
        {"g": grid_value},
        days=3,
        pv={"p": lambda rows: rows / 1000.0},
        pv_start=T0_UNIX + 2 * DAY_S,
        trace={"shift_days": 2},
    )
    power = power_of(path)
    assert power.t0_s == T0_UNIX + 2 * DAY_S
    assert power.rows == 3 * ROWS_PER_DAY  # the grid's 3 days, 2 days later, over the PV's 2+
    k = np.arange(power.rows)
    expected = 5250.0 * (1 - grid_value(k)) + 1000.0 * (k / 1000.0)
    np.testing.assert_allclose(power.available_w[:, 0], expected, rtol=1e-9)


def test_calendar_is_the_stretch_every_file_covers(tmp_path):
    # grid: days 1-2; PV: from day 2, for 2 days; forecasts as the PV: only day 2 is common
    path = write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=1.0, pv_column="p")],
        {"g": grid_value},
        pv={"p": 0.5},
        forecast={"p": 0.5},
        pv_start=T0_UNIX + DAY_S,
    )
    power = power_of(path)
    assert power.t0_s == T0_UNIX + DAY_S
    assert power.rows == ROWS_PER_DAY
    k = np.arange(power.rows)
    np.testing.assert_allclose(
        power.available_w[:, 0], 5250.0 * (1 - grid_value(k + ROWS_PER_DAY)) + 500.0, rtol=1e-9
    )
    # the env's clock counts from the calendar's start
    env = PowerTripEnv(scenario=path, split="all")
    _, info = env.reset(seed=0, options={"start_time": 0.0})
    assert info["trace_time"] == T0_UNIX + DAY_S


def test_forecast_keeps_the_grid_part_and_takes_the_pv_part_from_the_forecast(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=2.0, pv_column="p")],
        {"g": 0.5},
        pv={"p": 0.25},
        forecast={"p": lambda issue, h: 0.1 * h},
        horizons=4,
    )
    power = power_of(path)
    assert power.horizons == 4
    fc = power.forecast_w[10, :, 0]
    assert fc[0] == pytest.approx(2625.0 + 2000.0 * 0.25)  # horizon 0: the actual now
    np.testing.assert_allclose(fc[1:], 2625.0 + 2000.0 * 0.1 * np.arange(1, 4))


def test_without_a_forecast_file_the_forecast_is_the_current_power(tmp_path):
    path = write_scenario(
        tmp_path, [site("sun", "g", pv_kw=2.0, pv_column="p")], {"g": 0.5}, pv={"p": [0.0, 0.5]}
    )
    power = power_of(path)
    assert power.horizons == 1
    np.testing.assert_array_equal(power.forecast_w[:, 0, :], power.available_w)


# --------------------------------------------------------------------------- clear errors


def test_different_time_steps_are_refused_naming_the_files_and_steps(tmp_path):
    path = write_scenario(
        tmp_path, [site("sun", "g", pv_kw=1.0, pv_column="p")], {"g": 0.5}, pv={"p": 0.5}
    )
    write_trace(path.parent / "pv.csv", {"p": 0.5}, interval_s=600)  # every 10 minutes
    with pytest.raises(TraceError) as info:
        power_of(path)
    message = str(info.value)
    for part in ("different time steps", "trace.csv every 300 s", "pv.csv every 600 s"):
        assert part in message, message


def test_rows_on_different_grids_are_refused(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=1.0, pv_column="p")],
        {"g": 0.5},
        pv={"p": 0.5},
        pv_start=T0_UNIX + 150,  # half a step off the grid trace's rows
    )
    with pytest.raises(TraceError, match="different 300-s grids"):
        power_of(path)


def test_data_without_a_common_stretch_of_time_are_refused(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=1.0, pv_column="p")],
        {"g": 0.5},
        pv={"p": 0.5},
        pv_start=T0_UNIX + 5 * DAY_S,
    )
    with pytest.raises(ScenarioError) as info:
        power_of(path)
    message = str(info.value)
    for part in (str(path), "share no common stretch", "shift_days = 0", "utc_offset_h"):
        assert part in message, message


def test_a_utc_offset_that_is_not_whole_steps_is_refused(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("a", "g", utc_offset_h=0.01)],  # 36 s ahead of the trace's zone
        {"g": 0.5},
        trace={"utc_offset_h": 0.0},
    )
    with pytest.raises(ScenarioError, match=r"site 'a'.*not a whole number of its 300-s steps"):
        power_of(path)


@pytest.mark.parametrize(
    ("split", "days"), [("train", {"train_days": [1, 3]}), ("test", {"test_days": [3, 3]})]
)
def test_split_days_beyond_the_data_name_the_scenario_file_and_the_split(tmp_path, split, days):
    path = write_scenario(tmp_path, [site("a", "g")], {"g": 0.5}, trace=days)  # 2 days of data
    with pytest.raises(ScenarioError) as info:
        PowerTripEnv(scenario=path, split=split)
    message = str(info.value)
    for part in (str(path), f"'{split}_days'", "2 day(s)", "1 <= first <= last <= 2"):
        assert part in message, message


def test_day_rows_counts_whole_days_from_the_calendar_start(tmp_path):
    power = power_of(write_scenario(tmp_path, [site("a", "g")], {"g": 0.5}, days=3))
    assert power.day_rows(1, 1, "x") == (0, ROWS_PER_DAY)
    assert power.day_rows(2, 3, "x") == (ROWS_PER_DAY, 3 * ROWS_PER_DAY)
    with pytest.raises(ScenarioError, match="x = "):
        power.day_rows(0, 1, "x")


# --------------------------------------------------------------------------- forecasts


def dusk_scenario(tmp_path, forecast_h2: float, pv_actual=0.5):
    """One PV-only site: 10 GPUs while s = 0.5. The forecast issued at each row sees s = 0.5
    one row ahead and ``forecast_h2`` two rows ahead (the start of the row after next)."""
    return write_scenario(
        tmp_path,
        [site("sun", "g", pv_kw=5.25, pv_column="p")],
        {"g": 1.0},  # no grid headroom: only the sun powers it
        pv={"p": pv_actual},
        forecast={"p": lambda issue, h: np.where(h >= 2, forecast_h2, 0.5)},
        horizons=4,
    )


def predict_at(path, t: float, **kwargs) -> dynamics.RoundPrediction:
    params = load_simulation(path).params
    state = dynamics.initial_state(params, np.array([t]))
    return dynamics.predict_round(params, state, np.ones((1, 1), dtype=bool), **kwargs)


def test_a_site_forecast_to_lose_its_power_is_predicted_to_drop_out(tmp_path):
    # From 10 s into row 20: a 0.08 s join and 600 s of compute would end at row 22 + 10.08 s,
    # but the forecast has no sun from row 22: the round is predicted to end there, empty.
    t = 20 * INTERVAL_S + 10.0
    dark = predict_at(dusk_scenario(tmp_path, forecast_h2=0.0), t)
    assert dark.round_time_s[0] == pytest.approx(2 * INTERVAL_S - 10.0)
    assert dark.compute_s[0] == pytest.approx(2 * INTERVAL_S - 10.0)
    assert dark.delta_progress[0] == 0.0 and dark.comm_s[0] == 0.0
    # The actual sun never sets: the true round completes
    params = load_simulation(dusk_scenario(tmp_path, forecast_h2=0.0)).params
    real = dynamics.step_round(
        params,
        dynamics.initial_state(params, np.array([t])),
        np.ones((1, 1), dtype=bool),
        np.ones((1, 2)),
    )
    assert not real.dropped.any() and real.state.progress[0] > 0
    # A sunny forecast predicts the round that really happens
    sunny = predict_at(dusk_scenario(tmp_path, forecast_h2=0.5), t)
    assert sunny.compute_s[0] == pytest.approx(0.08 + 600.0)
    assert sunny.round_time_s[0] == pytest.approx(real.round_time_s[0], rel=1e-12)
    assert sunny.delta_progress[0] == pytest.approx(real.state.progress[0], rel=1e-12)


def test_predict_round_reads_the_forecast_and_never_future_actuals(tmp_path):
    now = 20
    t = now * INTERVAL_S + 10.0
    base = dusk_scenario(tmp_path, forecast_h2=0.0)
    # the same forecasts, but the actual sun after now is different (and dark at times)
    changed_actuals = dusk_scenario(
        tmp_path, forecast_h2=0.0, pv_actual=lambda r: np.where(r <= now, 0.5, (r % 3) / 2)
    )
    params = load_simulation(changed_actuals).params
    assert not np.array_equal(
        params.powered[now + 1 : now + 4], load_simulation(base).params.powered[now + 1 : now + 4]
    )
    a, b = predict_at(base, t), predict_at(changed_actuals, t)
    for name, x, y in zip(dynamics.RoundPrediction._fields, a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=name)
    # ... while a different forecast changes the prediction
    c = predict_at(dusk_scenario(tmp_path, forecast_h2=0.5), t)
    assert c.round_time_s[0] != a.round_time_s[0]
    assert c.delta_progress[0] > a.delta_progress[0] == 0.0


def test_steady_state_prediction_leaves_the_join_out(tmp_path):
    path = write_scenario(
        tmp_path,
        [site("a", "ca"), site("b", "cb")],
        {"ca": 0.5, "cb": 0.5},
        network={"join_fixed_s": 30.0, "rtt_to_hub_ms": [40.0, 40.0]},
    )
    env = gym.make("PowerTrip-v0", scenario=path, jitter=False)
    env.reset(seed=0, options={"start_time": 0.0})
    env.step(np.array([1, 0]))  # a is joined, b is not
    pe = env.unwrapped
    # b joins: 30 s plus the 8e8-bit model over 10 Gbps
    assert pe.predict_round(np.array([1, 0])).compute_s == pytest.approx(600.0, rel=1e-12)
    assert pe.predict_round(np.array([0, 1])).compute_s == pytest.approx(630.08, rel=1e-12)
    assert pe.predict_round(np.array([1, 1])).compute_s == pytest.approx(630.08, rel=1e-12)
    steady = pe.predict_round(np.array([[1, 0], [0, 1], [1, 1]]), steady_state=True)
    np.testing.assert_allclose(steady.compute_s, [600.0, 600.0, 600.0], rtol=1e-12)
    one, two = 2 * 0.040 + 2 * 0.08, 2 * 0.040 + 2 * (2 * 0.08)  # comm of one and two sites
    np.testing.assert_allclose(steady.round_time_s, [603 + one, 603 + one, 603 + two], rtol=1e-12)
    real = env.step(np.array([0, 1]))[4]  # the round itself pays b's join
    assert real["compute_s"] == pytest.approx(630.08, rel=1e-12)
