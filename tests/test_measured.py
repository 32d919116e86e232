"""The measured track (issue 42): episodes whose world departs from what the scenario states.

A scenario's ``[unknowns]`` section gives spreads; at reset each episode draws, from its jitter
key, factors on every site's throughput, RTT, bandwidth and join time and on the job's pace and
noise scale (``dynamics.draw_unknowns``). The round applies them; nothing a deployable policy
calls reads them: ``predict_round``, ``predict_plan``, ``candidates``, ``decision_view`` and the
observation answer from the stated values (or a belief the caller passes), so two episodes that
start alike but draw different worlds look the same to a policy until it measures. What it
measures is each site's telemetry (info's ``measured_*_s``, the decision view's ratios). The
clairvoyant door knows the draw (``Clairvoyant.drawn``) and plays the folded world exactly as
the episode does; ``Informed`` is a rule told the draw, ``Adaptive`` one that estimates it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import write_powered_scenario

import powertrip_env
from powertrip_env import ScenarioError, dynamics, load_scenario
from powertrip_env.baselines.adaptive import Adaptive, Informed
from powertrip_env.baselines.references import play_on_copy
from powertrip_env.baselines.registry import make_policy
from powertrip_env.dynamics.features import TELEMETRY_FEATURES
from powertrip_env.dynamics.layout import S_QUOTA, seen_start, state_width, unknowns_width
from powertrip_env.dynamics.unknowns import SPREAD_FIELDS

SIGMAS = ("throughput", "rtt", "bandwidth", "join", "pace", "noise")  # {name}_sigma -> .name
# The flagship measured with a far wider spread of site speeds: another world, the same
# stated values.
WIDER = 'extends = "measured"\nname = "wider"\n[unknowns]\nthroughput_sigma = 0.5\n'


def unwrapped(scenario: str | Path, **kwargs: Any) -> Any:
    return gym.make("PowerTrip-v0", scenario=str(scenario), **kwargs).unwrapped


def drawn(env: Any) -> np.ndarray:
    return env.clairvoyant().drawn().vector


def all_available(env: Any) -> np.ndarray:
    return env.available().astype(np.int8)


def spreads(**given: float) -> np.ndarray:
    """Spreads in ``SPREAD_FIELDS`` order: the ones given, the rest 0 (the slow factor 1)."""
    values = {"slow_factor": 1.0, **given}
    return np.array([values.get(f, 0.0) for f in SPREAD_FIELDS])


@pytest.fixture
def wider(tmp_path: Path) -> Path:
    path = tmp_path / "wider.toml"
    path.write_text(WIDER, encoding="utf-8")
    return path


@pytest.fixture
def flat_measured(tmp_path: Path) -> Path:
    """Four sites whose powered GPUs never change, on the measured track: a site's compute
    takes its stated time over its throughput factor exactly."""
    folder = tmp_path / "flat"
    write_powered_scenario(
        folder, [10, 8, 12, 6], rtt_ms=[1, 30, 60, 120], network={"join_fixed_s": 20.0}
    )
    path = folder / "measured.toml"
    path.write_text(
        'extends = "scenario.toml"\nname = "flat-measured"\n[unknowns]\n'
        "throughput_sigma = 0.2\nrtt_sigma = 0.1\nbandwidth_sigma = 0.3\njoin_sigma = 0.2\n"
        "pace_sigma = 0.1\nnoise_sigma = 0.1\n",
        encoding="utf-8",
    )
    return path


# --------------------------------------------------------------------------- scenarios


def test_measured_ids_are_registered_on_the_shipped_measured_scenarios():
    assert powertrip_env.MEASURED_SUITE_IDS == (
        "PowerTrip-Measured-v0",
        "PowerTrip-Wide-Measured-v0",
    )
    assert powertrip_env.ENV_IDS["PowerTrip-Measured-v0"] == "measured"
    assert powertrip_env.ENV_IDS["PowerTrip-Wide-Measured-v0"] == "wide-measured"
    for name, base in (("measured", "default"), ("wide-measured", "wide")):
        scenario, stated = load_scenario(name), load_scenario(base)
        assert scenario.unknowns.drawn and not stated.unknowns.drawn
        assert scenario.sites == stated.sites  # the same stated world, only drawn around
        assert scenario.workload == stated.workload
        assert scenario.unknowns == load_scenario("measured").unknowns
    env = gym.make("PowerTrip-Wide-Measured-v0").unwrapped
    env.reset(seed=0)
    assert env.params.measured and env.params.n_sites == 24
    assert not np.all(drawn(env) == 1.0)


def test_the_scenarios_spreads_are_in_the_order_the_draw_takes_them():
    unknowns = load_scenario("measured").unknowns
    # every field of [unknowns] is a spread the draw takes, in its order
    assert tuple(f.name for f in dataclasses.fields(unknowns)) == SPREAD_FIELDS
    values = unknowns.spreads()
    assert values == tuple(getattr(unknowns, f) for f in SPREAD_FIELDS)


@pytest.mark.parametrize("field", SIGMAS)
def test_each_spread_of_a_user_scenario_draws_only_its_own_factor(tmp_path, field):
    """A user's TOML extends the flagship with one spread: only that factor varies."""
    path = tmp_path / "mine.toml"
    path.write_text(f'extends = "default"\n[unknowns]\n{field}_sigma = 0.3\n', encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.unknowns.drawn
    n = len(scenario.sites)
    u = dynamics.UnknownFactors.from_vector(
        dynamics.draw_unknowns(np.array(scenario.unknowns.spreads()), [12345], n)[0]
    )
    for name in SIGMAS:
        factor = np.atleast_1d(getattr(u, name))
        if name == field:
            assert np.all(factor > 0.0) and np.all(factor != 1.0), name
        else:
            assert np.all(factor == 1.0), name


@pytest.mark.parametrize("field", [f"{name}_sigma" for name in SIGMAS])
def test_a_sigma_above_one_is_refused_naming_the_field(tmp_path, field):
    path = tmp_path / "mine.toml"
    path.write_text(f'extends = "default"\n[unknowns]\n{field} = 1.5\n', encoding="utf-8")
    with pytest.raises(ScenarioError, match=rf"\[unknowns\] field '{field}' = 1.5"):
        load_scenario(path)


def test_unknowns_with_fixed_time_rounds_are_refused(tmp_path):
    fixed = 'extends = "lora"\n[workload]\nround_mode = "fixed_time"\nround_s = 240.0\n'
    path = tmp_path / "fixed.toml"
    path.write_text(fixed + "[unknowns]\nthroughput_sigma = 0.1\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"\[unknowns\].*fixed_time"):
        load_scenario(path)
    path.write_text(fixed + "[unknowns]\nthroughput_sigma = 0.0\n", encoding="utf-8")
    assert not load_scenario(path).unknowns.drawn  # nothing drawn: the known track, allowed


# --------------------------------------------------------------------------- the draw


def test_draw_with_every_spread_zero_is_the_stated_world():
    out = dynamics.draw_unknowns(spreads(), [1, 2, 3], 5)
    assert out.shape == (3, unknowns_width(5))
    assert np.all(out == 1.0)


def test_every_site_a_slow_outlier_runs_at_exactly_one_over_the_slow_factor():
    u = dynamics.UnknownFactors.from_vector(
        dynamics.draw_unknowns(spreads(slow_probability=1.0, slow_factor=1.5), [7], 6)[0]
    )
    assert np.all(u.throughput == 1.0 / 1.5)
    assert u.pace == u.noise == 1.0
    assert np.all(np.concatenate([u.rtt, u.bandwidth, u.join]) == 1.0)


def test_the_draw_is_reproducible_and_differs_between_keys():
    given = spreads(**{f"{name}_sigma": 0.2 for name in SIGMAS})
    keys = np.array([3, 4, 2**40 + 5])
    first = dynamics.draw_unknowns(given, keys, 8)
    assert np.array_equal(first, dynamics.draw_unknowns(given, keys, 8))
    assert np.array_equal(first[1], dynamics.draw_unknowns(given, keys[1:2], 8)[0])
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert not np.any(first[a] == first[b])  # every factor of another key is another


def test_same_seed_same_draw_other_seed_other_draw():
    one, two = (gym.make("PowerTrip-Measured-v0").unwrapped for _ in range(2))
    one.reset(seed=3)
    two.reset(seed=3)
    assert np.array_equal(drawn(one), drawn(two))
    states = (dynamics.episode_unknowns(env.state) for env in (one, two))
    assert np.array_equal(*states)  # the state carries the draw
    two.reset(seed=4)
    assert not np.array_equal(drawn(one), drawn(two))


def test_each_vector_sub_env_draws_as_the_single_env_seeded_alike():
    venv = gym.make_vec("PowerTrip-Measured-v0", num_envs=2)
    singles = [gym.make("PowerTrip-Measured-v0") for _ in range(2)]
    venv.reset(seed=7)
    for i, env in enumerate(singles):
        env.reset(seed=7 + i)
        assert np.array_equal(venv.unwrapped.clairvoyant(i).drawn().vector, drawn(env.unwrapped))
    assert not np.array_equal(*(drawn(env.unwrapped) for env in singles))
    with pytest.raises(ValueError, match="name one"):
        venv.unwrapped.clairvoyant()  # each sub-env's world is its own
    actions = np.stack([all_available(env.unwrapped) for env in singles])
    for _ in range(3):
        *_, info = venv.step(actions)
        for i, env in enumerate(singles):
            *_, one = env.step(actions[i])
            for key in ("round_time_s", "delta_progress", "measured_compute_s", "measured_join_s"):
                assert np.array_equal(info[key][i], one[key]), key


def test_the_known_track_draws_the_stated_world():
    env = gym.make("PowerTrip-v0").unwrapped
    env.reset(seed=0)
    assert not env.params.measured
    assert np.all(drawn(env) == 1.0)
    assert np.all(dynamics.episode_unknowns(env.state) == 1.0)
    assert env.clairvoyant().params is env.params  # nothing folded


# --------------------------------------------------------------------------- what policies see


def assert_same_what_ifs(env: Any, twin: Any, columns: int) -> None:
    """Every what-if a policy reads is the same in both environments: ``predict_round`` of some
    sets (the first alone too), steady or not; ``predict_plan`` of plans kept and plans per
    round (its trajectories' state up to column ``columns``: what the two may differ in lies
    after it); and the candidates."""
    n = env.params.n_sites
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 2, (6, n)).astype(bool)
    masks[0] = True
    for steady_state in (False, True):
        a = env.predict_round(masks, steady_state=steady_state)
        b = twin.predict_round(masks, steady_state=steady_state)
        for name, x, y in zip(a._fields, a, b, strict=True):
            assert np.array_equal(x, y), (steady_state, name)
        one = env.predict_round(masks[0], steady_state=steady_state)
        assert one == twin.predict_round(masks[0], steady_state=steady_state)
    for plan in (masks[:4], rng.integers(0, 2, (3, 4, n)).astype(bool)):
        a, b = env.predict_plan(plan, 4), twin.predict_plan(plan, 4)
        assert np.array_equal(a.state.data[:, :columns], b.state.data[:, :columns])
        for name in ("success", "ended", "tta_h", "progress_needed"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    a, b = env.candidates(), twin.candidates()
    for name, x, y in zip(a._fields, a, b, strict=True):
        assert np.array_equal(x, y), name


@pytest.mark.parametrize("other", ["default", "wider"])
def test_policies_see_the_stated_world_whatever_the_draw(request, other):
    """The issue's done-when: two episodes that start alike but draw different worlds give the
    same observation, decision view, what-ifs and candidates, and different rounds."""
    measured = unwrapped("measured")
    twin = unwrapped("default" if other == "default" else request.getfixturevalue("wider"))
    obs, info = measured.reset(seed=5)
    twin_obs, twin_info = twin.reset(seed=5)
    assert measured.state.time_s[0] == twin.state.time_s[0]
    assert measured.state.key[0] == twin.state.key[0]
    assert not np.array_equal(drawn(measured), drawn(twin))

    if other == "wider":
        assert np.array_equal(obs, twin_obs)
    else:  # the known track's observation has no telemetry columns; nothing is measured yet
        n, f, t = measured.params.n_sites, dynamics.N_SITE_FEATURES, len(TELEMETRY_FEATURES)
        sites = obs[: n * (f + t)].reshape(n, f + t)
        assert np.array_equal(sites[:, :f].ravel(), twin_obs[: n * f])
        assert np.array_equal(obs[n * (f + t) :], twin_obs[n * f :])
        assert np.array_equal(sites[:, f:], np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)))
    assert info.keys() == twin_info.keys()
    for key, value in info.items():
        assert np.array_equal(value, twin_info[key]), key
    view, twin_view = measured.decision_view(), twin.decision_view()
    assert view.measured_track and twin_view.measured_track == (other == "wider")
    for field in dataclasses.fields(view):
        if field.name not in ("scenario", "measured_track"):
            a, b = getattr(view, field.name), getattr(twin_view, field.name)
            assert np.array_equal(a, b), field.name

    # a what-if's telemetry columns (from seen_start) are kept on the measured track only
    assert_same_what_ifs(measured, twin, seen_start(measured.params.n_sites))

    mask = all_available(measured)
    *_, info = measured.step(mask)
    *_, twin_info = twin.step(mask)
    assert info["round_time_s"] != twin_info["round_time_s"]  # the worlds are not the same


