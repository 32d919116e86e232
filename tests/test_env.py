"""The Gymnasium environment (powertrip_env/env.py) against docs/model.md."""

from __future__ import annotations

import datetime as dt
import doctest
import math
import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from scenario_files import T0_UNIX, site, write_scenario
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powertrip_env
from powertrip_env import dynamics, load_scenario
from powertrip_env.env import PowerTripEnv
from powertrip_env.scenario import provenance

ENV_IDS = list(powertrip_env.ENV_IDS)
FLAGSHIP = "PowerTrip-v0"  # scenario "default": 10 solar sites on real power data
LORA = "PowerTrip-LoRA-v0"  # scenario "lora": 8 sites on the synthetic 2019 trace
ROWS_PER_DAY = 288
INTERVAL_S = 300.0
F = 15  # per-site features (dynamics.SITE_FEATURES)
G = 6  # global features
FLAGSHIP_T0 = dt.datetime(2022, 6, 8, tzinfo=dt.UTC).timestamp()  # row 0 of its calendar
FLAGSHIP_ROWS = 8257  # 2022-06-08 00:00 UTC to 2022-07-06 16:00 UTC, every 5 minutes


# --------------------------------------------------------------------------- helpers


def trace_facts(scenario_name: str) -> tuple[float, int]:
    """Unix time of the first row and the number of rows of a scenario's trace, read directly.

    Only for scenarios whose calendar is their one grid trace (no PV, no shift), as "lora".
    """
    path = load_scenario(scenario_name).trace_file
    with path.open(encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    first = lines[1].split(",", 1)[0]
    t0 = dt.datetime.fromisoformat(first.replace("Z", "+00:00")).timestamp()
    return t0, len([line for line in lines[1:] if line.strip()])


def same(a: Any, b: Any) -> bool:
    """Bit-for-bit equality of observations, infos and scalars (nested dicts and arrays)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        if type(a) is not type(b):  # a numpy scalar is not a 0-d array, nor a Python float
            return False
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


# Every key of info, at reset and after every round (README's table, the class docstring).
INFO_KEYS = {
    "round_time_s", "compute_s", "comm_s", "elapsed_s", "start_time_s", "trace_time", "accuracy",
    "selected", "n_selected", "dropped", "invalid_selections", "idle", "cut", "powered_gpus",
    "available", "straggler", "round_energy_kwh", "energy_kwh", "rounds", "tta_h", "success",
    "delta_progress", "measured_compute_s", "measured_transfer_s", "measured_join_s",
    "round_carbon_kg", "carbon_kg",
}  # fmt: skip


def numeric_info_problems(info: dict[str, Any]) -> list[str]:
    """What in ``info`` is not a numpy scalar or array of a bool, integer or float dtype.

    Array-based libraries (TorchRL's info reader, Tianshou's batches) turn every info value into
    a tensor; a string, an object array or a Python scalar breaks that or loses the dtype.
    """
    return [
        f"{key}: {type(value).__name__} {getattr(value, 'dtype', '')}"
        for key, value in info.items()
        if not isinstance(value, np.ndarray | np.generic) or value.dtype.kind not in "biuf"
    ]


def rollout(env: gym.Env, seed: int, steps: int, options: dict | None = None) -> list:
    """Reset with ``seed`` and take ``steps`` random actions from the seeded action space."""
    obs, info = env.reset(seed=seed, options=options)
    env.action_space.seed(seed)
    record: list = [(obs, info)]
    for _ in range(steps):
        out = env.step(env.action_space.sample())
        record.append(out)
        if out[2] or out[3]:
            break
    return record


def same_rollout(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(same(u, v) for u, v in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@pytest.fixture
def toy_path(tmp_path):
    """Three sites; "dark" never has headroom. Sites: a (10 G100s), dark, c (6 G200s)."""
    return write_scenario(
        tmp_path,
        [site("a", "ca"), site("dark", "cb"), site("c", "cc", gpu="G200", capacity_kw=6.25)],
        {"ca": 0.5, "cb": 1.0, "cc": 0.5},
        network={"rtt_to_hub_ms": [10.0, 20.0, 40.0]},
    )


def all_sites(env: gym.Env) -> np.ndarray:
    return np.ones(env.unwrapped.params.n_sites, dtype=np.int8)


def test_observation_has_fifteen_site_and_six_global_features():
    assert len(dynamics.SITE_FEATURES) == F
    assert len(dynamics.GLOBAL_FEATURES) == G
    assert dynamics.SITE_LOW.shape == dynamics.SITE_HIGH.shape == (F,)


# --------------------------------------------------------------------------- checkers and docs


@pytest.mark.parametrize("action_mode", ["multibinary", "multidiscrete"])
@pytest.mark.parametrize("obs_mode", ["flat", "dict"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_and_sb3_env_checkers_pass_without_warnings(env_id, obs_mode, action_mode):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id, obs_mode=obs_mode, action_mode=action_mode)
        gym_check_env(env.unwrapped)
        sb3_check_env(env.unwrapped, warn=True)
        env.close()
    ours = [w for w in caught if "powertrip_env" in w.filename]
    assert not ours, [str(w.message) for w in ours]

    # The one warning allowed is SB3's advice about the (N, F) "sites" block of the dict
    # observation, which docs/model.md specifies on purpose for set encoders.
    def expected(w: warnings.WarningMessage) -> bool:
        return obs_mode == "dict" and "unconventional shape" in str(w.message)

    others = [f"{w.filename}: {w.message}" for w in caught if not expected(w)]
    assert not others


@pytest.mark.parametrize("render_mode", ["ansi", "rgb_array"])
def test_gymnasium_env_checker_passes_with_rendering(render_mode):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(gym.make("PowerTrip-v0", render_mode=render_mode).unwrapped)
    assert not [f"{w.filename}: {w.message}" for w in caught]


def test_class_docstring_gym_make_example_runs():
    tests = doctest.DocTestFinder().find(PowerTripEnv, "PowerTripEnv", globs={})
    class_test = next(t for t in tests if t.name == "PowerTripEnv")
    assert any("gym.make" in example.source for example in class_test.examples)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= len(class_test.examples) > 0
    assert result.failed == 0


def _doc_paragraph(start: str) -> str:
    """The docstring's paragraph that begins with ``start``, on one line."""
    doc = PowerTripEnv.__doc__
    begin = doc.index(start)
    return " ".join(doc[begin : doc.index("\n\n", begin)].split())


def _ids_in(text: str) -> list[str]:
    return re.findall(r"`(PowerTrip-[\w-]+)`", text)


def test_the_docstring_says_which_ids_run_on_real_data_from_the_data_s_record():
    """Which IDs run on real power data is read from traces/README.md's table (which marks each
    trace real or synthetic) and each registered scenario's trace, not written by hand: the
    flagship and the three other suite tasks (and the drawn catalogues of its data) run on
    Google's PDUs and Solcast's PV; every other setting on the synthetic trace."""
    real, synthetic = _doc_paragraph("`PowerTrip-v0`, ").split(" run on real data: ")
    assert _ids_in(real) == [
        *powertrip_env.SUITE_IDS,
        *powertrip_env.MEASURED_SUITE_IDS,
        *powertrip_env.MOVING_SUITE_IDS,
        *powertrip_env.CARBON_SUITE_IDS,
        *powertrip_env.SAMPLED_ENV_IDS,
    ]
    assert "on a synthetic trace" in synthetic
    tasks = (
        *powertrip_env.SUITE_IDS,
        *powertrip_env.MEASURED_SUITE_IDS,
        *powertrip_env.MOVING_SUITE_IDS,
        *powertrip_env.CARBON_SUITE_IDS,
    )
    rest = [eid for eid in powertrip_env.ENV_IDS if eid not in tasks]
    assert _ids_in(synthetic) == rest
    marked = provenance.provenance()
    assert marked["google_cella_2019.csv"] == "real"
    assert marked["power_synthetic_2019.csv"] == "synthetic"
    for env_id in _ids_in(real):  # every real-data ID runs on all the data the sentence names
        scenario = load_scenario(gym.spec(env_id).kwargs["scenario"])
        assert scenario.trace.file.name == "google_cella_2019.csv", env_id
        assert scenario.trace.pv_file.name == "solcast_pv_2022.csv", env_id
        assert scenario.trace.pv_forecast_file is not None, env_id


def test_the_docstring_s_id_list_is_the_registry_s():
    listed = _doc_paragraph("Registered IDs")
    assert _ids_in(listed) == [*powertrip_env.ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS]
    assert "`PowerTrip-Digits-v1` (`digits`)" in listed
    assert "`PowerTrip-Random-v0` (`default`, `sites='random'`, `max_sites=32`)" in listed


def test_the_docstring_s_power_data_follows_the_registrations_and_the_data(monkeypatch):
    """A new registration on real data joins the real list; a trace the README does not mark
    is in neither list, rather than called synthetic (or real) unread."""
    pairs = [("PowerTrip-v0", "default"), ("Mine-v0", "solar"), ("PowerTrip-KWS-v0", "kws")]
    text = " ".join(provenance.power_data_sentence(pairs).split())
    assert text.startswith("`PowerTrip-v0` and `Mine-v0` run on real data: Google's 2019 PDU")
    assert "; `PowerTrip-KWS-v0` runs on a synthetic trace (traces/README.md" in text
    monkeypatch.setattr(provenance, "provenance", lambda: {"power_synthetic_2019.csv": "synthetic"})
    text = " ".join(provenance.power_data_sentence(pairs).split())
    assert "real data" not in text and _ids_in(text) == ["PowerTrip-KWS-v0"]


# --------------------------------------------------------------------------- making envs


def test_make_by_module_path_registers_and_builds():
    env = gym.make("powertrip_env:PowerTrip-v0")
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.scenario.name == "default"
    assert obs.shape == (10 * F + G,)


def test_every_id_is_registered_with_the_one_pair_of_entry_points():
    from gymnasium.envs.registration import load_env_creator, registry

    from powertrip_env.vector_env import PowerTripVectorEnv

    assert load_env_creator(powertrip_env.ENTRY_POINT) is PowerTripEnv
    assert load_env_creator(powertrip_env.VECTOR_ENTRY_POINT) is PowerTripVectorEnv
    for env_id in powertrip_env.ENV_IDS:
        spec = registry[env_id]
        assert spec.entry_point == powertrip_env.ENTRY_POINT, env_id
        assert spec.vector_entry_point == powertrip_env.VECTOR_ENTRY_POINT, env_id


@pytest.mark.parametrize(
    ("env_id", "n_sites"),
    [(FLAGSHIP, 10), (LORA, 8), ("PowerTrip-KWS-v0", 8), ("PowerTrip-Large-v0", 32)],
)
def test_registered_ids_run_their_scenarios(env_id, n_sites):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.scenario.name == powertrip_env.ENV_IDS[env_id]
    assert obs.shape == (n_sites * F + G,)
    assert env.action_space == gym.spaces.MultiBinary(n_sites)


def test_make_loads_a_users_scenario_file(toy_path):
    env = gym.make("PowerTrip-v0", scenario=str(toy_path))
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.scenario.n_sites == 3
    assert obs.shape == (3 * F + G,)
    assert env.action_space == gym.spaces.MultiBinary(3)
    dict_env = gym.make("PowerTrip-v0", scenario=toy_path, obs_mode="dict")
    assert dict_env.observation_space["sites"].shape == (3, F)
    assert dict_env.observation_space["global"].shape == (6,)


@pytest.mark.parametrize(
    ("kwargs", "allowed"),
    [
        ({"reward_mode": "x"}, ("excess_gain", "gain_rate")),
        ({"obs_mode": "x"}, ("flat", "dict")),
        ({"split": "x"}, ("train", "test")),
        ({"action_mode": "x"}, ("multibinary", "multidiscrete")),
    ],
)
def test_bad_keyword_arguments_name_the_allowed_values(kwargs, allowed):
    with pytest.raises(ValueError) as info:
        gym.make("PowerTrip-v0", **kwargs)
    message = str(info.value)
    for word in (*kwargs, "'x'", *allowed):
        assert word in message, message


def test_unknown_scenario_name_is_a_scenario_error():
    with pytest.raises(powertrip_env.ScenarioError, match="no-such"):
        gym.make("PowerTrip-v0", scenario="no-such")


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-EMNIST-v0"])
def test_same_seed_same_episode(env_id):
    first = rollout(gym.make(env_id), seed=123, steps=40)
    second = rollout(gym.make(env_id), seed=123, steps=40)
    assert len(first) > 5
    assert same_rollout(first, second)


def test_reset_with_the_same_seed_replays_the_episode_on_one_env():
    env = gym.make("PowerTrip-v0")
    first = rollout(env, seed=7, steps=70)
    rollout(env, seed=8, steps=10)
    again = rollout(env, seed=7, steps=70)
    assert same_rollout(first, again)


def test_different_seeds_give_different_episodes():
    a = rollout(gym.make("PowerTrip-v0"), seed=1, steps=5)
    b = rollout(gym.make("PowerTrip-v0"), seed=2, steps=5)
    assert a[0][1]["start_time_s"] != b[0][1]["start_time_s"]
    assert not same_rollout(a, b)


@pytest.mark.parametrize("env_id", [FLAGSHIP, LORA])
def test_jitter_comes_from_the_episode_seed(env_id):
    options = {"start_time": 3600.0}
    times = []
    for seed in (1, 2):
        env = gym.make(env_id)
        env.reset(seed=seed, options=options)
        times.append(env.step(all_sites(env))[4]["round_time_s"])
    assert times[0] != times[1]
    quiet = []
    for seed in (1, 2):
        env = gym.make(env_id, jitter=False)
        env.reset(seed=seed, options=options)
        quiet.append(env.step(all_sites(env))[4]["round_time_s"])
    assert quiet[0] == quiet[1]


def jittery_toy(tmp_path) -> str:
    """Two sites, rounds of about 10 s and a 1 h budget: hundreds of jittered rounds."""
    return str(
        write_scenario(
            tmp_path,
            [site("a", "ca"), site("b", "cb", gpu="G200", capacity_kw=6.25)],
            {"ca": 0.5, "cb": lambda rows: np.where(rows % 7 == 3, 1.0, 0.5)},
            workload={"local_steps": 1},
            episode={"jitter_sigma": 0.1},
        )
    )


def test_clairvoyant_jitter_is_exactly_the_jitter_the_env_then_uses(tmp_path):
    env = PowerTripEnv(scenario=jittery_toy(tmp_path))
    env.reset(seed=3)
    rounds = 140
    rng = np.random.default_rng(0)
    ahead = env.clairvoyant().jitter(rounds)
    assert ahead.shape == (rounds, 3)
    assert np.unique(ahead).size == ahead.size  # real draws, not ones
    for r in range(rounds):
        if r in (63, 64, 65):  # asked again mid-episode
            np.testing.assert_array_equal(env.clairvoyant().jitter(rounds - r), ahead[r:])
        mask = rng.random((1, 2)) < 0.7
        expected = dynamics.step_round(env.params, env.state, mask, ahead[r : r + 1])
        env.step(mask[0].astype(np.int8))
        for name in ("time_s", "progress", "energy_j", "prev_selected"):
            np.testing.assert_array_equal(
                getattr(env.state, name), getattr(expected.state, name), err_msg=f"round {r}"
            )


def test_asking_for_clairvoyant_jitter_does_not_change_the_episode(tmp_path):
    path = jittery_toy(tmp_path)

    def run(peek: bool) -> list:
        env = PowerTripEnv(scenario=path)
        env.reset(seed=4)
        record = []
        for r in range(84):
            if peek and r % 9 in (0, 1):
                env.clairvoyant().jitter(1 + 17 * r)
                env.clairvoyant().simulate(np.ones((3, 2), dtype=bool))
            _, reward, _, _, info = env.step(np.ones(2, dtype=np.int8))
            record.append((reward, info["round_time_s"], info["compute_s"], info["comm_s"]))
        record.append(env.np_random.bit_generator.state)
        return record

    assert run(peek=True) == run(peek=False)


# --------------------------------------------------------------------------- starting state


@pytest.mark.parametrize("scenario", ["lora", "kws"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_split_starts_only_inside_its_days_leaving_room_for_the_budget(scenario, split):
    env_id = next(k for k, v in powertrip_env.ENV_IDS.items() if v == scenario)
    sc = load_scenario(scenario)
    first_day, last_day = sc.episode.train_days if split == "train" else sc.episode.test_days
    lo_s = (first_day - 1) * 86_400.0
    hi_s = last_day * 86_400.0 - sc.episode.time_budget_h * 3600.0
    env = gym.make(env_id, split=split)
    starts = np.array([env.reset(seed=seed)[1]["start_time_s"] for seed in range(300)])
    assert starts.min() >= lo_s
    assert starts.max() <= hi_s
    # drawn across the split, not from one corner of it
    span = hi_s - lo_s
    assert starts.min() < lo_s + 0.25 * span
    assert starts.max() > lo_s + 0.75 * span


@pytest.mark.parametrize("env_id", [FLAGSHIP, LORA])
def test_test_and_train_splits_do_not_overlap(env_id):
    train = gym.make(env_id, split="train")
    test = gym.make(env_id, split="test")
    episode = train.unwrapped.scenario.episode
    train_end = max(train.reset(seed=s)[1]["start_time_s"] for s in range(200))
    test_start = min(test.reset(seed=s)[1]["start_time_s"] for s in range(200))
    boundary_s = episode.train_days[1] * 86_400.0
    assert episode.test_days[0] == episode.train_days[1] + 1
    assert train_end + episode.time_budget_h * 3600.0 <= boundary_s <= test_start


def test_start_time_option_accepts_seconds():
    t0, _ = trace_facts("lora")
    env = gym.make(LORA)
    _, info = env.reset(seed=0, options={"start_time": 3600.0})
    assert info["start_time_s"] == 3600.0
    assert info["trace_time"] == pytest.approx(t0 + 3600.0)
    step_info = env.step(all_sites(env))[4]
    assert step_info["trace_time"] == pytest.approx(t0 + 3600.0 + step_info["round_time_s"])


@pytest.mark.parametrize(
    "stamp", ["2019-05-03T07:00:00Z", "2019-05-03T09:00:00+02:00", "2019-05-03T07:00:00"]
)
def test_start_time_option_accepts_iso_strings(stamp):
    t0, _ = trace_facts("lora")
    wanted = dt.datetime(2019, 5, 3, 7, 0, tzinfo=dt.UTC).timestamp() - t0
    env = gym.make(LORA)
    _, info = env.reset(seed=0, options={"start_time": stamp})
    assert info["start_time_s"] == pytest.approx(wanted)


def test_start_time_option_accepts_a_datetime():
    t0, _ = trace_facts("lora")
    when = dt.datetime(2019, 5, 10, 12, 30, tzinfo=dt.UTC)
    _, info = gym.make(LORA).reset(seed=0, options={"start_time": when})
    assert info["start_time_s"] == pytest.approx(when.timestamp() - t0)


@pytest.mark.parametrize(
    "bad", [-1.0, "end", "2019-04-01T00:00:00Z", "2019-07-01T00:00:00Z", "yesterday", [1, 2], True]
)
def test_start_time_option_rejects_out_of_range_values(bad):
    _, rows = trace_facts("lora")
    if bad == "end":
        bad = rows * INTERVAL_S  # one past the last second of the trace
    env = gym.make(LORA)
    with pytest.raises(ValueError, match="start_time"):
        env.reset(seed=0, options={"start_time": bad})


def test_flagship_start_time_counts_from_its_calendar():
    env = gym.make(FLAGSHIP)
    _, info = env.reset(seed=0, options={"start_time": "2022-06-10T12:00:00Z"})
    assert info["start_time_s"] == 2.5 * 86_400
    assert info["trace_time"] == FLAGSHIP_T0 + 2.5 * 86_400
    assert env.unwrapped.params.trace_rows == FLAGSHIP_ROWS
    for bad in ("2022-06-07T23:55:00Z", FLAGSHIP_ROWS * INTERVAL_S, "2019-05-03T07:00:00Z"):
        with pytest.raises(ValueError, match="start_time"):
            env.reset(seed=0, options={"start_time": bad})


@pytest.mark.parametrize(
    ("env_id", "rows"),
    [(LORA, lambda: trace_facts("lora")[1]), (FLAGSHIP, lambda: FLAGSHIP_ROWS)],
    ids=["lora-trace", "flagship-calendar"],
)
def test_start_near_the_end_of_the_trace_still_runs(env_id, rows):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0, options={"start_time": rows() * INTERVAL_S - 1.0})
    for _ in range(5):
        obs, reward, *_ = env.step(all_sites(env))
        assert env.observation_space.contains(obs)
        assert math.isfinite(reward)


# --------------------------------------------------------------------------- rewards


@pytest.mark.parametrize(
    ("env_id", "seeds", "policy"),
    [
        (FLAGSHIP, (0, 1), "PowerTrip"),  # every site at once fails there (drop-outs at night)
        (LORA, (0, 1, 2), "AllSites"),
        ("PowerTrip-KWS-v0", (0, 3, 4), "AllSites"),
        ("PowerTrip-EMNIST-v0", (0, 5), "AllSites"),
        ("PowerTrip-LLMFull-v0", (0, 6), "AllSites"),
    ],
)
def test_return_of_a_successful_episode_is_one_minus_tta_over_href(env_id, seeds, policy):
    from powertrip_env.baselines.registry import make_policy

    env = gym.make(env_id)
    h_ref_h = env.unwrapped.scenario.episode.h_ref_h
    chooser = make_policy(policy, env.unwrapped.params.n_sites)
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        chooser.reset(env.unwrapped)
        total, elapsed_h, terminated, truncated = 0.0, 0.0, False, False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(chooser.act(obs, info))
            total += reward
            elapsed_h += info["round_time_s"] / 3600.0
        assert terminated and info["success"], f"seed {seed} did not reach the target"
        assert info["tta_h"] == pytest.approx(elapsed_h, rel=1e-12)
        assert total == pytest.approx(1.0 - info["tta_h"] / h_ref_h, abs=1e-9)


def test_return_of_a_truncated_episode_is_progress_fraction_minus_time(toy_path):
    # Idle rounds only: nothing is learned and 12 rounds of 300 s use the 1 h budget
    env = gym.make("PowerTrip-v0", scenario=toy_path)
    env.reset(seed=0)
    total, steps, truncated = 0.0, 0, False
    while not truncated:
        _, reward, terminated, truncated, info = env.step(np.zeros(3, dtype=np.int8))
        assert not terminated
        total += reward
        steps += 1
    assert steps == 12
    assert info["tta_h"] == pytest.approx(1.0)
    assert not info["success"]
    assert total == pytest.approx(0.0 - 1.0 / 0.5, abs=1e-9)  # H_ref = 0.5 h


def test_failed_episode_reports_the_budget_as_tta_also_when_the_round_limit_ends_it(tmp_path):
    path = write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5}, episode={"max_rounds": 3})
    env = gym.make("PowerTrip-v0", scenario=path)
    env.reset(seed=0)
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(np.ones(1, dtype=np.int8))
    assert truncated and not terminated
    assert info["elapsed_s"] == pytest.approx(3 * (600.0 + 2.0 * 0.002 + 2.0 * 0.08 + 3.0) + 0.08)
    assert info["tta_h"] == 1.0  # the time budget, not the 0.5 h that elapsed
    assert not info["success"]


