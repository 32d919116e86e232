"""The simulator (powertrip_env/dynamics.py) against docs/model.md, worked by hand.

Every scenario here is a tiny TOML file and trace written by ``scenario_files`` whose numbers
make the model easy to evaluate on paper (see that module's docstring): a G100 costs 250 W at
the wall and processes 10 samples/s, the quota is 60,000 samples, and a site with 5.25 kW at
u = 0.5 powers 10 GPUs and computes a round in 600 s. A site that did not complete the previous
round first joins: ``join_fixed_s`` (0 unless a test sets it) plus fetching the 8e8-bit model
over its WAN link (0.08 s at 10 Gbps); tests about compute time start with their sites already
joined. Expected values below are written out from the formulas, never copied from a run.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scenario_files import INTERVAL_S, site, write_scenario

from powertrip_env import dynamics
from powertrip_env.dynamics import layout
from powertrip_env.dynamics.info import no_round
from powertrip_env.simulation import load_simulation

QUOTA = 100 * 600  # local_steps · site_batch
G100_RATE = 10.0  # samples/s per powered G100: 100e12 · 0.5 / 5e12
G200_RATE = 20.0
G100_WALL_W = 100 * 2.0 * 1.25  # tdp · server_overhead · PUE
G200_WALL_W = 200 * 2.0 * 1.25
MODEL_BITS = 1e8 * 8
FETCH_S = MODEL_BITS / 10e9  # a join's model download at the default 10 Gbps: 0.08 s


def params_for(tmp_path, sites, util, **kwargs) -> dynamics.SimParams:
    return load_simulation(write_scenario(tmp_path, sites, util, **kwargs)).params


def start(params, t=0.0, joined=()) -> dynamics.SimState:
    """A fresh episode at ``t`` in which the sites ``joined`` completed the previous round."""
    state = dynamics.initial_state(params, np.array([float(t)]))
    prev = np.zeros((1, params.n_sites), dtype=bool)
    prev[0, list(joined)] = True
    return state.replace(prev_selected=prev)


def mask_of(params, *selected) -> np.ndarray:
    mask = np.zeros((1, params.n_sites), dtype=bool)
    mask[0, list(selected)] = True
    return mask


def step(params, state, *selected) -> dynamics.RoundResult:
    no_jitter = np.ones((1, params.n_sites + 1))
    return dynamics.step_round(params, state, mask_of(params, *selected), no_jitter)


def state_arrays(state: dynamics.SimState) -> dict[str, np.ndarray]:
    return {name: np.array(getattr(state, name), copy=True) for name in dynamics.SimState.FIELDS}


def eight_site_params(tmp_path, **kwargs):
    sites = [site(f"s{i}", f"c{i}") for i in range(8)]
    return params_for(tmp_path, sites, {f"c{i}": 0.5 for i in range(8)}, **kwargs)


# --------------------------------------------------------------------------- power and GPUs


def test_site_whose_headroom_fits_10_point_5_gpus_powers_10(tmp_path):
    # 5.25 kW · (1 − 0.5) = 2,625 W; p_g = 100 W · 2.0 · 1.25 = 250 W: 10.5 GPUs -> 10 powered
    params = params_for(tmp_path, [site("a", "ca")], {"ca": 0.5})
    assert params.gpu_wall_w[0] == pytest.approx(250.0)
    assert params.powered[0, 0] == 10
    result = step(params, start(params, joined=[0]), 0)
    assert result.powered[0, 0] == 10
    assert result.compute_s[0] == pytest.approx(QUOTA / (10 * G100_RATE))  # 600 s


def test_headroom_of_exactly_ten_gpus_powers_ten(tmp_path):
    # 5.0 kW · (1 − 0.5) = 2,500 W = 10 × 250 W: rounding must not lose the tenth GPU
    params = params_for(tmp_path, [site("a", "ca", capacity_kw=5.0)], {"ca": 0.5})
    assert params.powered[0, 0] == 10


def test_powered_gpus_are_capped_by_the_gpu_count(tmp_path):
    # 50 kW · 0.5 = 25 kW would power 100 GPUs; the site has 16
    params = params_for(tmp_path, [site("a", "ca", capacity_kw=50.0)], {"ca": 0.5})
    assert params.powered[0, 0] == 16
    result = step(params, start(params, joined=[0]), 0)
    assert result.compute_s[0] == pytest.approx(QUOTA / (16 * G100_RATE))


def test_site_with_no_headroom_is_unavailable(tmp_path):
    params = params_for(tmp_path, [site("a", "ca"), site("b", "cb")], {"ca": 0.5, "cb": 1.0})
    state = start(params)
    assert dynamics.available_now(params, state).tolist() == [[True, False]]
    assert params.powered[0].tolist() == [10, 0]


def test_selecting_only_an_unavailable_site_gives_an_idle_round(tmp_path):
    params = params_for(
        tmp_path,
        [site("a", "ca"), site("b", "cb")],
        {"ca": 0.5, "cb": 1.0},
        episode={"idle_s": 120.0},
    )
    state = start(params, 600.0)
    result = step(params, state, 1)
    assert result.idle[0]
    assert result.invalid[0] == 1
    assert not result.selected.any()
    assert result.round_time_s[0] == 120.0
    assert result.state.time_s[0] == 720.0
    assert result.state.progress[0] == 0.0
    assert result.energy_j[0] == 0.0
    assert result.straggler[0] == -1
    assert result.delta_accuracy[0] == 0.0
    assert result.state.accuracy[0] == state.accuracy[0] == 0.1  # still a0: nothing learned


def test_idle_round_lasts_one_trace_interval_by_default(tmp_path):
    params = params_for(tmp_path, [site("a", "ca")], {"ca": 0.5})
    result = step(params, start(params))
    assert result.idle[0]
    assert result.invalid[0] == 0
    assert result.round_time_s[0] == INTERVAL_S
    assert result.state.time_s[0] == INTERVAL_S


def test_unavailable_site_is_dropped_from_a_mixed_selection(tmp_path):
    params = params_for(tmp_path, [site("a", "ca"), site("b", "cb")], {"ca": 0.5, "cb": 1.0})
    result = step(params, start(params, joined=[0, 1]), 0, 1)
    assert result.selected.tolist() == [[True, False]]
    assert result.invalid[0] == 1
    assert not result.idle[0]
    assert result.compute_s[0] == pytest.approx(600.0)


# --------------------------------------------------------------------------- round time


@pytest.mark.parametrize(
    ("hub_gbps", "transfer_s"),
    [
        (10.0, 0.8),  # slowest site link: 8e8 bit / 1 Gbps = 0.8 s > 2 · 8e8 / 10 Gbps = 0.16 s
        (1.0, 1.6),  # the hub is the bottleneck: 2 sites · 8e8 bit / 1 Gbps = 1.6 s > 0.8 s
    ],
)
def test_two_site_round_time_follows_the_barrier_formula(tmp_path, hub_gbps, transfer_s):
    sites = [
        site("a", "ca", wan_gbps=1.0),  # 10 G100s: 100 samples/s -> 600 s
        site("b", "cb", gpu="G200", gpu_count=4, wan_gbps=4.0),  # 4 G200s: 80 samples/s -> 750 s
    ]
    params = params_for(
        tmp_path,
        sites,
        {"ca": 0.5, "cb": 0.5},
        network={"rtt_to_hub_ms": [40.0, 90.0], "hub_gbps": hub_gbps, "join_fixed_s": 30.0},
    )
    t0 = 900.0
    result = step(params, start(params, t0), 0, 1)
    # both join: 30 s plus the model over their links (0.8 s at 1 Gbps, 0.2 s at 4 Gbps)
    compute = max(30.8 + QUOTA / (10 * G100_RATE), 30.2 + QUOTA / (4 * G200_RATE))  # 780.2 s
    comm = 2.0 * 0.090 + 2.0 * transfer_s  # rtt_factor · max RTT + 2 · max(...)
    expected = compute + comm + 3.0  # + aggregation_s
    assert result.compute_s[0] == pytest.approx(compute, rel=1e-12)
    assert result.comm_s[0] == pytest.approx(comm, rel=1e-12)
    assert result.round_time_s[0] == pytest.approx(expected, rel=1e-12)
    assert result.state.time_s[0] == pytest.approx(t0 + expected, rel=1e-12)
    assert result.straggler[0] == 1


@pytest.mark.parametrize(
    ("util_a", "expected_compute_s"),
    [
        # from t = 100 s: 200 s at 10 GPUs (20,000 samples), then 5 GPUs (u = 0.75:
        # 1,312.5 W / 250 W = 5.25): 40,000 samples at 50/s = 800 s
        ([0.5, 0.75], 200.0 + 40_000 / 50.0),
        # ... then 300 s at 5 GPUs (15,000), then 8 GPUs (u = 0.6: 2,100 W -> 8.4): 25,000 at 80/s
        ([0.5, 0.75, 0.6], 200.0 + 300.0 + 25_000 / 80.0),
    ],
)
def test_site_whose_power_falls_mid_round_finishes_later(tmp_path, util_a, expected_compute_s):
    params = params_for(tmp_path, [site("a", "ca")], {"ca": util_a})
    result = step(params, start(params, 100.0, joined=[0]), 0)
    assert result.compute_s[0] == pytest.approx(expected_compute_s, rel=1e-12)
    assert result.compute_s[0] > QUOTA / (10 * G100_RATE)  # later than at the starting power


def test_site_whose_power_rises_mid_round_finishes_sooner(tmp_path):
    # from t = 100 s: 200 s at 5 GPUs (10,000 samples), then 10 GPUs: 50,000 at 100/s = 500 s
    params = params_for(tmp_path, [site("a", "ca")], {"ca": [0.75, 0.5]})
    result = step(params, start(params, 100.0, joined=[0]), 0)
    assert result.compute_s[0] == pytest.approx(200.0 + 500.0, rel=1e-12)


def test_join_cost_applies_only_to_sites_not_in_the_previous_round(tmp_path):
    sites = [
        site("a", "ca"),  # 10 G100s: 600 s
        site("b", "cb", gpu="G200", capacity_kw=6.25),  # 3,125 W / 500 W -> 6 G200s: 500 s
    ]
    params = params_for(tmp_path, sites, {"ca": 0.5, "cb": 0.5}, network={"join_fixed_s": 120.0})
    state = start(params)

    join = 120.0 + FETCH_S  # both sites fetch the model at 10 Gbps
    first = step(params, state, 0)
    assert first.compute_s[0] == pytest.approx(join + 600.0, rel=1e-12)  # a joins
    second = step(params, first.state, 0)
    assert second.compute_s[0] == pytest.approx(600.0, rel=1e-12)  # same set: no join
    third = step(params, second.state, 0, 1)
    # only b joins: max(600, 120.08 + 500) = 620.08 (a joining too would make it 720.08)
    assert third.compute_s[0] == pytest.approx(join + 500.0, rel=1e-12)
    assert third.straggler[0] == 1
    fourth = step(params, third.state, 1)
    assert fourth.compute_s[0] == pytest.approx(500.0, rel=1e-12)
    fifth = step(params, fourth.state, 0, 1)
    assert fifth.compute_s[0] == pytest.approx(join + 600.0, rel=1e-12)  # a sat out: it rejoins
    assert fifth.straggler[0] == 0


def test_idle_round_releases_every_site(tmp_path):
    params = params_for(tmp_path, [site("a", "ca")], {"ca": 0.5}, network={"join_fixed_s": 120.0})
    first = step(params, start(params), 0)
    idle = step(params, first.state)
    assert idle.idle[0]
    again = step(params, idle.state, 0)
    assert again.compute_s[0] == pytest.approx(120.0 + FETCH_S + 600.0, rel=1e-12)


def test_jitter_scales_compute_and_network_time_log_normally(tmp_path):
    params = params_for(
        tmp_path,
        [site("a", "ca")],
        {"ca": 0.5},
        network={"rtt_to_hub_ms": [40.0]},
        episode={"jitter_sigma": 0.1},
    )
    noise = np.array([[0.5, -1.0]])  # site draw, network draw
    factors = np.exp(0.1 * noise)
    result = dynamics.step_round(params, start(params, joined=[0]), mask_of(params, 0), factors)
    comm = 2.0 * 0.040 + 2.0 * max(MODEL_BITS / 10e9, MODEL_BITS / 10e9)
    assert result.compute_s[0] == pytest.approx(600.0 * math.exp(0.1 * 0.5), rel=1e-12)
    assert result.comm_s[0] == pytest.approx(comm * math.exp(0.1 * -1.0), rel=1e-12)


def test_join_time_is_the_fixed_cost_plus_fetching_the_model_over_the_wan(tmp_path):
    sites = [site("a", "ca", wan_gbps=1.0), site("b", "cb", wan_gbps=4.0)]
    params = params_for(
        tmp_path,
        sites,
        {"ca": 0.5, "cb": 0.5},
        network={"join_fixed_s": 30.0},
        workload={"model_bytes": 5e8},
    )
    # 5e8 bytes = 4e9 bits: 4 s at 1 Gbps, 1 s at 4 Gbps
    np.testing.assert_allclose(params.join_s, [30.0 + 4.0, 30.0 + 1.0], rtol=1e-15)
    first = step(params, start(params), 0)
    assert first.compute_s[0] == pytest.approx(34.0 + 600.0, rel=1e-12)
    fresh_b = step(params, first.state, 1)  # b did not take part: it joins
    assert fresh_b.compute_s[0] == pytest.approx(31.0 + 600.0, rel=1e-12)
    again = step(params, fresh_b.state, 1)
    assert again.compute_s[0] == pytest.approx(600.0, rel=1e-12)


def drop_out_params(tmp_path, util_a, util_b=0.5, **kwargs):
    """a and b (10 G100s at u = 0.5) with RTT 40 ms each; a's power follows ``util_a``."""
    sites = [site("a", "ca"), site("b", "cb")]
    network = {"rtt_to_hub_ms": [40.0, 40.0], **kwargs.pop("network", {})}
    return params_for(tmp_path, sites, {"ca": util_a, "cb": util_b}, network=network, **kwargs)


