"""The candidate-set agent's carbon slots (``agents/carbon_slots.py``) and the training run that
acts through them on a carbon task.

Every test says in a comment which mistake it catches. The environments run without jitter, so
every number is deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from future_rows import scrambled_future, twin_on
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import carbon_slots as cs
from powertrip_env.agents import training
from powertrip_env.baselines.carbon import CarbonGreedy
from powertrip_env.harness.evaluation import evaluate as evaluate_module
from powertrip_env.harness.models.loading import load_agent
from powertrip_env.harness.models.registry import INTERFACES

ID = "PowerTrip-Carbon-v2"


def _slots_env(split: str = "test") -> cs.CarbonSlots:
    return cs.CarbonSlots(gym.make(ID, split=split, jitter=False))


def test_the_layout_is_named_feature_by_feature() -> None:
    # catches: a feature added without its name (docs and the model's input drift apart)
    assert cs.N_SLOTS == len(cs.SLOT_NAMES) == 4 + cs.MAX_PREFIXES
    assert cs.N_FEATURES == cs.N_SLOTS * len(cs.SLOT_FEATURES) + len(cs.GLOBAL_FEATURES)
    env = _slots_env()
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape == (cs.N_FEATURES,)
    assert env.observation_space.contains(obs)


def test_the_wrapper_passes_gymnasiums_and_sb3s_checks() -> None:
    # catches: observations outside the declared space, a reset that ignores its seed, an
    # action space SB3 cannot train on
    gym_check_env(_slots_env(), skip_render_check=True)
    sb3_check_env(_slots_env(), warn=False)


def test_the_greedy_slot_plays_carbon_greedy_round_for_round() -> None:
    # catches: a greedy slot that is not CarbonGreedy's pick (another ranking, pace or reserve),
    # so the agent's "do as the best rule does" is not on offer
    env = _slots_env()
    rule_env = gym.make(ID, split="test", jitter=False)
    for seed in (0, 1):
        env.reset(seed=seed)
        rule_env.reset(seed=seed)
        rule = CarbonGreedy()
        rule.reset(rule_env.unwrapped)
        done, rounds = False, 0
        while not done:
            picked = env.candidates.masks[cs.GREEDY]
            np.testing.assert_array_equal(picked, rule.act(None, {}).astype(bool))
            _, _, term, trunc, info = env.step(cs.GREEDY)
            _, _, rterm, rtrunc, rinfo = rule_env.step(picked.astype(np.int8))
            done, rounds = term or trunc, rounds + 1
            assert (rterm or rtrunc) == done
        assert info["carbon_kg"] == rinfo["carbon_kg"] and rounds > 100
        assert info["success"] == rinfo["success"] and info["tta_h"] == rinfo["tta_h"]


def test_idle_trains_nowhere_and_missing_prefixes_are_masked_stand_ins() -> None:
    # catches: an idle slot that trains, a stand-in marked valid (MaskablePPO would pick a
    # duplicate as if it were another set), or a stand-in that is not the largest prefix
    env = _slots_env()
    env.reset(seed=2)
    slots = env.candidates
    n_avail = int(env.unwrapped.decision_view().available.sum())
    assert not slots.masks[cs.IDLE].any() and slots.valid[cs.IDLE]
    prefixes = slots.masks[cs.PREFIX0 :]
    assert [int(m.sum()) for m in prefixes[:n_avail]] == list(range(1, n_avail + 1))
    assert (prefixes[n_avail:] == prefixes[n_avail - 1]).all()
    assert not slots.valid[cs.PREFIX0 + n_avail :].any()
    np.testing.assert_array_equal(env.action_masks(), slots.valid)
    assert not slots.valid[cs.KEEP]  # nothing is joined before the first round
    _, reward, _, _, info = env.step(cs.IDLE)
    assert info["n_selected"] == 0 and info["round_carbon_kg"] == 0.0 and reward <= 0.0
    with pytest.raises(ValueError, match=r"expected an integer in \[0, 12\)"):
        env.step(cs.N_SLOTS)


def test_the_features_are_finite_bounded_and_warning_free_to_the_end() -> None:
    # catches: a division by the time left or by a zero pace at the deadline (inf, NaN or a
    # RuntimeWarning reaching the learner), on an episode that idles into its deadline
    env = _slots_env()
    env.reset(seed=3)
    done, seen = False, []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        while not done:
            obs, _, term, trunc, info = env.step(cs.IDLE)
            seen.append(obs)
            done = term or trunc
    seen = np.array(seen)
    assert not info["success"] and np.isfinite(seen).all()
    assert np.abs(seen).max() <= cs.FEATURE_LIMIT


def test_the_slots_read_no_future_actual() -> None:
    # catches: a forecast feature that reads the trace's later rows (the grid's intensity, the
    # PV or the power), which a deployed agent could not see
    env = gym.make(ID, split="test", jitter=False).unwrapped
    for seed in (0, 1):
        env.reset(seed=seed)
        for _ in range(20):
            env.step(np.ones(env.n_sites, dtype=np.int8))
        ours = cs.build(env)
        theirs = cs.build(twin_on(env, scrambled_future(env, seed)))
        np.testing.assert_array_equal(ours.features, theirs.features)
        np.testing.assert_array_equal(ours.masks, theirs.masks)


def test_a_task_without_carbon_is_refused() -> None:
    # catches: carbon slots built on a task with no intensity (every slot would cost nothing)
    with pytest.raises(ValueError, match="CarbonSlots needs a carbon task"):
        cs.CarbonSlots(gym.make("PowerTrip-v0")).reset(seed=0)


def test_the_candidate_agent_acts_through_the_slots_of_its_objective() -> None:
    # catches: a carbon task trained on the time slots (they offer neither idling nor the
    # carbon rule's pick), or a time task given the carbon slots
    assert training.action_interface("candidates", "carbon") == "carbon_slots"
    assert training.action_interface("candidates", "excess_gain") == "candidates"
    assert training.action_interface("sites", "carbon") is None
    assert INTERFACES["carbon_slots"].wrap is cs.CarbonSlots


@pytest.mark.usefixtures("one_torch_thread")
def test_a_carbon_run_trains_on_the_slots_and_its_model_plays_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # catches: train_agent.py on a carbon task building the time slots, --shaping not reaching
    # the training envs or reaching the final table (scored on the objective alone), a final
    # table without the agent, or a saved model that the harness cannot match to the interface
    # it acts through
    out = tmp_path / "run"
    argv = [
        "--env", ID, "--timesteps", "128", "--n-envs", "2", "--hp", "n_steps=64",
        "--hp", "batch_size=64", "--eval-freq", "0", "--checkpoint-freq", "0",
        "--shaping", "progress",
        "--final-episodes", "1", "--final-policies", "CarbonGreedy", "--no-progress",
        "--out", str(out),
    ]  # fmt: skip
    asked: list[dict] = []
    real = evaluate_module.evaluate

    def spy(*args, **kwargs):
        asked.append(kwargs["env_kwargs"])
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "evaluate", spy)
    assert training.main(argv) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["env_kwargs"]["shaping"] == "progress"
    assert asked and all("shaping" not in kw and "reward_mode" not in kw for kw in asked)
    summary = (out / "summary.md").read_text()
    assert "CarbonGreedy" in summary and "ppo (final_model)" in summary
    agent, _ = load_agent(str(out / "final_model.zip"), "ppo", "agent", ID)
    assert isinstance(agent, cs.CarbonSlotPolicy)
    env = gym.make(ID, split="test", jitter=False)
    env.reset(seed=0)
    agent.reset(env.unwrapped)
    action = agent.act(None, {})
    assert action.shape == env.action_space.shape
