"""The clairvoyant teacher and its students (agents/imitation.py): the teacher's rollouts are
the env's own episodes, its labels prefer the tuned rule, and behaviour cloning learns them."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import hyperparams, imitation
from powertrip_env.agents.candidates import N_FEATURES, N_SLOTS, CandidatePolicy
from powertrip_env.baselines.registry import make_policy


def test_a_rule_rollout_is_the_episode_the_rule_plays() -> None:
    """``Clairvoyant.follow`` plays the horizon rule in each simulated episode exactly as the
    rule plays the real one: the same time to the target, to the second."""
    env = gym.make("PowerTrip-v0")
    env.reset(seed=5)
    u = env.unwrapped
    first = u.candidates((imitation.TEACHER,)).masks[0, 1:2]
    predicted = u.clairvoyant().follow(first, imitation.TEACHER)
    rule = make_policy("HorizonRule", n_sites=10)
    rule.reset(env)
    done, info = False, {}
    while not done:
        *_, terminated, truncated, info = env.step(rule.act(None, info))
        done = terminated or truncated
    assert predicted.success[0] == terminated
    assert predicted.tta_h[0] == info["elapsed_s"] / 3600.0


def test_slot_regrets_rank_each_slot_by_its_rollout() -> None:
    venv = imitation.make_venv("PowerTrip-v0", {"jitter": False}, 2, seed=3)
    venv.reset()
    for _ in range(5):
        venv.step(np.full(2, N_SLOTS - 1))
    regret = imitation.slot_regrets(venv.vector, venv.masks)
    assert regret.shape == (2, N_SLOTS)
    assert (regret >= 0).all() and (regret.min(axis=1) == 0).all()
    future = venv.vector.clairvoyant()
    for i in range(2):
        state = future.state.take(np.full(N_SLOTS, i))
        tta = future.follow(venv.masks[i], imitation.TEACHER, state=state).tta_h
        np.testing.assert_array_equal(regret[i], tta - tta.min())


def test_the_teacher_prefers_the_tuned_rule_among_the_best() -> None:
    regret = np.array([[0.0, 0.1] + [0.0] * (N_SLOTS - 2), [0.2, 0.0] + [0.3] * (N_SLOTS - 2)])
    np.testing.assert_array_equal(imitation.teacher_slots(regret), [N_SLOTS - 1, 1])
    target = imitation.teacher_targets(regret)
    np.testing.assert_array_equal(target[0], np.eye(N_SLOTS)[-1])
    np.testing.assert_array_equal(target[1], np.eye(N_SLOTS)[1])


def test_behaviour_cloning_learns_a_rule_of_the_features() -> None:
    """A student fit on decisions that follow one feature's sign takes them on new states."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(4_000, N_FEATURES)).astype(np.float32)
    slots = np.where(features[:, 7] > 0, 2, 5)
    venv = imitation.make_venv("PowerTrip-v0", {}, 1, seed=0)
    from stable_baselines3 import PPO

    config = hyperparams.load_config(hyperparams.default_config_path("ppo"), "ppo")
    policy, kwargs = hyperparams.model_kwargs(config, "ppo", "candidates")
    model = PPO(policy, venv, seed=0, device="cpu", **kwargs)
    losses = imitation.fit(model.policy, imitation.from_slots(features, slots), epochs=30)
    assert losses[-1] < losses[0]
    test = rng.normal(size=(500, N_FEATURES)).astype(np.float32)
    chosen = imitation.student_of(model.policy)(test)
    assert (chosen == np.where(test[:, 7] > 0, 2, 5)).mean() > 0.9


def test_the_command_saves_a_student_that_plays(tmp_path) -> None:
    out = tmp_path / "run"
    code = imitation.main(
        ["--n-envs", "2", "--steps", "3", "--dagger", "1", "--epochs", "2", "--out", str(out)]
    )
    assert code == 0
    summary = json.loads((out / "imitation.json").read_text())
    assert summary["states"] == 2 * 3 + 2 * 1
    from stable_baselines3 import PPO

    agent = CandidatePolicy(PPO.load(out / "model.zip", device="cpu"), "student")
    env = gym.make("PowerTrip-v0")
    obs, info = env.reset(seed=0)
    agent.reset(env)
    action = agent.act(obs, info)
    assert env.action_space.contains(action)


def test_one_student_learns_from_several_ids(tmp_path) -> None:
    """Repeated ``--env`` labels each ID and fits one student on all of them; it plays on a
    catalogue of 10 sites and on one of 24, the features being the same size for both."""
    out = tmp_path / "run"
    argv = ["--env", "PowerTrip-v0", "--env", "PowerTrip-Wide-v0", "--n-envs", "2", "--steps",
            "2", "--dagger", "1", "--epochs", "2", "--out", str(out)]  # fmt: skip
    assert imitation.main(argv) == 0
    summary = json.loads((out / "imitation.json").read_text())
    assert summary["env"] == ["PowerTrip-v0", "PowerTrip-Wide-v0"]
    assert summary["states"] == 2 * (2 * 2 + 2 * 1)
    from stable_baselines3 import PPO

    agent = CandidatePolicy(PPO.load(out / "model.zip", device="cpu"), "student")
    for env_id in ("PowerTrip-v0", "PowerTrip-Wide-v0"):
        env = gym.make(env_id)
        obs, info = env.reset(seed=0)
        agent.reset(env)
        assert env.action_space.contains(agent.act(obs, info))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--beta", "1.5"], "argument --beta: 1.5: expected a share in [0, 1]"),
        (["--env", "PowerTrip-Random-v0"], "draws a site catalogue per episode"),
        (["--env", "Nope-v0"], "unknown environment 'Nope-v0'"),
    ],
)
def test_bad_arguments_are_named(argv, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        imitation.main([*argv, "--out", str(tmp_path / "x")])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
