"""The calibrated mechanisms (docs/calibration.md) worked by hand, and the reports built on them.

The toy scenarios come from ``scenario_files`` (see test_core.py's docstring for their
numbers): a G100 site with 5.25 kW at u = 0.5 powers 10 GPUs and computes its 60,000-sample
quota in 600 s; the pseudo-gradient is 8e8 bits. Expected values are written out from the
formulas in docs/model.md, never copied from a run.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import site, write_scenario
from test_core import G100_RATE, QUOTA, params_for, start, step

import powertrip_env
from powertrip_env.baselines.policies import PowerTrip, PowerTripRTT
from powertrip_env.dynamics import formulas
from powertrip_env.harness.calibration import fidelity, sensitivity
from powertrip_env.simulation import load_simulation

MODEL_BITS = 8e8


def three_sites(tmp_path, **network):
    sites = [
        site("a", "ca", wan_gbps=1.0),
        site("b", "cb", wan_gbps=4.0),
        site("c", "cc", wan_gbps=2.0),
    ]
    net = {"rtt_to_hub_ms": [40.0, 90.0, 60.0], **network}
    return params_for(tmp_path, sites, {"ca": 0.5, "cb": 0.5, "cc": 0.5}, network=net)


def test_ring_all_reduce_moves_2_n_minus_1_over_n_updates_through_the_slowest_link(tmp_path):
    params = three_sites(tmp_path, allreduce="ring")
    result = step(params, start(params, 900.0, joined=(0, 1, 2)), 0, 1, 2)
    # rtt_factor · max RTT + 2 (3 − 1)/3 · 8e8 bit / 1 Gbps (site a's link)
    comm = 2.0 * 0.090 + 2.0 * 2.0 / 3.0 * MODEL_BITS / 1e9
    assert result.comm_s[0] == pytest.approx(comm, rel=1e-12)
    assert result.compute_s[0] == pytest.approx(QUOTA / (10 * G100_RATE), rel=1e-12)
    assert result.round_time_s[0] == pytest.approx(600.0 + comm + 3.0, rel=1e-12)


def test_a_lone_site_in_a_ring_sends_nothing_but_the_hub_still_exchanges(tmp_path):
    ring = three_sites(tmp_path, allreduce="ring")
    hub = three_sites(tmp_path, allreduce="hub")
    alone_ring = step(ring, start(ring, 900.0, joined=(1,)), 1)
    alone_hub = step(hub, start(hub, 900.0, joined=(1,)), 1)
    assert alone_ring.comm_s[0] == 0.0
    # through the hub: rtt_factor · RTT + 2 · max(8e8 / 4 Gbps, 1 · 8e8 / 10 Gbps)
    assert alone_hub.comm_s[0] == pytest.approx(2.0 * 0.090 + 2.0 * 0.2, rel=1e-12)


def test_a_joining_site_fetches_the_training_state_not_the_model(tmp_path):
    sites = [site("a", "ca", wan_gbps=2.0)]
    params = params_for(
        tmp_path,
        sites,
        {"ca": 0.5},
        workload={"state_bytes": 8e8},
        network={"join_fixed_s": 30.0},
    )
    # 30 s plus 6.4e9 bits over 2 Gbps
    assert params.join_s[0] == pytest.approx(30.0 + 8 * 8e8 / 2e9, rel=1e-12)
    result = step(params, start(params, 900.0), 0)
    assert result.compute_s[0] == pytest.approx(30.0 + 3.2 + 600.0, rel=1e-12)
    default = params_for(tmp_path, sites, {"ca": 0.5}, network={"join_fixed_s": 30.0})
    assert default.join_s[0] == pytest.approx(30.0 + MODEL_BITS / 2e9, rel=1e-12)


def test_time_balanced_rounds_stop_a_slow_window_at_the_grace_deadline(tmp_path):
    sites = [site("a", "ca"), site("b", "cb")]
    work = {"round_mode": "fixed_time", "round_s": 100.0, "grace": 0.1}
    params = params_for(tmp_path, sites, {"ca": 0.5, "cb": 0.5}, workload=work)
    state = start(params, 900.0, joined=(0, 1))
    slow = np.array([[1.5, 1.05, 1.0]])  # site a's window 50% slow, b's 5%
    result = core_step(params, state, slow)
    # a stops at (1 + grace) · round_s = 110 s; b at 105 s; the barrier waits for a
    assert result.compute_s[0] == pytest.approx(110.0, rel=1e-12)
    without = params_for(
        tmp_path,
        sites,
        {"ca": 0.5, "cb": 0.5},
        workload={"round_mode": "fixed_time", "round_s": 100.0},
    )
    assert core_step(without, start(without, 900.0, joined=(0, 1)), slow).compute_s[0] == (
        pytest.approx(150.0, rel=1e-12)
    )


def core_step(params, state, jitter):
    from powertrip_env import dynamics

    mask = np.ones((1, params.n_sites), dtype=bool)
    return dynamics.step_round(params, state, mask, jitter)


# --------------------------------------------------------------------------- PowerTrip's score


def test_exchange_cost_floors_the_aggregator_sites_self_rtt(tmp_path):
    sites = [site("hub", "ca", wan_gbps=1.0), site("b", "cb", wan_gbps=1.0),
             site("c", "cc", wan_gbps=1.0)]  # fmt: skip
    params = params_for(
        tmp_path,
        sites,
        {"ca": 0.5, "cb": 0.5, "cc": 0.5},
        network={"rtt_to_hub_ms": [2.0, 50.0, 80.0], "allreduce": "ring"},
    )
    tx = 2.0 * MODEL_BITS / 1e9
    # the hub's site pays the next site's RTT (50 ms), not its 2 ms to itself
    np.testing.assert_allclose(
        params.exchange_s, [2.0 * 0.050 + tx, 2.0 * 0.050 + tx, 2.0 * 0.080 + tx], rtol=1e-12
    )


def _views(env_id: str, episodes: int = 6, steps: int = 40):
    """Decision views along a few test episodes of AllSites."""
    env = gym.make(env_id, split="test")
    for e in range(episodes):
        env.reset(seed=e)
        for _ in range(steps):
            yield env.unwrapped.decision_view()
            *_, terminated, truncated, _ = env.step(env.unwrapped.available().astype(np.int8))
            if terminated or truncated:
                break


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-LoRA-v0", "PowerTrip-KWS-v0"])
def test_powertrip_never_ranks_a_site_first_only_because_it_hosts_the_aggregator(env_id):
    """Give the aggregator's site the network cost of the cheapest other site: if that changed
    which site ranks first, the site was first only because it hosts the aggregator."""
    hub = powertrip_env.load_scenario(gym.spec(env_id).kwargs.get("scenario", "default"))
    names = [s.name for s in hub.sites]
    if hub.network.hub not in names:
        pytest.skip("the aggregator is not at a site")
    h = names.index(hub.network.hub)
    literal_firsts = 0
    for now in _views(env_id):
        if not now.available.any():
            continue
        policy = PowerTrip()
        first = policy.ranking(now)[0]
        cost = now.exchange_s.copy()
        cost[h] = np.delete(cost, h).min()
        score = now.power_w / cost
        masked = np.where(now.available, score, -np.inf)
        assert first == int(np.argmax(masked)) or masked[first] == masked.max()
        literal_firsts += PowerTripRTT().ranking(now)[0] == h
    # the literal power/RTT reading ranks the hub's site first whenever it has power
    assert literal_firsts > 0


# --------------------------------------------------------------------------- the reports


def test_tokens_ratio_matches_the_published_anchor_within_ten_percent():
    params = load_simulation("default").params
    for m in fidelity.REPLICAS:
        simulated = fidelity.simulated_tokens_ratio(params, m)
        published = fidelity.published_tokens_ratio(1.1e9, m)
        assert abs(simulated / published - 1.0) <= 0.10, (m, simulated, published)
    # Table 3's ordering: more replicas, more progress per round at fixed inner steps
    per_round = [formulas.delta_progress(params, 0.0, m * 512.0) for m in (1, 4, 8, 16, 64)]
    assert all(a < b for a, b in itertools.pairwise(per_round))


def test_published_ratio_is_the_scaling_law_fit_through_the_chinchilla_data_term():
    # worked by hand at N = 1.1e9 (docs/calibration.md): 1.149, 1.330, 1.551
    assert fidelity.published_tokens_ratio(1.1e9, 2) == pytest.approx(1.1495, abs=1e-3)
    assert fidelity.published_tokens_ratio(1.1e9, 4) == pytest.approx(1.3304, abs=1e-3)
    assert fidelity.published_tokens_ratio(1.1e9, 8) == pytest.approx(1.5513, abs=1e-3)
    assert fidelity.published_tokens_ratio(1.1e9, 1) == 1.0


def test_rounds_to_target_counts_the_last_round_by_its_share(tmp_path):
    params = load_simulation("default").params
    one, two = formulas.rounds_to_target(params, 1), formulas.rounds_to_target(params, 2)
    assert 0 < two < one
    need, p, r = formulas.progress_needed(params), 0.0, 0
    while p + formulas.delta_progress(params, p, 512.0) < need:
        p += formulas.delta_progress(params, p, 512.0)
        r += 1
    assert r < one <= r + 1


@pytest.mark.slow  # two flagship episodes of BeamPlanner and the rules, about 7 s of CPU
def test_fidelity_cli_prints_the_table_and_the_json(capsys):
    assert fidelity.main(["--env", "PowerTrip-v0", "--episodes", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    report = json.loads(out[-1])
    assert set(report["tokens_ratio"]) == {"2", "4", "8"} == set(report["tokens_ratio_published"])
    assert {"MyopicOptimal", "PowerTrip"} <= set(report["comm_share"])
    assert report["join_s"] >= report["state_transfer_s"]
    assert report["beam_never_worse"] is True
    for key in ("headroom", "myopic_over_beam", "powertrip_over_myopic"):
        assert report[key] > 0
    assert any(line.startswith("| tokens to target, 8 sites") for line in out)


def test_fidelity_refuses_a_scenario_without_a_parameter_count(tmp_path, capsys):
    path = write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5})
    assert fidelity.main(["--env", "PowerTrip-v0", "--scenario", str(path), "--episodes", "1"]) == 2
    assert "'parameters'" in capsys.readouterr().err


@pytest.mark.slow  # headroom's references on a flagship episode per setting, about 7 s of CPU
def test_sensitivity_runs_each_setting_on_the_same_episodes():
    settings = (sensitivity.SHIPPED, sensitivity.SETTINGS[3])  # the shipped one, 60 s start-up
    report = sensitivity.sensitivity("PowerTrip-v0", episodes=1, settings=settings)
    rows = report["settings"]
    assert [r["knob"] for r in rows] == ["shipped", "join start-up"]
    assert rows[0]["kendall_tau"] == 1.0
    assert rows[1]["mean_tta_h"] != rows[0]["mean_tta_h"]  # the setting reached the episodes
    table = sensitivity.to_markdown(report)
    assert "| join start-up | 60 s |" in table


def test_sensitivity_refuses_catalogue_settings_on_inline_sites(tmp_path):
    from powertrip_env.errors import EvaluationError

    wan = sensitivity.SETTINGS[1]
    with pytest.raises(EvaluationError, match="inline"):
        sensitivity.write_setting(wan, "PowerTrip-KWS-v0", tmp_path)


def test_every_sensitivity_setting_changes_only_its_knob(tmp_path):
    shipped = powertrip_env.load_scenario("default")
    for setting in sensitivity.SETTINGS[1:]:
        path = sensitivity.write_setting(setting, "PowerTrip-v0", tmp_path)
        moved = powertrip_env.load_scenario(path)
        assert moved.network.hub == shipped.network.hub
        assert [s.data_share for s in moved.sites] == [s.data_share for s in shipped.sites]
        changed = {
            f
            for f in ("workload", "network", "episode", "sites")
            if getattr(moved, f) != getattr(shipped, f)
        }
        expected = set(setting.toml) | ({"sites"} if setting.catalogue else set())
        assert changed == expected, setting


def test_every_moving_setting_changes_only_its_process_fields(tmp_path):
    """The moving sweep's settings write [moving] alone, each its own fields, in range."""
    shipped = powertrip_env.load_scenario("moving")
    for setting in sensitivity.MOVING_SETTINGS[1:]:
        moved = powertrip_env.load_scenario(
            sensitivity.write_setting(setting, "PowerTrip-Moving-v0", tmp_path)
        )
        assert set(setting.toml) == {"moving"}, setting
        changed = {
            f.name
            for f in dataclasses.fields(shipped.moving)
            if getattr(moved.moving, f.name) != getattr(shipped.moving, f.name)
        }
        assert changed == set(setting.toml["moving"]), setting
        assert moved.unknowns == shipped.unknowns and moved.workload == shipped.workload


