"""The native vector environment (powertrip_env/vector_env.py) against docs/model.md.

Its contract is simple to state: sub-environment i of ``gym.make_vec(ID, num_envs=B)`` reset
with seed s *is* ``gym.make(ID)`` reset with seed s + i, autoreset by Gymnasium's NEXT_STEP
rules. The tests step both with the same actions and compare every output bit for bit, across
many episode ends, idle rounds and selections of unavailable sites.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from scenario_files import site, write_scenario

import powertrip_env
from powertrip_env import dynamics
from powertrip_env.vector_env import PowerTripVectorEnv

ENV_IDS = list(powertrip_env.ENV_IDS)
# The single env's info keys, at reset and after every round alike.
INFO_KEYS = {
    "round_time_s", "compute_s", "comm_s", "elapsed_s", "start_time_s", "trace_time", "accuracy",
    "selected", "n_selected", "dropped", "invalid_selections", "idle", "cut", "powered_gpus",
    "available", "straggler", "round_energy_kwh", "energy_kwh", "rounds", "tta_h", "success",
    "delta_progress", "measured_compute_s", "measured_transfer_s", "measured_join_s",
    "round_carbon_kg", "carbon_kg",
}  # fmt: skip
F = len(dynamics.SITE_FEATURES)


# --------------------------------------------------------------------------- helpers


def same(a: Any, b: Any) -> bool:
    """Bit-for-bit equality of observations, infos and scalars (nested dicts, tuples, arrays)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return a.tolist() == b.tolist() if a.dtype == object else a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


def numeric_info_problems(info: dict[str, Any], b: int) -> list[str]:
    """What in a vector env's ``info`` is not a (B, ...) numpy array of a bool, integer or
    float dtype, or whose ``_key`` mask is not all True (every sub-env reports every key)."""
    bad = []
    for key, value in info.items():
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            bad.append(f"{key}: {type(value).__name__} {getattr(value, 'dtype', '')}")
        elif value.shape[:1] != (b,):
            bad.append(f"{key}: shape {value.shape}")
        elif key.startswith("_") and not value.all():
            bad.append(f"{key}: {value.tolist()}")
    return bad


def row(obs: Any, i: int) -> Any:
    return {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]


def actions_for(rng: np.random.Generator, b: int, n: int) -> np.ndarray:
    """Per-row densities from none (an idle round) to all sites (some may be unavailable)."""
    density = rng.choice([0.0, 0.25, 0.6, 1.0], size=(b, 1))
    return (rng.random((b, n)) < density).astype(np.int8)


