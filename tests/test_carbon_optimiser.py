"""The carbon optimiser's moves that idle (``references.carbon_moves``), the plays from a plan's
state where a move first differs (``improve_plan(suffix=True)``), the time-shift start, and a
toy world where waiting for a clean hour is plainly the cheapest plan."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

from powertrip_env.baselines.carbon import CarbonGreedy
from powertrip_env.baselines.carbon_references import (
    CarbonOptimiser,
    _carbon_cost,
    carbon_neighbours,
    time_shift_carbon,
)
from powertrip_env.baselines.references import (
    _best_move_from_states,
    carbon_moves,
    improve_plan,
    pad_plans,
    play_on_copy,
)
from powertrip_env.dynamics.layout import CUM_BUSY_G, G_PER_J, POWERED, PV_W
from powertrip_env.dynamics.tables import current_row

ID = "PowerTrip-Carbon-v2"
FAST = {"split": "train", "jitter": False}


def test_carbon_moves_are_plans_that_idle() -> None:
    # catches: a move with a row that is not a set (wrong width, not bool), an idle row that
    # requests a site, a move that is all idle, or the inserts, deletions and moves of idle
    # runs missing
    plan = np.zeros((40, 4), dtype=bool)
    plan[:10, :2] = True
    plan[10:20, 1:3] = True  # rounds 20..24 are idle
    plan[25:, 3] = True
    moves = carbon_moves(plan)
    assert moves
    for m in moves:
        assert m.dtype == bool and m.ndim == 2 and m.shape[1] == 4 and m.shape[0] >= 1
        assert m.any()
    gap = np.zeros((4, 4), dtype=bool)
    inserted = np.concatenate([plan[:10], gap, plan[10:]])  # 4 idle rounds before a change
    assert any(m.shape == inserted.shape and (m == inserted).all() for m in moves)
    dropped = np.concatenate([plan[:20], plan[25:]])  # the idle run taken out
    assert any(m.shape == dropped.shape and (m == dropped).all() for m in moves)
    later = np.concatenate([plan[:20], plan[25:29], plan[20:25], plan[29:]])  # moved 4 later
    assert any(m.shape == later.shape and (m == later).all() for m in moves)
    skipped = plan.copy()
    skipped[:4] = False  # a stretch replaced by idle rounds, the rest as it was
    assert any(m.shape == skipped.shape and (m == skipped).all() for m in moves)
    padded = pad_plans(moves, plan.shape[0], 1000)
    assert padded.shape[0] == len(moves)
    for m, p in zip(moves, padded, strict=True):
        assert (p[: m.shape[0]] == m).all() and (p[m.shape[0] :] == m[-1]).all()


@pytest.fixture(scope="module")
def greedy_start() -> tuple[gym.Env, np.ndarray, float]:
    env = gym.make(ID, **FAST)
    env.reset(seed=1)
    run = play_on_copy(env.unwrapped, CarbonGreedy())
    future = env.unwrapped.clairvoyant()
    cost = float(_carbon_cost(future.params, future.simulate(run.masks[None]))[0])
    return env, run.masks, cost


def test_a_move_played_from_where_it_differs_costs_what_it_costs_played_whole(
    greedy_start,
) -> None:
    # catches: a move played from the wrong round's state, or its rounds counted from there
    # and not from the episode's state (the plan kept would then not replay)
    env, plan, _ = greedy_start
    future = env.unwrapped.clairvoyant()
    moves = carbon_neighbours(plan)
    whole = _carbon_cost(future.params, future.simulate(pad_plans(moves, plan.shape[0], 1000)))
    move, value, played = _best_move_from_states(future, plan, moves, _carbon_cost)
    assert value == pytest.approx(whole.min(), rel=1e-12)
    replay = future.simulate(move[:played][None])
    assert replay.ended[0]
    assert float(_carbon_cost(future.params, replay)[0]) == pytest.approx(value, rel=1e-12)


def test_the_idle_moves_only_lower_the_cost(greedy_start) -> None:
    # catches: the second descent keeping a dearer plan than the Optimiser's moves found, or a
    # plan the env does not replay at its cost
    env, plan, cost = greedy_start
    u = env.unwrapped
    first, first_cost = improve_plan(u, plan, cost, 60, _carbon_cost)
    best, best_cost = improve_plan(
        u, first, first_cost, 8, _carbon_cost, moves=carbon_neighbours, suffix=True
    )
    assert best_cost <= first_cost <= cost
    replay = u.clairvoyant().simulate(best[None])
    assert float(_carbon_cost(u.params, replay)[0]) == pytest.approx(best_cost, rel=1e-12)


def test_the_time_shift_start_waits_and_keeps_the_deadline() -> None:
    env = gym.make(ID, **FAST)
    env.reset(seed=0)
    u = env.unwrapped
    run = time_shift_carbon(u)
    future = u.clairvoyant()
    out = future.simulate(run.masks[None])
    assert out.ended[0] and bool(out.success[0]) == run.success
    assert float(_carbon_cost(u.params, out)[0]) == pytest.approx(
        run.carbon_kg + 1000.0 * (not run.success)
    )
    idle = ~run.masks.any(axis=1)
    assert not idle[idle.argmin() :].any()  # the idle rounds come first, then one set
    assert (run.masks[~idle] == run.masks[-1]).all()


@contextlib.contextmanager
def dirty_then_clean(env: gym.Env, dirty_h: float) -> Iterator[None]:
    """The episode's grid made the same on every site: 10 kg/kWh for ``dirty_h`` hours from
    now, then 100 g/kWh; on-site PV removed, so waiting out the dirty hours is plainly
    cheapest when the deadline leaves the time. The tables are shared by every env of the
    scenario, so they are put back on the way out."""
    u = env.unwrapped
    p = u.params
    table = p.table
    saved = table.copy()
    table.setflags(write=True)
    rows = table.shape[0] - 1
    row = int(current_row(p, u.clairvoyant().state.time_s[:1])[0])
    dirty = row + int(dirty_h * 3600.0 / p.interval_s)
    table[:rows, PV_W] = 0.0
    table[:rows, G_PER_J] = 100.0 / 3.6e6
    table[row:dirty, G_PER_J] = 10_000.0 / 3.6e6
    busy_w = table[:rows, POWERED] * p.gpu_wall_w
    table[1:, CUM_BUSY_G] = np.cumsum(busy_w * table[:rows, G_PER_J] * p.interval_s, axis=0)
    try:
        yield
    finally:
        table[:] = saved
        table.setflags(write=False)


def test_where_a_clean_hour_follows_a_dirty_one_the_optimiser_waits_for_it() -> None:
    # catches: a search that never idles (today's moves keep every round busy), or an idling
    # plan the env does not replay at its cost
    env = gym.make(ID, **FAST)
    env.reset(seed=0)
    with dirty_then_clean(env, 2.0):
        optimiser = CarbonOptimiser(starts=[CarbonGreedy()], iterations=20, idle_iterations=12)
        optimiser.reset(env.unwrapped)
        plan = np.asarray(optimiser.plan)
        # at least half an hour of waiting (this episode's deadline leaves room for about one)
        assert (~plan.any(axis=1)).sum() >= 6
        busy = [cost for name, cost in optimiser.starts.items() if name not in {"TimeShiftCarbon"}]
        assert optimiser.planned_tta_h < min(busy)
        carbon_kg, terminated, truncated = 0.0, False, False
        for mask in plan:
            _, _, terminated, truncated, info = env.step(mask.astype(np.int8))
            carbon_kg = float(info["carbon_kg"])
            if terminated or truncated:
                break
        assert terminated
        assert carbon_kg == pytest.approx(optimiser.planned_tta_h, rel=1e-9)
