"""The candidate-set action space (agents/candidates.py): what each slot holds, and that it
reads only what is known now."""

from __future__ import annotations

import candidates_reference as reference
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import powertrip_env
from powertrip_env.agents.candidates import (
    GLOBAL_FEATURES,
    HORIZONS,
    N_FEATURES,
    N_SLOTS,
    SLOT_FEATURES,
    STICKY_HORIZONS,
    CandidatePolicy,
    CandidateSets,
    build,
)
from powertrip_env.baselines.base import subset_matrix
from powertrip_env.baselines.candidates import pool_of


def _episode(env: gym.Env, choose, seed: int = 0, rounds: int = 40) -> list:
    obs, _ = env.reset(seed=seed)
    seen = []
    for _ in range(rounds):
        action = choose(env)
        seen.append((obs.copy(), action))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return seen


def test_passes_gymnasium_check_env() -> None:
    check_env(CandidateSets(gym.make("PowerTrip-v0")), skip_render_check=True)


def test_spaces_and_feature_names_agree() -> None:
    env = CandidateSets(gym.make("PowerTrip-v0"))
    assert env.action_space == gym.spaces.Discrete(N_SLOTS)
    assert N_SLOTS == 3 + len(HORIZONS) + len(STICKY_HORIZONS)
    assert env.observation_space.shape == (N_FEATURES,)
    assert N_FEATURES == N_SLOTS * len(SLOT_FEATURES) + len(GLOBAL_FEATURES)


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-Large-v0", "PowerTrip-Random-v0"])
def test_slots_hold_available_sets_and_slot_zero_keeps(env_id: str) -> None:
    env = CandidateSets(gym.make(env_id))
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    for _ in range(60):
        u = env.unwrapped
        now = u.decision_view()
        c = env.candidates
        assert c.masks.shape == (N_SLOTS, now.n_sites)
        assert np.isfinite(obs).all() and env.observation_space.contains(obs)
        assert not (c.masks & ~now.available).any(), "a slot holds a site without power"
        current = now.joined & now.available
        if current.any():
            np.testing.assert_array_equal(c.masks[0], current)
        if now.available.any():
            assert c.masks.any(axis=1).all(), "an empty slot while sites are available"
            # a sticky slot keeps the current set or takes the best set at its horizon
            first_sticky = 2 + len(HORIZONS)
            for k, h in enumerate(STICKY_HORIZONS, start=first_sticky):
                best = c.masks[1 + HORIZONS.index(h)] if h in HORIZONS else None
                assert (
                    (c.masks[k] == c.masks[0]).all() or best is None or (c.masks[k] == best).all()
                )
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(N_SLOTS)))
        if terminated or truncated:
            break


def test_action_selects_the_slot_it_names() -> None:
    env = CandidateSets(gym.make("PowerTrip-v0", jitter=False))
    env.reset(seed=1)
    for slot in (3, 0, 7, 1):
        chosen = env.candidates.masks[slot]
        _, _, _, _, info = env.step(slot)
        np.testing.assert_array_equal(info["selected"], chosen)


