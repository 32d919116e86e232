"""The carbon track (docs/carbon.md): reach the target before a deadline with the least grid
carbon, scored on the carbon cost (kg CO2eq, plus ``carbon_ref_kg`` for a missed deadline:
``rewards.CarbonCost``'s return in kilograms).

Its IDs are registered with ``reward_mode="carbon"``. Its deployable baselines gain the carbon
rules (on a measured carbon task their adaptive versions too); its references are
``BestFixedCarbon``, ``PerfectForecastPlanner`` (clairvoyant: the carbon planner on the true
future),
``CarbonOptimiser`` (score 1) and the time ``Optimiser`` (the other end of the trade-off); its
bound is ``carbon_bound_kg``; each task's room is split into a chain (``carbon_chain``:
PowerTrip → the best deployable rule → the perfect forecast → the clairvoyant plan); and a run
draws ``tradeoff.png``, each policy's mean TTA against its mean grid carbon.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from powertrip_env.baselines.carbon_bound import CARBON_BOUND, carbon_bound_rows
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg
from powertrip_env.baselines.registry import (
    ADAPTIVE,
    ADAPTIVE_CARBON,
    INFORMED,
    LOOKAHEAD,
    common_rules,
    policy_names,
)
from powertrip_env.baselines.registry import (
    CARBON as CARBON_RULES,
)
from powertrip_env.dynamics.params import SimParams
from powertrip_env.harness.evaluation.results import ZERO
from powertrip_env.harness.reports import measures, tradeoff
from powertrip_env.harness.tracks.track import (
    Facts,
    Section,
    Track,
    bracket,
    chain_table,
    with_bound_rows,
)
from powertrip_env.units import s_to_h

CARBON_TOP, CARBON_FIXED = "CarbonOptimiser", "BestFixedCarbon"  # the track's references
PERFECT = "PerfectForecastPlanner"  # clairvoyant: the carbon planner on the true future
TIME_TOP = "Optimiser"  # the time optimiser: the other end of the trade-off
TRADEOFF = "tradeoff.png"  # its TTA against carbon, drawn with a run

CARBON_FINAL_POLICIES = ",".join(("PowerTrip", *CARBON_RULES, "HorizonRule", PERFECT, CARBON_TOP))
"""The agents' final table on the carbon track: the paper's heuristic, every carbon rule, the
strongest time rule, the carbon planner on the true future and the clairvoyant plan."""


def deadlines_s(params: SimParams, played: pd.DataFrame) -> np.ndarray:
    """(E,) the time budget of each episode ``played`` (one per episode number), from its
    start time."""
    first = played.drop_duplicates("episode").sort_values("episode")
    unix_s = pd.to_datetime(first["start_time"], utc=True).map(pd.Timestamp.timestamp)
    return params.budget_at(unix_s.to_numpy(dtype=np.float64) - params.trace_t0_s)


class CarbonTrack(Track):
    """The track scored on the carbon cost, bracketed by ``CarbonOptimiser`` and
    ``carbon_bound_kg``."""

    bound_label = CARBON_BOUND

    def bound(self, env: gym.Env, episodes: int, seed: int) -> pd.DataFrame:
        return carbon_bound_rows(env, episodes, seed)

    def values(self, played: pd.DataFrame, params: SimParams) -> pd.Series:
        """The carbon cost of each episode: its grid carbon, and the price of a miss."""
        return pd.Series(
            carbon_cost_from_kg(params, played["carbon_kg"], played["success"]),
            index=played.index,
        )

    def score(
        self,
        env_id: str,
        played: pd.DataFrame,
        bounds: pd.DataFrame | None,
        params: SimParams,
        contenders: list[str],
    ) -> tuple[pd.DataFrame, dict[str, Any]]:
        """A carbon task's frame and facts, scored on the carbon cost (``cost_kg``: grid
        carbon, and the price of a missed deadline) and bracketed by ``CarbonOptimiser`` and
        ``carbon_bound_kg``: ``played`` is ``evaluate``'s episodes, ``bounds`` the bound's rows
        and ``contenders`` the policies the optimiser must not lose to."""
        assert bounds is not None  # bound() always gives rows
        frame = played[["policy", "episode", "start_time", "tta_h", "success", "carbon_kg"]].copy()
        frame["cost_kg"] = self.values(frame, params)
        frame = with_bound_rows(frame, bounds, self.zero, "cost_kg")
        frame.insert(0, "task", env_id)
        cost = frame.pivot(index="episode", columns="policy", values="cost_kg")
        facts = {
            "track": self.name,
            **bracket(
                cost,
                fixed=CARBON_FIXED,
                top=CARBON_TOP,
                bound=CARBON_BOUND,
                unit="kg",
                contenders=contenders,
            ),
            "n_sites": int(params.n_sites),
            # the test episodes' own deadlines (docs/carbon.md, "The deadline"), and the cap
            "deadline_h": float(s_to_h(deadlines_s(params, played).mean())),
            "deadline_cap_h": float(s_to_h(params.time_budget_s)),
            "carbon_ref_kg": float(params.carbon_ref_kg),
        }
        rules = [name for name in self.rules(params.n_sites, params.measured) if name in cost]
        if rules and {self.zero, PERFECT, CARBON_TOP} <= set(cost.columns):
            facts |= carbon_chain(cost.mean(), rules, self.zero)
        return frame, facts

    def sections(self) -> list[Section]:
        return [carbon_lines, carbon_chain_lines]

    def figures(self, episodes: pd.DataFrame, facts: Facts, folder: Path) -> list[str]:
        tradeoff_of(episodes, facts, list(facts), folder / TRADEOFF)
        return [TRADEOFF]


def carbon_lines(facts: Facts) -> list[str]:
    """The carbon tasks' facts (deadline, headroom on the carbon cost, the bracket), one row
    each."""
    if not facts:
        return []
    lines = [
        "| task | sites | deadline (h) | optimiser headroom | optimum ≥ (kg) | optimum ≤ (kg) "
        "| gap | never beaten |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for task, f in facts.items():
        lines.append(
            f"| {task} | {f['n_sites']} | {f['deadline_h']:.1f} | {f['optimiser_headroom']:.3f} "
            f"| {f['optimum_lower_kg']:.1f} | {f['optimum_upper_kg']:.1f} | {f['gap']:.3f} | "
            f"{f['reference_never_beaten']} |"
        )
    return [
        *lines,
        "",
        f"The carbon track is scored on the carbon cost: grid carbon (kg CO2eq), plus "
        f"carbon_ref_kg for an episode that misses the deadline. optimiser headroom = "
        f"{CARBON_FIXED} / {CARBON_TOP}; optimum ≤ is {CARBON_TOP}'s feasible plan, optimum ≥ "
        "the carbon lower bound (carbon_bound_kg).",
        "",
    ]


def carbon_chain(mean: pd.Series, rules: Sequence[str], zero: str = ZERO) -> dict[str, Any]:
    """A carbon task's room, split as the measured track's (``time.room_chain``), from each
    policy's mean carbon cost (kg): PowerTrip → the best of the deployable ``rules`` (the
    least mean cost) → ``PerfectForecastPlanner`` (the carbon planner priced on the true rows)
    → ``CarbonOptimiser`` (the clairvoyant plan), each step with its share of PowerTrip →
    CarbonOptimiser. ``learnable_room`` is the best rule's cost over the perfect forecast's:
    what forecasting the grid and the power better is worth, and what an agent that reads the
    same forecasts may take; the last step is what the plan's shape (rounds, joins, jitter)
    holds beyond it."""
    best = min(rules, key=lambda name: mean[name])
    steps = [("PowerTrip", zero), ("rule", best), ("perfect-forecast", PERFECT)]
    steps += [("optimiser", CARBON_TOP)]
    total = float(mean[zero] - mean[CARBON_TOP])
    chain = [{"step": step, "policy": name, "cost_kg": float(mean[name])} for step, name in steps]
    for before, after in itertools.pairwise(chain):
        after["share"] = (before["cost_kg"] - after["cost_kg"]) / total if total > 0 else 0.0
    return {
        "best_rule": best,
        "perfect_forecast_kg": float(mean[PERFECT]),
        "learnable_room": float(mean[best] / mean[PERFECT]),
        "chain": chain,
    }


def carbon_chain_lines(facts: Facts) -> list[str]:
    """The carbon tasks' room chains (``carbon_chain``), one row each."""
    rows = [(task, f) for task, f in facts.items() if "chain" in f]
    if not rows:
        return []
    heads = {
        "PowerTrip": "PowerTrip (kg)",
        "rule": "best rule (kg)",
        "perfect-forecast": "perfect forecast (kg)",
        "optimiser": "clairvoyant (kg)",
    }
    lines = chain_table(rows, heads, "cost_kg", 1)
    return [
        *lines,
        "",
        f"The carbon track's room, split: each step's policy, its mean carbon cost and (in "
        f"brackets) its share of PowerTrip → {CARBON_TOP}; best rule is the track's deployable "
        f"rule of least mean cost, perfect forecast {PERFECT} (the carbon planner priced on the "
        f"true future); learnable room = best rule / {PERFECT}.",
        "",
    ]