def test_a_round_past_the_budget_is_cut_there_and_teaches_nothing(tmp_path):
    # rounds of 600 s (+ 0.08 s join once, comm and aggregation): five fit in the hour, the
    # sixth would end at about 3,620 s
    path = write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5})
    env = gym.make("PowerTrip-v0", scenario=path, jitter=False)
    env.reset(seed=0, options={"start_time": 0.0})
    for _ in range(5):
        _, _, terminated, truncated, info = env.step(np.ones(1, dtype=np.int8))
        assert not (terminated or truncated or info["cut"])
    before = info
    _, reward, terminated, truncated, info = env.step(np.ones(1, dtype=np.int8))
    assert info["cut"]
    assert truncated and not terminated
    assert info["elapsed_s"] == 3600.0  # never past the budget
    assert info["round_time_s"] == pytest.approx(3600.0 - before["elapsed_s"], rel=1e-12)
    assert info["accuracy"] == before["accuracy"]  # the cut round taught nothing
    assert reward == pytest.approx(-info["round_time_s"] / (0.5 * 3600.0), rel=1e-12)
    assert info["tta_h"] == 1.0
    assert not info["success"]


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-EMNIST-v0"])
def test_gain_rate_reward_is_normalised_accuracy_gain_per_round_time(env_id):
    env = gym.make(env_id, reward_mode="gain_rate")
    sc = env.unwrapped.scenario
    a0, target, h_ref_s = sc.workload.a0, sc.workload.a_target, sc.episode.h_ref_h * 3600.0
    env.reset(seed=11)
    env.action_space.seed(11)
    before = a0
    for _ in range(40):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        gain = min(info["accuracy"], target) - min(before, target)
        expected = gain / (target - a0) * h_ref_s / info["round_time_s"]
        assert reward == pytest.approx(expected, rel=1e-9, abs=1e-12)
        before = info["accuracy"]
        if terminated or truncated:
            break