def test_bad_action_is_refused_with_the_range() -> None:
    env = CandidateSets(gym.make("PowerTrip-v0"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=rf"\[0, {N_SLOTS}\)"):
        env.step(N_SLOTS)


def test_pool_grows_linearly_and_holds_the_extremes() -> None:
    env = gym.make("PowerTrip-Large-v0")
    env.reset(seed=0)
    now = env.unwrapped.decision_view()
    pool = pool_of(env.unwrapped)
    m = int(now.available.sum())
    assert pool.shape[0] <= 4 * m + 1
    assert pool.any(axis=1).all()
    assert any(row.sum() == m for row in pool), "the set of every available site is missing"


def test_pool_contains_the_myopic_best_often() -> None:
    """The pool is a few dozen sets, not 2^m: on the flagship it still holds MyopicOptimal's
    choice (the best of all 2^m − 1) in most rounds, so slot 1 is at least as good as the rule
    it replaces."""
    env = gym.make("PowerTrip-v0")
    env.reset(seed=0)
    u = env.unwrapped
    hits = total = 0
    rng = np.random.default_rng(1)
    for _ in range(80):
        now = u.decision_view()
        idx = np.flatnonzero(now.available)
        if idx.size:
            every = np.zeros((2**idx.size - 1, now.n_sites), dtype=bool)
            every[:, idx] = subset_matrix(idx.size)
            best = every[int(np.argmax(u.predict_round(every).efficiency))]
            hits += bool((pool_of(u) == best).all(axis=1).any())
            total += 1
        _, _, terminated, truncated, _ = env.step(rng.integers(0, 2, now.n_sites))
        if terminated or truncated:
            break
    assert total > 20 and hits / total >= 0.8


def test_building_candidates_changes_nothing_in_the_episode() -> None:
    """``build`` only asks ``predict_round``: an episode is the same whether or not candidates
    are built every round."""
    rng_actions = np.random.default_rng(5).integers(0, 2, (60, 10))

    def run(with_build: bool) -> list[float]:
        env = gym.make("PowerTrip-v0")
        env.reset(seed=7)
        out = []
        for a in rng_actions:
            if with_build:
                build(env.unwrapped)
            _, r, terminated, truncated, info = env.step(a)
            out.append((r, info["elapsed_s"]))
            if terminated or truncated:
                break
        return out

    assert run(True) == run(False)


@pytest.mark.parametrize(
    "env_id", [*powertrip_env.SUITE_IDS, "PowerTrip-LoRA-v0", "PowerTrip-Large-v0"]
)
def test_the_kernel_builds_the_numpy_construction_bit_for_bit(env_id: str) -> None:
    """The compiled candidates (``dynamics.candidates``) are the numpy construction they
    replaced (``tests/candidates_reference.py``): the same slots and the same float32
    features, bit for bit, on whole episodes with every slot played in turn; and the horizon
    rule's single slot is the numpy pool's pick."""
    env = gym.make(env_id)
    u = env.unwrapped
    rng = np.random.default_rng(2)
    env.reset(seed=4)
    for step in range(2_000):
        expected = reference.build(u)
        got = build(u)
        np.testing.assert_array_equal(got.masks, expected.masks)
        np.testing.assert_array_equal(got.features.view(np.int32), expected.features.view(np.int32))
        now = u.decision_view()
        if now.available.any() and step % 7 == 0:
            pool = reference.predict_pool(u, now)
            np.testing.assert_array_equal(pool_of(u), pool.sets)
            for h, margin in ((6.0, 0.02), (3.0, 0.0), (12.0, 0.1)):
                rule = build(u, ((h, margin),)).masks[1]
                np.testing.assert_array_equal(rule, pool.sets[pool.pick(h, margin)])
        action = np.zeros(env.action_space.shape, np.int8)
        action[: got.masks.shape[1]] = got.masks[rng.integers(N_SLOTS)]
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    assert step > 50


def test_the_vector_env_builds_each_sub_environments_candidates() -> None:
    """One call for the batch gives what each sub-environment's own call gives."""
    venv = gym.make_vec("PowerTrip-v0", num_envs=4)
    single = [gym.make("PowerTrip-v0") for _ in range(4)]
    venv.reset(seed=9)
    for i, env in enumerate(single):
        env.reset(seed=9 + i)
    rng = np.random.default_rng(0)
    for _ in range(30):
        batch = venv.unwrapped.candidates()
        for i, env in enumerate(single):
            one = env.unwrapped.candidates()
            np.testing.assert_array_equal(batch.masks[i], one.masks[0])
            np.testing.assert_array_equal(batch.features[i], one.features[0])
        slots = rng.integers(N_SLOTS, size=4)
        actions = batch.masks[np.arange(4), slots].astype(np.int8)
        venv.step(actions)
        for env, a in zip(single, actions, strict=True):
            env.step(a)


def test_same_seed_same_candidates() -> None:
    a = _episode(CandidateSets(gym.make("PowerTrip-v0")), lambda e: 4, seed=11)
    b = _episode(CandidateSets(gym.make("PowerTrip-v0")), lambda e: 4, seed=11)
    assert all((x[0] == y[0]).all() for x, y in zip(a, b, strict=True))


class _Always:
    """A stand-in model: always the same slot."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def predict(self, obs, deterministic=True):
        assert obs.shape == (N_FEATURES,)
        return np.array(self.slot), None


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-Random-v0"])
def test_policy_plays_the_slot_the_model_picks(env_id: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=2)
    policy = CandidatePolicy(_Always(5), "always-5")
    policy.reset(env)
    for _ in range(20):
        expected = build(env.unwrapped).masks[5]
        action = policy.act(None, {})
        assert action.shape == env.action_space.shape  # padded to max_sites on Random-v0
        np.testing.assert_array_equal(action[: expected.shape[0]], expected)
        assert not action[expected.shape[0] :].any()
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break


@pytest.fixture(scope="module")
def saved_candidate_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PPO agent on ``CandidateSets``, trained for one short rollout and saved."""
    from stable_baselines3 import PPO

    env = CandidateSets(gym.make("PowerTrip-KWS-v0"))
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    path = tmp_path_factory.mktemp("candidate-model") / "cand.zip"
    model.save(path)
    return str(path)


def test_evaluate_loads_and_plays_a_saved_candidate_agent(saved_candidate_model: str) -> None:
    from powertrip_env.harness.evaluation.evaluate import evaluate

    result = evaluate(
        "PowerTrip-KWS-v0",
        ["PowerTrip"],
        episodes=2,
        models=[(saved_candidate_model, "ppo")],
        progress=False,
    )
    assert list(result.summary["policy"]) == ["PowerTrip", "cand"]
    assert (result.episodes["tta_h"] > 0).all()


def test_a_candidate_agent_loads_in_a_process_that_never_imported_agents(
    saved_candidate_model: str,
) -> None:
    """The loader finds the candidate interface through its plugins
    (``powertrip_env.harness.models.loading``), and plays the model as ``CandidatePolicy``."""
    import subprocess
    import sys

    code = (
        "import sys, gymnasium as gym\n"
        "from powertrip_env.harness.models.loading import load_agent\n"
        "assert 'powertrip_env.agents.candidates' not in sys.modules\n"
        f"agent, kwargs = load_agent({saved_candidate_model!r}, 'ppo', 'cand', 'PowerTrip-v0')\n"
        "print(type(agent).__name__, kwargs)\n"
        "env = gym.make('PowerTrip-v0', **kwargs)\n"
        "obs, info = env.reset(seed=0)\n"
        "agent.reset(env)\n"
        "print(int(agent.act(obs, info).sum()) > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["CandidatePolicy", "{}", "True"]


def test_a_model_in_an_unknown_space_is_refused_naming_it(tmp_path) -> None:
    from stable_baselines3 import PPO

    from powertrip_env.errors import EvaluationError
    from powertrip_env.harness.models.loading import load_agent

    env = gym.wrappers.FlattenObservation(gym.make("CartPole-v1"))
    path = tmp_path / "cartpole.zip"
    PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, device="cpu").save(path)
    with pytest.raises(EvaluationError, match=r"acts in Discrete.*candidates"):
        load_agent(str(path), "ppo", "cartpole", "PowerTrip-v0")


def test_compiled_actor_decides_as_sb3_predict() -> None:
    """``CandidatePolicy`` plays an MlpPolicy's layers in one compiled call: the same slot as
    SB3's deterministic ``predict`` on the states of real episodes."""
    import torch
    from stable_baselines3 import PPO

    from powertrip_env.agents.candidates import compiled_actor

    for activation in (torch.nn.Tanh, torch.nn.ReLU):
        env = CandidateSets(gym.make("PowerTrip-v0"))
        kwargs = {"net_arch": [32, 16], "activation_fn": activation}
        model = PPO("MlpPolicy", env, policy_kwargs=kwargs, seed=1, device="cpu")
        with torch.no_grad():  # larger weights, so the slots differ from state to state
            for p in model.policy.action_net.parameters():
                p.mul_(50.0)
        actor = compiled_actor(model.policy)
        assert actor is not None
        slots = set()
        for obs, _ in _episode(env, lambda e: 2, seed=4, rounds=60):
            expected = int(model.predict(obs, deterministic=True)[0])
            assert actor(obs) == expected
            slots.add(expected)
        assert len(slots) > 1, "the check saw one slot only"
        nan = np.zeros(env.observation_space.shape, dtype=np.float32)
        nan[5] = np.nan  # every logit NaN: slot 0, as np.argmax gives
        assert actor(nan) == 0


def test_the_candidate_vector_env_is_a_dummy_vec_env_of_candidate_sets() -> None:
    """``CandidateVecEnv`` over the native vector env steps what SB3's ``DummyVecEnv`` of
    ``CandidateSets`` steps, bit for bit: observations, rewards, dones, terminal observations
    and infos, through autoresets (a short step limit makes episodes end often)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from powertrip_env.agents.candidate_vec_env import CandidateVecEnv

    b, limit = 3, 25
    dummy = DummyVecEnv(
        [lambda: CandidateSets(gym.make("PowerTrip-v0", max_episode_steps=limit))] * b
    )
    native = CandidateVecEnv(gym.make_vec("PowerTrip-v0", num_envs=b, max_episode_steps=limit))
    dummy.seed(21)
    native.seed(21)
    np.testing.assert_array_equal(dummy.reset(), native.reset())
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(80):
        actions = rng.integers(N_SLOTS, size=b)
        a, b_ = dummy.step(actions), native.step(actions)
        for x, y in zip(a[:3], b_[:3], strict=True):
            np.testing.assert_array_equal(x, y)
        for da, na in zip(a[3], b_[3], strict=True):
            assert da.keys() == na.keys()
            for key in da:
                np.testing.assert_array_equal(da[key], na[key], err_msg=key)
        ends += int(a[2].sum())
    assert ends >= 6
    with pytest.raises(ValueError, match=rf"expected integers in \[0, {N_SLOTS}\)"):
        native.step(np.array([0, 1, N_SLOTS]))
