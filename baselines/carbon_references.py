"""Clairvoyant references for the carbon objective: the searches of ``baselines/references.py``
scored on the carbon cost (``carbon_cost_kg``: the episode's grid carbon, and ``carbon_ref_kg``
for a missed deadline, ``rewards.CarbonCost``'s return in kilograms).

* ``BestFixedCarbon`` knows the whole episode in hindsight and plays the one site set of least
  carbon cost.
* ``CarbonOptimiser`` starts from the complete episodes of the deployable baselines, the best
  fixed sets, a fixed set after a wait (``time_shift_carbon``) and idling to the deadline, and
  improves the cheapest with the ``Optimiser``'s moves and moves that wait
  (``references.carbon_moves``): the carbon tasks' normaliser, never beaten by a shipped
  policy.

``baselines/carbon_bound.py`` bounds them from below. Neither is a deployable policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powertrip_env.baselines.references import (
    BeamPlanner,
    BestFixedSet,
    PolicyRun,
    carbon_moves,
    fixed_set_candidates,
    improve_plan,
    plan_moves,
)
from powertrip_env.units import g_to_kg, h_to_s


def carbon_cost_from_kg(params: Any, carbon_kg: Any, success: Any) -> np.ndarray:
    """The carbon objective of episodes that ended (``rewards.CarbonCost``'s return times
    ``−carbon_ref_kg``): their grid carbon ``carbon_kg`` (as ``info["carbon_kg"]`` and the
    evaluation's episodes give it), plus ``params.carbon_ref_kg`` for each that missed the
    deadline (``priced_misses_kg``)."""
    return priced_misses_kg(carbon_kg, success, params.carbon_ref_kg)


def priced_misses_kg(carbon_kg: Any, success: Any, carbon_ref_kg: float) -> np.ndarray:
    """``carbon_kg`` plus ``carbon_ref_kg`` for each episode that missed the deadline: the
    carbon cost, for callers that hold the price rather than the scenario's parameters."""
    return np.asarray(carbon_kg) + carbon_ref_kg * ~np.asarray(success, dtype=bool)


def carbon_cost_kg(params: Any, carbon_g: Any, success: Any) -> np.ndarray:
    """``carbon_cost_from_kg`` of episodes whose carbon is the kernel's grams
    (``state.carbon_g``)."""
    return carbon_cost_from_kg(params, g_to_kg(np.asarray(carbon_g)), success)


def _carbon_cost(params: Any, out: Any) -> np.ndarray:
    """The carbon objective of plans played to the end (``carbon_cost_kg``); inf for a plan whose
    episode had not ended when its rounds ran out, whose cost the env would not reproduce (it
    goes on playing the last set)."""
    return np.where(out.ended, carbon_cost_kg(params, out.state.carbon_g, out.success), np.inf)


def idle_plan(env: Any) -> PolicyRun:
    """No site in any round from the env's current state to the deadline, as a plan: it emits
    what the sites already joined draw while they wait, if anything, and misses. It is the cheapest
    plan where the deadline is out of reach, so the carbon references start from it too."""
    future = env.clairvoyant()
    out = future.simulate(np.zeros((1, env.n_sites), dtype=bool))
    rounds = max(int(out.state.rounds[0]) - env.decision_view().rounds, 1)
    return PolicyRun(
        "Idle",
        np.zeros((rounds, env.n_sites), dtype=bool),
        float(out.tta_h[0]),
        bool(out.success[0]),
        g_to_kg(float(out.state.carbon_g[0])),
    )


def best_fixed_carbon(env: Any) -> PolicyRun:
    """The fixed set with the least carbon cost (``carbon_cost_kg``) from the env's current
    state, as a plan: ``best_fixed_set`` scored on the carbon objective (ties: fewer sites, then
    the lower candidate index). Every site set for N ≤ 16, else the rankings' prefixes."""
    future = env.clairvoyant()
    masks = fixed_set_candidates(env)
    out = future.simulate(masks)
    cost = carbon_cost_kg(future.params, out.state.carbon_g, out.success)
    best = int(np.lexsort((np.arange(masks.shape[0]), masks.sum(axis=1), cost))[0])
    rounds = max(int(out.state.rounds[best]) - env.decision_view().rounds, 1)
    plan = np.repeat(masks[best][None, :], rounds, axis=0)
    return PolicyRun(
        "BestFixedCarbon",
        plan,
        float(out.tta_h[best]),
        bool(out.success[best]),
        g_to_kg(float(out.state.carbon_g[best])),
    )


def time_shift_carbon(env: Any, every: int = 3) -> PolicyRun:
    """The cheapest plan (``carbon_cost_kg``) that idles k rounds from the env's current state,
    then plays one fixed set to the end: the sets that keep the deadline when played now, k
    every ``every`` rounds up to the time each leaves to spare (an idle round lasts
    ``idle_s``), all in one batch. In hindsight it waits for the cleanest window a fixed set
    has time for: an upper end that idles in dirty hours. Ties: the shorter wait, then the
    lower candidate index. Without a set that keeps the deadline, the best fixed set."""
    future = env.clairvoyant()
    p = future.params
    now = int(future.state.rounds[0])
    masks = fixed_set_candidates(env)
    fixed = future.simulate(masks)
    ok = np.flatnonzero(fixed.success)
    if ok.size == 0:
        return best_fixed_carbon(env)
    spare = (float(future.state.budget_s[0]) - h_to_s(fixed.tta_h[ok])) / p.idle_s
    waits = [np.arange(0, int(k) + 1, every) for k in spare]
    wait = np.concatenate(waits)
    which = np.concatenate([np.full(w.size, j) for j, w in zip(ok, waits, strict=True)])
    length = int(wait.max()) + int(fixed.state.rounds[ok].max()) - now + 16
    plans = np.repeat(masks[which][:, None, :], length, axis=1)
    plans[np.arange(length)[None, :] < wait[:, None]] = False
    out = future.simulate(plans)
    cost = _carbon_cost(p, out)
    best = int(np.lexsort((np.arange(cost.size), wait, cost))[0])
    rounds = max(int(out.state.rounds[best]) - now, 1)
    return PolicyRun(
        "TimeShiftCarbon",
        plans[best, :rounds],
        float(out.tta_h[best]),
        bool(out.success[best]),
        g_to_kg(float(out.state.carbon_g[best])) if np.isfinite(cost[best]) else float("nan"),
    )


class BestFixedCarbon(BestFixedSet):
    """CLAIRVOYANT REFERENCE: ``BestFixedSet`` on the carbon objective: the one set whose
    episode, in hindsight, has the least grid carbon, a missed deadline priced in
    (``best_fixed_carbon``). The carbon tasks' headroom is its cost over ``CarbonOptimiser``'s."""

    name = "BestFixedCarbon"

    @staticmethod
    def best(env: Any) -> PolicyRun:
        return best_fixed_carbon(env)


class CarbonOptimiser(BeamPlanner):
    """CLAIRVOYANT REFERENCE: the plan with the least carbon cost found (grid carbon, a missed
    deadline priced at ``carbon_ref_kg``: ``carbon_cost_kg``), the carbon tasks' optimiser.

    It starts from the complete episodes ``BeamPlanner`` starts from (PowerTrip, MyopicOptimal
    and every deployable baseline it is given, the carbon rules among them, each played on a
    copy of the episode), from the best fixed sets for time and for carbon, from a fixed set
    after the wait that suits it best (``time_shift_carbon``) and from idling to the deadline
    (``idle_plan``: the cheapest plan where the deadline is out of reach), and takes the
    cheapest. Two descents on the carbon cost (``improve_plan(objective="carbon")``), the
    cheaper kept: ``Optimiser``'s moves for at most ``iterations`` steps, then those and the
    moves that wait (``carbon_neighbours``) for at most ``idle_iterations``; and the latter
    from the start for at most ``idle_iterations``. Every step strictly lowers the cost and
    every plan it keeps is replayed exactly by the env, so its cost is feasible and at most
    every starting policy's in the same episode: ``reference_never_beaten`` holds by
    construction. There is no beam: the beam scores children by the time they take, not by
    what they emit. ``planned_tta_h`` holds the plan's cost (kg), ``starts`` every start's.
    """

    name = "CarbonOptimiser"

    def __init__(
        self, *args: Any, iterations: int = 60, idle_iterations: int = 12, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if iterations < 0 or idle_iterations < 0:
            raise ValueError(
                f"CarbonOptimiser: iterations={iterations} and idle_iterations={idle_iterations} "
                "must be >= 0"
            )
        self.iterations = iterations
        self.idle_iterations = idle_iterations
        self.improved_kg = 0.0

    def search(self) -> tuple[list[np.ndarray], float]:
        future = self.env.clairvoyant()
        self._first_round = int(future.state.rounds[0])
        runs = [
            *self.starting_plans(),
            best_fixed_carbon(self.env),
            time_shift_carbon(self.env),
            idle_plan(self.env),
        ]
        costs = [_plan_cost(future, run) for run in runs]
        self.starts = {run.name: cost for run, cost in zip(runs, costs, strict=True)}
        first = int(np.argmin(costs))  # ties: the earlier in the list
        plan, cost, self.source = runs[first].masks, costs[first], runs[first].name
        # two descents, the cheaper kept: the Optimiser's moves to a local optimum, then those
        # that idle too; and both kinds from the start (they reach different optima). The idle
        # moves have several lengths and are played from the plan's state where each differs.
        best, better = improve_plan(self.env, plan, cost, self.iterations, _carbon_cost)
        for origin, value in ((best, better), (plan, cost)):
            found, lower = improve_plan(
                self.env,
                origin,
                value,
                self.idle_iterations,
                _carbon_cost,
                moves=carbon_neighbours,
                suffix=True,
            )
            if lower < better:
                best, better = found, lower
        if better < cost:
            plan, self.source = best, "local search"
        self.improved_kg = cost - min(better, cost)
        return list(plan), min(better, cost)


def carbon_neighbours(plan: np.ndarray) -> list[np.ndarray]:
    """The carbon optimiser's moves of ``plan``: the ``Optimiser``'s (``plan_moves``), then
    those that idle (``carbon_moves``)."""
    return [*plan_moves(plan), *carbon_moves(plan)]


def _plan_cost(future: Any, run: PolicyRun) -> float:
    """A complete plan's carbon cost: from the episode it came from (its kg as the env reported
    them), else replayed."""
    if np.isfinite(run.carbon_kg):
        return float(carbon_cost_from_kg(future.params, run.carbon_kg, run.success))
    out = future.simulate(run.masks[None])
    return float(_carbon_cost(future.params, out)[0])