def test_the_moving_sweep_splits_the_room_and_the_cli_picks_it(capsys):
    """``powertrip sensitivity`` on a moving task runs the room sweep; its rooms are the
    ratios of the policies' mean TTA it reports."""
    settings = (sensitivity.SHIPPED, sensitivity.MOVING_SETTINGS[1])  # the fail-slows off
    report = sensitivity.room_sweep("PowerTrip-Moving-v0", episodes=1, settings=settings)
    rows = report["room"]
    assert [r["knob"] for r in rows] == ["shipped", "fail-slow"]
    for row in rows:
        tta = row["mean_tta_h"]
        best = min(tta["AdaptiveHorizon"], tta["TrackingHorizon"])
        assert row["learnable_room"] == pytest.approx(best / tta["Informed"], abs=1e-3)
        assert row["stated_room"] == pytest.approx(tta["HorizonRule"] / tta["Informed"], abs=1e-3)
        assert row["monitor_room"] == pytest.approx(tta["InformedDraw"] / tta["Informed"], abs=1e-3)
    assert "| fail-slow | off |" in sensitivity.room_markdown(report)
    assert sensitivity._moves("PowerTrip-Moving-v0") and not sensitivity._moves("PowerTrip-v0")


# --------------------------------------------------------------------------- non-blocking joins