def test_a_nominal_belief_is_no_belief():
    env = gym.make("PowerTrip-Measured-v0").unwrapped
    env.reset(seed=1)
    n = env.params.n_sites
    masks = np.random.default_rng(1).integers(0, 2, (5, n)).astype(bool)
    for nominal in (dynamics.UnknownFactors.nominal(n), dynamics.nominal_belief(n)):
        for steady_state in (False, True):
            a = env.predict_round(masks, steady_state=steady_state)
            b = env.predict_round(masks, steady_state=steady_state, belief=nominal)
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        a, b = env.predict_plan(masks, 4), env.predict_plan(masks, 4, belief=nominal)
        assert np.array_equal(a.state.data, b.state.data) and np.array_equal(a.tta_h, b.tta_h)
        a, b = env.candidates(), env.candidates(belief=nominal)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_belief_changes_the_what_if():
    env = gym.make("PowerTrip-Measured-v0").unwrapped
    env.reset(seed=1)
    n = env.params.n_sites
    site = int(np.flatnonzero(env.available())[0])
    mask = np.zeros(n, dtype=bool)
    mask[site] = True
    nominal = dynamics.UnknownFactors.nominal(n)
    slow = nominal.replace(throughput=np.full(n, 0.5))
    stated = env.predict_round(mask, steady_state=True)
    halved = env.predict_round(mask, steady_state=True, belief=slow)
    assert halved.compute_s > stated.compute_s
    assert halved.round_time_s > stated.round_time_s
    fast_pace = env.predict_round(mask, steady_state=True, belief=nominal.replace(pace=2.0))
    assert fast_pace.delta_progress > stated.delta_progress
    assert fast_pace.compute_s == stated.compute_s
    plan = np.array([mask])
    assert (
        env.predict_plan(plan, 4, belief=slow).state.time_s[0]
        > env.predict_plan(plan, 4).state.time_s[0]
    )
    # the draw as a belief: what Informed passes, and not the stated world's what-if
    told = env.predict_round(np.ones(n, dtype=bool), belief=env.clairvoyant().drawn())
    assert told != env.predict_round(np.ones(n, dtype=bool))


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda n: np.ones(n), id="too-short"),
        pytest.param(lambda n: np.ones(unknowns_width(n) + 1), id="too-long"),
        pytest.param(lambda n: np.ones((3, unknowns_width(n))), id="too-many-rows"),
        pytest.param(lambda n: np.r_[0.0, np.ones(unknowns_width(n) - 1)], id="zero"),
        pytest.param(lambda n: -np.ones(unknowns_width(n)), id="negative"),
        pytest.param(lambda n: np.r_[np.ones(unknowns_width(n) - 1), np.nan], id="nan"),
        pytest.param(lambda n: np.r_[np.ones(unknowns_width(n) - 1), np.inf], id="inf"),
    ],
)
def test_a_bad_belief_is_refused(bad):
    env = gym.make("PowerTrip-Measured-v0").unwrapped
    env.reset(seed=0)
    n = env.params.n_sites
    belief, mask = bad(n), np.ones(n, dtype=bool)
    with pytest.raises(ValueError, match="belief"):
        env.predict_round(mask, belief=belief)
    with pytest.raises(ValueError, match="belief"):
        env.predict_plan(mask[None], 2, belief=belief)
    with pytest.raises(ValueError, match="belief"):
        env.candidates(belief=belief)