def test_step_returns_python_scalars_for_sb3_and_numpy_info_values():
    env = gym.make("PowerTrip-v0")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(all_sites(env))
    assert type(reward) is float
    assert type(terminated) is bool
    assert type(truncated) is bool
    for key in ("round_time_s", "compute_s", "comm_s", "elapsed_s", "accuracy", "energy_kwh"):
        assert type(info[key]) is np.float64, key
    for key in ("n_selected", "invalid_selections", "straggler", "rounds"):
        assert type(info[key]) is np.int64, key
    for key in ("idle", "cut", "success"):  # 0-d: Gymnasium's vector envs stack them as bool
        assert type(info[key]) is np.ndarray and info[key].shape == (), key
        assert info[key].dtype == np.bool_, key


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        (FLAGSHIP, {}),
        (FLAGSHIP, {"obs_mode": "dict", "action_mode": "multidiscrete"}),
        (LORA, {"max_sites": 12}),
        ("PowerTrip-Random-v0", {}),  # a catalogue per episode, padded to 32 sites
    ],
)
def test_info_has_the_same_numeric_keys_at_reset_and_after_every_round(env_id, kwargs):
    """TorchRL's info reader builds its spec from the first info and turns each value into a
    tensor: reset and step must report the same keys, all numpy numbers (no str, no object)."""
    env = gym.make(env_id, **kwargs)
    width = env.action_space.shape[0]
    for seed in (0, 1):
        _, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        infos = [info]
        done = False
        while not done:
            *_, terminated, truncated, info = env.step(env.action_space.sample())
            infos.append(info)
            done = terminated or truncated
        for info in infos:
            assert set(info) == INFO_KEYS, set(info) ^ INFO_KEYS
            assert not numeric_info_problems(info), numeric_info_problems(info)
            for key in ("selected", "dropped", "powered_gpus", "available"):
                assert info[key].shape == (width,), key
        first = infos[0]
        assert {k: first[k].dtype for k in INFO_KEYS} == {k: infos[-1][k].dtype for k in INFO_KEYS}


