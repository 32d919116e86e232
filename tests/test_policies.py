"""Tests for powertrip_env.baselines.policies (and the helpers of powertrip_env.baselines.base, the
names of powertrip_env.baselines.registry): each rule on hand-made states, and that none but the
clairvoyant reference reads the future.

The scenarios are written to ``tmp_path`` by ``write_scenario``: inline sites with two toy GPU
types, RTTs given directly, and a trace computed from the number of GPUs each site should have
powered in each 5-minute row, so every expectation can be worked out by hand:

* ``G100``: 100 TFLOPS, 100 W; ``server_overhead = 2`` and PUE 1.25 give ``p_g = 250 W``;
  ``θ = 100e12 · 0.5 / 5e12 = 10`` samples/s per powered GPU. ``G200`` is twice both;
  ``GSLOW`` draws like a G200 (500 W) for half a G100's speed (5 samples/s).
* The quota is ``site_batch · local_steps`` (default ``100 · 10 = 1,000`` samples), so a site
  with 10 powered G100s computes a round in 10 s.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scenario_files import INTERVAL_S, ROWS_PER_DAY, site
from scenario_files import write_powered_scenario as write_scenario
from scenario_files import write_scenario as write_toy_scenario

from powertrip_env import dynamics
from powertrip_env.baselines.base import Policy, first_peak, prefix_masks, subset_matrix
from powertrip_env.baselines.policies import (
    AllSites,
    FastestK,
    FedZeroLike,
    MyopicOptimal,
    Nearest,
    OortLike,
    PowerTrip,
    RandomK,
    TopPower,
)
from powertrip_env.baselines.registry import (
    POLICIES,
    REFERENCES,
    default_policy_names,
    make_policy,
    policy_names,
)
from powertrip_env.env import PowerTripEnv
from powertrip_env.view import DecisionView

DAY2_S = ROWS_PER_DAY * INTERVAL_S  # start of the test day


def make_env(path: Path, start_s: float = DAY2_S, **kwargs: Any) -> PowerTripEnv:
    env = PowerTripEnv(scenario=path, split="test", **kwargs)
    env.reset(seed=0, options={"start_time": start_s})
    return env


def act(policy: Policy, env: PowerTripEnv) -> np.ndarray:
    policy.reset(env)
    mask = policy.act(None, {})  # hand-coded policies read the env, not the observation
    assert mask.shape == (env.params.n_sites,)
    assert mask.dtype == np.int8
    assert set(np.unique(mask)) <= {0, 1}
    return mask


def chosen(mask: np.ndarray) -> set[int]:
    return {int(i) for i in np.flatnonzero(mask)}


# --------------------------------------------------------------------------- helpers


def test_first_peak_stops_at_first_prefix_that_does_not_improve():
    assert first_peak(np.array([1.0, 2.0, 1.5, 3.0]), 4) == 1
    assert first_peak(np.array([1.0, 1.0, 5.0]), 3) == 0  # equal is not an improvement
    assert first_peak(np.array([1.0, 2.0, 3.0]), 3) == 2
    assert first_peak(np.array([1.0, 2.0, 3.0]), 2) == 1  # only the usable prefixes count


def test_prefix_masks_follow_the_order():
    masks = prefix_masks(np.array([2, 0, 1]))
    assert masks.tolist() == [[0, 0, 1], [1, 0, 1], [1, 1, 1]]


def test_subset_matrix_lists_every_nonempty_subset_once():
    sub = subset_matrix(4)
    assert sub.shape == (15, 4)
    assert len({tuple(r) for r in sub.tolist()}) == 15
    assert sub.any(axis=1).all()
    assert subset_matrix(4) is sub  # built once per size


# --------------------------------------------------------------------------- PowerTrip


def test_powertrip_ranks_available_sites_by_power_over_rtt(tmp_path):
    # power (W): 10·250, 20·250, 6·250, 0, 8·500 (G200); RTT (ms): 10, 40, 2, 1, 5
    path = write_scenario(
        tmp_path,
        [10, 20, 6, 0, 8],
        gpus=["G100", "G100", "G100", "G100", "G200"],
        rtt_ms=[10, 40, 2, 1, 5],
    )
    env = make_env(path)
    order = PowerTrip().ranking(env.decision_view())
    # scores W/ms: 250, 125, 750, unavailable, 800
    assert order[:4].tolist() == [4, 2, 0, 1]
    assert order[4] == 3  # the unavailable site comes last


def test_powertrip_stops_when_the_next_site_lowers_predicted_efficiency(tmp_path):
    # s0: hub, 10 GPUs -> 10 s; s1: tiny power but very close, ranked second, 50 s straggler;
    # s2: fast but far. Adding s1 lowers efficiency, so the greedy stops at {s0}.
    path = write_scenario(tmp_path, [10, 2, 10], rtt_ms=[1, 2, 40])
    env = make_env(path)
    policy = PowerTrip()
    policy.reset(env)
    order = policy.ranking(env.decision_view())
    assert order.tolist() == [0, 1, 2]
    eff = env.predict_round(prefix_masks(order), steady_state=True).efficiency
    assert eff[1] < eff[0]  # the case the test is about
    assert chosen(act(policy, env)) == {0}
    # A search would not stop there: MyopicOptimal finds the better set {s0, s2}.
    assert chosen(act(MyopicOptimal(), env)) == {0, 2}


def test_powertrip_keeps_adding_sites_while_efficiency_rises(tmp_path):
    path = write_scenario(tmp_path, [10, 10, 10, 0], rtt_ms=[1, 2, 3, 4])
    env = make_env(path)
    eff = env.predict_round(prefix_masks(np.arange(4)), steady_state=True).efficiency
    assert eff[0] < eff[1] < eff[2]
    assert chosen(act(PowerTrip(), env)) == {0, 1, 2}


def test_powertrip_idles_when_no_site_is_available(tmp_path):
    path = write_scenario(tmp_path, [0, 0, 0])
    env = make_env(path)
    for name in ("PowerTrip", "AllSites", "RandomK", "TopPower-2", "OortLike", "FedZeroLike",
                 "MyopicOptimal"):  # fmt: skip
        assert not act(make_policy(name, 3, seed=0), env).any(), name


# --------------------------------------------------------------------------- simple rules


@pytest.fixture
def mixed_env(tmp_path) -> PowerTripEnv:
    """Five sites that power, speed and distance rank differently.

    ===== ============ ======= ========== ========
    site  powered GPUs power W samples/s  RTT ms
    ===== ============ ======= ========== ========
    s0    12 G100      3000    120        30
    s1    8 GSLOW      4000    40         50
    s2    4 G200       2000    80         3
    s3    0            0       0          1 (nearest, but unavailable)
    s4    9 G100       2250    90         10
    ===== ============ ======= ========== ========
    """
    path = write_scenario(
        tmp_path,
        [12, 8, 4, 0, 9],
        gpus=["G100", "GSLOW", "G200", "G100", "G100"],
        rtt_ms=[30, 50, 3, 1, 10],
    )
    return make_env(path)


def test_all_sites_selects_every_available_site(mixed_env):
    assert chosen(act(AllSites(), mixed_env)) == {0, 1, 2, 4}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (TopPower(1), {1}),  # most watts, although they buy the least throughput
        (TopPower(2), {0, 1}),
        (TopPower(4), {0, 1, 2, 4}),
        (FastestK(1), {0}),  # GPU-aware: the most samples per second
        (FastestK(2), {0, 4}),
        (FastestK(3), {0, 2, 4}),
        (Nearest(1), {2}),  # s3 is nearer but unavailable
        (Nearest(2), {2, 4}),
        (Nearest(3), {0, 2, 4}),
        (TopPower(9), {0, 1, 2, 4}),  # k beyond the available sites takes them all
    ],
)
def test_ranked_k_policies_pick_the_right_sites(mixed_env, policy, expected):
    assert chosen(act(policy, mixed_env)) == expected


def test_random_k_is_reproducible_per_seed_and_leaves_the_env_generator_alone(mixed_env):
    def run(seed: int, episodes: int = 3, rounds: int = 5) -> list[list[int]]:
        policy, out = RandomK(2, seed=seed), []
        for _ in range(episodes):
            policy.reset(mixed_env)
            before = mixed_env.np_random.bit_generator.state
            out += [sorted(chosen(policy.act(None, {}))) for _ in range(rounds)]
            assert mixed_env.np_random.bit_generator.state == before
        return out

    first, again, other = run(3), run(3), run(4)
    assert first == again
    assert first != other
    assert all(len(s) == 2 and set(s) <= {0, 1, 2, 4} for s in first)
    assert first[:5] != first[5:10]  # the episode counter reseeds each episode differently


# --------------------------------------------------------------------------- MyopicOptimal


def test_myopic_optimal_matches_brute_force_over_subsets(tmp_path):
    path = write_scenario(
        tmp_path,
        [12, 3, 7, 0, 9, 5],
        gpus=["G100", "G200", "G100", "G100", "G200", "G100"],
        rtt_ms=[1, 80, 20, 5, 150, 40],
        network={"rtt_factor": 50.0, "join_fixed_s": 4.0},
    )
    env = make_env(path)
    best, best_set = -np.inf, None
    for size in range(1, 7):
        for subset in itertools.combinations(range(6), size):
            mask = np.zeros(6, dtype=bool)
            mask[list(subset)] = True
            if (mask & ~env.available()).any():
                continue
            eff = env.predict_round(mask).efficiency
            if eff > best:
                best, best_set = eff, set(subset)
    mask = act(MyopicOptimal(), env)
    assert chosen(mask) == best_set
    assert env.predict_round(mask).efficiency == pytest.approx(best)


def test_myopic_optimal_refuses_more_than_sixteen_sites(tmp_path):
    with pytest.raises(ValueError, match="N <= 16"):
        make_policy("MyopicOptimal", n_sites=17, seed=0)
    path = write_scenario(tmp_path, [1] * 17, days=2)
    env = PowerTripEnv(scenario=path, split="test")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="N = 17"):
        MyopicOptimal().reset(env)


# --------------------------------------------------------------------------- OortLike


def test_oort_utility_penalises_sites_slower_than_the_preferred_duration(tmp_path):
    # compute times 5, 5, 10, 20 s (+2 s network and aggregation): T is the median duration
    path = write_scenario(tmp_path, [20, 20, 10, 5], gpu_count=32, rtt_ms=[1, 1, 1, 1])
    env = make_env(path)
    oort = OortLike(seed=0)
    oort.reset(env)
    now = env.decision_view()
    utility = oort.utility(now)
    duration = env.predict_round(np.eye(4, dtype=bool)).round_time_s
    preferred = np.median(duration)
    share = env.params.data_share
    assert utility[:2] == pytest.approx(share[:2])  # fast sites: no penalty, staleness 0
    assert utility[3] == pytest.approx(share[3] * (preferred / duration[3]) ** 2)
    assert utility[3] < utility[2] < utility[0]


def test_oort_exploration_decays_from_point_nine_to_point_three(tmp_path):
    path = write_scenario(tmp_path, [10, 10, 10])
    env = make_env(path)
    oort = OortLike(seed=0)
    oort.reset(env)
    assert oort.epsilon(env.decision_view()) == pytest.approx(0.9)
    p = env.params
    env.state = env.state.replace(accuracy=p.a_target)
    assert oort.epsilon(env.decision_view()) == pytest.approx(0.3)


def test_oort_is_reproducible_and_leaves_the_env_generator_alone(mixed_env):
    def run(seed: int) -> list[list[int]]:
        oort, out = OortLike(seed=seed), []
        oort.reset(mixed_env)
        before = mixed_env.np_random.bit_generator.state
        out = [sorted(chosen(oort.act(None, {}))) for _ in range(8)]
        assert mixed_env.np_random.bit_generator.state == before
        return out

    assert run(1) == run(1)


# --------------------------------------------------------------------------- references


def test_clairvoyant_references_avoid_a_site_whose_power_collapses_mid_round(tmp_path):
    # Rounds take ~200 s. s1 equals s0 now but keeps 1 GPU from the next interval on, so it
    # would straggle; the prediction (no forecast file: current power holds) cannot know, the
    # clairvoyant references can.
    rows = np.array([[10, 10]] * ROWS_PER_DAY + [[10, 10], [10, 1]] * ROWS_PER_DAY)
    path = write_scenario(tmp_path, rows, rtt_ms=[1, 1], workload={"local_steps": 200})
    start = DAY2_S + 150.0  # row 288 (s1 has 10 GPUs), row 289 (1 GPU) starts 150 s later
    env = make_env(path, start_s=start)
    assert env.params.powered[ROWS_PER_DAY + 1, 1] == 1
    assert chosen(act(MyopicOptimal(), env)) == {0, 1}
    for name in REFERENCES:
        assert chosen(act(make_policy(name, 2, seed=0), env)) == {0}, name


# --------------------------------------------------------------------------- no peeking


def _scramble_future(env: PowerTripEnv, row: int, rng: np.random.Generator) -> dynamics.SimParams:
    """The env's tables rebuilt from power whose actual values after ``row`` are random.

    The forecasts issued up to ``row`` stay as they were (what an operator knows now); those
    issued later start from the scrambled actuals (horizon 0 is the actual of its row; without a
    forecast file it is all there is). Rebuilding through ``dynamics.build_params`` keeps every
    derived table consistent, whatever tables the simulator keeps. (Rows of the wrapped copy up
    to ``row`` stay as they were; they are a whole calendar ahead.)
    """
    power = env.sim.power
    available = power.available_w.copy()
    available[row + 1 :] = rng.uniform(0.0, 1.0, size=available[row + 1 :].shape) * power.peak_w
    forecast = power.forecast_w.copy()
    forecast[row + 1 :, 0] = available[row + 1 :]
    if power.horizons == 1:
        forecast[row + 1 :] = available[row + 1 :, None]
    scrambled = dataclasses.replace(power, available_w=available, forecast_w=forecast)
    params = dynamics.build_params(env.scenario, scrambled)
    assert np.array_equal(params.powered[: row + 1], env.params.powered[: row + 1])
    assert np.array_equal(params.forecast_rate[: row + 1], env.params.forecast_rate[: row + 1])
    assert not np.array_equal(params.powered[row + 1 :], env.params.powered[row + 1 :])
    return params


def _run_on(env: PowerTripEnv, params: dynamics.SimParams) -> None:
    """Let ``env`` run on other tables (a scrambled future) from now on."""
    setup = env._engine.setup
    sim = dataclasses.replace(setup.sim, params=params)
    env._engine.setup = dataclasses.replace(setup, sim=sim, interface=setup.interface.on(params))


class _Peeker(Policy):
    """A deliberately cheating policy: picks the sites with most power three rows ahead."""

    name = "Peeker"

    def act(self, obs, info):
        p = self.env.params
        row = int(dynamics.current_row(p, self.env.state.time_s)[0])
        ahead = p.powered[row + 3] * self.env.available()
        return (ahead >= np.sort(ahead)[-2]).astype(np.int8) * self.env.available()


def _decisions_differ(path: Path, factory, rounds: int = 40) -> bool:
    """Run one episode on the true trace; at every round, also ask a twin policy bound to an
    env whose future trace is scrambled. True if any decision differed."""
    true_env = PowerTripEnv(scenario=path, split="test")
    twin_env = PowerTripEnv(scenario=path, split="test")
    obs, info = true_env.reset(seed=5)
    twin_env.reset(seed=5)
    policy, twin = factory(), factory()
    policy.reset(true_env)
    twin.reset(twin_env)
    rng = np.random.default_rng(0)
    for _ in range(rounds):
        row = int(dynamics.current_row(true_env.params, true_env.state.time_s)[0])
        twin_env.state = true_env.state
        _run_on(twin_env, _scramble_future(true_env, row, rng))
        mask = policy.act(obs, info)
        if not np.array_equal(mask, twin.act(obs, info)):
            return True
        obs, _, terminated, truncated, info = true_env.step(mask)
        if terminated or truncated:
            break
    return False


def test_the_decision_view_reads_no_future_actual_and_is_read_only(varying_scenario):
    true_env = PowerTripEnv(scenario=varying_scenario, split="test")
    twin_env = PowerTripEnv(scenario=varying_scenario, split="test")
    true_env.reset(seed=3)
    twin_env.reset(seed=3)
    rng = np.random.default_rng(1)
    for _ in range(20):
        row = int(dynamics.current_row(true_env.params, true_env.state.time_s)[0])
        twin_env.state = true_env.state
        _run_on(twin_env, _scramble_future(true_env, row, rng))
        view, twin = true_env.decision_view(), twin_env.decision_view()
        for field in dataclasses.fields(view):
            a, b = getattr(view, field.name), getattr(twin, field.name)
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, field.name
        *_, terminated, truncated, _ = true_env.step(rng.integers(0, 2, size=view.n_sites))
        if terminated or truncated:
            break
    with pytest.raises(ValueError, match="read-only"):
        view.power_w[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.accuracy = 1.0  # type: ignore[misc]


@pytest.fixture(scope="module")
def varying_scenario(tmp_path_factory) -> Path:
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 17, size=(ROWS_PER_DAY * 3, 6))
    return write_scenario(
        tmp_path_factory.mktemp("varying"),
        rows,
        gpus=["G100", "G200", "G100", "G200", "G100", "G100"],
        rtt_ms=[1, 20, 40, 60, 90, 120],
        network={"join_fixed_s": 3.0, "rtt_factor": 20.0},
        workload={"local_steps": 60},
        episode={"jitter_sigma": 0.05},
        data_shares=[0.3, 0.1, 0.2, 0.1, 0.2, 0.1],
    )


@pytest.mark.parametrize("name", [*default_policy_names(6), "TopPower-3", "FastestK-2"])
def test_no_deployable_policy_reads_future_power(varying_scenario, name):
    assert not set(REFERENCES) & set(default_policy_names(6))
    assert not _decisions_differ(varying_scenario, lambda: make_policy(name, 6, seed=1))


def test_the_future_check_catches_a_policy_that_peeks(varying_scenario):
    assert _decisions_differ(varying_scenario, _Peeker)


def _smooth_guess(phase: float):
    return lambda issue, h: 0.5 + 0.5 * np.sin((issue + h) / 9.0 + phase)


@pytest.fixture(scope="module")
def solar_scenario(tmp_path_factory) -> Path:
    """Four sites with on-site solar whose PV forecasts are wrong in their own way: the actual
    sun is random per row, the forecast a smooth guess. Rounds of about two minutes."""
    rng = np.random.default_rng(11)
    rows = 2 * ROWS_PER_DAY
    sites = [
        site(f"s{i}", f"g{i}", pv_kw=2.0 + i, pv_column=f"p{i}", longitude=-90.0 + 20 * i)
        for i in range(4)
    ]
    return write_toy_scenario(
        tmp_path_factory.mktemp("solar"),
        sites,
        {f"g{i}": rng.uniform(0.3, 1.0, rows) for i in range(4)},
        pv={f"p{i}": rng.uniform(0.0, 1.0, rows) for i in range(4)},
        forecast={f"p{i}": _smooth_guess(i) for i in range(4)},
        horizons=6,
        workload={"local_steps": 20},
        network={"join_fixed_s": 5.0},
        episode={"jitter_sigma": 0.05},
    )


@pytest.mark.parametrize("name", ["FedZeroLike", "PowerTrip", "MyopicOptimal"])
def test_forecast_readers_never_read_future_actuals(solar_scenario, name):
    """Their choices may depend on the forecasts issued so far, never on the actual future."""
    assert not _decisions_differ(solar_scenario, lambda: make_policy(name, 4, seed=1))


def _after_a_round_with_one_site_going_dark(tmp_path, dark: str) -> DecisionView:
    """Two PV-only sites, equal power now; ``dark``'s forecast loses its sun from the next row."""
    sunny = "pa" if dark == "pb" else "pb"
    path = write_toy_scenario(
        tmp_path,
        [site("a", "g", pv_kw=5.25, pv_column="pa"), site("b", "g", pv_kw=5.25, pv_column="pb")],
        {"g": 1.0},
        pv={"pa": 0.5, "pb": 0.5},
        forecast={sunny: 0.5, dark: lambda issue, h: np.where(h >= 1, 0.0, 0.5)},
    )
    env = PowerTripEnv(scenario=path, split="train", jitter=False)
    env.reset(seed=0, options={"start_time": 3000.0})
    env.step(np.array([1, 1]))  # a round of about 600 s: FedZero looks two rows ahead
    return env.decision_view()


