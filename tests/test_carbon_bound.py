"""``carbon_bound_kg``: a carbon cost no policy beats on the carbon tasks, and its three steps.

The bound is checked against policies played to the end (PowerTrip, CarbonGreedy, AllSites) on
both carbon tracks, and must not be trivial there. Each step is then checked on its own: the
batch units against their closed form, the cells against the kernel's cumulative tables (PV
and the least jitter included), the knapsack against what any selection of cells costs, and a
deadline that cannot be met against the price of a miss.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.carbon_bound import (
    CARBON_BOUND,
    batch_units_needed,
    carbon_bound_kg,
    carbon_bound_rows,
    cells,
    compute_jitter_min,
    least_grams,
    round_lp_grams,
)
from powertrip_env.baselines.registry import make_policy
from powertrip_env.dynamics import episode_unknowns
from powertrip_env.dynamics.layout import CUM_BUSY_G, CUM_SAMPLES, PV_W

POLICIES = ("PowerTrip", "CarbonGreedy", "AllSites")


class _World:
    """A stand-in env whose ``clairvoyant()`` is a given future (``carbon_bound_kg`` reads
    nothing else), so one future can be bounded under changed constants."""

    def __init__(self, future: Any) -> None:
        self.future = future

    def clairvoyant(self) -> Any:
        return self.future


def _with(future: Any, budget_s: float | None = None, **constants: float) -> _World:
    """``future`` with the scenario's scalars ``constants`` and the episode's time budget."""
    state = future.state if budget_s is None else future.state.replace(budget_s=budget_s)
    params = future.params.with_constants(**constants)
    return _World(dataclasses.replace(future, params=params, state=state))


def _play(env: gym.Env, name: str, seed: int, rounds: int | None = None) -> tuple[float, bool]:
    """``name`` from ``reset(seed)`` to the episode's end (or ``rounds`` rounds): its carbon
    cost (grid carbon, plus ``carbon_ref_kg`` for a miss) and whether it reached the target."""
    obs, info = env.reset(seed=seed)
    policy = make_policy(name, n_sites=env.unwrapped.n_sites, seed=0)
    policy.reset(env)
    return _go_on(env, policy, obs, info, rounds)


def _go_on(
    env: gym.Env, policy: Any, obs: Any, info: dict[str, Any], rounds: int | None = None
) -> tuple[float, bool]:
    """``policy`` on from the episode's current round (``_play``'s cost and success)."""
    terminated = False
    for _ in range(rounds if rounds is not None else 10**6):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            break
    ref = env.unwrapped.params.carbon_ref_kg
    return float(info["carbon_kg"]) + ref * (not terminated), bool(terminated)


@pytest.fixture(scope="module")
def carbon_env() -> gym.Env:
    env = gym.make("PowerTrip-Carbon-v2", split="train", jitter=False)
    yield env
    env.close()


@pytest.fixture(scope="module")
def measured_env() -> gym.Env:
    env = gym.make("PowerTrip-Carbon-Measured-v2", split="train", jitter=False)
    yield env
    env.close()


def _check_below_policies(env: gym.Env, seed: int) -> dict[str, float]:
    env.reset(seed=seed)
    started = time.perf_counter()
    bound = carbon_bound_kg(env)
    elapsed = time.perf_counter() - started
    assert 0.0 < bound < env.unwrapped.params.carbon_ref_kg  # not the trivial bound
    ratios = {}
    for name in POLICIES:
        cost, _ = _play(env, name, seed)
        assert bound <= cost + 1e-9, (name, bound, cost)
        ratios[name] = round(bound / cost, 3)
    print(f"seed {seed}: bound {bound:.2f} kg in {elapsed * 1e3:.2f} ms, bound/cost {ratios}")
    return ratios


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_is_below_every_policys_cost(carbon_env: gym.Env, seed: int) -> None:
    _check_below_policies(carbon_env, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_bound_is_below_every_policys_cost_on_the_measured_track(
    measured_env: gym.Env, seed: int
) -> None:
    _check_below_policies(measured_env, seed)


def test_bound_reads_the_folded_world_on_the_measured_track(measured_env: gym.Env) -> None:
    # pace and noise are folded into the clairvoyant params (η·pace, B0·noise), the quota
    # divided by the throughput factor, and the state's own factors set to 1: the bound reads
    # each once
    measured_env.reset(seed=0)
    stated = measured_env.unwrapped.params
    future = measured_env.unwrapped.clairvoyant()
    drawn = future.drawn()
    assert np.all(episode_unknowns(future.state) == 1.0)
    assert drawn.pace != 1.0 and drawn.noise != 1.0
    assert future.params.eta_local == pytest.approx(stated.eta_local * drawn.pace)
    assert future.params.noise_b0 == pytest.approx(stated.noise_b0 * drawn.noise)
    np.testing.assert_allclose(future.params.quota, stated.quota / drawn.throughput)


def test_bound_holds_mid_episode_and_counts_what_was_emitted(carbon_env: gym.Env) -> None:
    # after 60 rounds of CarbonGreedy the bound is more than the episode emitted so far, and at
    # most what the rest of the episode brings its cost to
    obs, info = carbon_env.reset(seed=1)
    policy = make_policy("CarbonGreedy", n_sites=carbon_env.unwrapped.n_sites, seed=0)
    policy.reset(carbon_env)
    for _ in range(60):
        obs, _, terminated, truncated, info = carbon_env.step(policy.act(obs, info))
        assert not (terminated or truncated)
    future = carbon_env.unwrapped.clairvoyant()
    emitted = float(future.state.carbon_g[0]) / 1000.0
    assert emitted > 0.0 and future.state.progress[0] > 0.0
    bound = carbon_bound_kg(carbon_env)
    assert bound > emitted
    cost, _ = _go_on(carbon_env, policy, obs, info)
    assert bound <= cost + 1e-9


def test_batch_units_have_their_closed_form(carbon_env: gym.Env) -> None:
    carbon_env.reset(seed=0)
    future = carbon_env.unwrapped.clairvoyant()
    p = future.params
    per_round = p.local_steps * p.eta_local
    b_min, b_all = float(p.site_batch.min()), float(p.site_batch.sum())
    # γ = 0: B_noise is B0 everywhere, and the integral is a rectangle
    flat = _with(future, noise_gamma=0.0).future
    need = flat.progress_needed
    expected = need * (p.noise_b0 + b_min) / per_round
    assert batch_units_needed(flat) == pytest.approx(expected, rel=1e-12)
    # γ = 1 (the scenario's): B0 at the progress ΔP_max below, never below now (0), so a
    # rectangle up to ΔP_max and a trapezoid after it; the lower Riemann sum stays below
    assert p.noise_gamma == 1.0 and future.state.progress[0] == 0.0
    need = future.progress_needed
    d = per_round / (1.0 + p.noise_b0 / b_all)
    integral = (b_min + p.noise_b0) * need + p.noise_b0 / p.noise_p_b * (need - d) ** 2 / 2.0
    units = batch_units_needed(future)
    assert integral / per_round * (1 - 1e-3) < units <= integral / per_round


def test_cells_are_the_kernels_busy_samples_and_carbon() -> None:
    # with jitter (the least factor below 1) and PV (covering part of the busy draw): the cells
    # are the cumulative tables' differences, the units per sample site_batch / (quota · ε_min)
    env = gym.make("PowerTrip-Carbon-v2", split="train", jitter=True)
    env.reset(seed=4)
    future = env.unwrapped.clairvoyant()
    p, state = future.params, future.state
    jitter = future.jitter(p.max_rounds)[:, : p.n_sites]
    assert compute_jitter_min(future) == jitter.min() < 1.0 < jitter.max()
    first = int(state.time_s[0] / p.interval_s)
    last = int((state.start_s[0] + state.budget_s[0]) / p.interval_s)
    rows = slice(first, last + 1)
    samples = np.diff(p.table[first : last + 2, CUM_SAMPLES], axis=0)
    grams = np.diff(p.table[first : last + 2, CUM_BUSY_G], axis=0)
    units, cell_grams = cells(future)
    assert units.shape == (last - first + 1, p.n_sites)
    np.testing.assert_allclose(cell_grams, grams, rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(units, samples * p.site_batch / (p.quota * jitter.min()), rtol=1e-9)
    assert np.any((p.table[rows, PV_W] > 0.0) & (samples > 0.0))  # ignoring PV would differ
    env.close()


def test_knapsack_takes_the_cheapest_cells_first(carbon_env: gym.Env) -> None:
    carbon_env.reset(seed=2)
    future = carbon_env.unwrapped.clairvoyant()
    units, grams = (a.ravel() for a in cells(future))
    held = units > 0.0
    units, grams = units[held], grams[held]
    price = grams / units
    cheapest = int(np.argmin(price))
    # less than the cheapest cell holds: all of it at the cheapest price
    small = units[cheapest] / 2.0
    assert least_grams(future, small) == pytest.approx(small * price[cheapest], rel=1e-12)
    # everything: every cell, and more than everything is out of reach
    assert least_grams(future, units.sum()) == pytest.approx(grams.sum(), rel=1e-9)
    assert least_grams(future, units.sum() * 1.001) == math.inf
    assert least_grams(future, 0.0) == 0.0
    # no selection of cells that holds U costs less than the knapsack
    need = batch_units_needed(future)
    best = least_grams(future, need)
    rng = np.random.default_rng(0)
    for _ in range(200):
        order = rng.permutation(units.size)
        filled = np.cumsum(units[order])
        k = int(np.searchsorted(filled, need))
        before = filled[k - 1] if k else 0.0
        spent = grams[order[:k]].sum() + grams[order[k]] * (need - before) / units[order[k]]
        assert best <= spent + 1e-9
    # and the cells the knapsack takes, whole, cost what it says (up to the last one's part)
    order = np.argsort(price, kind="stable")
    filled = np.cumsum(units[order])
    k = int(np.searchsorted(filled, need))
    assert grams[order[:k]].sum() <= best <= grams[order[: k + 1]].sum()
    # the dearest cells first would cost more: the order matters
    dear = order[::-1]
    k = int(np.searchsorted(np.cumsum(units[dear]), need))
    assert grams[dear[:k]].sum() > 2.0 * best


def test_a_deadline_out_of_reach_costs_the_price_of_a_miss(
    carbon_env: gym.Env, tmp_path: Path
) -> None:
    # the same episode start with a budget of 2 h: the cells before it cannot hold U_min
    carbon_env.reset(seed=0)
    future = carbon_env.unwrapped.clairvoyant()
    short = _with(future, budget_s=2 * 3600.0)
    assert least_grams(short.future, batch_units_needed(short.future)) == math.inf
    assert carbon_bound_kg(short) == future.params.carbon_ref_kg
    # a scenario that states it: every policy misses and pays at least the price
    path = tmp_path / "short.toml"
    path.write_text('extends = "carbon"\n\n[episode]\ntime_budget_h = 2.0\n', encoding="utf-8")
    env = gym.make("PowerTrip-Carbon-v2", scenario=str(path), split="train", jitter=False)
    env.reset(seed=0)
    ref = env.unwrapped.params.carbon_ref_kg
    assert carbon_bound_kg(env) == ref
    for name in ("AllSites", "CarbonGreedy"):
        cost, reached = _play(env, name, 0)
        assert not reached and ref <= cost
    # part way, the bound is the price plus what was emitted
    _play(env, "AllSites", 0, rounds=3)
    emitted = float(env.unwrapped.clairvoyant().state.carbon_g[0]) / 1000.0
    assert emitted > 0.0
    assert carbon_bound_kg(env) == pytest.approx(ref + emitted, rel=1e-12)
    env.close()


def test_fixed_time_rounds_get_the_trivial_bound(carbon_env: gym.Env) -> None:
    carbon_env.reset(seed=0)
    assert carbon_bound_kg(_with(carbon_env.unwrapped.clairvoyant(), fixed_time=1.0)) == 0.0


def test_bound_rows_are_the_evaluated_episodes(carbon_env: gym.Env) -> None:
    rows = carbon_bound_rows(carbon_env, 2, seed=5)
    assert list(rows.columns) == ["policy", "episode", "seed", "cost_kg"]
    assert rows["policy"].tolist() == [CARBON_BOUND, CARBON_BOUND]
    assert rows["seed"].tolist() == [5, 6]
    for e in range(2):
        carbon_env.reset(seed=5 + e)  # evaluate's episode e of seed 5
        assert rows["cost_kg"][e] == carbon_bound_kg(carbon_env)


# --------------------------------------------------------------------------- the round LP


@pytest.mark.parametrize(
    ("env_id", "seed"), [("PowerTrip-Carbon-v2", 1), ("PowerTrip-Carbon-Measured-v2", 0)]
)
def test_round_lp_is_below_the_clairvoyant_plan_and_above_the_knapsack(
    env_id: str, seed: int
) -> None:
    # the benchmark's episodes (test split, no jitter, reset with the benchmark's seed 0 + e):
    # the bound is at most CarbonOptimiser's cost and CarbonGreedy's, and at least the knapsack
    env = gym.make(env_id, split="test", jitter=False)
    env.reset(seed=seed)
    future = env.unwrapped.clairvoyant()
    knapsack = least_grams(future, batch_units_needed(future)) / 1000.0
    lp = round_lp_grams(future) / 1000.0
    bound = carbon_bound_kg(env)
    assert bound == pytest.approx(max(knapsack, lp), rel=1e-12)
    assert lp > knapsack  # the LP tightens it here
    for name in ("CarbonOptimiser", "CarbonGreedy"):
        cost, _ = _play(env, name, seed)
        assert bound <= cost + 1e-9, (name, bound, cost)
    env.close()


def _toy_future(
    rate: list[float], busy_g: list[float], idle_g: list[float], budget_s: float, real: Any
) -> Any:
    """A world of constant rate and prices per site: γ = 0 (B_noise = B0), a ring all-reduce
    (a lone site exchanges nothing), no jitter, every row alike."""
    from types import SimpleNamespace

    n, rows, iv = len(rate), 2000, 300.0
    r = np.broadcast_to(np.array(rate, float), (rows, n)).copy()
    cum_samples = np.zeros((rows + 1, n))
    cum_samples[1:] = np.cumsum(r * iv, axis=0)
    powered = np.full((rows, n), 10.0)
    wall = np.array(busy_g, float) / 10.0  # g_per_j = 1: a GPU's wall watts are its grams/s
    p = SimpleNamespace(
        consts=real.params.consts,  # the scenario's ring all-reduce
        n_sites=n,
        interval_s=iv,
        rows=rows,
        max_rounds=1000,
        fixed_time=False,
        moving=False,
        quota=np.full(n, 1000.0),
        site_batch=np.full(n, 512.0),
        join_s=np.full(n, 60.0),
        rtt_s=np.full(n, 0.01),
        site_tx_s=np.full(n, 5.0),
        aggregation_s=5.0,
        rate=r,
        powered=powered,
        gpu_wall_w=wall,
        idle_w_per_gpu=np.array(idle_g, float) / 10.0,
        pv_w=np.zeros((rows, n)),
        g_per_j=np.ones((rows, n)),
        cum_samples=cum_samples,
        local_steps=500,
        eta_local=0.9,
        noise_b0=3500.0,
        noise_p_b=22500.0,
        noise_gamma=0.0,
        carbon_ref_kg=1000.0,
    )
    state = SimpleNamespace(
        time_s=np.array([3000.0]),
        start_s=np.array([3000.0]),
        budget_s=np.array([budget_s]),
        progress=np.array([0.0]),
        carbon_g=np.array([0.0]),
        rounds=np.array([0.0]),
    )
    return SimpleNamespace(
        params=p,
        state=state,
        progress_needed=4500.0,
        jitter=lambda rounds: np.empty((0, n + 1)),
        finish_s=lambda begin, work: begin + np.asarray(work) / r[0],
    )


def test_round_lp_on_a_toy_world_is_its_hand_computed_cost(carbon_env: gym.Env) -> None:
    carbon_env.reset(seed=0)
    real = carbon_env.unwrapped.clairvoyant()
    # one site: 100 samples/s, quota 1000 → 10 s of compute, then 5 s of aggregation (a lone
    # site exchanges nothing in a ring); 2 g/s busy, 0.5 g/s idle. B_noise = 3500 throughout,
    # so every round teaches 450 / (1 + 3500/512) and the target (4500) takes that many rounds
    rounds = 4500.0 / (450.0 / (1.0 + 3500.0 / 512.0))
    future = _toy_future([100.0], [2.0], [0.5], 36 * 3600.0, real)
    expected = rounds * (10.0 * 2.0 + 5.0 * 0.5)
    assert round_lp_grams(future) == pytest.approx(expected, rel=1e-6)
    # the knapsack charges the busy samples alone at one site-batch per round: less
    units = batch_units_needed(future)
    assert units == pytest.approx(rounds * 512.0, rel=1e-9)
    assert least_grams(future, units) < expected
    # two sites, the second twice as dear: with time to spare, the cheap one alone
    future = _toy_future([100.0, 100.0], [2.0, 4.0], [0.5, 1.0], 36 * 3600.0, real)
    assert round_lp_grams(future) == pytest.approx(expected, rel=1e-6)
    # a deadline shorter than the rounds take: no round fits enough, every policy misses
    short = _toy_future([100.0], [2.0], [0.5], rounds * 15.0 * 0.9, real)
    assert round_lp_grams(short) == math.inf