def test_the_single_envs_info_is_the_batch_infos_first_row_keyed_in_info_keys_order():
    """The single env's info (``dynamics.first_info``, written out by hand for speed) reads the
    kernel's columns by the same names as the vector env's (``Interface.batch_info``)."""
    from powertrip_env.interface import INFO_KEYS as ORDER

    env = gym.make(FLAGSHIP)
    env.reset(seed=4)
    engine = env.unwrapped._engine
    for _ in range(3):
        result, _, report = engine.step(np.ones((1, engine.params.n_sites), bool), lend=False)
        engine.state = result.state
        single = engine.interface.episode_info(report)
        batch = engine.interface.batch_info(report)
        assert tuple(single) == ORDER
        for key in ORDER:
            np.testing.assert_array_equal(single[key], batch[key][0], err_msg=key)
            assert np.asarray(single[key]).dtype == batch[key].dtype, key
    assert single["rounds"] == 3 and single["elapsed_s"] > 0.0


def test_reset_info_reports_no_round_yet_and_episode_end_keys_are_neutral_until_the_end():
    env = gym.make(FLAGSHIP)
    _, info = env.reset(seed=3)
    n = env.unwrapped.params.n_sites
    for key in ("round_time_s", "compute_s", "comm_s", "elapsed_s", "round_energy_kwh",
                "energy_kwh", "n_selected", "invalid_selections", "rounds", "tta_h"):  # fmt: skip
        assert info[key] == 0, key
    assert not (info["idle"] or info["cut"] or info["success"])
    assert info["straggler"] == -1
    for key in ("selected", "dropped", "powered_gpus"):
        assert not info[key].any(), key
    assert info["accuracy"] == env.unwrapped.params.a0
    assert info["trace_time"] == env.unwrapped.params.trace_t0_s + info["start_time_s"]
    assert info["available"].tolist() == env.unwrapped.available().tolist()
    start = info["start_time_s"]
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(np.ones(n, dtype=np.int8))
        done = terminated or truncated
        # before the end tta_h is 0.0 (a real TTA is > 0) and success False
        assert (info["tta_h"] > 0) == done and info["success"] == terminated
        assert info["start_time_s"] == start
        assert info["available"].tolist() == env.unwrapped.available().tolist()
    budget_h = env.unwrapped.params.time_budget_s / 3600
    assert info["tta_h"] == (info["elapsed_s"] / 3600 if terminated else budget_h)