# --------------------------------------------------------------------------- clairvoyant


def test_clairvoyant_plays_the_folded_world_from_a_state_of_ones():
    env = gym.make("PowerTrip-Measured-v0", split="test").unwrapped
    env.reset(seed=2)
    n = env.params.n_sites
    door = env.clairvoyant()
    assert not np.all(door.drawn().vector == 1.0)
    assert np.array_equal(door.drawn().vector, dynamics.episode_unknowns(env.state)[0])
    folded = dynamics.fold(env.params, door.drawn().vector)
    assert np.array_equal(door.params.site, folded.site)
    assert np.array_equal(door.params.consts, folded.consts)
    assert not np.array_equal(door.params.site, env.params.site)
    assert np.all(dynamics.episode_unknowns(door.state) == 1.0)
    assert door.state.data.shape == env.state.data.shape == (1, state_width(n))


@pytest.mark.parametrize("jitter", [False, True])
def test_a_clairvoyant_plan_is_exactly_what_the_env_then_plays(jitter):
    env = gym.make("PowerTrip-Measured-v0", split="test", jitter=jitter).unwrapped
    env.reset(seed=2)
    plan = np.repeat(env.available()[None, :], 5, axis=0)
    door = env.clairvoyant()
    played = door.simulate(np.array([plan]), rounds=5)
    # the stated world played from the same start is another episode
    stated = dynamics.play_plans(env.params, door.state, np.array([plan]), 5)
    for mask in plan:
        env.step(mask.astype(np.int8))
    assert int(env.state.rounds[0]) == 5
    assert played.state.time_s[0] == env.state.time_s[0]
    assert played.state.progress[0] == env.state.progress[0]
    assert played.state.accuracy[0] == env.state.accuracy[0]
    assert played.state.energy_j[0] == env.state.energy_j[0]
    assert stated.state.time_s[0] != env.state.time_s[0]
    assert stated.state.progress[0] != env.state.progress[0]


