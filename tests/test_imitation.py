"""The clairvoyant teacher and its students (agents/imitation.py): the teacher's rollouts are
the env's own episodes, its labels prefer the tuned rule, and behaviour cloning learns them."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import hyperparams, imitation
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
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


def stepped(env_id: str, seed: int, steps: int) -> CandidateVecEnv:
    """Two jitter-free episodes of ``env_id`` on the native vector env, ``steps`` rounds in
    (the tuned rule's slot played)."""
    venv = imitation.make_venv(env_id, {"jitter": False}, 2, seed=seed)
    venv.reset()
    for _ in range(steps):
        venv.step(np.full(2, N_SLOTS - 1))
    return venv


def test_slot_regrets_roll_each_measured_episode_out_in_its_own_world() -> None:
    """On the measured track there is no batch future (each episode's drawn unknowns make its
    world), yet ``slot_regrets`` scores every row, each in the world ``clairvoyant(i)`` gives."""
    venv = stepped("PowerTrip-Measured-v0", seed=3, steps=3)
    vector = venv.vector
    with pytest.raises(ValueError, match="name one"):
        vector.clairvoyant()
    regret = imitation.slot_regrets(vector, venv.masks)
    assert regret.shape == (2, N_SLOTS)
    assert (regret >= 0).all() and (regret.min(axis=1) == 0).all()
    assert (regret > 0).any()  # a state where the choice matters
    for i in range(2):
        future = vector.clairvoyant(i)
        alone = imitation._rollouts(
            future, venv.masks[i : i + 1], np.zeros(1, dtype=np.int64), imitation.TEACHER
        )[0]
        np.testing.assert_array_equal(regret[i], alone - alone.min())
        # and without _rollouts' sharing of equal sets: every slot played on its own copy
        state = future.state.take(np.zeros(N_SLOTS, dtype=np.intp))
        tta = future.follow(venv.masks[i], imitation.TEACHER, state=state).tta_h
        np.testing.assert_array_equal(regret[i], tta - tta.min())
    # a row's regrets are its own episode's: another row's slots do not move them
    other = venv.masks.copy()
    other[1] = venv.masks[0]
    assert (other != venv.masks).any()
    changed = imitation.slot_regrets(vector, other)
    np.testing.assert_array_equal(changed[0], regret[0])


def informed_choice(vector, belief) -> np.ndarray:
    """(B, N) the tuned rule's set in each row under ``belief`` (None: the stated values)."""
    return vector.candidates([imitation.TEACHER], belief=belief).masks[:, 1]


def test_informed_regrets_on_the_known_track_are_the_rule_itself() -> None:
    """On the known track the draw is the stated world: the tuned rule's slot (the last) is
    what Informed plays, in every row and round."""
    venv = stepped("PowerTrip-v0", seed=0, steps=0)
    for _ in range(4):
        regret = imitation.informed_regrets(venv.vector, venv.masks)
        assert regret.shape == (2, N_SLOTS)
        np.testing.assert_array_equal(regret[:, -1], 0.0)
        np.testing.assert_array_equal(regret.min(axis=1), 0.0)
        venv.step(np.full(2, 3))


def test_informed_regrets_on_the_measured_track_read_the_draw() -> None:
    """On the measured track the label is the share of sites on which a slot's set differs from
    the tuned rule told each episode's drawn unknowns, less the nearest slot's; told the stated
    values instead, the rule chooses otherwise in some states, and the labels change with it."""
    chose_otherwise = labelled_otherwise = False
    for seed in (0, 2):
        venv = stepped("PowerTrip-Measured-v0", seed=seed, steps=0)
        for _ in range(3):
            vector, masks = venv.vector, venv.masks
            regret = imitation.informed_regrets(vector, masks)
            assert regret.shape == (2, N_SLOTS)
            np.testing.assert_array_equal(regret.min(axis=1), 0.0)
            assert ((regret >= 0) & (regret <= 1)).all()
            drawn = np.stack([vector.clairvoyant(i).drawn().vector for i in range(2)])
            told = informed_choice(vector, drawn)
            apart = (masks != told[:, None, :]).sum(axis=2)  # sites, not shares
            nearest = apart == apart.min(axis=1, keepdims=True)
            np.testing.assert_array_equal(regret == 0, nearest)
            stated = informed_choice(vector, None)
            chose_otherwise |= bool((stated != told).any())
            apart = (masks != stated[:, None, :]).mean(axis=2)
            labelled_otherwise |= not np.array_equal(apart - apart.min(axis=1)[:, None], regret)
            venv.step(np.full(2, N_SLOTS - 1))
    assert chose_otherwise and labelled_otherwise


def test_informed_regrets_on_the_moving_track_read_the_present_state() -> None:
    """On the moving track the teacher is ``Informed`` as the benchmark plays it: the tuned
    rule told the draw and each site's present state (``monitored``), so while an event is on
    its choice departs from the rule told the draw alone, and the labels follow the former."""
    venv = stepped("PowerTrip-Moving-v0", seed=2, steps=0)  # a seed with an event on early
    departed = False
    for _ in range(40):
        vector, masks = venv.vector, venv.masks
        regret = imitation.informed_regrets(vector, masks)
        monitored = np.stack([vector.clairvoyant(i).monitored().vector for i in range(2)])
        told = informed_choice(vector, monitored)
        apart = (masks != told[:, None, :]).sum(axis=2)
        np.testing.assert_array_equal(regret == 0, apart == apart.min(axis=1, keepdims=True))
        drawn = np.stack([vector.clairvoyant(i).drawn().vector for i in range(2)])
        departed |= bool((informed_choice(vector, drawn) != told).any())
        venv.step(np.full(2, N_SLOTS - 1))
    assert departed, "no event moved the teacher's choice in 40 rounds"


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
    argv = [
        "--env",
        "PowerTrip-v0",
        "--env",
        "PowerTrip-Wide-v0",
        "--n-envs",
        "2",
        "--steps",
        "2",
        "--dagger",
        "1",
        "--epochs",
        "2",
        "--out",
        str(out),
    ]
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


def test_the_command_teaches_informed_on_the_measured_track(tmp_path) -> None:
    out = tmp_path / "run"
    argv = [
        "--env",
        "PowerTrip-Measured-v0",
        "--teacher",
        "informed",
        "--n-envs",
        "2",
        "--steps",
        "3",
        "--dagger",
        "1",
        "--epochs",
        "1",
        "--out",
        str(out),
    ]
    assert imitation.main(argv) == 0
    assert (out / "model.zip").is_file()
    summary = json.loads((out / "imitation.json").read_text())
    assert summary["teacher"] == "informed"
    assert summary["env"] == "PowerTrip-Measured-v0"
    assert summary["states"] == 2 * 3 + 2 * 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--beta", "1.5"], "argument --beta: 1.5: expected a share in [0, 1]"),
        (["--env", "PowerTrip-Random-v0"], "draws a site catalogue per episode"),
        (["--env", "Nope-v0"], "unknown environment 'Nope-v0'"),
        (["--teacher", "nonsense"], "argument --teacher: invalid choice: 'nonsense'"),
    ],
)
def test_bad_arguments_are_named(argv, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        imitation.main([*argv, "--out", str(tmp_path / "x")])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