def test_time_limit_truncation_leaves_tta_h_neutral():
    """Only the episode's own end (target, budget, round limit) sets tta_h; a shorter
    ``max_episode_steps`` cuts the episode in TimeLimit, which the env does not see."""
    env = gym.make(FLAGSHIP, max_episode_steps=2)
    env.reset(seed=0)
    for _ in range(2):
        *_, terminated, truncated, info = env.step(all_sites(env))
    assert truncated and not terminated
    assert info["tta_h"] == 0.0 and not info["success"]


def test_info_reports_the_round(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path, jitter=False)
    env.reset(seed=0, options={"start_time": 0.0})
    _, _, _, _, info = env.step(np.array([1, 0, 1]))
    assert set(info) == INFO_KEYS
    assert info["selected"].tolist() == [True, False, True]
    assert info["dropped"].tolist() == [False, False, False]
    assert not info["cut"]
    assert info["powered_gpus"].tolist() == [10, 0, 6]
    assert info["available"].tolist() == [True, False, True]
    assert info["straggler"] == 0  # 600 s against c's 500 s
    assert env.unwrapped.site_names[info["straggler"]] == "a"  # its name
    # both join first: join_fixed_s = 0 plus the 8e8-bit model over 10 Gbps, 0.08 s
    assert info["compute_s"] == pytest.approx(0.08 + 600.0, rel=1e-12)
    assert info["round_time_s"] == pytest.approx(
        info["compute_s"] + info["comm_s"] + 3.0  # aggregation_s
    )
    assert info["elapsed_s"] == pytest.approx(info["round_time_s"])
    assert info["trace_time"] == pytest.approx(T0_UNIX + info["round_time_s"])


