"""The moving world (``[moving]``, powertrip_env/dynamics/paths.py): sites that slow down and
recover, links that dip and power that is called back while the job runs.

Each site has three two-state processes (fail-slow, link excursion, power callback) whose phases
are keyed to the calendar's rows and the episode's key. The contract these tests hold it to:

* the path is the episode's, not the policy's: the same seed gives the same path whatever is
  played, and a vector sub-env's path is the single env's seeded alike;
* nothing a deployable policy calls sees it (the forecast's world switches it off), while the
  rounds do;
* the clairvoyant door plays it exactly as the env does, and its perfect monitor reads it;
* a scenario whose rates are all 0 is its static base, bit for bit;
* the processes spend the share of time in events their rates and durations give.

The bad-input cases of ``[moving]`` are in tests/test_bad_input.py, the run without the JIT in
tests/test_pure_python.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import write_powered_scenario
from test_measured import all_available, assert_same_what_ifs, drawn, unwrapped
from test_vector_env import compare_with_single_envs, same

import powertrip_env
from powertrip_env import dynamics, load_scenario
from powertrip_env.baselines.references import (
    BestFixedSet,
    best_fixed_set,
    play_on_copy,
    rollout_fixed,
)
from powertrip_env.baselines.registry import make_policy
from powertrip_env.dynamics.layout import (
    P_CALLBACK,
    P_LINK,
    P_SLOW,
    PATH_FIELDS,
    PROCESSES,
    S_IDLE_W,
    S_WALL_W,
    path_start,
    seen_start,
    share_start,
)
from powertrip_env.dynamics.paths import _advance_path
from powertrip_env.scenario.portable import from_portable, to_portable
from powertrip_env.units import S_PER_DAY

MOVING = "PowerTrip-Moving-v0"
MEASURED = "PowerTrip-Measured-v0"
# The flagship on the moving track with frequent, deep events: a fail-slow that halves a site
# and a link at half its bandwidth, each a fifth of the time (rate x mean = 1/4), no callback.
BUSY = (
    'extends = "moving"\nname = "busy"\n[moving]\n'
    "slow_per_day = 6.0\nslow_hours = 1.0\nslow_factor = 2.0\n"
    "link_per_day = 4.0\nlink_hours = 1.5\nlink_depth = 0.5\n"
    "callback_per_day = 0.0\n"
)
# The moving scenario with every process off: the measured track's world, depths and all kept.
STILL = (
    'extends = "moving"\nname = "still"\n[moving]\n'
    "slow_per_day = 0.0\nlink_per_day = 0.0\ncallback_per_day = 0.0\n"
)
# The flagship's known track (no unknowns drawn) with the moving track's processes.
KNOWN_MOVING = 'extends = "default"\nname = "known-moving"\n[moving]\nextends = "moving"\n'


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def busy(tmp_path: Path) -> Path:
    return write(tmp_path, "busy", BUSY)


def path_rows(env: Any, rows: int) -> np.ndarray:
    """(rows, 3, N): the episode's path from its current row on (``dynamics.path_of``)."""
    return dynamics.path_of(env.params, env.state, rows)[0]


def now(env: Any) -> np.ndarray:
    """(3, N): the path now (``dynamics.path_now``): speed, link and power factors."""
    return dynamics.path_now(env.params, env.state)[0]


def row_of(env: Any) -> int:
    return int(dynamics.current_row(env.params, env.state.time_s)[0])


def path_columns(env: Any) -> np.ndarray:
    n = env.params.n_sites
    return env.state.data[:, path_start(n) : path_start(n) + len(PATH_FIELDS) * n]


# --------------------------------------------------------------------------- the task