def short_scenario(tmp_path) -> str:
    """The LoRA scenario with a 2 h budget and at most 6 rounds: episodes end all the time."""
    path = tmp_path / "short.toml"
    path.write_text(
        'extends = "lora"\nname = "short"\ndescription = "short episodes"\n'
        "[episode]\ntime_budget_h = 2.0\nmax_rounds = 6\nh_ref_h = 1.5\n"
        "jitter_sigma = 0.05\nserver_overhead = 1.8\nidle_fraction = 0.3\n",
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture
def dark_site_path(tmp_path):
    """Three toy sites, one of which ("dark") never has headroom: selecting it is invalid."""
    return write_scenario(
        tmp_path,
        [site("a", "ca"), site("dark", "cb"), site("c", "cc", gpu="G200", capacity_kw=6.25)],
        {"ca": 0.5, "cb": 1.0, "cc": 0.5},
        network={"rtt_to_hub_ms": [10.0, 20.0, 40.0]},
        episode={"max_rounds": 9, "jitter_sigma": 0.1},
    )


def compare_with_single_envs(
    env_id: str, kwargs: dict[str, Any], b: int, steps: int, seed: int
) -> dict[str, int]:
    """Step the vector env and B single envs side by side; assert every output is identical.

    The single envs are autoreset by hand as NEXT_STEP prescribes: after an end, the next step
    calls ``reset()`` (no seed: the env's generator carries on) and ignores the action.
    """
    venv = gym.make_vec(env_id, num_envs=b, **kwargs)
    singles = [gym.make(env_id, **kwargs) for _ in range(b)]
    obs, info = venv.reset(seed=seed)
    for i, env in enumerate(singles):
        one_obs, one_info = env.reset(seed=seed + i)
        assert same(row(obs, i), one_obs)
        for key, value in one_info.items():
            assert info[f"_{key}"][i] and same(info[key][i], np.asarray(value)), key
    n = venv.single_action_space.shape[0]
    rng = np.random.default_rng(seed)
    pending = np.zeros(b, dtype=bool)
    seen = {"ends": 0, "idle": 0, "invalid": 0, "autoresets": 0, "dropped": 0, "cut": 0}
    for _ in range(steps):
        actions = actions_for(rng, b, n)
        obs, rewards, terminated, truncated, info = venv.step(actions)
        assert rewards.dtype == np.float64 and rewards.shape == (b,)
        assert terminated.dtype == truncated.dtype == np.bool_
        for i, env in enumerate(singles):
            if pending[i]:
                one_obs, one_info = env.reset()
                one = (one_obs, 0.0, False, False, one_info)
                seen["autoresets"] += 1
            else:
                one = env.step(actions[i])
                seen["idle"] += one[4]["idle"]
                seen["invalid"] += one[4]["invalid_selections"] > 0
                seen["dropped"] += bool(one[4]["dropped"].any())
                seen["cut"] += one[4]["cut"]
            one_obs, one_reward, one_term, one_trunc, one_info = one
            assert same(row(obs, i), one_obs)
            assert rewards[i] == one_reward and terminated[i] == one_term
            assert truncated[i] == one_trunc
            reported = {k for k in info if not k.startswith("_") and info[f"_{k}"][i]}
            assert reported == set(one_info), reported ^ set(one_info)
            for key, value in one_info.items():
                assert same(info[key][i], np.asarray(value, dtype=info[key].dtype)), key
        pending = terminated | truncated
        seen["ends"] += int(pending.sum())
    return seen


# --------------------------------------------------------------------------- registration


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_vec_builds_the_native_vector_env(env_id):
    venv = gym.make_vec(env_id, num_envs=3)
    env = gym.make(env_id)
    assert isinstance(venv, PowerTripVectorEnv)
    assert venv.num_envs == 3
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert venv.autoreset_mode is AutoresetMode.NEXT_STEP  # the attribute TorchRL reads
    assert venv.spec.id == env_id
    assert venv.single_observation_space == env.observation_space
    assert venv.single_action_space == env.action_space
    assert venv.observation_space == gym.vector.utils.batch_space(env.observation_space, 3)
    assert venv.action_space == gym.vector.utils.batch_space(env.action_space, 3)


def test_make_vec_passes_keyword_arguments_through(dark_site_path):
    venv = gym.make_vec(
        "PowerTrip-v0",
        num_envs=2,
        scenario=dark_site_path,
        reward_mode="gain_rate",
        obs_mode="dict",
        action_mode="multidiscrete",
        split="all",
        jitter=False,
        max_episode_steps=5,
    )
    unwrapped = venv.unwrapped
    assert [s.name for s in unwrapped.scenario.sites] == ["a", "dark", "c"]
    assert unwrapped.reward_mode == "gain_rate" and unwrapped.split == "all"
    assert unwrapped.params.jitter_sigma == 0.0
    assert unwrapped.max_episode_steps == 5
    assert isinstance(venv.single_observation_space, gym.spaces.Dict)
    assert venv.single_action_space == gym.spaces.MultiDiscrete([2, 2, 2])
    assert venv.observation_space["sites"].shape == (2, 3, F)


def test_bad_keyword_arguments_are_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match=r"obs_mode='pixels'.*flat, dict"):
        gym.make_vec("PowerTrip-v0", num_envs=2, obs_mode="pixels")
    with pytest.raises(ValueError, match="num_envs=0"):
        PowerTripVectorEnv(num_envs=0)
    with pytest.raises(ValueError, match=r"render_mode='rgb_array'.*ansi"):
        gym.make_vec("PowerTrip-v0", num_envs=2, render_mode="rgb_array")