# --------------------------------------------------------------------------- actions


def test_selected_unavailable_site_is_dropped_and_counted(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([1, 1, 0]))
    assert info["invalid_selections"] == 1
    assert info["selected"].tolist() == [True, False, False]
    assert info["n_selected"] == 1
    assert not info["idle"]
    _, _, _, _, info = env.step(np.array([1, 0, 1]))
    assert info["invalid_selections"] == 0


def test_selecting_only_unavailable_sites_is_an_idle_round_with_invalid_count(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([0, 1, 0]))
    assert info["idle"]
    assert info["invalid_selections"] == 1
    assert info["elapsed_s"] == INTERVAL_S
    assert reward < 0


def test_empty_set_is_an_idle_round(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(3, dtype=np.int8))
    assert info["idle"]
    assert info["invalid_selections"] == 0
    assert info["elapsed_s"] == INTERVAL_S  # idle_s = 0 means one trace interval
    assert reward == pytest.approx(-INTERVAL_S / (0.5 * 3600.0))  # −T_r / H_ref
    first_idle_accuracy = info["accuracy"]
    _, _, _, _, worked = env.step(np.array([1, 0, 1]))
    _, reward, _, _, idle = env.step(np.zeros(3, dtype=np.int8))
    assert idle["idle"]
    assert idle["accuracy"] == worked["accuracy"]
    assert idle["elapsed_s"] == pytest.approx(worked["elapsed_s"] + INTERVAL_S)
    assert reward < 0
    assert first_idle_accuracy == 0.1  # still a0: nothing was learned


@pytest.mark.parametrize(("env_id", "scenario"), [(FLAGSHIP, "default"), (LORA, "lora")])
def test_idle_round_on_a_shipped_scenario_advances_one_interval(env_id, scenario):
    env = gym.make(env_id)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(env.unwrapped.params.n_sites, dtype=np.int8))
    h_ref_s = load_scenario(scenario).episode.h_ref_h * 3600.0
    assert info["idle"]
    assert info["elapsed_s"] == INTERVAL_S
    assert reward == pytest.approx(-INTERVAL_S / h_ref_s)