def tradeoff_of(episodes: pd.DataFrame, facts: Facts, tasks: Sequence[str], path: Path) -> None:
    """The carbon tasks' trade-off (``tradeoff.tradeoff_figure``): every policy's mean TTA
    against its mean grid carbon, the references' Pareto front marked (the time optimiser at
    one end, the carbon optimiser at the other), the deadline drawn."""
    part = episodes[episodes["task"].isin(tasks) & (episodes["policy"] != CARBON_BOUND)]
    means = tradeoff.means_of(part[["task", "policy", "episode", "tta_h", "carbon_kg", "success"]])
    means["deadline_h"] = means["task"].map({task: facts[task]["deadline_h"] for task in tasks})
    named = {ZERO, *LOOKAHEAD, *CARBON_RULES, "AllSites", "FedZeroLike"}
    rules = {name for task in tasks for name in policy_names(facts[task]["n_sites"])}
    # the rules worth a name, and every agent (a --model: no rule's name)
    label = [name for name in pd.unique(means["policy"]) if name in named or name not in rules]
    tradeoff.tradeoff_figure(means, path, [TIME_TOP, CARBON_FIXED, CARBON_TOP], label=label)


def _rules(n_sites: int, measured: bool) -> list[str]:
    """The common rules, the carbon rules, and on a measured task both's adaptive versions."""
    return [
        *common_rules(n_sites),
        *(ADAPTIVE if measured else ()),
        *CARBON_RULES,
        *(ADAPTIVE_CARBON if measured else ()),
    ]


CARBON = CarbonTrack(
    "carbon",
    title="Leaderboard: the carbon track",
    rules=_rules,
    told=lambda measured: list(INFORMED) if measured else [],
    references=(TIME_TOP, CARBON_FIXED, PERFECT, CARBON_TOP),
    top=CARBON_TOP,
    objective="carbon",
    measure=measures.CARBON,
    final_policies=CARBON_FINAL_POLICIES,
    about="task of the carbon track: reach the target before the deadline with the least grid "
    "carbon (`powertrip_env.CARBON_SUITE_IDS`, [the carbon track](../carbon.md))",
)
"""Reach the target before the deadline with the least grid carbon."""