def test_site_losing_all_power_mid_round_drops_out(tmp_path):
    # a: 5 GPUs (u = 0.75, 1,312.5 W) in row 0 would need 1,200 s, but has no power in row 1
    # (from 300 s) and power again from row 2. b: 10 GPUs, 600 s.
    params = drop_out_params(tmp_path, [0.75, 1.0, 0.5], network={"join_fixed_s": 60.0})
    result = step(params, start(params, joined=[0, 1]), 0, 1)
    assert result.selected.tolist() == [[True, True]]
    assert result.dropped.tolist() == [[True, False]]
    assert not result.idle[0] and not result.cut[0]
    # the barrier waits for b only: 600 s, then comm among the completing sites (b alone)
    comm = 2.0 * 0.040 + 2.0 * max(0.08, 1 * 0.08)
    assert result.compute_s[0] == pytest.approx(600.0, rel=1e-12)
    assert result.comm_s[0] == pytest.approx(comm, rel=1e-12)
    assert result.round_time_s[0] == pytest.approx(600.0 + comm + 3.0, rel=1e-12)
    assert result.straggler[0] == 1
    # a's work is lost: the progress of a one-site round (b's batch)
    assert result.state.progress[0] == pytest.approx(hand_delta_p(1), rel=1e-12)
    assert result.state.absent_rounds.tolist() == [[1.0, 0.0]]
    # a did not complete the round, so it is not joined: selected again, it pays its join
    assert result.state.prev_selected.tolist() == [[False, True]]
    assert dynamics.available_now(params, result.state).tolist() == [[True, True]]  # row 2
    again = step(params, result.state, 0, 1)
    assert not again.dropped.any()
    assert again.compute_s[0] == pytest.approx(60.0 + FETCH_S + 600.0, rel=1e-12)
    assert again.straggler[0] == 0