# --------------------------------------------------------------------------- telemetry


def test_info_reports_each_sites_telemetry_from_reset_on():
    env = gym.make("PowerTrip-Measured-v0", split="test", jitter=False).unwrapped
    _, info = env.reset(seed=2)
    n = env.params.n_sites
    for key in ("measured_compute_s", "measured_transfer_s", "measured_join_s"):
        assert info[key].shape == (n,) and info[key].dtype == np.float64
        assert np.all(info[key] == 0.0), key
    assert info["delta_progress"] == 0.0
    mask = all_available(env)
    left_out = int(np.flatnonzero(mask)[-1])
    mask[left_out] = 0
    *_, info = env.step(mask)
    completed = info["selected"] & ~info["dropped"]
    assert completed.sum() >= 2 and not info["selected"][left_out]
    assert np.all(info["measured_compute_s"][completed] > 0.0)
    assert np.all(info["measured_transfer_s"][completed] > 0.0)
    assert np.all(info["measured_join_s"][info["selected"]] > 0.0)  # the first round: all join
    for key in ("measured_compute_s", "measured_transfer_s", "measured_join_s"):
        assert np.all(info[key][~info["selected"]] == 0.0), key
    assert np.all(info["measured_compute_s"][~completed] == 0.0)
    assert info["measured_compute_s"].max() <= info["compute_s"]
    assert info["delta_progress"] > 0.0
    stayed = completed & env.available()
    *_, info = env.step(stayed.astype(np.int8))  # joined already: no join to pay
    assert np.all(info["measured_join_s"][stayed] == 0.0)
    assert np.all(info["measured_compute_s"][info["selected"] & ~info["dropped"]] > 0.0)