def test_the_moving_ids_are_the_measured_ones_with_moving_processes():
    assert powertrip_env.MOVING_SUITE_IDS == (MOVING, "PowerTrip-Wide-Moving-v0")
    for moving, measured in (("moving", "measured"), ("wide-moving", "wide-measured")):
        scenario, base = load_scenario(moving), load_scenario(measured)
        assert scenario.moving.on and not base.moving.on
        assert scenario.moving == load_scenario("moving").moving  # written once
        for field in dataclasses.fields(scenario):
            if field.name not in ("name", "description", "source", "moving", "inputs"):
                a, b = getattr(scenario, field.name), getattr(base, field.name)
                assert a == b, (moving, field.name)
    params = gym.make(MOVING).unwrapped.params
    assert params.moving and params.measured
    consts = load_scenario("moving").moving.constants()
    assert consts["slow_rate_per_s"] == 2.5 / S_PER_DAY and consts["moving"] == 1.0


# --------------------------------------------------------------------------- 1. the episode's path


def play_reading_the_path(env: Any, name: str, seed: int, horizon: int) -> list[int]:
    """Reset on ``seed``, record the path (``path_of``) and play ``name`` (a registry policy,
    or "idle": no site at all) for up to 40 rounds; after each, the path now (``path_now``)
    and ahead (``path_of`` from the state the round advanced) must be the recorded one at the
    row reached. The rows reached, from the start row."""
    env.reset(seed=seed)
    first = row_of(env)
    recorded = path_rows(env, horizon)
    n = env.params.n_sites
    policy = None if name == "idle" else make_policy(name, n)
    if policy is not None:
        policy.reset(env)
    obs: Any = None
    info: dict[str, Any] = {}
    rows = []
    for _ in range(40):
        mask = np.zeros(n, dtype=np.int8) if policy is None else policy.act(obs, info)
        obs, _, terminated, truncated, info = env.step(mask)
        r = row_of(env) - first
        assert r + 5 <= horizon
        np.testing.assert_array_equal(now(env), recorded[r], err_msg=f"{name}, row {r}")
        np.testing.assert_array_equal(path_rows(env, 5), recorded[r : r + 5])
        rows.append(r)
        if terminated or truncated:
            break
    env.reset(seed=seed)
    np.testing.assert_array_equal(path_rows(env, horizon), recorded)  # not the policy's
    return rows


@pytest.mark.parametrize("other", ["TopPower-2", "idle"])
def test_the_same_seed_gives_the_same_path_whatever_the_policy_plays(other):
    """AllSites and another policy cross the episode's rows at their own pace from the same
    reset; each meets, at every step, the path recorded at reset, which moves under them."""
    env = gym.make(MOVING).unwrapped
    horizon = 900
    env.reset(seed=0)
    recorded = path_rows(env, horizon)
    crossed = [play_reading_the_path(env, name, 0, horizon) for name in ("AllSites", other)]
    assert crossed[0] != crossed[1]  # the policies met the path at different rows
    for rows in crossed:
        assert any(np.any(recorded[r] != 1.0) for r in rows)  # and it moved under them
    env.reset(seed=1)
    assert not np.array_equal(path_rows(env, horizon), recorded)  # another seed, another path


def test_a_fork_and_a_saved_state_replay_the_path():
    env = gym.make(MOVING).unwrapped
    env.reset(seed=4)
    for _ in range(3):
        env.step(all_available(env))
    fork, saved = env.fork(), env.get_state()
    ahead = path_rows(env, 300)
    mask = all_available(env)
    for _ in range(5):
        *_, info = env.step(mask)
        *_, twin = fork.step(mask)
        assert same(info, twin)
    np.testing.assert_array_equal(path_columns(env), path_columns(fork))
    env.set_state(saved)
    np.testing.assert_array_equal(path_rows(env, 300), ahead)


# --------------------------------------------------------------------------- 2. unseen by policies


def first_seed_with_a_slowed_round(env: Any, twin: Any, seeds: range) -> int:
    """The first seed whose first round (all available sites) differs between the envs."""
    for seed in seeds:
        env.reset(seed=seed)
        twin.reset(seed=seed)
        mask = all_available(env)
        a, b = env.fork().step(mask)[4], twin.fork().step(mask)[4]
        if a["round_time_s"] != b["round_time_s"]:
            return seed
    raise AssertionError(f"no seed in {seeds} slows the first round")


