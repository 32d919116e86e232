"""The clairvoyant references and the lower bound (baselines/references.py).

What makes them references: ``lower_bound_h`` is below every policy's time to accuracy, in
every round mode and all-reduce, ``BestFixedSet`` is the best set kept for a whole episode,
``BeamPlanner`` is never worse than it or the policies it starts from, and what a reference plans
is exactly what the environment then reports. The small scenario is ``test_policies``'
hand-made one: four sites whose powered GPUs change every 5-minute row, rounds of tens of
seconds, a 2 h budget. ``test_references_flagship`` runs the same guarantees on PowerTrip-v0.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import write_powered_scenario as write_scenario

from powertrip_env.baselines.base import Policy, subset_matrix
from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.baselines.policies import AllSites, MyopicOptimal, PowerTrip
from powertrip_env.baselines.references import (
    BeamPlanner,
    BestFixedSet,
    fixed_set_candidates,
    play_on_copy,
    rollout_fixed,
)
from powertrip_env.dynamics import candidates, estimates, formulas

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


# The bound at the start of each (env, seed) episode: it is the same episode whichever policy
# then plays it, and the bound takes about 0.3 s here (1.5 s on the flagship), far longer than
# the episode, which the tests below play with up to 16 policies.
_BOUNDS: weakref.WeakKeyDictionary[Any, dict[int, float]] = weakref.WeakKeyDictionary()


def play(env: gym.Env, policy: Policy, seed: int) -> dict[str, Any]:
    """One episode; returns the last info (with tta_h) and the bound at its start."""
    obs, info = env.reset(seed=seed)
    bounds = _BOUNDS.setdefault(env.unwrapped, {})
    if seed not in bounds:
        bounds[seed] = lower_bound_h(env.unwrapped)
    bound = bounds[seed]
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


# Whole flagship episodes (7 s of CPU for both): CI's slow stage; tests/test_optimum.py checks
# every bound below every policy and the plan on PowerTrip-v0 with and without jitter each run.
@pytest.mark.slow
@pytest.mark.parametrize("jitter", [True, False])
def test_lower_bound_holds_on_the_flagship(jitter):
    env = gym.make("PowerTrip-v0", split="test", jitter=jitter)
    for seed in (0, 1):
        policies = (RandomActions(seed), AllSites(), PowerTrip(), BestFixedSet())
        ttas = [play(env, policy, seed) for policy in policies]
        bound = ttas[0]["bound_h"]
        assert 0.0 < bound <= min(end["tta_h"] for end in ttas) + 1e-9
        assert ttas[2]["success"] and ttas[3]["success"]  # PowerTrip, BestFixedSet: within 48 h


# Variants of the small scenario: (workload, network) overrides. The small scenario's default
# is fixed_quota rounds through the hub.
MODES = {
    "fixed_time": ({"round_mode": "fixed_time", "round_s": 60.0}, {}),
    "fixed_time_grace": ({"round_mode": "fixed_time", "round_s": 60.0, "grace": 0.02}, {}),
    "ring": ({}, {"allreduce": "ring"}),
    "fixed_time_ring": ({"round_mode": "fixed_time", "round_s": 30.0}, {"allreduce": "ring"}),
}


def small_variant(folder: Path, workload: dict[str, Any], network: dict[str, Any]) -> Path:
    """The small scenario (same power, GPUs and RTTs) with other rounds or another all-reduce,
    and jitter strong enough that grace caps windows."""
    rng = np.random.default_rng(3)
    return write_scenario(
        folder,
        rng.integers(0, 13, size=(288 * 3, 4)),
        gpus=["G100", "G200", "G100", "G100"],
        rtt_ms=[1, 30, 60, 120],
        network={"join_fixed_s": 2.0, "rtt_factor": 10.0, **network},
        episode={"jitter_sigma": 0.1},
        workload=workload,
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_lower_bound_holds_in_every_round_mode_and_all_reduce(tmp_path, mode):
    env = gym.make(
        "PowerTrip-v0", scenario=str(small_variant(tmp_path, *MODES[mode])), split="test"
    )
    assert env.unwrapped.params.fixed_time == mode.startswith("fixed_time")
    successes = 0
    for seed in SEEDS[:3]:
        policies = (
            RandomActions(seed),
            AllSites(),
            PowerTrip(),
            MyopicOptimal(),
            BestFixedSet(),
            BeamPlanner(width=4, lookahead=4, top_k=8),
        )
        for policy in policies:
            end = play(env, policy, seed)
            assert 0.0 < end["bound_h"] <= end["tta_h"] + 1e-9, (mode, policy.name, seed)
            successes += end["success"]
    assert successes >= 3 * 5  # the bound meets finished episodes, not just the budget


def test_lower_bound_charges_a_ring_all_reduce_what_it_costs(tmp_path):
    """By ring all-reduce a lone site exchanges nothing and k sites move 2 (k − 1) / k updates
    over their links; charging the hub's exchange instead put the bound above every policy."""
    path = write_scenario(
        tmp_path,
        [10, 10, 10, 10],
        rtt_ms=[1, 30, 60, 120],
        network={"allreduce": "ring", "rtt_factor": 2.0},
        workload={"model_bytes": 1e9},
    )
    env = gym.make("PowerTrip-v0", scenario=str(path), split="test", jitter=False)
    for seed in (0, 1):
        for policy in (AllSites(), PowerTrip(), MyopicOptimal(), BestFixedSet()):
            end = play(env, policy, seed)
            assert end["success"]
            assert end["bound_h"] <= end["tta_h"] + 1e-9, (policy.name, seed)
            assert end["bound_h"] >= 0.8 * end["tta_h"]  # and still close: power is constant