def test_dropped_sites_busy_energy_until_the_outage_counts_and_nothing_after(tmp_path):
    # a joins (60 s at idle draw with its 5 powered GPUs), computes from 60 s to the outage at
    # 300 s on 5 GPUs, then has nothing left to draw with. b computes 600 s, then waits.
    join_fixed_s = 60.0 - FETCH_S  # a join of exactly 60 s
    params = drop_out_params(tmp_path, [0.75, 1.0, 0.5], network={"join_fixed_s": join_fixed_s})
    result = step(params, start(params, joined=[1]), 0, 1)
    assert result.dropped.tolist() == [[True, False]]
    round_s = 600.0 + 2.0 * 0.040 + 2.0 * 0.08 + 3.0
    a_j = 0.3 * 5 * G100_WALL_W * 60.0 + 5 * G100_WALL_W * (300.0 - 60.0)
    b_j = 10 * G100_WALL_W * 600.0 + 0.3 * 10 * G100_WALL_W * (round_s - 600.0)
    assert result.round_time_s[0] == pytest.approx(round_s, rel=1e-12)
    assert result.energy_j[0] == pytest.approx(a_j + b_j, rel=1e-12)


def test_round_in_which_every_selected_site_drops_out_ends_at_the_last_drop_out(tmp_path):
    # from t = 100 s: a loses its power at 300 s, b at 600 s; both would need 600 s
    params = drop_out_params(tmp_path, [0.5, 1.0], util_b=[0.5, 0.5, 1.0])
    state = start(params, 100.0, joined=[0, 1])
    result = step(params, state, 0, 1)
    assert result.dropped.tolist() == [[True, True]]
    assert not result.idle[0] and not result.cut[0]
    assert result.round_time_s[0] == pytest.approx(600.0 - 100.0, rel=1e-12)
    assert result.compute_s[0] == pytest.approx(500.0, rel=1e-12)
    assert result.comm_s[0] == 0.0  # no update to send, no aggregation
    assert result.state.time_s[0] == pytest.approx(600.0, rel=1e-12)
    assert result.state.progress[0] == 0.0
    assert result.delta_accuracy[0] == 0.0
    assert result.straggler[0] == -1
    assert not result.state.prev_selected.any()
    assert result.state.absent_rounds.tolist() == [[1.0, 1.0]]
    busy_j = 10 * G100_WALL_W * (200.0 + 500.0)
    assert result.energy_j[0] == pytest.approx(busy_j, rel=1e-12)