# --------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize(
    ("obs_mode", "action_mode"),
    [("flat", "multibinary"), ("dict", "multidiscrete"), ("dict", "multibinary")],
)
def test_each_sub_env_is_the_single_env_seeded_s_plus_i_across_many_autoresets(
    tmp_path, obs_mode, action_mode
):
    kwargs = {"scenario": short_scenario(tmp_path), "obs_mode": obs_mode}
    kwargs["action_mode"] = action_mode
    seen = compare_with_single_envs("PowerTrip-v0", kwargs, b=4, steps=90, seed=11)
    assert seen["autoresets"] >= 4 * 8  # many episode boundaries
    assert seen["idle"] > 0


def test_sub_envs_match_the_single_env_through_jitter_block_refills():
    """Flagship episodes run for many rounds of counter-based jitter; sites lose their power at
    dusk and drop out of rounds."""
    kwargs = {"reward_mode": "gain_rate"}
    seen = compare_with_single_envs("PowerTrip-v0", kwargs, b=3, steps=160, seed=5)
    assert seen["idle"] > 0 and seen["dropped"] > 0


def test_unavailable_selections_and_idle_rounds_match(dark_site_path):
    seen = compare_with_single_envs(
        "PowerTrip-v0", {"scenario": dark_site_path}, b=3, steps=60, seed=2
    )
    assert seen["invalid"] > 0 and seen["idle"] > 0 and seen["autoresets"] > 0


@pytest.mark.parametrize(
    "env_id", ["PowerTrip-LoRA-v0", "PowerTrip-EMNIST-v0", "PowerTrip-Large-v0"]
)
def test_other_scenarios_match_the_single_env(env_id):
    """The synthetic trace (LoRA), non-IID coverage (EMNIST) and 32 sites (Large) go through
    the same batched round."""
    compare_with_single_envs(env_id, {"split": "test"}, b=2, steps=40, seed=3)


def test_fixed_time_rounds_match_the_single_env(tmp_path):
    path = tmp_path / "fixed.toml"
    path.write_text(
        'extends = "lora"\nname = "fixed"\ndescription = "fixed-time rounds"\n'
        '[workload]\nround_mode = "fixed_time"\nround_s = 240.0\n',
        encoding="utf-8",
    )
    compare_with_single_envs("PowerTrip-v0", {"scenario": str(path)}, b=2, steps=40, seed=4)


def test_gain_rate_rewards_warn_of_nothing_when_episodes_end_at_the_budget(tmp_path):
    """An episode cut at its budget ends with no time left; the row that restarts next step
    still runs through the batched round (then is replaced), and must not divide by zero."""
    path = write_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5})  # 600 s rounds, 1 h budget
    venv = gym.make_vec("PowerTrip-v0", num_envs=2, scenario=path, reward_mode="gain_rate")
    venv.reset(seed=0)
    ends = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(9):
            _, rewards, *_, info = venv.step(np.ones((2, 1), dtype=np.int8))
            assert np.isfinite(rewards).all()
            ends += int(info.get("cut", np.zeros(2, dtype=bool)).sum())
    assert ends == 2  # both episodes were cut at the budget and restarted


def test_infos_equal_gymnasiums_sync_vector_env_of_single_envs(tmp_path):
    """Whole info dicts, masks and unreported entries included, as SyncVectorEnv builds them."""
    kwargs = {"scenario": short_scenario(tmp_path)}
    native = gym.make_vec("PowerTrip-v0", num_envs=3, **kwargs)
    sync = gym.make_vec("PowerTrip-v0", num_envs=3, vectorization_mode="sync", **kwargs)
    assert same(native.reset(seed=7), sync.reset(seed=7))
    rng = np.random.default_rng(7)
    for _ in range(40):
        actions = actions_for(rng, 3, native.single_action_space.shape[0])
        assert all(
            same(a, b) for a, b in zip(native.step(actions), sync.step(actions), strict=True)
        )