@pytest.mark.parametrize("mode", ["hub", "ring"])
def test_the_bounds_round_formulas_are_the_kernels(small, tmp_path, mode):
    """The bound takes the communication time and the progress of a round from the kernel
    (``formulas.comm_time_s``, ``formulas.delta_progress``, which it asks for many batches at
    once): every round of fixed sets, without jitter, must show exactly what they compute."""
    path = small if mode == "hub" else small_variant(tmp_path, {}, {"allreduce": "ring"})
    env = gym.make("PowerTrip-v0", scenario=str(path), split="test", jitter=False)
    p = env.unwrapped.params
    assert p.ring == (mode == "ring")
    checked = 0
    for mask in subset_matrix(4)[[0, 2, 6, 14]]:  # {0}, {1}, {0, 1, 2}, all four
        env.reset(seed=2)
        for _ in range(6):
            before = env.unwrapped.state
            _, _, terminated, truncated, info = env.step(mask.astype(np.int8))
            done = info["selected"] & ~info["dropped"]
            if info["cut"] or not done.any():
                continue
            expected = formulas.comm_time_s(
                p, done.sum(), p.rtt_s[done].max(), p.site_tx_s[done].max()
            )
            assert info["comm_s"] == pytest.approx(float(expected), rel=1e-12, abs=1e-12)
            gained = env.unwrapped.state.progress[0] - before.progress[0]
            batch = p.site_batch[done].sum()
            expected = formulas.delta_progress(p, before.progress[0], batch)
            assert gained == pytest.approx(expected, rel=1e-12)
            many = formulas.delta_progress(p, before.progress[0], np.array([[batch, 2 * batch]]))
            assert many.shape == (1, 2) and many[0, 0] == expected  # the same, one by one
            assert many[0, 1] == formulas.delta_progress(p, before.progress[0], 2 * batch)
            checked += 1
            if terminated or truncated:
                break
    assert checked >= 12


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


# --------------------------------------------------------------------------- play_on_copy


def test_play_on_copy_is_the_episode_the_policy_would_play_and_leaves_it_alone(small):
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test")  # with jitter
    for seed in (0, 4):
        env.reset(seed=seed)
        env.step(np.array([1, 1, 0, 0], dtype=np.int8))  # from mid-episode too
        state = env.unwrapped.state.data.copy()
        run = play_on_copy(env, PowerTrip())
        assert np.array_equal(env.unwrapped.state.data, state)  # the episode is unchanged
        requested = []
        policy = PowerTrip()
        policy.reset(env)
        while True:
            mask = policy.act(None, {})
            requested.append(mask != 0)
            _, _, terminated, truncated, info = env.step(mask)
            if terminated or truncated:
                break
        assert run.name == "PowerTrip"
        assert np.array_equal(run.masks, np.array(requested))
        assert run.tta_h == info["tta_h"] and run.success == info["success"]


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


@pytest.mark.parametrize("jitter", [False, True])
def test_beam_planner_starts_from_the_policies_episodes_and_never_loses_to_them(small, jitter):
    """The times it starts from are those of the policies played in the same episode, and a
    beam too narrow to find them itself still plays one of them or better."""
    env = gym.make("PowerTrip-v0", scenario=str(small), split="test", jitter=jitter)
    for seed in SEEDS:
        real = {
            policy.name: play(env, policy, seed)["tta_h"]
            for policy in (PowerTrip(), MyopicOptimal(), BestFixedSet())
        }
        planner = BeamPlanner(width=1, lookahead=1, top_k=1)
        end = play(env, planner, seed)
        assert end["tta_h"] <= min(real.values()) + 1e-9, (seed, end["tta_h"], real)
        assert planner.starts == real, seed
        assert end["tta_h"] == pytest.approx(planner.planned_tta_h, rel=1e-12)
        assert end["rounds"] == len(planner.plan)
        if planner.source != "beam":
            assert end["tta_h"] == real[planner.source]


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
    no module under baselines/ reaches into ``powertrip_env.dynamics`` (or ``powertrip_env``'s
    other internals that hold its tables) beyond the model's formulas
    (``powertrip_env.dynamics.formulas``) and the candidates' layout."""
    import ast
    from pathlib import Path

    allowed = {f"{formulas.__name__}.{name}" for name in formulas.__all__}
    allowed |= {formulas.__name__, *(f"powertrip_env.dynamics.{name}" for name in formulas.__all__)}
    # the candidates' layout (slots and features), not the builder: policies call
    # env.candidates()
    allowed |= {f"{candidates.__name__}.{name}" for name in candidates.LAYOUT}
    # the observation's declared columns, which the documentation site prints (docs_envs)
    allowed.add("powertrip_env.dynamics.features")
    # the online estimates the adaptive rules keep: compiled with the kernel, they read the
    # telemetry and nothing else (``dynamics.estimates``)
    allowed |= {f"{estimates.__name__}.{name}" for name in estimates.__all__}
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
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.startswith("powertrip_env.dynamics") and n not in allowed
            ]
    assert len(list(root.glob("*.py"))) >= 8
    assert not offenders, offenders