def test_round_that_would_pass_the_budget_is_cut_there_and_teaches_nothing(tmp_path):
    params = params_for(tmp_path, [site("a", "ca")], {"ca": 0.5})  # 1 h budget
    state = start(params, 0.0, joined=[0]).replace(time_s=np.array([3300.0]))
    result = step(params, state, 0)  # 600 s of compute would end at 3,900 s
    assert result.cut[0]
    assert not result.dropped.any()
    assert result.round_time_s[0] == pytest.approx(300.0, rel=1e-12)
    assert result.state.time_s[0] == 3600.0  # exactly the budget, never past it
    assert result.compute_s[0] == pytest.approx(300.0, rel=1e-12)
    assert result.comm_s[0] == 0.0
    assert result.state.progress[0] == 0.0
    assert result.delta_accuracy[0] == 0.0
    assert result.energy_j[0] == pytest.approx(10 * G100_WALL_W * 300.0, rel=1e-12)
    # a round that ends 0.01 s before the budget is not cut
    round_s = 600.0 + 2 * 0.002 + 2 * 0.08 + 3.0  # RTT = base_ms = 2 ms: the site is the hub
    fits = state.replace(time_s=3600.0 - round_s - 0.01)
    whole = step(params, fits, 0)
    assert not whole.cut[0]
    assert whole.round_time_s[0] == pytest.approx(round_s, rel=1e-12)
    assert whole.state.progress[0] == pytest.approx(hand_delta_p(1), rel=1e-12)


def test_tta_is_the_elapsed_time_on_success_and_the_budget_on_failure(tmp_path):
    sim = load_simulation(write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5}))
    state = dynamics.initial_state(sim.params, np.array([100.0, 100.0])).replace(
        time_s=np.array([1900.0, 2000.0])
    )
    rec, srec = no_round(2, sim.params.n_sites)
    rec[:, layout.R_TERMINATED] = [1.0, 0.0]  # the first reached the target, the second
    rec[:, layout.R_TRUNCATED] = [0.0, 1.0]  # ran out of its (1 h) budget
    info = dynamics.describe(sim.params, dynamics.RoundResult(state, rec, srec), width=1)
    tta = info.values[:, dynamics.INFO_FIELDS.index("tta_h")]
    np.testing.assert_array_equal(tta, [0.5, 1.0])
    success = info.values[:, dynamics.INFO_FIELDS.index("success")]
    np.testing.assert_array_equal(success, [1.0, 0.0])


# --------------------------------------------------------------------------- learning progress


def hand_delta_p(k_sites: int, progress: float = 0.0) -> float:
    """ΔP = local_steps · η / (1 + B_noise(P) / B_r), B_noise = 1200 · (1 + P / 50)."""
    b_noise = 1200.0 * (1.0 + progress / 50.0)
    return 100 * 0.8 / (1.0 + b_noise / (600.0 * k_sites))


def hand_accuracy(progress: float) -> float:
    """a(P) = a_max − (a_max − a0) · (1 + P / P0)^−α with 0.9, 0.1, 100, 1."""
    return 0.9 - (0.9 - 0.1) * (1.0 + progress / 100.0) ** -1.0


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_round_progress_matches_the_large_batch_model(tmp_path, k):
    params = eight_site_params(tmp_path)
    result = step(params, start(params), *range(k))
    assert result.state.progress[0] == pytest.approx(hand_delta_p(k), rel=1e-12)
    assert result.state.accuracy[0] == pytest.approx(hand_accuracy(hand_delta_p(k)), rel=1e-12)
    expected_gain = hand_accuracy(hand_delta_p(k)) - 0.1
    assert result.delta_accuracy[0] == pytest.approx(expected_gain, rel=1e-12)


def test_adding_sites_gives_diminishing_progress_per_round(tmp_path):
    params = eight_site_params(tmp_path)
    state = start(params)
    gains = {k: float(step(params, state, *range(k)).state.progress[0]) for k in range(1, 9)}
    assert gains[1] < gains[2] < gains[4] < gains[8]
    # per added site: from 1 to 2 sites, 2 to 4 and 4 to 8 each site adds less
    per_site = [gains[2] - gains[1], (gains[4] - gains[2]) / 2, (gains[8] - gains[4]) / 4]
    assert per_site[0] > per_site[1] > per_site[2] > 0
    increments = [gains[k + 1] - gains[k] for k in range(1, 8)]
    assert all(a > b for a, b in itertools.pairwise(increments))
    for k in (1, 2, 4, 8):
        assert gains[k] == pytest.approx(hand_delta_p(k), rel=1e-12)


def test_noise_scale_grows_with_progress(tmp_path):
    params = eight_site_params(tmp_path)
    progress = np.array([0.0, 50.0, 150.0])
    np.testing.assert_allclose(dynamics.noise_scale(params, progress), [1200.0, 2400.0, 4800.0])
    first = step(params, start(params), *range(8))
    p1 = hand_delta_p(8)
    second = step(params, first.state, *range(8))
    delta2 = second.state.progress[0] - first.state.progress[0]
    assert delta2 == pytest.approx(hand_delta_p(8, progress=p1), rel=1e-12)
    assert delta2 < p1  # the same set makes less progress later in training


def test_more_sites_pay_off_later_in_training(tmp_path):
    params = eight_site_params(tmp_path)
    early = start(params)
    late = early.replace(progress=np.array([500.0]))
    one, eight = mask_of(params, 0), mask_of(params, *range(8))
    ratio_early = (
        dynamics.predict_round(params, early, eight).delta_progress[0]
        / dynamics.predict_round(params, early, one).delta_progress[0]
    )
    ratio_late = (
        dynamics.predict_round(params, late, eight).delta_progress[0]
        / dynamics.predict_round(params, late, one).delta_progress[0]
    )
    assert ratio_early == pytest.approx(hand_delta_p(8) / hand_delta_p(1), rel=1e-12)
    assert ratio_late == pytest.approx(hand_delta_p(8, 500.0) / hand_delta_p(1, 500.0), rel=1e-12)
    assert ratio_late > ratio_early


