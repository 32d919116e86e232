"""The benchmark's carbon track (docs/carbon.md): each carbon task's episodes scored on the
carbon cost, its facts (the bracket between ``CarbonOptimiser`` and ``carbon_bound_kg``, the
headroom over ``BestFixedCarbon``, the deadline), their table, and the trade-off figure of time
against emissions. ``powertrip_env.harness.reports.benchmark`` runs the tasks and calls these.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from powertrip_env.baselines.carbon_bound import CARBON_BOUND
from powertrip_env.baselines.carbon_references import carbon_cost_kg
from powertrip_env.baselines.registry import CARBON, LOOKAHEAD, policy_names
from powertrip_env.harness.evaluation.results import YARDSTICK
from powertrip_env.harness.reports import leaderboard, measures, tradeoff
from powertrip_env.harness.reports.headroom import bound_holds

CARBON_TOP, CARBON_FIXED = "CarbonOptimiser", "BestFixedCarbon"  # the track's references
TIME_TOP = "Optimiser"  # the time optimiser: the other end of the trade-off


def carbon_task(
    env_id: str,
    played: pd.DataFrame,
    bounds: pd.DataFrame,
    params: Any,
    rules: Sequence[str],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A carbon task's frame and facts (``benchmark.run_task``'s), scored on the carbon cost
    (``cost_kg``: grid carbon, and the price of a missed deadline) and bracketed by
    ``CarbonOptimiser`` and ``carbon_bound_kg``: ``played`` is ``evaluate``'s episodes,
    ``bounds`` the bound's rows and ``rules`` the policies the optimiser must not lose to."""
    frame = played[["policy", "episode", "start_time", "tta_h", "success", "carbon_kg"]].copy()
    frame["cost_kg"] = carbon_cost_kg(params, frame["carbon_kg"] * 1000.0, frame["success"])
    starts = frame.loc[frame["policy"] == YARDSTICK, ["episode", "start_time"]]
    bounds = bounds[["policy", "episode", "cost_kg"]].merge(starts, on="episode")
    bounds["success"] = True  # as the time bound's rows: it plays no round
    frame = pd.concat([frame, bounds], ignore_index=True)
    frame.insert(0, "task", env_id)
    cost = frame.pivot(index="episode", columns="policy", values="cost_kg")
    mean = cost.mean()
    facts = {
        "track": "carbon",
        "optimiser_headroom": float(mean[CARBON_FIXED] / mean[CARBON_TOP]),
        "optimum_upper_kg": float(mean[CARBON_TOP]),
        "optimum_lower_kg": float(mean[CARBON_BOUND]),
        "gap": float(mean[CARBON_TOP] / mean[CARBON_BOUND]),
        "reference_never_beaten": bool((cost[CARBON_TOP] <= cost[rules].min(axis=1) + 1e-9).all()),
        "bound_holds": bound_holds(cost, CARBON_BOUND),
        "episodes": int(cost.shape[0]),
        "n_sites": int(params.n_sites),
        "deadline_h": float(params.time_budget_s / 3600.0),
        "carbon_ref_kg": float(params.carbon_ref_kg),
    }
    return frame, facts


def carbon_lines(facts: dict[str, dict[str, Any]]) -> list[str]:
    """The carbon tasks' facts (deadline, headroom on the carbon cost, the bracket), one row
    each; none when no carbon task ran."""
    rows = [(task, f) for task, f in facts.items() if f.get("track") == "carbon"]
    if not rows:
        return []
    lines = [
        "| task | sites | deadline (h) | optimiser headroom | optimum ≥ (kg) | optimum ≤ (kg) "
        "| gap | never beaten |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for task, f in rows:
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


def tradeoff_of(
    episodes: pd.DataFrame, facts: dict[str, dict[str, Any]], tasks: Sequence[str], path: Path
) -> None:
    """The carbon tasks' trade-off (``tradeoff.tradeoff_figure``): every policy's mean TTA
    against its mean grid carbon, the references' Pareto front marked (the time optimiser at
    one end, the carbon optimiser at the other), the deadline drawn."""
    part = episodes[episodes["task"].isin(tasks) & (episodes["policy"] != CARBON_BOUND)]
    means = tradeoff.means_of(part[["task", "policy", "episode", "tta_h", "carbon_kg", "success"]])
    means["deadline_h"] = means["task"].map({task: facts[task]["deadline_h"] for task in tasks})
    named = {YARDSTICK, *LOOKAHEAD, *CARBON, "AllSites", "FedZeroLike"}
    rules = {name for task in tasks for name in policy_names(facts[task]["n_sites"])}
    # the rules worth a name, and every agent (a --model: no rule's name)
    label = [name for name in pd.unique(means["policy"]) if name in named or name not in rules]
    tradeoff.tradeoff_figure(means, path, [TIME_TOP, CARBON_FIXED, CARBON_TOP], label=label)


def on_cost(episodes: pd.DataFrame) -> pd.DataFrame:
    """``episodes`` with their carbon cost where the boards read a policy's measure (``tta_h``):
    the statistics are the same for any lower-is-better measure."""
    return episodes.assign(tta_h=episodes["cost_kg"])


def board(episodes: pd.DataFrame) -> leaderboard.Board:
    """The carbon track's board of its scored episodes: the carbon cost, 0 = PowerTrip and 1 =
    ``CarbonOptimiser``."""
    return leaderboard.board(on_cost(episodes), YARDSTICK, CARBON_TOP, measure=measures.CARBON)