@pytest.mark.parametrize("action_mode", ["multibinary", "multidiscrete"])
@pytest.mark.parametrize(
    "bad",
    [
        np.ones(9, dtype=np.int8),
        np.ones((2, 8), dtype=np.int8),
        np.ones(7, dtype=np.int8),
        np.full(8, 2),
        np.full(8, -1),
        np.full(8, 0.5),
        "11111111",
        np.full(8, np.nan),
        None,
        np.array(1, dtype=np.int8),
        np.ones((1, 8), dtype=np.int8),
    ],
    ids=[
        "long",
        "2d",
        "short",
        "two",
        "minus-one",
        "half",
        "string",
        "nan",
        "none",
        "0-d",
        "batch-of-one",
    ],
)
def test_malformed_action_raises_value_error_naming_the_space(action_mode, bad):
    env = gym.make(LORA, action_mode=action_mode)  # 8 sites, as the bad actions assume
    env.reset(seed=0)
    env.step(all_sites(env))
    with pytest.raises(ValueError) as info:
        env.step(bad)
    assert str(env.action_space) in str(info.value)
    _, _, _, _, after = env.step(all_sites(env))
    assert after["rounds"] == 2  # the malformed action did not count as a round


@pytest.mark.parametrize("action_mode", ["multibinary", "multidiscrete"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8, np.bool_])
def test_zero_one_actions_of_any_numeric_dtype_are_accepted(action_mode, dtype):
    env = gym.make(LORA, action_mode=action_mode)  # 8 sites
    env.reset(seed=0)
    action = np.array([1, 0, 1, 1, 0, 0, 1, 0], dtype=dtype)
    _, _, _, _, info = env.step(action)
    expected = action.astype(bool) & (info["powered_gpus"] > 0)
    assert info["selected"].tolist() == expected.tolist()
    assert expected.any()


def test_action_masks_mark_unavailable_sites_choice_one_false(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path)
    env.reset(seed=0)
    masks = env.unwrapped.action_masks()
    assert masks.shape == (6,)
    assert masks.dtype == bool
    assert masks.tolist() == [True, True, True, False, True, True]


@pytest.mark.parametrize("env_id", [FLAGSHIP, LORA])
def test_action_masks_follow_availability_on_a_shipped_scenario(env_id):
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    masks = env.unwrapped.action_masks().reshape(env.unwrapped.params.n_sites, 2)
    assert masks[:, 0].all()
    assert masks[:, 1].tolist() == info["available"].tolist()


# --------------------------------------------------------------------------- observations


def test_observation_reports_each_sites_power_and_selection(toy_path):
    env = gym.make("PowerTrip-v0", scenario=toy_path, jitter=False)
    # 06:00 UTC: a quarter of the day, so the time-of-day features are sin = 1, cos = 0; at
    # longitude -90 it is local solar midnight (UTC − 6 h): sin = 0, cos = 1
    obs, _ = env.reset(seed=0, options={"start_time": 6 * 3600.0})
    sites, glob = obs[: 3 * F].reshape(3, F), obs[3 * F :]
    # a: u = 0.5 -> power 0.5 of its peak (no PV), 10 of 16 GPUs, 100 samples/s of the largest
    # full-power throughput (c: 16 G200s · 20 = 320/s), RTT 10 of 40 ms, steady power,
    # available, a join of 0.08 s (the model over 10 Gbps), the forecast (no forecast file: the
    # current power holds) 0.5 in each quarter hour
    time_scale = 20 * 60_000 / 320.0  # 20 × the fastest full-power compute time
    join = 0.08 / time_scale
    np.testing.assert_allclose(
        sites[0],
        [0.5, 10 / 16, 100 / 320, 600 / time_scale, 0.25, 0, 0, 1, join, *[0.5] * 4, 0, 1],
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_allclose(  # dark
        sites[1], [0, 0, 0, 1, 0.5, 0, 0, 0, join, 0, 0, 0, 0, 0, 1], rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        sites[2],
        [0.5, 6 / 16, 120 / 320, 500 / time_scale, 1.0, 0, 0, 1, join, *[0.5] * 4, 0, 1],
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_allclose(glob, [0, 0, 1, 0, 0, 1], atol=1e-6)

    obs, _, _, _, info = env.step(np.array([1, 0, 1]))
    sites, glob = obs[: 3 * F].reshape(3, F), obs[3 * F :]
    assert sites[:, 6].tolist() == [1, 0, 1]  # took part in the previous round
    assert glob[1] == pytest.approx(info["round_time_s"] / 3600.0, rel=1e-6)  # of the budget
    assert glob[4] == pytest.approx(info["round_time_s"] / time_scale, rel=1e-6)
    progress = (info["accuracy"] - 0.1) / (0.8 - 0.1)
    assert glob[0] == pytest.approx(progress, rel=1e-6)


def test_one_site_that_is_its_own_hub_at_zero_base_latency_observes_finite_values(tmp_path):
    # RTT = base_ms + distance term = 0: the RTT feature is 0, not 0 / 0 = NaN
    path = write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5}, network={"base_ms": 0.0})
    env = gym.make("PowerTrip-v0", scenario=path)
    assert env.unwrapped.params.rtt_s.tolist() == [0.0]
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        assert np.isfinite(obs).all()
        assert env.observation_space.contains(obs)
        assert obs[dynamics.SITE_FEATURES.index("rtt_to_hub")] == 0.0
        obs, *_ = env.step(np.ones(1, dtype=np.int8))


def test_dict_observation_holds_the_same_numbers_as_the_flat_one():
    flat = gym.make("PowerTrip-v0")
    nested = gym.make("PowerTrip-v0", obs_mode="dict")
    f_obs, _ = flat.reset(seed=5)
    d_obs, _ = nested.reset(seed=5)
    assert d_obs["sites"].shape == (10, F)
    for _ in range(3):
        np.testing.assert_array_equal(d_obs["sites"].ravel(), f_obs[: 10 * F])
        np.testing.assert_array_equal(d_obs["global"], f_obs[10 * F :])
        f_obs = flat.step(all_sites(flat))[0]
        d_obs = nested.step(all_sites(nested))[0]