def test_progress_needed_inverts_the_accuracy_curve(tmp_path):
    params = eight_site_params(tmp_path)
    # 0.8 = 0.9 − 0.8 / (1 + P / 100)  <=>  P = 700
    assert dynamics.progress_needed(params) == pytest.approx(700.0)
    assert dynamics.accuracy(params, np.array([700.0]))[0] == pytest.approx(0.8)


def test_leaving_a_site_out_under_non_iid_data_shrinks_progress(tmp_path):
    params = params_for(
        tmp_path,
        [site("a", "ca", data_share=0.75), site("b", "cb", data_share=0.25)],
        {"ca": 0.5, "cb": 0.5},
        workload={"non_iid": 0.5, "coverage_tau_rounds": 2.0},
    )
    first = step(params, start(params), 0)
    cover1 = 1.0 - 0.5 * 0.25 * (1.0 - math.exp(-1.0 / 2.0))  # b absent for 1 round
    assert first.state.progress[0] == pytest.approx(hand_delta_p(1) * cover1, rel=1e-12)
    second = step(params, first.state, 0)
    cover2 = 1.0 - 0.5 * 0.25 * (1.0 - math.exp(-2.0 / 2.0))  # ... for 2 rounds
    p1 = first.state.progress[0]
    delta2 = second.state.progress[0] - p1
    assert delta2 == pytest.approx(hand_delta_p(1, p1) * cover2, rel=1e-12)
    both = step(params, second.state, 0, 1)
    delta3 = both.state.progress[0] - second.state.progress[0]
    assert delta3 == pytest.approx(hand_delta_p(2, second.state.progress[0]), rel=1e-12)


# --------------------------------------------------------------------------- network latency


CITIES = {
    "us-east-1": (39.04, -77.49),  # N. Virginia (Ashburn)
    "us-east-2": (39.96, -83.00),  # Ohio (Columbus)
    "us-west-1": (37.77, -122.42),  # N. California (San Francisco)
    "us-west-2": (45.84, -119.70),  # Oregon (Boardman)
    "eu-west-1": (53.35, -6.26),  # Ireland (Dublin)
    "eu-central-1": (50.11, 8.68),  # Frankfurt
    "sa-east-1": (-23.55, -46.63),  # São Paulo
    "ap-northeast-1": (35.68, 139.69),  # Tokyo
    "ap-southeast-2": (-33.87, 151.21),  # Sydney
    "ap-southeast-1": (1.35, 103.82),  # Singapore
    "washington": (38.91, -77.04),
    "dallas": (32.78, -96.80),
    "london": (51.51, -0.13),
    "frankfurt": (50.11, 8.68),
    "tokyo": (35.68, 139.69),
    "sydney": (-33.87, 151.21),
}

# docs/references.md "Wide-area network": AWS (cloudping) and IBM Cloud RTTs in ms.
# Frankfurt–Tokyo is published as a range (233–264 ms); both ends are checked.
PUBLISHED_RTT_MS = [
    ("us-east-1", "us-east-2", 13),
    ("us-east-1", "us-west-1", 62),
    ("us-east-1", "us-west-2", 64),
    ("us-east-1", "eu-west-1", 70),
    ("us-east-1", "eu-central-1", 92),
    ("us-east-1", "sa-east-1", 114),
    ("us-east-1", "ap-northeast-1", 146),
    ("us-east-1", "ap-southeast-2", 199),
    ("us-east-1", "ap-southeast-1", 211),
    ("us-west-2", "ap-northeast-1", 97),
    ("us-west-2", "eu-central-1", 140),
    ("eu-west-1", "eu-central-1", 26),
    ("eu-central-1", "ap-southeast-1", 158),
    ("washington", "dallas", 31),
    ("washington", "london", 75),
    ("london", "frankfurt", 12),
    ("dallas", "tokyo", 144),
    ("washington", "tokyo", 166),
    ("frankfurt", "tokyo", 233),
    ("frankfurt", "tokyo", 264),
    ("dallas", "sydney", 185),
]


# Frankfurt–Tokyo traffic does not follow the great circle: its published 233–264 ms is 2.6–2.9
# times the fibre time of the 9,333 km arc, while every other pair fits a route factor of about
# 1.5. No single route factor fits both (1.85 would be needed here, which puts other pairs above
# +35%), so the distance model keeps this known miss; scenarios that need the pair exactly give
# measured RTTs in [network] rtt_to_hub_ms. strict: the mark fails if the model starts to fit.
_DETOURED = pytest.mark.xfail(
    strict=True, reason="Europe–East Asia routes detour far from the great circle"
)


@pytest.mark.parametrize(
    ("a", "b", "published_ms"),
    [
        pytest.param(a, b, ms, marks=_DETOURED) if {a, b} == {"frankfurt", "tokyo"} else (a, b, ms)
        for a, b, ms in PUBLISHED_RTT_MS
    ],
    ids=[f"{a}-{b}-{ms}" for a, b, ms in PUBLISHED_RTT_MS],
)
def test_rtt_model_is_within_35_percent_of_published_rtts(a, b, published_ms):
    (lat1, lon1), (lat2, lon2) = CITIES[a], CITIES[b]
    distance = dynamics.great_circle_km(np.array([lat1]), np.array([lon1]), lat2, lon2)
    model_ms = float(dynamics.rtt_ms(distance, 2.0, 1.5, 204.0)[0])
    assert 0.65 * published_ms <= model_ms <= 1.35 * published_ms, (
        f"model {model_ms:.1f} ms vs published {published_ms} ms ({a}–{b})"
    )