def test_policies_see_the_same_world_whatever_the_path(busy):
    """Two episodes that start alike (the same draw, start and jitter key) but on different
    paths, the busy one's and none (the measured track), give the same observation, info,
    decision view, what-ifs and candidates, and different rounds."""
    moving, still = unwrapped(busy), gym.make(MEASURED).unwrapped
    seed = first_seed_with_a_slowed_round(moving, still, range(10))
    obs, info = moving.reset(seed=seed)
    still_obs, still_info = still.reset(seed=seed)
    assert moving.state.time_s[0] == still.state.time_s[0]
    assert np.array_equal(drawn(moving), drawn(still))
    assert np.any(now(moving) != 1.0) and np.all(now(still) == 1.0)

    assert same(obs, still_obs)
    assert same(info, still_info)
    view, still_view = moving.decision_view(), still.decision_view()
    for field in dataclasses.fields(view):
        if field.name != "scenario":
            a, b = getattr(view, field.name), getattr(still_view, field.name)
            assert np.array_equal(a, b), field.name

    # the what-if's state up to the path's columns
    assert_same_what_ifs(moving, still, path_start(moving.params.n_sites))

    mask = all_available(moving)
    *_, info = moving.step(mask)
    *_, still_info = still.step(mask)
    assert info["round_time_s"] != still_info["round_time_s"]  # the rounds see the path


def test_a_what_ifs_state_carries_no_path(busy):
    """``predict_plan``'s trajectory is a deployable policy's to read; on the measured track
    its unknowns are the belief's, not the draw (``with_belief``). Its path must not be the
    episode's either: the episode's path columns hold whether each site is in an event now
    and the calendar row at which each phase ends, the future the forecast knows nothing of."""
    moving, still = unwrapped(busy), gym.make(MEASURED).unwrapped
    moving.reset(seed=0)
    still.reset(seed=0)
    assert np.any(path_columns(moving) != path_columns(still))  # the episode has a path
    n = moving.params.n_sites
    plan = np.ones((2, n), dtype=bool)
    a, b = moving.predict_plan(plan, 4), still.predict_plan(plan, 4)
    lo = path_start(n)
    assert np.array_equal(a.state.data[:, lo:], b.state.data[:, lo:]), (
        "predict_plan's state carries the episode's path (phase ends: future rows)"
    )


def round_energy_kwh(env: Any, info: dict[str, Any], power: np.ndarray) -> float:
    """A round's energy on constant power (docs/model.md): each started site's powered GPUs at
    wall power while it computes and at idle power the rest of the round, times the share of
    them a callback leaves it (``power``)."""
    site = env.params.site
    gpus = np.where(info["selected"], info["powered_gpus"], 0)
    busy = info["measured_compute_s"]
    waiting = info["round_time_s"] - busy
    joules = power * gpus * (site[S_WALL_W] * busy + site[S_IDLE_W] * waiting)
    return float(joules.sum()) / 3.6e6


def test_each_process_acts_on_the_round_as_stated(tmp_path):
    """On four sites with constant power, no jitter and no latency term, the path a round starts
    on sets each site's compute (the quota over the throughput times the speed: a fail-slow's
    1 / factor and a callback's share of the GPUs), its transfer (the update over the bandwidth
    times 1 - the link's depth) and its GPUs' draw (the callback's share), against the same
    episode without a path."""
    folder = tmp_path / "flat"
    # the hub's link ten times the sites': each site's own link sets the exchange
    write_powered_scenario(folder, [10, 8, 12, 6], network={"rtt_factor": 0.0, "hub_gbps": 100.0})
    often = (
        'extends = "scenario.toml"\nname = "flat-moving"\n[moving]\n'
        "slow_per_day = 60.0\nslow_hours = 1.0\nslow_factor = 2.0\n"
        "link_per_day = 60.0\nlink_hours = 1.0\nlink_depth = 0.6\n"
        "callback_per_day = 60.0\ncallback_hours = 1.0\ncallback_depth = 0.25\n"
    )
    moving = unwrapped(write(folder, "moving", often), jitter=False)
    still = unwrapped(folder / "scenario.toml", jitter=False)
    moving.reset(seed=1)
    still.reset(seed=1)
    mask = np.ones(4, dtype=np.int8)
    seen = set()
    for _ in range(8):
        speed, link, power = now(moving)
        for p, on in enumerate((speed != power, link != 1.0, power != 1.0)):  # slowed: speed
            seen |= {(p, bool(x)) for x in on}  # is the callback's share over the factor
        *_, info = moving.step(mask)
        *_, calm = still.step(mask)
        assert not info["dropped"].any() and not calm["dropped"].any()
        np.testing.assert_allclose(
            info["measured_compute_s"], calm["measured_compute_s"] / speed, rtol=1e-9
        )
        transfer = info["measured_transfer_s"]
        np.testing.assert_allclose(transfer, calm["measured_transfer_s"] / link, rtol=1e-12)
        assert info["comm_s"] == pytest.approx(transfer.max(), rel=1e-12)  # the round's own
        for env, one, share in ((moving, info, power), (still, calm, np.ones(4))):
            assert one["round_energy_kwh"] == pytest.approx(
                round_energy_kwh(env, one, share), rel=1e-9
            )
    assert seen == {(p, on) for p in range(3) for on in (False, True)}  # each process, each state