# --------------------------------------------------------------------------- rendering


def test_ansi_render_lists_every_site():
    env = gym.make("PowerTrip-v0", render_mode="ansi")
    env.reset(seed=0)
    names = [s.name for s in env.unwrapped.scenario.sites]
    for _ in range(3):
        text = env.render()
        assert isinstance(text, str)
        for name in names:
            assert name in text
        env.step(all_sites(env))


def test_rgb_array_render_is_an_image():
    env = gym.make("PowerTrip-v0", render_mode="rgb_array")
    env.reset(seed=0)
    first = env.render()
    for _ in range(2):
        env.step(all_sites(env))
    later = env.render()
    for image in (first, later):
        assert isinstance(image, np.ndarray)
        assert image.ndim == 3
        assert image.shape[2] == 3
        assert image.dtype == np.uint8
        assert image.std() > 0  # something is drawn


@pytest.mark.parametrize(
    ("table", "field", "value"),
    [
        ("network", "join_fixed_s", 1e9),
        ("network", "join_fixed_s", 1e15),
        ("workload", "flops_per_sample", 1e22),
        ("workload", "flops_per_sample", 1e30),
        ("workload", "site_batch", 10**19),
    ],
)
def test_absurdly_slow_rounds_are_cut_at_the_budget_and_fail_honestly(
    tmp_path, table, field, value
):
    # Huge inputs are accepted and modelled: a round that cannot finish inside the budget is cut
    # at it, teaches nothing, and the episode fails with tta_h equal to the budget (not a time
    # clamped somewhere past it, and the same whatever the size of the input).
    overrides = {table: {field: value}}
    path = write_scenario(
        tmp_path, [site("a", "ca"), site("b", "cb")], {"ca": 0.5, "cb": 0.5}, **overrides
    )
    env = gym.make("PowerTrip-v0", scenario=str(path))
    budget_s = env.unwrapped.params.time_budget_s
    obs, _ = env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obs, reward, terminated, truncated, info = env.step(np.ones(2, dtype=np.int8))
    assert truncated and not terminated
    assert info["cut"] and info["round_time_s"] == pytest.approx(budget_s)
    assert info["tta_h"] == budget_s / 3600.0 and not info["success"]
    assert info["accuracy"] == env.unwrapped.params.a0
    assert np.isfinite(obs).all() and np.isfinite(reward)


def test_a_fractional_start_still_truncates_exactly_at_the_budget() -> None:
    """start + (deadline − t) can round below the deadline; the clock must stop on it anyway."""
    env = gym.make("PowerTrip-KWS-v0")
    sim = env.unwrapped.sim
    env.reset(seed=0, options={"start_time": 0.022 * sim.power.rows * sim.params.interval_s})
    budget_s = sim.params.time_budget_s
    limit = int(budget_s // sim.params.idle_s) + 1
    for _ in range(limit):
        *_, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.int8))
        if truncated:
            break
    assert truncated and not terminated
    assert info["tta_h"] == budget_s / 3600
    assert env.unwrapped.state.time_s[0] == env.unwrapped.state.start_s[0] + budget_s


def test_a_reward_of_ones_own_is_a_reward_fn_and_the_vector_env_takes_it_too() -> None:
    from powertrip_env.rewards import RewardFn

    class EnergyPenalty(RewardFn):
        """The default reward minus a price per kWh, as a user might write it."""

        name = "energy_penalty"

        def __call__(self, params, result):
            base = powertrip_env.rewards.ExcessGain()(params, result)
            return base - 1e-4 * result.energy_j / 3.6e6

    plain = gym.make("PowerTrip-v0")
    mine = gym.make("PowerTrip-v0", reward_mode=EnergyPenalty())
    vec = gym.make_vec("PowerTrip-v0", num_envs=1, reward_mode=EnergyPenalty())
    assert mine.unwrapped.reward_mode == "energy_penalty"
    plain.reset(seed=2)
    mine.reset(seed=2)
    vec.reset(seed=2)
    action = np.ones(10, dtype=np.int8)
    _, r_plain, *_, info = plain.step(action)
    _, r_mine, *_ = mine.step(action)
    _, r_vec, *_ = vec.step(action[None])
    assert r_mine == r_plain - 1e-4 * info["round_energy_kwh"] == r_vec[0]
    with pytest.raises(ValueError, match=r"reward_mode=7 .*excess_gain, gain_rate, carbon or a"):
        gym.make("PowerTrip-v0", reward_mode=7)


def test_the_clock_never_reads_past_the_time_budget() -> None:
    """A round that reaches the budget stops at start + budget; the reported elapsed time is
    the budget itself, not one rounding step above it (seen on KWS: 7200.000000000001 s)."""
    env = gym.make("PowerTrip-KWS-v0")
    budget_s = env.unwrapped.scenario.episode.time_budget_h * 3600.0
    cut = 0
    for seed in range(12):
        # fractional starts: start + budget − start is then rarely the budget exactly
        env.reset(seed=seed, options={"start_time": (seed + 0.123456789) * 28_800.0})
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            action = (rng.random(env.action_space.shape) < 0.15).astype(np.int8)
            _, _, terminated, truncated, info = env.step(action)
            assert info["elapsed_s"] <= budget_s, info["elapsed_s"]
            done = terminated or truncated
        if not info["success"]:
            cut += 1
            # the deadline is start + budget, rounded: elapsed may fall a rounding step short
            assert info["elapsed_s"] == pytest.approx(budget_s, rel=0, abs=1e-6)
            assert info["tta_h"] == budget_s / 3600.0
    assert cut > 0, "no episode ran into the budget"