def test_great_circle_distance_of_known_arcs():
    quarter = math.pi / 2 * 6371.0
    d = dynamics.great_circle_km(np.array([0.0, 0.0, 45.0]), np.array([0.0, 0.0, 10.0]), 0.0, 90.0)
    # (0,0)-(0,90): a quarter of the equator; (45,10)-(0,90) is not, and is shorter than half
    assert d[0] == pytest.approx(quarter)
    assert d[1] == pytest.approx(quarter)
    assert 0 < d[2] < math.pi * 6371.0
    pole = dynamics.great_circle_km(np.array([90.0]), np.array([0.0]), -90.0, 0.0)
    assert pole[0] == pytest.approx(math.pi * 6371.0)


def test_rtt_formula_adds_base_to_routed_fibre_round_trip():
    # 2 ms + 2 · 1.5 · 1,000 km / 204 km/ms
    assert dynamics.rtt_ms(np.array(1000.0), 2.0, 1.5, 204.0) == pytest.approx(2.0 + 3000.0 / 204.0)
    # docs/references.md: 1,000 km of fibre is about 10 ms of round trip
    assert dynamics.rtt_ms(np.array(1000.0), 0.0, 1.0, 204.0) == pytest.approx(9.8, abs=0.1)


def test_scenario_rtts_come_from_distance_to_the_hub(tmp_path):
    sites = [
        site("hub", "ca", latitude=0.0, longitude=0.0),
        site("far", "cb", latitude=0.0, longitude=9.0),
    ]
    params = params_for(tmp_path, sites, {"ca": 0.5, "cb": 0.5})
    d = 6371.0 * math.radians(9.0)  # along the equator
    np.testing.assert_allclose(params.rtt_s * 1e3, [2.0, 2.0 + 3.0 * d / 204.0], rtol=1e-9)


def test_measured_rtt_list_overrides_the_distance_model(tmp_path):
    params = params_for(
        tmp_path,
        [site("a", "ca"), site("b", "cb", longitude=90.0)],
        {"ca": 0.5, "cb": 0.5},
        network={"rtt_to_hub_ms": [7.0, 11.0]},
    )
    np.testing.assert_allclose(params.rtt_s, [0.007, 0.011])


# --------------------------------------------------------------------------- predict_round


ALL_MASKS_3 = np.array([m for m in itertools.product([0, 1], repeat=3) if any(m)], dtype=bool)


def three_site_sites():
    return [
        site("a", "ca"),
        site("b", "cb", gpu="G200", capacity_kw=6.25, wan_gbps=2.0),
        site("c", "cc", latitude=50.0, longitude=10.0, gpu_count=8),
    ]


def test_predict_round_never_reads_future_trace_values(tmp_path):
    now_row = 3
    past = {"ca": 0.5, "cb": 0.3, "cc": 0.6}
    future = {"ca": 0.95, "cb": 1.0, "cc": 0.1}

    def changed_after_now(col):
        return lambda rows: np.where(rows <= now_row, past[col], future[col])

    same = params_for(tmp_path, three_site_sites(), past, network={"join_fixed_s": 45.0})
    changed = params_for(
        tmp_path,
        three_site_sites(),
        {c: changed_after_now(c) for c in past},
        network={"join_fixed_s": 45.0},
    )
    t = now_row * INTERVAL_S + 120.0
    for params in (same, changed):
        assert dynamics.current_row(params, np.array([t]))[0] == now_row
    masks = ALL_MASKS_3[None]  # (1, 7, 3)

    def state_for(params):
        return start(params, t).replace(
            progress=np.array([42.0]),
            prev_selected=np.array([[True, False, False]]),
            absent_rounds=np.array([[0.0, 1.0, 1.0]]),
        )

    a = dynamics.predict_round(same, state_for(same), masks)
    b = dynamics.predict_round(changed, state_for(changed), masks)
    for name, x, y in zip(dynamics.RoundPrediction._fields, a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=name)
    # ... while the true round does see the changed future
    real_same = step(same, state_for(same), 0, 1, 2)
    real_changed = step(changed, state_for(changed), 0, 1, 2)
    assert real_same.round_time_s[0] != real_changed.round_time_s[0]


def test_predict_round_does_not_change_the_state(tmp_path):
    params = params_for(tmp_path, three_site_sites(), {"ca": 0.5, "cb": 0.3, "cc": 0.6})
    state = step(params, start(params, 1000.0), 0, 2).state
    before = state_arrays(state)
    dynamics.predict_round(params, state, ALL_MASKS_3[None])
    dynamics.predict_round(params, state, ALL_MASKS_3[:1])
    after = state_arrays(state)
    for name in before:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)


@pytest.mark.parametrize("join_mode", ["blocking", "non_blocking"])
@pytest.mark.parametrize("round_mode", ["fixed_quota", "fixed_time"])
def test_predict_round_equals_step_round_at_constant_power_without_jitter(
    tmp_path, round_mode, join_mode
):
    sites = [*three_site_sites(), site("off", "cd")]
    params = params_for(
        tmp_path,
        sites,
        {"ca": 0.5, "cb": 0.3, "cc": 0.6, "cd": 1.0},  # site "off" is unavailable
        network={
            "join_fixed_s": 45.0,
            "rtt_to_hub_ms": [5.0, 30.0, 80.0, 20.0],
            "hub_gbps": 2.0,
            "join_mode": join_mode,
        },
        workload={"round_mode": round_mode, "round_s": 400.0},
    )
    state = step(params, start(params, 2000.0), 0, 1).state  # a and b took part last round
    for bits in itertools.product([0, 1], repeat=4):
        mask = np.array([bits], dtype=bool)
        predicted = dynamics.predict_round(params, state, mask)
        real = dynamics.step_round(params, state, mask, np.ones((1, 5)))
        label = f"mask {bits}"
        np.testing.assert_allclose(
            predicted.round_time_s, real.round_time_s, rtol=1e-12, err_msg=label
        )
        np.testing.assert_allclose(predicted.compute_s, real.compute_s, rtol=1e-12, err_msg=label)
        np.testing.assert_allclose(predicted.comm_s, real.comm_s, rtol=1e-12, err_msg=label)
        np.testing.assert_allclose(
            predicted.delta_progress,
            real.state.progress - state.progress,
            rtol=1e-12,
            err_msg=label,
        )
        np.testing.assert_allclose(
            predicted.delta_accuracy, real.delta_accuracy, rtol=1e-12, atol=1e-15, err_msg=label
        )