@pytest.mark.parametrize(
    ("vectorization_mode", "kwargs"),
    [
        ("vector_entry_point", {}),
        ("vector_entry_point", {"obs_mode": "dict", "max_sites": 12}),
        ("sync", {}),
        ("sync", {"action_mode": "multidiscrete"}),
    ],
)
def test_vector_infos_have_the_same_numeric_keys_at_reset_and_every_step(
    tmp_path, vectorization_mode, kwargs
):
    """TorchRL, Tianshou and skrl read vector infos as arrays: the native vector env and
    Gymnasium's SyncVectorEnv give every key for every sub-env at every step, all numbers."""
    venv = gym.make_vec(
        "PowerTrip-v0",
        num_envs=3,
        vectorization_mode=vectorization_mode,
        scenario=short_scenario(tmp_path),
        **kwargs,
    )
    _, info = venv.reset(seed=1)
    keys = INFO_KEYS | {f"_{key}" for key in INFO_KEYS}
    assert set(info) == keys, set(info) ^ keys
    assert not numeric_info_problems(info, 3), numeric_info_problems(info, 3)
    dtypes = {key: value.dtype for key, value in info.items()}
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(30):
        *_, terminated, truncated, info = venv.step(
            actions_for(rng, 3, venv.single_action_space.shape[0])
        )
        ends += int((terminated | truncated).sum())
        assert set(info) == keys, set(info) ^ keys
        assert not numeric_info_problems(info, 3), numeric_info_problems(info, 3)
        assert {key: value.dtype for key, value in info.items()} == dtypes
        ended = terminated | truncated
        assert np.array_equal(info["tta_h"] > 0, ended) and not info["success"][~ended].any()
    assert ends >= 6


def test_async_vector_env_infos_are_numeric_too(tmp_path):
    """The vector env TorchRL's ``GymEnv(ID, num_envs=N)`` builds: sub-envs in processes."""
    venv = gym.vector.AsyncVectorEnv(
        [lambda: gym.make("powertrip_env:PowerTrip-LoRA-v0") for _ in range(2)], context="spawn"
    )
    try:
        _, info = venv.reset(seed=0)
        assert set(info) == INFO_KEYS | {f"_{key}" for key in INFO_KEYS}
        assert not numeric_info_problems(info, 2)
        for _ in range(3):
            *_, info = venv.step(venv.action_space.sample())
            assert set(info) == INFO_KEYS | {f"_{key}" for key in INFO_KEYS}
            assert not numeric_info_problems(info, 2)
    finally:
        venv.close()


# --------------------------------------------------------------------------- autoreset


def run_until_an_end(venv: gym.vector.VectorEnv, rng: np.random.Generator) -> tuple:
    n = venv.single_action_space.shape[0]
    for _ in range(100):
        out = venv.step(actions_for(rng, venv.num_envs, n))
        if (out[2] | out[3]).any():
            return out
    pytest.fail("no episode ended")


def test_the_step_after_an_end_returns_the_reset_and_ignores_the_action(tmp_path):
    kwargs = {"scenario": short_scenario(tmp_path)}
    one, two = (gym.make_vec("PowerTrip-v0", num_envs=3, **kwargs) for _ in range(2))
    one.reset(seed=3)
    two.reset(seed=3)
    rng = np.random.default_rng(0)
    _, _, terminated, truncated, _ = run_until_an_end(one, np.random.default_rng(0))
    run_until_an_end(two, rng)
    ended = terminated | truncated
    n = one.single_action_space.shape[0]
    all_sites = np.ones((3, n), dtype=np.int8)
    other = all_sites.copy()
    other[ended] = 0  # a different action for the restarting sub-envs
    obs, rewards, terminated, truncated, info = one.step(all_sites)
    assert same((obs, rewards, terminated, truncated, info), two.step(other)[:5])
    assert np.all(rewards[ended] == 0.0)
    assert not terminated[ended].any() and not truncated[ended].any()
    assert set(info) == INFO_KEYS | {f"_{key}" for key in INFO_KEYS}
    assert all(info[f"_{key}"].all() for key in INFO_KEYS)  # every row reports every key
    # the restarting rows report their reset: no round yet, the new episode's start
    assert np.all(info["rounds"][ended] == 0) and np.all(info["straggler"][ended] == -1)
    assert np.all(info["elapsed_s"][ended] == 0.0) and np.all(info["tta_h"][ended] == 0.0)
    assert not info["selected"][ended].any() and not info["success"][ended].any()
    state = one.unwrapped.state
    np.testing.assert_array_equal(info["start_time_s"][ended], state.start_s[ended])
    assert np.all(state.rounds[ended] == 0) and np.all(state.progress[ended] == 0.0)