def two_sites(tmp_path, join_fixed_s, **network):
    sites = [site("a", "ca"), site("b", "cb")]
    net = {"rtt_to_hub_ms": [40.0, 90.0], "join_fixed_s": join_fixed_s, **network}
    return params_for(tmp_path, sites, {"ca": 0.5, "cb": 0.5}, network=net)


def test_a_non_blocking_joiner_fetches_while_the_others_train_and_adds_nothing(tmp_path):
    params = two_sites(tmp_path, 30.0, join_mode="non_blocking")
    state = start(params, 900.0, joined=(0,))
    both = step(params, state, 0, 1)
    alone = step(params, state, 0)
    # b fetches 30 s + 0.08 s while a trains 600 s: the round is a's alone, b adds nothing
    expected = 600.0 + 2 * 0.040 + 2 * 0.08 + 3.0  # a's compute, a's exchange, aggregation
    assert both.round_time_s[0] == alone.round_time_s[0] == pytest.approx(expected)
    assert both.state.progress[0] == alone.state.progress[0]
    assert both.state.prev_selected[0].tolist() == [True, True]  # b has joined for the next
    assert both.state.absent_rounds[0].tolist() == [0, 1]  # but did not contribute
    # next round both train: the barrier waits for b's compute, no join
    again = step(params, both.state, 0, 1)
    assert again.compute_s[0] == pytest.approx(600.0, rel=1e-12)
    assert again.state.progress[0] - both.state.progress[0] > (
        alone.state.progress[0] - state.progress[0]
    )
    blocking = two_sites(tmp_path, 30.0)
    waits = step(blocking, start(blocking, 900.0, joined=(0,)), 0, 1)
    assert waits.compute_s[0] == pytest.approx(30.08 + 600.0, rel=1e-12)  # the round waits