# --------------------------------------------------------------------------- 3. the vector env


@pytest.mark.parametrize("scenario", ["moving", "busy"])
def test_each_vector_sub_env_is_the_single_env_seeded_alike(request, scenario):
    kwargs: dict[str, Any] = {"split": "test"}
    if scenario == "busy":
        kwargs["scenario"] = str(request.getfixturevalue("busy"))
    env_id = MOVING if scenario == "moving" else "PowerTrip-v0"
    venv = gym.make_vec(env_id, num_envs=3, **kwargs)
    venv.reset(seed=5)
    paths = dynamics.path_of(venv.unwrapped.params, venv.unwrapped.state, 400)
    for i in range(3):
        single = gym.make(env_id, **kwargs).unwrapped
        single.reset(seed=5 + i)
        np.testing.assert_array_equal(paths[i], path_rows(single, 400))
    assert np.any(paths != 1.0)
    compare_with_single_envs(env_id, kwargs, b=2, steps=40, seed=3)


# --------------------------------------------------------------------------- 5. the clairvoyant


def calmed(state: dynamics.SimState) -> dynamics.SimState:
    """A copy of ``state`` whose path is calm for good (as ``initial_state`` leaves it)."""
    data = state.data.copy()
    n = state.n_sites
    lo = path_start(n)
    for p in range(len(PROCESSES)):
        data[:, lo + 2 * p * n : lo + (2 * p + 1) * n] = 0.0
        data[:, lo + (2 * p + 1) * n : lo + (2 * p + 2) * n] = np.inf
    return type(state)(data)


def seed_with_early_events(env: Any, rows: int = 100) -> int:
    """The first seed whose path moves within ``rows`` rows of its start."""
    for seed in range(30):
        env.reset(seed=seed)
        if np.any(path_rows(env, rows) != 1.0):
            return seed
    raise AssertionError("no seed's path moves early")


@pytest.mark.parametrize("scenario", ["moving", "busy", "known-moving"])
@pytest.mark.parametrize("jitter", [False, True])
def test_the_clairvoyant_replays_a_fixed_set_exactly_as_the_env_plays_it(
    tmp_path, busy, scenario, jitter
):
    """``clairvoyant().simulate`` knows the path (the Optimiser's and BestFixedSet's door): R
    rounds of a fixed set end where the env's do, bit for bit, and the same rounds on a calm
    path end elsewhere."""
    path = {"busy": busy, "known-moving": write(tmp_path, "known", KNOWN_MOVING)}.get(
        scenario, scenario
    )
    env = unwrapped(path, split="test", jitter=jitter)
    assert env.params.moving and env.params.measured == (scenario != "known-moving")
    seed_with_early_events(env)  # leaves the env reset on it
    rounds = 12
    plan = np.array([np.repeat(env.available()[None, :], rounds, axis=0)])
    door = env.clairvoyant()
    played = door.simulate(plan, rounds=rounds)
    calm = door.simulate(plan, calmed(door.state), rounds=rounds)
    for mask in plan[0]:
        env.step(mask.astype(np.int8))
    assert int(env.state.rounds[0]) == rounds
    for name in ("time_s", "progress", "accuracy", "energy_j", "rounds"):
        assert getattr(played.state, name)[0] == getattr(env.state, name)[0], name
    # the state as the door holds the env's (unknowns folded: set to 1), and the path; not
    # the telemetry, measured against the folded world's stated values there
    n = env.params.n_sites
    seen = env.clairvoyant().state.data[:, : seen_start(n)]
    np.testing.assert_array_equal(played.state.data[:, : seen_start(n)], seen)
    np.testing.assert_array_equal(
        played.state.data[:, path_start(n) : share_start(n)], path_columns(env)
    )
    assert calm.state.energy_j[0] != env.state.energy_j[0]  # the path moved under the rounds