def test_the_decision_view_keeps_measured_over_stated_on_the_measured_track():
    env = gym.make("PowerTrip-Measured-v0", split="test", jitter=False).unwrapped
    env.reset(seed=2)
    view = env.decision_view()
    assert np.all(view.measured_round == -1)
    for ratio in (view.measured_compute, view.measured_transfer, view.measured_join):
        assert np.all(ratio == 1.0)
    start = env.state.time_s[0]
    door = env.clairvoyant()
    u = door.drawn()
    *_, info = env.step(all_available(env))
    completed = info["selected"] & ~info["dropped"]
    assert completed.any() and not completed.all()  # seed 2: a site loses its power
    view = env.decision_view()
    assert np.all(view.measured_round[completed] == 0)
    assert np.all(view.measured_round[~completed] == -1)
    assert np.all(view.measured_compute[~completed] == 1.0)
    np.testing.assert_allclose(view.measured_join[completed], u.join[completed], rtol=1e-12)
    # compute: the true throughput's time for the quota, on the true trace; its ratio is the
    # stated throughput's work in that time over the quota, 1 / the throughput factor however
    # the site's power moved during the round
    begin = start + info["measured_join_s"]
    quota = env.params.site[S_QUOTA]
    actual = door.finish_s(begin[None], quota / u.throughput)[0] - begin
    np.testing.assert_allclose(info["measured_compute_s"][completed], actual[completed], rtol=1e-12)
    np.testing.assert_allclose(
        view.measured_compute[completed], 1.0 / u.throughput[completed], rtol=1e-9
    )
    assert np.all(view.measured_transfer[completed] != 1.0)