def test_fedzero_ranks_a_site_forecast_to_lose_its_sun_below_one_that_keeps_it(tmp_path):
    now = _after_a_round_with_one_site_going_dark(tmp_path, dark="pb")
    assert now.power_w.tolist() == [2500.0, 2500.0]
    assert now.forecast_power_w[1:, 1].tolist() == [0.0, 0.0, 0.0]
    assert FedZeroLike().ranking(now).tolist() == [0, 1]
    # ... and the other way round when a is the one forecast to go dark
    now = _after_a_round_with_one_site_going_dark(tmp_path, dark="pa")
    assert now.forecast_power_w[1:, 0].tolist() == [0.0, 0.0, 0.0]
    assert FedZeroLike().ranking(now).tolist() == [1, 0]


# --------------------------------------------------------------------------- registry


def test_registry_parses_sized_names_and_lists_valid_names_on_error():
    assert make_policy("TopPower-3", 8, 0).name == "TopPower-3"
    assert isinstance(make_policy("Nearest-2", 8, 0), Nearest)
    assert isinstance(make_policy("FastestK-8", 8, 0), FastestK)
    assert make_policy("RandomK", 8, 0).k == 4
    for fixed in POLICIES:
        assert make_policy(fixed, 8, 0).name == fixed
    with pytest.raises(ValueError, match=r"unknown policy 'Greedy'.*PowerTrip.*TopPower-k"):
        make_policy("Greedy", 8, 0)
    with pytest.raises(ValueError, match="1 <= k <= 8"):
        make_policy("TopPower-9", 8, 0)
    with pytest.raises(ValueError, match="1 <= k <= 8"):
        make_policy("Nearest-0", 8, 0)


def test_default_policy_names_fit_the_scenario_size():
    names = default_policy_names(8)
    assert names[0] == "PowerTrip"
    assert {"MyopicOptimal", "FedZeroLike", "TopPower-4", "FastestK-4"} <= set(names)
    assert not set(REFERENCES) & set(names)  # clairvoyant references are asked for by name
    large = default_policy_names(32)
    assert "MyopicOptimal" not in large and "FedZeroLike" in large
    assert "TopPower-4" not in default_policy_names(3)
    for n in (3, 8, 32):
        assert set(default_policy_names(n)) <= set(policy_names(n))