def test_predict_round_broadcasts_over_candidate_masks(tmp_path):
    params = params_for(
        tmp_path,
        three_site_sites(),
        {"ca": 0.5, "cb": 0.3, "cc": 0.6},
        network={"join_fixed_s": 45.0},
    )
    starts = np.array([0.0, 5000.0])
    batch = dynamics.initial_state(params, starts).replace(
        progress=np.array([0.0, 300.0]),
        prev_selected=np.array([[False, False, False], [True, True, False]]),
    )
    masks = np.stack([ALL_MASKS_3[:5], ALL_MASKS_3[2:]])  # (B=2, M=5, N=3)
    pred = dynamics.predict_round(params, batch, masks)
    for array in pred:
        assert array.shape == (2, 5)
    for b in range(2):
        single = start(params, starts[b]).replace(
            progress=batch.progress[b : b + 1],
            prev_selected=batch.prev_selected[b : b + 1],
        )
        for m in range(5):
            one = dynamics.predict_round(params, single, masks[b, m][None])
            for name, many, alone in zip(dynamics.RoundPrediction._fields, pred, one, strict=True):
                assert many[b, m] == alone[0], f"{name} episode {b} mask {m}"


# --------------------------------------------------------------------------- energy


def test_one_site_round_energy_is_busy_draw_plus_idle_draw_while_waiting(tmp_path):
    params = params_for(tmp_path, [site("a", "ca")], {"ca": 0.5}, network={"rtt_to_hub_ms": [40.0]})
    result = step(params, start(params, joined=[0]), 0)
    compute = 600.0
    comm = 2.0 * 0.040 + 2.0 * 0.08  # rtt_factor · RTT + 2 · 8e8 bit / 10 Gbps
    waiting = comm + 3.0  # + aggregation_s
    expected_j = 10 * 250.0 * compute + 0.3 * 10 * 250.0 * waiting
    assert result.round_time_s[0] == pytest.approx(compute + waiting, rel=1e-12)
    assert result.energy_j[0] == pytest.approx(expected_j, rel=1e-12)
    assert result.state.energy_j[0] == pytest.approx(expected_j, rel=1e-12)


def test_faster_site_draws_idle_power_while_waiting_for_the_straggler(tmp_path):
    sites = [site("a", "ca"), site("b", "cb", gpu="G200", gpu_count=4)]  # 600 s and 750 s
    params = params_for(
        tmp_path, sites, {"ca": 0.5, "cb": 0.5}, network={"rtt_to_hub_ms": [40.0, 90.0]}
    )
    result = step(params, start(params, joined=[0, 1]), 0, 1)
    comm = 2.0 * 0.090 + 2.0 * max(0.08, 2 * 0.08)
    round_s = 750.0 + comm + 3.0
    busy_j = 10 * G100_WALL_W * 600.0 + 4 * G200_WALL_W * 750.0
    idle_j = 0.3 * 10 * G100_WALL_W * (round_s - 600.0) + 0.3 * 4 * G200_WALL_W * (round_s - 750.0)
    assert result.round_time_s[0] == pytest.approx(round_s, rel=1e-12)
    assert result.energy_j[0] == pytest.approx(busy_j + idle_j, rel=1e-12)


def test_energy_follows_the_powered_gpus_when_power_falls_mid_round(tmp_path):
    params = params_for(
        tmp_path, [site("a", "ca")], {"ca": [0.5, 0.75]}, network={"rtt_to_hub_ms": [40.0]}
    )
    result = step(params, start(params, 100.0, joined=[0]), 0)
    busy_j = 250.0 * (10 * 200.0 + 5 * 800.0)  # 200 s at 10 GPUs, 800 s at 5
    idle_j = 0.3 * 10 * 250.0 * (2.0 * 0.040 + 2.0 * 0.08 + 3.0)
    assert result.energy_j[0] == pytest.approx(busy_j + idle_j, rel=1e-12)


def test_idle_round_uses_no_energy_and_sites_left_out_draw_nothing(tmp_path):
    params = eight_site_params(tmp_path)
    one = step(params, start(params), 0).energy_j[0]
    # s0 alone: 10 GPUs · 250 W · 600 s busy + idle draw during comm and aggregation (< 1%)
    assert 10 * 250.0 * 600.0 <= one < 1.01 * 10 * 250.0 * 600.0
    assert step(params, start(params)).energy_j[0] == 0.0


# --------------------------------------------------------------------------- batching


def test_a_batch_of_episodes_steps_like_each_episode_alone(tmp_path):
    rng = np.random.default_rng(7)
    util = {}
    for i in range(4):
        values = rng.uniform(0.2, 0.95, size=2 * 288)
        values[rng.random(values.size) < 0.1] = 1.0  # some intervals with no headroom
        util[f"c{i}"] = values
    sites = [
        site("a", "c0"),
        site("b", "c1", gpu="G200", capacity_kw=6.25),
        site("c", "c2", latitude=10.0, longitude=100.0),
        site("d", "c3", gpu_count=8, wan_gbps=1.0),
    ]
    params = params_for(
        tmp_path, sites, util, network={"join_fixed_s": 30.0}, episode={"jitter_sigma": 0.1}
    )
    starts = np.array([0.0, 7000.0, 40_000.0])
    batch = dynamics.initial_state(params, starts)
    alone = [dynamics.initial_state(params, starts[b : b + 1]) for b in range(3)]
    for _ in range(12):
        masks = rng.random((3, 4)) < 0.5
        noise = rng.standard_normal((3, 5))
        result = dynamics.step_round(params, batch, masks, noise)
        for b in range(3):
            single = dynamics.step_round(params, alone[b], masks[b : b + 1], noise[b : b + 1])
            for name in dynamics.RoundResult.FIELDS:
                np.testing.assert_array_equal(
                    getattr(result, name)[b], getattr(single, name)[0], err_msg=name
                )
            for name, value in state_arrays(result.state).items():
                np.testing.assert_array_equal(
                    value[b], getattr(single.state, name)[0], err_msg=f"state.{name}"
                )
            alone[b] = single.state
        batch = result.state
    assert len({float(t) for t in batch.time_s}) == 3