def test_registered_max_episode_steps_truncates_like_time_limit():
    venv = gym.make_vec("PowerTrip-v0", num_envs=2, max_episode_steps=3)
    env = gym.make("PowerTrip-v0", max_episode_steps=3)
    venv.reset(seed=1)
    env.reset(seed=1)
    idle = np.zeros((2, env.action_space.n), dtype=np.int8)
    for step in range(1, 4):
        _, _, _, truncated, info = venv.step(idle)
        one = env.step(idle[0])
        assert truncated[0] == one[3] == (step == 3)
        # the episode itself did not end (TimeLimit cut it): tta_h keeps its neutral 0.0
        assert info["tta_h"][0] == one[4]["tta_h"] == 0.0
        assert not info["success"][0] and not one[4]["success"]
    assert gym.make_vec("PowerTrip-v0", num_envs=2).unwrapped._step_limit() == (
        powertrip_env.MAX_EPISODE_STEPS
    )


# --------------------------------------------------------------------------- spaces, seeding


def test_outputs_lie_in_the_batched_spaces():
    venv = gym.make_vec("PowerTrip-v0", num_envs=4)
    obs, _ = venv.reset(seed=0)
    venv.action_space.seed(0)
    assert venv.observation_space.contains(obs)
    for _ in range(30):
        obs, rewards, terminated, truncated, _ = venv.step(venv.action_space.sample())
        assert venv.observation_space.contains(obs)
        assert all(venv.single_observation_space.contains(o) for o in obs)
        assert np.isfinite(rewards).all()
        assert rewards.shape == terminated.shape == truncated.shape == (4,)


def test_dict_observations_lie_in_the_batched_dict_space():
    venv = gym.make_vec("PowerTrip-v0", num_envs=3, obs_mode="dict")
    obs, _ = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    n = venv.single_action_space.shape[0]
    obs, *_ = venv.step(np.ones((3, n), dtype=np.float32))  # SB3-style float actions
    assert venv.observation_space.contains(obs)
    assert obs["sites"].dtype == obs["global"].dtype == np.float32


def test_same_seed_same_rollout_and_seed_lists_seed_each_sub_env():
    def rollout(seed: Any) -> list:
        venv = gym.make_vec("PowerTrip-v0", num_envs=3)
        record = [venv.reset(seed=seed)]
        rng = np.random.default_rng(0)
        n = venv.single_action_space.shape[0]
        record += [venv.step(actions_for(rng, 3, n)) for _ in range(20)]
        return record

    first = rollout(5)
    assert all(same(a, b) for a, b in zip(first, rollout(5), strict=True))
    assert all(same(a, b) for a, b in zip(first, rollout([5, 6, 7]), strict=True))
    assert not same(first[0][0], rollout(6)[0][0])


def test_reset_without_a_seed_continues_each_sub_envs_generator():
    venv = gym.make_vec("PowerTrip-v0", num_envs=2)
    singles = [gym.make("PowerTrip-v0") for _ in range(2)]
    venv.reset(seed=9)
    for i, env in enumerate(singles):
        env.reset(seed=9 + i)
    obs, _ = venv.reset()
    for i, env in enumerate(singles):
        assert same(obs[i], env.reset()[0])


def test_reset_mask_resets_only_the_masked_sub_envs():
    venv = gym.make_vec("PowerTrip-v0", num_envs=3)
    venv.reset(seed=1)
    for _ in range(3):
        venv.step(np.ones((3, venv.single_action_space.shape[0]), dtype=np.int8))
    before = venv.unwrapped.state
    _, info = venv.reset(options={"reset_mask": np.array([False, True, False])})
    after = venv.unwrapped.state
    assert after.rounds.tolist() == [3, 0, 3]
    assert after.time_s[0] == before.time_s[0] and after.time_s[2] == before.time_s[2]
    assert info["_start_time_s"].tolist() == [False, True, False]
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.array([1, 0, 0])})


# --------------------------------------------------------------------------- the rest of the API


def test_action_masks_allow_zero_everywhere_and_one_where_available():
    venv = gym.make_vec("PowerTrip-v0", num_envs=4)
    venv.reset(seed=0)
    masks = venv.unwrapped.action_masks().reshape(4, 10, 2)
    assert masks[..., 0].all()
    assert np.array_equal(masks[..., 1], venv.unwrapped.available())


