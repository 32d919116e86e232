"""The clairvoyant references and the lower bound (baselines/references.py).

What makes them references: ``lower_bound_h`` is below every policy's time to accuracy,
``BestFixedSet`` is the best set kept for a whole episode, ``BeamPlanner`` is never worse than it,
and what a reference plans is exactly what the environment then reports. The small scenario is
``test_policies``' hand-made one: four sites whose powered GPUs change every 5-minute row, rounds
of tens of seconds, a 2 h budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import write_powered_scenario as write_scenario

from baselines.policies import AllSites, Policy, PowerTrip, subset_matrix
from baselines.references import (
    BeamPlanner,
    BestFixedSet,
    fixed_set_candidates,
    lower_bound_h,
    rollout_fixed,
)

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def small(small_scenario: Path) -> Path:
    return small_scenario


class RandomActions(Policy):
    """Any set at all, from its own generator."""

    name = "RandomActions"

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        return (self.rng.random(self.env.params.n_sites) < 0.5).astype(np.int8)


def play(env: gym.Env, policy: Policy, seed: int) -> dict[str, Any]:
    """One episode; returns the last info (with tta_h) and the bound at its start."""
    obs, info = env.reset(seed=seed)
    bound = lower_bound_h(env.unwrapped)
    policy.reset(env.unwrapped)
    while True:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return {**info, "bound_h": bound}


def fixed(mask: np.ndarray) -> Policy:
    class Fixed(Policy):
        name = "Fixed"

        def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
            return mask.astype(np.int8)

    return Fixed()


# --------------------------------------------------------------------------- the bound


@pytest.mark.parametrize("jitter", [True, False])
def test_lower_bound_is_below_every_policys_time_to_accuracy(small, jitter):
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test", jitter=jitter)
    budget_h = env.unwrapped.scenario.episode.time_budget_h
    successes = 0
    for seed in SEEDS:
        for policy in (RandomActions(seed), AllSites(), PowerTrip(), BestFixedSet()):
            end = play(env, policy, seed)
            assert 0.0 < end["bound_h"] <= end["tta_h"] + 1e-9, (policy.name, seed)
            assert end["bound_h"] <= budget_h
            successes += end["success"]
    assert successes >= len(SEEDS)  # the bound is tested against finished episodes too


@pytest.mark.parametrize("jitter", [True, False])
def test_lower_bound_holds_on_the_flagship(jitter):
    env = gym.make("PowerTrip-v0", split="test", jitter=jitter)
    for seed in (0, 1):
        policies = (RandomActions(seed), AllSites(), PowerTrip(), BestFixedSet())
        ttas = [play(env, policy, seed) for policy in policies]
        bound = ttas[0]["bound_h"]
        assert 0.0 < bound <= min(end["tta_h"] for end in ttas) + 1e-9
        assert ttas[2]["success"] and ttas[3]["success"]  # PowerTrip, BestFixedSet: within 48 h


def test_lower_bound_refuses_fixed_time_rounds(tmp_path):
    path = write_scenario(tmp_path, [10, 10], workload={"round_mode": "fixed_time"})
    env = gym.make("PowerTrip-v0", scenario=str(path), split="test")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="fixed_quota"):
        lower_bound_h(env.unwrapped)


# --------------------------------------------------------------------------- BestFixedSet


def test_best_fixed_set_is_the_best_set_played_through_the_env(small):
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test")
    candidates = fixed_set_candidates(env.unwrapped)
    assert candidates.shape == (15, 4)  # every non-empty set of four sites
    assert np.array_equal(candidates, subset_matrix(4))
    for seed in SEEDS[:3]:
        played = np.array([play(env, fixed(mask), seed)["tta_h"] for mask in candidates])
        reference = BestFixedSet()
        end = play(env, reference, seed)
        assert end["tta_h"] == played.min(), seed
        best = np.flatnonzero(played == played.min())
        fewest = best[np.argmin(candidates[best].sum(axis=1))]  # ties: fewer sites, then first
        assert np.array_equal(reference.mask, candidates[fewest].astype(np.int8))


def test_fixed_rollouts_equal_what_the_env_reports(small):
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test")
    env.reset(seed=5)
    masks = subset_matrix(4)
    planned = rollout_fixed(env.unwrapped, masks)
    for i in (0, 6, 14):
        end = play(env, fixed(masks[i]), 5)
        assert planned.tta_h[i] == end["tta_h"]
        assert planned.success[i] == end["success"]
        assert planned.rounds[i] == end["rounds"]


# --------------------------------------------------------------------------- BeamPlanner


def test_beam_planner_is_never_slower_than_the_best_fixed_set_and_plays_its_plan(small):
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test")
    gains = []
    for seed in SEEDS[:3]:
        fixed_tta = play(env, BestFixedSet(), seed)["tta_h"]
        planner = BeamPlanner(width=4, lookahead=4, top_k=8)
        end = play(env, planner, seed)
        assert end["tta_h"] <= fixed_tta + 1e-12, seed
        # the plan it made at reset is the episode the env then runs
        assert end["success"]
        assert end["tta_h"] == pytest.approx(planner.planned_tta_h, rel=1e-12, abs=1e-12)
        assert end["rounds"] == len(planner.plan)
        gains.append(fixed_tta - end["tta_h"])
    assert max(gains) > 0  # changing sets as power moves pays on this scenario


def test_beam_planner_refuses_empty_settings():
    with pytest.raises(ValueError, match="width"):
        BeamPlanner(width=0)


@pytest.mark.parametrize(("seed", "jitter"), [(0, False), (1, True)])
def test_beam_planner_on_the_flagship_beats_the_best_fixed_set_as_planned(seed, jitter):
    env = gym.make("PowerTrip-v0", split="test", jitter=jitter)
    fixed_tta = play(env, BestFixedSet(), seed)["tta_h"]
    planner = BeamPlanner()
    end = play(env, planner, seed)
    assert end["success"]
    assert end["tta_h"] <= fixed_tta
    assert end["tta_h"] == pytest.approx(planner.planned_tta_h, rel=1e-12)


def test_baselines_import_nothing_from_the_simulator_core():
    """Policies read ``decision_view``/``predict_round``, references ``env.clairvoyant()``:
    no module under baselines/ reaches into ``powertrip_env.core`` (or ``powertrip_env``'s
    other internals that hold its tables)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "baselines"
    offenders = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("powertrip_env.core")]
    assert len(list(root.glob("*.py"))) >= 8
    assert not offenders, offenders