# ------------------------------------------------------------------------ counter-based randomness


def jitter_params(tmp_path, sigma=0.1, n=3):
    sites = [site(f"s{i}", f"c{i}") for i in range(n)]
    return params_for(
        tmp_path, sites, {f"c{i}": 0.5 for i in range(n)}, episode={"jitter_sigma": sigma}
    )


def test_jitter_is_log_normal_with_the_scenarios_sigma(tmp_path):
    params = jitter_params(tmp_path, sigma=0.1)
    state = dynamics.initial_state(params, [0.0], key=[123456789])
    z = np.log(dynamics.jitter_factors(params, state, 20_000)[0]) / 0.1  # (rounds, N + 1)
    flat = z.ravel()
    assert abs(flat.mean()) < 0.02  # 80,000 draws: the mean's standard error is 0.0035
    assert flat.std() == pytest.approx(1.0, abs=0.01)
    assert abs(np.mean(flat**3)) < 0.05  # symmetric
    assert np.mean(flat**4) == pytest.approx(3.0, abs=0.1)  # normal tails
    assert np.mean(np.abs(flat) > 1.96) == pytest.approx(0.05, abs=0.005)
    corr = np.corrcoef(np.concatenate([z[1:], z[:-1]], axis=1).T)  # sites, network, next round
    assert np.abs(corr - np.eye(corr.shape[0])).max() < 0.03


def test_jitter_is_a_function_of_key_round_and_site_only(tmp_path):
    params = jitter_params(tmp_path)
    keys = np.array([5, 2**52 + 3, 5, 2**53 - 1])
    batch = dynamics.initial_state(params, [0.0, 600.0, 9000.0, 0.0], key=keys)
    factors = dynamics.jitter_factors(params, batch, 30)
    np.testing.assert_array_equal(factors[0], factors[2])  # same key: same jitter, any start
    assert not np.any(factors[0] == factors[1]) and not np.any(factors[0] == factors[3])
    later = batch.replace(rounds=10)
    np.testing.assert_array_equal(dynamics.jitter_factors(params, later, 20), factors[:, 10:])
    assert np.unique(factors[0]).size == factors[0].size  # sites and rounds all differ
    quiet = params.with_constants(jitter_sigma=0.0)
    assert np.all(dynamics.jitter_factors(quiet, batch, 5) == 1.0)


def test_a_batch_with_its_own_jitter_equals_its_members(tmp_path):
    params = jitter_params(tmp_path, n=4)
    rng = np.random.default_rng(3)
    starts, keys = np.array([0.0, 3000.0, 7000.0]), np.array([11, 12, 13])
    batch = dynamics.initial_state(params, starts, keys)
    alone = [dynamics.initial_state(params, starts[b : b + 1], keys[b : b + 1]) for b in range(3)]
    for _ in range(20):
        masks = rng.random((3, 4)) < 0.6
        result = dynamics.step_round(params, batch, masks)
        for b in range(3):
            single = dynamics.step_round(params, alone[b], masks[b : b + 1])
            np.testing.assert_array_equal(result.record[b], single.record[0])
            np.testing.assert_array_equal(result.state.data[b], single.state.data[0])
            alone[b] = single.state
        batch = result.state


def test_episode_draws_are_uniform_over_the_start_rows_and_keys_distinct():
    bases = np.full(60_000, 987654321)
    rows, keys, seeds = dynamics.episode_draws(bases, np.arange(60_000), 100, 160)
    assert rows.min() == 100 and rows.max() == 159
    counts = np.bincount(rows - 100, minlength=60)
    chi2 = float(((counts - 1000.0) ** 2 / 1000.0).sum())
    assert chi2 < 110  # 59 degrees of freedom: p < 1e-4 above this
    assert np.unique(keys).size == keys.size and keys.min() >= 0 and keys.max() < dynamics.KEY_LIMIT
    assert seeds.min() >= 0 and seeds.max() < 2**31
    again = dynamics.episode_draws(bases[:5], np.arange(5), 100, 160)
    np.testing.assert_array_equal(again[0], rows[:5])
    other = dynamics.episode_draws(bases[:5] + 1, np.arange(5), 100, 160)
    assert not np.array_equal(other[1], keys[:5])


# --------------------------------------------------------------------------- rewards in the record


def test_the_kernels_rewards_are_the_documented_formulas(tmp_path):
    from powertrip_env.rewards import ExcessGain, GainRate

    params = eight_site_params(tmp_path, episode={"jitter_sigma": 0.1, "h_ref_h": 2.0})
    rng = np.random.default_rng(0)
    state = dynamics.initial_state(params, [0.0, 100.0, 5000.0], key=[1, 2, 3])
    for _ in range(10):
        result = dynamics.step_round(params, state, rng.random((3, 8)) < 0.5)
        gain = result.delta_accuracy / (params.a_target - params.a0)
        t = result.round_time_s
        np.testing.assert_allclose(
            ExcessGain()(params, result), gain - t / 7200.0, rtol=1e-15, atol=1e-17
        )
        rate = np.where(t > 0, gain * 7200.0 / np.where(t > 0, t, 1.0), 0.0)  # 0 at the budget
        np.testing.assert_allclose(GainRate()(params, result), rate, rtol=1e-15)
        state = result.state
    learnt = result.with_accuracy(
        params, result.state.accuracy - result.delta_accuracy, np.full(3, params.a_target)
    )
    assert learnt.terminated.all() and not learnt.truncated.any()
    gain = learnt.delta_accuracy / (params.a_target - params.a0)
    np.testing.assert_allclose(ExcessGain()(params, learnt), gain - t / 7200.0, rtol=1e-15)
