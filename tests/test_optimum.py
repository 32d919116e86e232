"""The bracket on the optimum (baselines/references.py): the optimiser's plan is feasible and no
slower than the beam it starts from; each lower bound holds below every policy and the plan, on
every suite task, with jitter on and off; the bound that charges joins is the tighter one."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env
from powertrip_env.baselines.lower_bound import (
    JOIN_BOUND_MAX_SITES,
    join_bound_h,
    lower_bound_h,
    rate_bound_h,
    round_bound_h,
)
from powertrip_env.baselines.references import Optimiser, improve_plan, plan_moves, play_on_copy
from powertrip_env.baselines.registry import make_policy

TOLERANCE_H = 1e-9
# The flagship in every run; the suite's other tasks (seconds of clairvoyant planning per
# episode each) in CI's slow stage.
SUITE = [
    pytest.param(env_id, marks=[] if env_id == "PowerTrip-v0" else [pytest.mark.slow])
    for env_id in powertrip_env.SUITE_IDS
]


def _runs(runs, env_id: str, jitter: bool, names: tuple[str, ...], seed: int) -> dict[str, float]:
    """Each policy's TTA from ``reset(seed=seed)``, played by ``play_on_copy`` once per test run
    (``reference_runs``, tests/conftest.py: test_benchmark.py plays the Optimiser there too)."""
    return {name: runs(env_id, jitter, seed, name).run.tta_h for name in names}


@pytest.mark.parametrize("jitter", [False, True])
@pytest.mark.parametrize("env_id", SUITE)
def test_every_bound_holds_below_every_policy_and_the_plan(
    env_id: str, jitter: bool, reference_runs
) -> None:
    env = gym.make(env_id, split="test", jitter=jitter)
    p = env.unwrapped.params
    names = ("Optimiser", "HorizonRule", "PowerTrip")
    if p.n_sites <= 16:
        names += ("MyopicOptimal",)
    seed = 1 if jitter else 0
    ttas = _runs(reference_runs, env_id, jitter, names, seed)
    env.reset(seed=seed)
    bounds = {"rate": rate_bound_h(env.unwrapped), "round": round_bound_h(env.unwrapped)}
    if not p.nonblocking and p.n_sites <= JOIN_BOUND_MAX_SITES:
        bounds["join"] = join_bound_h(env.unwrapped)
    assert lower_bound_h(env.unwrapped) == max(bounds.values())
    for name, bound in bounds.items():
        assert 0.0 < bound <= min(ttas.values()) + TOLERANCE_H, (name, bound, ttas)
    assert ttas["Optimiser"] == min(ttas.values())


def test_charging_joins_tightens_the_bound_on_the_flagship() -> None:
    """The flagship's joins cost minutes: the rate bound lets every round pick the best sites
    for free and sits 14% below the plan; the DP bounds close most of it (measured over 30
    test episodes: docs/benchmark.md)."""
    env = gym.make("PowerTrip-v0", split="test", jitter=False)
    env.reset(seed=2)
    rate, rounds, joins = (f(env.unwrapped) for f in (rate_bound_h, round_bound_h, join_bound_h))
    plan = play_on_copy(env, make_policy("Optimiser", 10)).tta_h
    assert rate < rounds < joins <= plan
    assert plan / joins < 1.05 < plan / rate


def test_the_optimiser_replays_its_plan_and_never_loses_to_its_beam(reference_runs) -> None:
    env = gym.make("PowerTrip-v0", split="test", jitter=True)
    # make_policy("Optimiser", 10) played by play_on_copy from reset(seed=1), as the bounds' test
    # plays it (tests/conftest.py)
    run, optimiser = reference_runs("PowerTrip-v0", True, 1, "Optimiser")
    assert isinstance(optimiser, Optimiser)
    beam_tta = optimiser.planned_tta_h + optimiser.improved_h
    assert run.tta_h == pytest.approx(optimiser.planned_tta_h, rel=1e-12)  # replayed exactly
    assert run.tta_h <= beam_tta + TOLERANCE_H
    assert run.tta_h <= min(optimiser.starts.values()) + TOLERANCE_H
    env.reset(seed=1)
    beam = play_on_copy(env, make_policy("BeamPlanner", 10)).tta_h
    assert beam == pytest.approx(beam_tta, rel=1e-12)


def test_plan_moves_shift_changes_and_toggle_sites() -> None:
    a, b = np.array([1, 1, 0], bool), np.array([0, 1, 1], bool)
    plan = np.array([a, a, a, b, b])
    moves = plan_moves(plan)
    as_lists = {tuple(map(tuple, m.astype(int))) for m in moves}
    earlier = tuple(map(tuple, np.array([a, a, b, b, b]).astype(int)))
    later = tuple(map(tuple, np.array([a, a, a, a, b]).astype(int)))
    toggled = tuple(map(tuple, np.array([a | [0, 0, 1]] * 3 + [b, b]).astype(int)))
    assert {earlier, later, toggled} <= as_lists
    assert not any((m == plan).all() for m in moves)  # the plan itself is no move
    assert all(m.any(axis=1).all() for m in moves)  # no move empties a segment
    assert plan_moves(np.array([a])).shape[0] == 3  # one segment: toggle each site
    assert plan_moves(np.array([[True, False]])).shape[0] == 1  # never the empty set


def test_improve_plan_only_accepts_a_strictly_faster_plan() -> None:
    env = gym.make("PowerTrip-v0", split="test", jitter=False)
    env.reset(seed=0)
    start = play_on_copy(env, make_policy("PowerTrip", 10))
    plan, tta = improve_plan(env.unwrapped, start.masks, start.tta_h, iterations=3)
    assert tta < start.tta_h
    replay = env.unwrapped.clairvoyant().simulate(plan[None])
    assert float(replay.tta_h[0]) == pytest.approx(tta, rel=1e-12)
    same, same_tta = improve_plan(env.unwrapped, start.masks, start.tta_h, iterations=0)
    assert same_tta == start.tta_h and (same == start.masks).all()


def test_optimiser_refuses_negative_iterations() -> None:
    with pytest.raises(ValueError, match="iterations=-1"):
        Optimiser(iterations=-1)