def test_on_constant_power_a_measured_compute_is_one_over_the_throughput(flat_measured):
    env = unwrapped(flat_measured, jitter=False)
    env.reset(seed=1)
    u = env.clairvoyant().drawn()
    *_, info = env.step(np.ones(4, dtype=np.int8))
    assert np.all(info["selected"] & ~info["dropped"])
    view = env.decision_view()
    assert np.all(view.measured_round == 0)
    np.testing.assert_allclose(view.measured_compute, 1.0 / u.throughput, rtol=1e-9)
    np.testing.assert_allclose(view.measured_join, u.join, rtol=1e-12)


def test_the_known_track_reports_telemetry_but_keeps_no_ratios():
    env = gym.make("PowerTrip-v0", split="test", jitter=False).unwrapped
    env.reset(seed=2)
    for _ in range(3):
        *_, info = env.step(all_available(env))
        assert np.any(info["measured_compute_s"] > 0.0)  # info reports it on either track
        view = env.decision_view()
        assert not view.measured_track
        assert np.all(view.measured_round == -1)
        for ratio in (view.measured_compute, view.measured_transfer, view.measured_join):
            assert np.all(ratio == 1.0)


# --------------------------------------------------------------------------- baselines


def test_informed_plays_its_inner_rule_on_the_known_track():
    env = gym.make("PowerTrip-v0", split="test").unwrapped
    env.reset(seed=0)
    n = env.params.n_sites
    rule = play_on_copy(env, make_policy("HorizonRule", n))
    told = play_on_copy(env, Informed(make_policy("HorizonRule", n), "Informed"))
    assert np.array_equal(told.masks, rule.masks)
    assert told.tta_h == rule.tta_h and told.success == rule.success