def test_malformed_actions_are_refused_naming_the_space():
    venv = gym.make_vec("PowerTrip-v0", num_envs=2)  # 10 sites
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros((2, 10), dtype=np.int8))
    venv.reset(seed=0)
    for bad in (np.zeros((2, 9)), np.full((2, 10), 2), np.full((2, 10), np.nan), np.zeros(10)):
        with pytest.raises(ValueError, match=r"action space .*\(2, 10\).*0 or 1"):
            venv.step(bad)


def test_a_step_is_one_core_round_for_the_whole_batch(monkeypatch):
    venv = gym.make_vec("PowerTrip-v0", num_envs=16)
    venv.reset(seed=0)
    calls = []
    original = dynamics.step_observe

    def counting(params, state, *args, **kwargs):
        calls.append(state.batch)
        return original(params, state, *args, **kwargs)

    monkeypatch.setattr(dynamics, "step_observe", counting)
    for _ in range(5):
        venv.step(np.ones((16, 10), dtype=np.int8))
    assert calls == [16] * 5


def test_ansi_render_shows_the_first_sub_env():
    venv = gym.make_vec("PowerTrip-v0", num_envs=3, render_mode="ansi")
    env = gym.make("PowerTrip-v0", render_mode="ansi")
    venv.reset(seed=4)
    env.reset(seed=4)
    action = np.ones((3, 10), dtype=np.int8)
    venv.step(action)
    env.step(action[0])
    assert venv.render() == env.render()


# --------------------------------------------------------------------------- batched fast paths


def test_state_take_picks_episodes_by_index_repeats_allowed():
    """``SimState.take`` is how planners fan one episode out into a batch of candidates."""
    venv = gym.make_vec("PowerTrip-v0", num_envs=3)
    venv.reset(seed=2)
    venv.step(np.ones((3, 10), dtype=np.int8))
    state = venv.unwrapped.state
    index = np.array([2, 0, 2, 2])
    taken = state.take(index)
    assert taken.batch == 4
    for name in dynamics.SimState.FIELDS:
        value = getattr(state, name)
        np.testing.assert_array_equal(getattr(taken, name), value[index], err_msg=name)
        assert not np.shares_memory(getattr(taken, name), value), name