def test_a_fixed_set_played_to_the_end_takes_the_clairvoyants_time(busy):
    """``rollout_fixed`` (the door's whole-episode simulation) and BestFixedSet, replayed in
    the env, reach the target when the door said they would."""
    env = unwrapped(busy, split="test")
    env.reset(seed=1)
    masks = np.array([np.ones(env.params.n_sites, dtype=bool), env.available()])
    out = rollout_fixed(env, masks)
    for i, mask in enumerate(masks):
        fork = env.fork()
        while True:
            *_, terminated, truncated, info = fork.step(mask.astype(np.int8))
            if terminated or truncated:
                break
        assert info["tta_h"] == out.tta_h[i] and terminated == out.success[i]
        assert fork.state.rounds[0] == out.rounds[i]
    assert play_on_copy(env, BestFixedSet()).tta_h == best_fixed_set(env).tta_h


@pytest.mark.slow
def test_the_optimiser_plays_the_plan_it_made_on_the_moving_track(reference_runs):
    played = reference_runs(MOVING, True, 0, "Optimiser")
    assert played.run.success
    assert played.run.tta_h == pytest.approx(played.policy.planned_tta_h, rel=1e-12)


# --------------------------------------------------------------------------- 9. the monitor


def test_the_monitor_reads_the_draw_times_the_path_now(busy):
    env = unwrapped(busy, split="test")
    env.reset(seed=3)
    moved = 0
    for _ in range(8):
        door = env.clairvoyant()
        told, drawn_now = door.monitored(), door.drawn()
        speed, link, _ = now(env)
        np.testing.assert_array_equal(told.throughput, drawn_now.throughput * speed)
        np.testing.assert_array_equal(told.bandwidth, drawn_now.bandwidth * link)
        for name in ("rtt", "join", "pace", "noise"):
            assert np.array_equal(getattr(told, name), getattr(drawn_now, name)), name
        moved += bool(np.any(speed != 1.0) or np.any(link != 1.0))
        env.step(all_available(env))
    assert moved >= 2


def test_on_a_static_world_the_monitor_reads_the_draw():
    env = gym.make(MEASURED, split="test").unwrapped
    env.reset(seed=3)
    for _ in range(4):
        door = env.clairvoyant()
        assert np.array_equal(door.monitored().vector, door.drawn().vector)
        env.step(all_available(env))


# --------------------------------------------------------------------------- 6. the path moves


def event_share(rate_per_day: float, hours: float) -> float:
    """The share of time an alternating process spends in events: rate·mean / (1 + rate·mean)."""
    x = rate_per_day * hours / 24.0
    return x / (1.0 + x)


def many_paths(scenario: str | Path, episodes: int, rows: int) -> tuple[Any, np.ndarray]:
    """(B, rows, 3, N) paths of ``episodes`` episodes from their starts (on the training split,
    whose starts leave the trace thousands of rows)."""
    venv = gym.make_vec("PowerTrip-v0", num_envs=episodes, scenario=str(scenario))
    venv.reset(seed=0)
    return venv.unwrapped, dynamics.path_of(venv.unwrapped.params, venv.unwrapped.state, rows)