def test_informed_is_told_the_draw_on_the_measured_track():
    env = gym.make("PowerTrip-Measured-v0", split="test", jitter=False).unwrapped
    env.reset(seed=0)
    n = env.params.n_sites
    policy = Informed(make_policy("HorizonRule", n), "Informed")
    told = play_on_copy(env, policy)
    assert np.array_equal(policy.inner.env.belief.vector, drawn(env))
    rule = play_on_copy(env, make_policy("HorizonRule", n))
    assert told.tta_h != rule.tta_h  # the draw reached the rule's what-ifs


def test_adaptive_estimates_the_measured_sites_exactly_without_jitter(flat_measured):
    env = unwrapped(flat_measured, jitter=False)
    env.reset(seed=1)
    u = env.clairvoyant().drawn()
    policy = Adaptive(make_policy("HorizonRule", 4), "Adaptive")
    policy.reset(env)
    assert np.all(policy.estimator.belief().vector == 1.0)  # nothing measured yet
    obs, info = None, {}
    for _ in range(5):
        obs, *_, info = env.step(policy.act(obs, info))
    seen = env.decision_view().measured_round >= 0
    assert seen.sum() >= 2
    policy.estimator.update(env.decision_view())
    belief = policy.estimator.belief()
    np.testing.assert_allclose(belief.throughput[seen], u.throughput[seen], rtol=1e-6)
    np.testing.assert_allclose(belief.join[seen], u.join[seen], rtol=1e-6)
    assert np.all(belief.throughput[~seen] == 1.0)  # never measured: taken as stated
    # the rule's what-ifs assume the estimates (as of its last act)
    np.testing.assert_allclose(policy.inner.env.belief.throughput, belief.throughput, rtol=1e-12)


def test_the_measured_observation_carries_each_sites_telemetry_and_its_age():
    """On the measured track each site's columns end with its last telemetry (``ln`` of measured
    over stated, clipped to ±1) and the measurement's age in rounds over AGE_SCALE_ROUNDS."""
    from powertrip_env.dynamics.features import AGE_SCALE_ROUNDS

    env = gym.make("PowerTrip-Measured-v0", split="test", jitter=False)
    inner = env.unwrapped
    obs, _ = env.reset(seed=3)
    n, f, t = inner.params.n_sites, dynamics.N_SITE_FEATURES, len(TELEMETRY_FEATURES)
    assert env.observation_space.shape == (n * (f + t) + dynamics.N_GLOBAL,)
    first = all_available(inner)
    obs, *_, info = env.step(first)
    done = info["selected"] & ~info["dropped"]
    assert done.any()
    view = inner.decision_view()
    tel = obs[: n * (f + t)].reshape(n, f + t)[:, f:]
    expected = np.clip(np.log(view.measured_compute), -1.0, 1.0)
    np.testing.assert_allclose(tel[done, 0], expected[done], rtol=1e-6)
    np.testing.assert_allclose(tel[done, 2], np.log(view.measured_join[done]), rtol=1e-6)
    assert np.all(tel[done, 3] == 0.0) and np.all(tel[~done, 3] == 1.0)
    # one site sits out the next round: its measurement ages by one round
    keep = first.copy()
    out = int(np.flatnonzero(done)[0])
    keep[out] = 0
    obs, *_ = env.step(keep)
    tel = obs[: n * (f + t)].reshape(n, f + t)[:, f:]
    assert tel[out, 3] == pytest.approx(1.0 / AGE_SCALE_ROUNDS)
    assert env.observation_space.contains(obs)