def test_a_batch_predicts_each_candidate_as_it_would_alone_under_non_iid_data():
    """Coverage sums one dot product per row, so a (B, N) batch cannot reorder the sum."""
    env = gym.make("PowerTrip-EMNIST-v0")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n = env.unwrapped.params.n_sites
    subsets = ((np.arange(1, 2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    for _ in range(30):
        env.step((rng.random(n) < 0.4).astype(np.int8))
        many = env.unwrapped.predict_round(subsets)
        for i in range(0, len(subsets), 7):
            alone = env.unwrapped.predict_round(subsets[i])
            assert all(float(a[i]) == b for a, b in zip(many, alone, strict=True))


def test_autoresets_draw_every_new_episode_in_one_call_without_generators(monkeypatch):
    """Counter-based episodes: an autoreset neither seeds nor draws from a generator per
    sub-environment; the restarting rows' start times and keys come from one kernel call."""
    from powertrip_env import engine

    venv = gym.make_vec("PowerTrip-LoRA-v0", num_envs=8)
    venv.reset(seed=0)
    calls, seedings = [], []
    original = dynamics.episode_draws
    monkeypatch.setattr(
        dynamics,
        "episode_draws",
        lambda b, e, lo, hi: calls.append(len(b)) or original(b, e, lo, hi),
    )
    monkeypatch.setattr(engine, "base_from", lambda rng: seedings.append(1))
    n = venv.unwrapped.params.n_sites
    restarted = 0
    for _ in range(300):
        _, _, terminated, truncated, _ = venv.step(np.ones((8, n), dtype=np.int8))
        restarted += int(np.sum(terminated | truncated))
    assert restarted >= 8 and sum(calls) == restarted - int(venv.unwrapped._autoreset.sum())
    assert not seedings


def test_vector_envs_stepped_from_two_threads_at_once_stay_exact():
    """Batches from PARALLEL_MIN_BATCH up run on numba's thread pool, which takes one caller
    at a time: two Python threads stepping their own vector envs must neither crash nor mix
    their episodes."""
    import threading

    b = dynamics.PARALLEL_MIN_BATCH
    actions = np.random.default_rng(0).integers(0, 2, (30, b, 10)).astype(np.int8)

    def run(out: list) -> None:
        venv = gym.make_vec("PowerTrip-v0", num_envs=b)
        obs, _ = venv.reset(seed=4)
        for a in actions:
            obs, *_ = venv.step(a)
        out.append(obs)

    alone: list = []
    run(alone)
    together: list = [[], []]
    threads = [threading.Thread(target=run, args=(out,)) for out in together]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in together:
        np.testing.assert_array_equal(out[0], alone[0])


def test_the_vector_env_takes_the_single_envs_options_with_the_same_defaults():
    """The vector env passes its options through to ``options.configure`` with the defaults
    ``PowerTripEnv`` documents in its signature; unknown names are refused."""
    import inspect

    from powertrip_env.env import PowerTripEnv
    from powertrip_env.options import ENV_OPTIONS

    single = inspect.signature(PowerTripEnv.__init__).parameters
    assert set(ENV_OPTIONS) | {"self", "scenario", "learner", "sites"} == set(single)
    plain = gym.make_vec("PowerTrip-v0", num_envs=2).unwrapped
    for name in ("obs_mode", "split", "render_mode", "max_sites"):
        assert getattr(plain, name) == single[name].default, name
    assert plain.reward_mode == single["reward_mode"].default
    assert plain.single_action_space == gym.make("PowerTrip-v0").action_space
    venv = gym.make_vec("PowerTrip-v0", num_envs=2, obs_mode="dict", max_sites=12)
    assert venv.unwrapped.obs_mode == "dict" and venv.unwrapped.max_sites == 12
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['obs_mod'\]"):
        gym.make_vec("PowerTrip-v0", num_envs=2, obs_mod="dict")


def test_the_thread_choice_keeps_the_faster_way_and_follows_a_change():
    """``ThreadChoice``: on a busy machine (threads 3x slower than one) a step runs on the
    threads only for the first timings and the probes; one preempted serial call does not flip
    it; when the cores free up (threads twice as fast) it moves to them within a few probes."""
    from powertrip_env.dynamics.observation import ThreadChoice

    choice, b = ThreadChoice(probe_every=8), 1024
    cost = {False: 1.0, True: 3.0}

    def run(calls: int, spike_at: int = -1) -> int:
        threaded = 0
        for k in range(calls):
            way = choice.parallel(b)
            threaded += way
            choice.record(b, way, 4.0 if k == spike_at and not way else cost[way])
        return threaded

    assert run(64, spike_at=20) <= 2 + 64 // 8  # the two first timings and the probes
    cost[True] = 0.5
    run(24)  # three probes
    assert run(64) >= 64 - 64 // 8


@pytest.mark.parametrize("threaded", [False, True])
def test_a_step_is_the_same_on_the_threads_and_off_them(threaded, monkeypatch):
    """Whichever way ``ThreadChoice`` picks, every episode's step is the same serial code: the
    observations, rewards and infos are bit-identical to the single envs'."""
    from powertrip_env.dynamics import observation

    monkeypatch.setattr(observation.THREADS, "parallel", lambda batch: threaded)
    b = dynamics.PARALLEL_MIN_BATCH
    actions = np.random.default_rng(1).integers(0, 2, (12, b, 10)).astype(np.int8)
    venv = gym.make_vec("PowerTrip-v0", num_envs=b)
    obs, _ = venv.reset(seed=9)
    for a in actions:
        obs, reward, *_ = venv.step(a)
    monkeypatch.setattr(observation.THREADS, "parallel", lambda batch: not threaded)
    other = gym.make_vec("PowerTrip-v0", num_envs=b)
    obs2, _ = other.reset(seed=9)
    for a in actions:
        obs2, reward2, *_ = other.step(a)
    np.testing.assert_array_equal(obs, obs2)
    np.testing.assert_array_equal(reward, reward2)