def test_a_fetch_longer_than_the_round_goes_on_in_the_next(tmp_path):
    params = two_sites(tmp_path, 1000.0, join_mode="non_blocking")
    first = step(params, start(params, 900.0, joined=(0,)), 0, 1)
    t1 = first.round_time_s[0]
    assert not first.state.prev_selected[0][1]  # not joined yet
    fetched = first.state.data[0, core_joined_slot(params) + 1]
    assert fetched == pytest.approx(t1 / 1000.08, rel=1e-12)
    second = step(params, first.state, 0, 1)
    assert second.state.prev_selected[0].tolist() == [True, True]
    dropped_b = step(params, first.state, 0)  # leaving it out loses what it fetched
    assert dropped_b.state.data[0, core_joined_slot(params) + 1] == 0.0


def test_a_round_in_which_every_site_is_fetching_ends_with_the_first_fetch(tmp_path):
    params = two_sites(tmp_path, 30.0, join_mode="non_blocking")
    state = start(params, 900.0)
    result = step(params, state, 0, 1)
    assert result.round_time_s[0] == pytest.approx(30.08, rel=1e-12)
    assert result.comm_s[0] == 0.0
    assert result.state.progress[0] == state.progress[0]
    assert result.state.prev_selected[0].tolist() == [True, True]


def core_joined_slot(params):
    from powertrip_env.dynamics import layout

    return layout.JOINED


def test_the_lora_scenario_keeps_the_papers_shape():
    """PowerTrip's published claim on its own setting: well ahead of taking every site, and far
    ahead of the simple rules (issue: PowerTrip <= 0.85 x AllSites, <= 0.6 x the worst)."""
    from powertrip_env.harness.evaluation.evaluate import evaluate

    simple = ["AllSites", "RandomK", "TopPower-1", "TopPower-2", "Nearest-2", "OortLike"]
    result = evaluate("PowerTrip-LoRA-v0", ["PowerTrip", *simple], episodes=6, progress=False)
    mean = result.summary.set_index("policy")["mean_tta_h"]
    assert mean["PowerTrip"] <= 0.85 * mean["AllSites"]
    assert mean["PowerTrip"] <= 0.6 * max(mean[name] for name in simple)
