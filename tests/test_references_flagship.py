"""The references' guarantees on the shipped scenarios, episode by episode.

``BeamPlanner`` starts from the complete episodes of PowerTrip, MyopicOptimal and the best fixed
set, so on every paired episode (as ``powertrip headroom`` runs them: test split, ``reset(seed=e)``)
its time to accuracy is at most each of theirs. ``lower_bound_h`` is below every policy in every
round mode and all-reduce, and ``powertrip_env.harness.reports.headroom`` runs on a ``fixed_time``
scenario.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.baselines.policies import AllSites, MyopicOptimal, PowerTrip
from powertrip_env.baselines.references import BeamPlanner, BestFixedSet
from powertrip_env.harness.reports import headroom

TOLERANCE_H = 1e-9


def tta_h(env: gym.Env, policy: Policy, seed: int) -> float:
    """The policy's time to accuracy in episode ``seed`` (hours; the budget on failure)."""
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    while True:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return float(info["tta_h"])


def beam_against_its_starts(
    env_id: str, seeds: range, jitter: bool, **beam: Any
) -> list[tuple[int, float, dict[str, float]]]:
    """Per episode where BeamPlanner is slower than a policy it starts from: (seed, its TTA,
    theirs). Empty when the guarantee holds."""
    env = gym.make(env_id, split="test", jitter=jitter)
    n_sites = env.unwrapped.params.n_sites
    losses = []
    for seed in seeds:
        starts: list[Policy] = [PowerTrip(), BestFixedSet()]
        if n_sites <= 16:
            starts.append(MyopicOptimal())
        theirs = {policy.name: tta_h(env, policy, seed) for policy in starts}
        ours = tta_h(env, BeamPlanner(**beam), seed)
        if ours > min(theirs.values()) + TOLERANCE_H:
            losses.append((seed, ours, theirs))
    env.close()
    return losses


# --------------------------------------------------------------------------- BeamPlanner


# 80 s: behind the slow marker to keep CI under 20 minutes; test_beam_planner_is_never_slower_than
# _its_starts (below) checks the same property on fewer episodes in every CI run.
@pytest.mark.slow
def test_beam_planner_is_never_slower_than_its_starts_on_30_flagship_episodes():
    """headroom's 30 paired test episodes of PowerTrip-v0, without jitter (BeamPlanner was
    slower than MyopicOptimal in 7 of them, by up to 5%, on the flagship as calibrated before
    its recalibration, when it did not start from them). About 35 s of CPU: CI's slow stage."""
    assert beam_against_its_starts("PowerTrip-v0", range(30), jitter=False) == []


@pytest.mark.parametrize(
    ("env_id", "seeds", "jitter", "beam"),
    [
        ("PowerTrip-v0", range(3), True, {}),
        # a narrow beam lost to MyopicOptimal in episodes 6 and 8 before it started from it
        ("PowerTrip-v0", range(6, 9), False, {"width": 2, "lookahead": 2, "top_k": 4}),
        # the default beam lost to MyopicOptimal in episodes 0 and 3 of KWS, by 0.01%
        ("PowerTrip-KWS-v0", range(4), False, {}),
        ("PowerTrip-KWS-v0", range(2), True, {}),
    ],
    ids=["flagship-jitter", "flagship-narrow", "kws", "kws-jitter"],
)
def test_beam_planner_is_never_slower_than_its_starts(env_id, seeds, jitter, beam):
    assert beam_against_its_starts(env_id, seeds, jitter, **beam) == []


# --------------------------------------------------------------------------- the bound

VARIANTS = {
    "fixed_time": '[workload]\nround_mode = "fixed_time"\nround_s = 300\n',
    "fixed_time_grace": '[workload]\nround_mode = "fixed_time"\nround_s = 300\ngrace = 0.05\n',
    "ring": '[network]\nallreduce = "ring"\n',
    "hub": '[network]\nallreduce = "hub"\n',
}


def variant(folder: Path, name: str) -> Path:
    """PowerTrip-v0's scenario with other rounds or another all-reduce."""
    path = folder / f"{name}.toml"
    path.write_text(f'extends = "default"\n\n{VARIANTS[name]}', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "jitter", "seeds"),
    [
        ("fixed_time", False, (0, 1)),
        ("fixed_time", True, (2,)),
        ("fixed_time_grace", True, (3,)),
        ("ring", False, (0, 1)),
        ("hub", True, (2,)),
    ],
)
def test_lower_bound_holds_on_flagship_variants(tmp_path, name, jitter, seeds):
    env = gym.make(
        "PowerTrip-v0", scenario=str(variant(tmp_path, name)), split="test", jitter=jitter
    )
    p = env.unwrapped.params
    assert p.fixed_time == name.startswith("fixed_time")
    assert p.ring == (name != "hub")  # the flagship's all-reduce is a ring
    for seed in seeds:
        env.reset(seed=seed)
        bound = lower_bound_h(env.unwrapped)
        policies = (BeamPlanner(), MyopicOptimal(), PowerTrip(), AllSites())
        ttas = {policy.name: tta_h(env, policy, seed) for policy in policies}
        assert 0.0 < bound <= min(ttas.values()) + TOLERANCE_H, (name, seed, bound, ttas)
        assert ttas["BeamPlanner"] < p.time_budget_s / 3600.0  # a finished episode


def test_headroom_runs_on_a_fixed_time_scenario(tmp_path):
    summary, frame = headroom.headroom(
        "PowerTrip-v0", episodes=2, scenario=str(variant(tmp_path, "fixed_time")), progress=False
    )
    assert summary["bound_holds"] is True
    tta = summary["mean_tta_h"]
    assert (
        tta["LowerBound"]
        <= tta["BeamPlanner"]
        <= min(tta["BestFixedSet"], tta["MyopicOptimal"], tta["PowerTrip"])
    )
    assert len(frame) == 2 * 6