def test_each_process_spends_its_share_of_time_in_events(busy):
    """Over many episodes a process is in an event for rate·mean / (1 + rate·mean) of the rows,
    from its first row on (the stationary start), in phases of its mean length (rounded up to
    whole rows); a process with rate 0 stays calm; an event's factors are the scenario's. (That
    no phase is shorter than a row: ``test_every_phase_lasts_at_least_one_row``.)"""
    env, paths = many_paths(busy, 100, 3000)
    moving = load_scenario(busy).moving
    assert (moving.slow_per_day, moving.link_per_day, moving.callback_per_day) == (6, 4, 0)
    slow = paths[:, :, 0] != 1.0  # speed: the fail-slow (no callback here)
    link = paths[:, :, 1] != 1.0
    assert set(np.unique(paths[:, :, 0])) == {1.0, 0.5}  # 1 / slow_factor
    assert set(np.unique(paths[:, :, 1])) == {1.0, 0.5}  # 1 - link_depth
    assert np.all(paths[:, :, 2] == 1.0)  # the callback's rate is 0: calm throughout
    iv_h = env.params.interval_s / 3600.0
    for on, (rate, hours) in ((slow, (6.0, 1.0)), (link, (4.0, 1.5))):
        share = event_share(rate, hours)
        assert on.mean() == pytest.approx(share, rel=0.1)
        assert on[:, 0].mean() == pytest.approx(share, abs=0.05)  # stationary from the start
        # a phase of mean m rows lasts ceil(Exp(m)) rows, m + 1/2 on average: the rows in each
        # state over the phases of it that began in the window
        changes = np.diff(on.astype(np.int8), axis=1)
        assert on.sum() / np.sum(changes == 1) == pytest.approx(hours / iv_h + 0.5, rel=0.1)
        calm_rows = 24.0 / rate / iv_h
        assert (~on).sum() / np.sum(changes == -1) == pytest.approx(calm_rows + 0.5, rel=0.1)
    # the sites' and processes' paths are not copies of each other
    assert not np.array_equal(slow[:, :, 0], slow[:, :, 1])
    assert not np.array_equal(slow, link)


def test_the_shipped_processes_take_their_share_of_time():
    """The moving track's own rates: about 2% of the time slowed, 0.4% on a dipped link, 1.2%
    with power called back (loose: their events are rare); a callback slows the site too."""
    _, paths = many_paths("moving", 100, 3000)
    moving = load_scenario("moving").moving
    speed, link, power = paths[:, :, 0], paths[:, :, 1], paths[:, :, 2]
    slow, kept = 1.0 / moving.slow_factor, 1.0 - moving.callback_depth
    assert set(np.unique(speed)) == {1.0, slow, kept, slow * kept}
    assert set(np.unique(link)) == {1.0, 1.0 - moving.link_depth}
    assert set(np.unique(power)) == {1.0, kept}
    slowed = speed != power  # speed is the callback's share, over the slow factor if slowed
    on = (slowed, link != 1.0, power != 1.0)
    for p, (rate, hours, _) in enumerate(moving.processes()):
        assert on[p].mean() == pytest.approx(event_share(rate, hours), rel=0.3), PROCESSES[p]


def test_every_phase_lasts_at_least_one_row(busy):
    """The state's path, advanced row by row (as rounds advance it, ``_advance_path``), always
    ends its current phase after the row it is at: no phase of zero rows, none that ended."""
    env, _ = many_paths(busy, 20, 1)
    params, data = env.params, env.state.data.copy()
    n = params.n_sites
    until = path_start(n) + np.array([(2 * p + 1) * n + np.arange(n) for p in (P_SLOW, P_LINK)])
    first = dynamics.current_row(params, env.state.time_s)
    assert np.all(data[:, until] > first[:, None, None])  # the stationary start's phases
    assert np.all(data[:, path_start(n) + (2 * P_CALLBACK + 1) * n :][:, :n] == np.inf)
    for b in range(data.shape[0]):
        for k in range(int(first[b]), int(first[b]) + 600, 7):  # rounds skip rows
            _advance_path(params.consts, data[b], n, k)
            assert np.all(data[b, until] > k), (b, k)
            assert np.all(data[b, until] == np.floor(data[b, until]))  # whole rows


# --------------------------------------------------------------------------- 7. rates of 0


def test_a_moving_section_with_every_rate_zero_is_its_static_base_bit_for_bit(tmp_path):
    """``moving.toml`` with its three rates set to 0 (its depths and durations kept) plays the
    measured track's episodes exactly: observations, rewards, infos and the whole state."""
    still = unwrapped(write(tmp_path, "still", STILL))
    base = gym.make(MEASURED).unwrapped
    assert not still.params.moving and still.scenario.moving.slow_factor == 1.6
    n = base.params.n_sites
    rng = np.random.default_rng(0)
    for seed in (0, 7):
        assert same(still.reset(seed=seed), base.reset(seed=seed))
        assert np.array_equal(still.state.data, base.state.data)
        assert np.all(path_rows(still, 50) == 1.0)
        for _ in range(25):
            mask = (rng.random(n) < 0.6).astype(np.int8)
            a, b = still.step(mask), base.step(mask)
            assert same(a, b)
            assert np.array_equal(still.state.data, base.state.data)
            if a[2] or a[3]:
                break
        assert np.array_equal(still.clairvoyant().monitored().vector, drawn(base))


# --------------------------------------------------------------------------- 8. by value


@pytest.mark.parametrize("name", ["moving", "wide-moving"])
def test_a_portable_scenario_keeps_its_moving_processes(name):
    scenario = load_scenario(name)
    data = to_portable(name)
    again, _ = from_portable(data)
    assert again.moving == scenario.moving and again.moving.on
    data["scenario"] = json.loads(json.dumps(data["scenario"]))  # the section as plain JSON
    assert from_portable(data)[0].moving == scenario.moving


def test_an_env_on_a_portable_moving_scenario_plays_like_the_file_based_one():
    by_file = gym.make(MOVING).unwrapped
    by_value = gym.make(MOVING, scenario=to_portable("moving")).unwrapped
    assert np.array_equal(by_file.params.consts, by_value.params.consts)
    assert same(by_file.reset(seed=7), by_value.reset(seed=7))
    np.testing.assert_array_equal(path_rows(by_file, 300), path_rows(by_value, 300))
    rng = np.random.default_rng(0)
    for _ in range(20):
        mask = (rng.random(by_file.params.n_sites) < 0.5).astype(np.int8)
        assert same(by_file.step(mask), by_value.step(mask))


def test_a_portable_made_before_the_moving_world_loads_static():
    data = to_portable("moving")
    del data["scenario"]["moving"]
    scenario, _ = from_portable(data)
    assert not scenario.moving.on


def test_a_portable_with_a_phase_shorter_than_a_row_is_refused():
    data = to_portable("moving")
    data["scenario"]["moving"]["slow_hours"] = 0.05
    from_portable(data)  # the row length is the power data's: checked when the env is built
    with pytest.raises(powertrip_env.ScenarioError, match=r"'slow_hours' = 0.05.*one trace row"):
        gym.make(MOVING, scenario=data)


def test_a_phase_of_one_row_and_a_static_section_on_fixed_time_rounds_load(tmp_path):
    """The limits themselves are allowed: a mean phase of exactly one trace row (5 minutes),
    also as the error message writes it (0.0833333 h), and a [moving] section with every rate 0
    (its depths set) on fixed_time rounds."""
    row = write(
        tmp_path,
        "row",
        'extends = "moving"\n[moving]\nslow_hours = 0.08333333333333333\n'
        "link_hours = 0.08333333333333333\ncallback_hours = 0.0833333\n",
    )
    assert unwrapped(row).params.slow_mean_s == 300.0
    fixed = write(
        tmp_path,
        "fixed",
        'extends = "lora"\n[workload]\nround_mode = "fixed_time"\nround_s = 240.0\n'
        "[moving]\nslow_factor = 2.0\nlink_depth = 0.7\ncallback_depth = 0.5\n",
    )
    assert not load_scenario(fixed).moving.on
