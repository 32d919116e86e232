"""The time tracks: reach the target accuracy soonest, scored on the time to accuracy (TTA).

* ``KNOWN``: the world is what the scenario states (the flagship and its variants).
* ``MEASURED`` (docs/measured.md): sites, links, joins and the progress curve depart per episode
  from what the scenario states (``[unknowns]``), so a policy must measure them. Its deployable
  baselines gain the adaptive rules, the rules told the draw (``Informed``) play beside them,
  and each task's room is split into a chain: PowerTrip → the best rule on the stated model →
  the best adaptive rule → the best rule told the draw → the Optimiser.
* ``MOVING`` (docs/moving.md): the measured track's world, moving while the job runs (sites
  slow down and recover, links dip, power is called back: ``[moving]``). Its baselines add
  change detection (``TRACKING``), and its chain a link: the rule told the draw alone, then
  the rule that also monitors every process's present state perfectly (``Informed``), whose
  gap to the best adaptive rule is the learnable room.

Both are bracketed by the ``Optimiser``'s feasible plan (score 1) and ``lower_bound_h`` (a
relaxation no policy beats), and share one table of those brackets.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import gymnasium as gym
import pandas as pd

from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.baselines.registry import (
    ADAPTIVE,
    INFORMED,
    LOOKAHEAD,
    MOVING_TOLD,
    REFERENCES,
    TRACKING,
    common_rules,
)
from powertrip_env.dynamics.params import SimParams
from powertrip_env.harness.tracks.track import (
    Facts,
    Section,
    Track,
    bracket,
    chain_table,
    with_bound_rows,
)

TOP = "Optimiser"  # the reference: score 1
FIXED = "BestFixedSet"  # the best fixed set in hindsight: the optimiser headroom's numerator
BOUND = "LowerBound"  # the label of the lower bound's rows
CHAIN = "chain.png"  # the measured tasks' room chains, drawn with a run
MOVING_CHAIN = "moving-chain.png"  # the moving tasks' room chains

KNOWN_FINAL_POLICIES = "PowerTrip,MyopicOptimal,HorizonRule,ForecastMPC,BestFixedSet,Optimiser"
"""The agents' final table on the known track: the paper's heuristic, the strongest rules and
both references."""
MEASURED_FINAL_POLICIES = (
    "PowerTrip,ForecastMPC,AdaptiveHorizon,ExploringHorizon,AdaptiveMPC,Informed,InformedMPC,"
    "Optimiser"
)
"""On the measured track: the paper's heuristic, the strongest rule on the stated values, the
adaptive rules (the strongest deployable baselines there), Informed (told the draw: the
learnable room's end) and the optimiser."""


def bound_rows(env: gym.Env, episodes: int, seed: int) -> pd.DataFrame:
    """The lower bound's rows of paired episodes ``0 .. episodes - 1``: for each, ``env`` reset
    with ``seed + e`` (the start time and jitter stream every policy of the run met) and
    ``lower_bound_h`` of it. Columns ``policy, episode, seed, tta_h, success, rounds``, like a
    policy's episodes, so the bound sits in the same frame as the policies it bounds; it plays
    no round and reaches the target by construction (``success`` True, ``rounds`` 0)."""
    rows = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        bound = lower_bound_h(env.unwrapped)
        rows.append(
            {
                "policy": BOUND,
                "episode": e,
                "seed": seed + e,
                "tta_h": bound,
                "success": True,
                "rounds": 0,
            }
        )
    return pd.DataFrame(rows)


class TimeTrack(Track):
    """A track scored on the TTA, bracketed by the ``Optimiser`` and ``lower_bound_h``."""

    bound_label = BOUND

    def bound(self, env: gym.Env, episodes: int, seed: int) -> pd.DataFrame:
        return bound_rows(env, episodes, seed)

    def score(
        self,
        env_id: str,
        played: pd.DataFrame,
        bounds: pd.DataFrame | None,
        params: SimParams,
        contenders: list[str],
    ) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The task's episodes with the bound's rows, and its facts: the optimiser headroom
        (``BestFixedSet`` / ``Optimiser``), the bracket and whether the reference and the bound
        held against ``contenders`` (the rules and those told the draw)."""
        assert bounds is not None  # bound() always gives rows
        frame = played[["policy", "episode", "start_time", "tta_h", "success"]].copy()
        frame = with_bound_rows(frame, bounds, self.zero, "tta_h")
        frame.insert(0, "task", env_id)
        tta = frame.pivot(index="episode", columns="policy", values="tta_h")
        facts = {
            "track": self.name,
            **bracket(tta, fixed=FIXED, top=TOP, bound=BOUND, unit="h", contenders=contenders),
            "n_sites": int(params.n_sites),
            **self.chain(tta.mean()),
        }
        return frame, facts

    def chain(self, mean: pd.Series) -> dict[str, Any]:
        """More facts from each policy's mean TTA: none on the known track."""
        return {}

    def sections(self) -> list[Section]:
        return [bracket_lines]


class MeasuredTrack(TimeTrack):
    """The time track whose world departs from the scenario: it adds each task's room chain."""

    chain_file = CHAIN  # the run's figure of its tasks' chains

    def chain(self, mean: pd.Series) -> dict[str, Any]:
        return room_chain(mean)

    def sections(self) -> list[Section]:
        return [bracket_lines, chain_lines]

    def figures(self, episodes: pd.DataFrame, facts: Facts, folder: Path) -> list[str]:
        chains = {task: entry for task, entry in facts.items() if "chain" in entry}
        if not chains:
            return []
        chain_figure(chains, folder / self.chain_file)
        return [self.chain_file]


class MovingTrack(MeasuredTrack):
    """The measured track's world moving while the job runs: its chain splits being told the
    draw from monitoring every process's present state."""

    chain_file = MOVING_CHAIN

    def chain(self, mean: pd.Series) -> dict[str, Any]:
        return room_chain(mean, adaptive=(*ADAPTIVE, *TRACKING), monitored=True)


def room_chain(
    mean: pd.Series, adaptive: tuple[str, ...] = ADAPTIVE, monitored: bool = False
) -> dict[str, Any]:
    """A measured task's room, split (docs/measured.md): PowerTrip → the best rule on the
    stated model → the best of the ``adaptive`` rules → ``Informed`` (the best rule told the
    draw) → the Optimiser, with each step's share of PowerTrip → Optimiser. ``learnable_room``
    is the best adaptive rule over Informed: what measuring costs, and what an agent may take.
    On the moving track (``monitored``, docs/moving.md) ``InformedDraw`` is told the draw
    alone, and Informed also reads every process's present state (the step
    "monitor-perfect"), so the learnable room is what a perfect monitor would buy."""
    nominal = min(LOOKAHEAD, key=lambda name: mean[name])
    best = min(adaptive, key=lambda name: mean[name])
    informed = min(INFORMED, key=lambda name: mean[name])
    steps = [("PowerTrip", MEASURED.zero), ("nominal", nominal), ("adaptive", best)]
    if monitored:
        steps += [("informed", "InformedDraw"), ("monitor-perfect", informed)]
    else:
        steps += [("informed", informed)]
    steps += [("optimiser", TOP)]
    total = float(mean[MEASURED.zero] - mean[TOP])
    chain = [{"step": step, "policy": name, "tta_h": float(mean[name])} for step, name in steps]
    for before, after in itertools.pairwise(chain):
        after["share"] = (before["tta_h"] - after["tta_h"]) / total if total > 0 else 0.0
    return {
        "informed_h": float(mean[informed]),
        "best_adaptive": best,
        "learnable_room": float(mean[best] / mean[informed]),
        "chain": chain,
    }


def bracket_lines(facts: Facts) -> list[str]:
    """The table of each time task's facts (sites, optimiser headroom, the bracket, whether the
    reference held) and the note that reads it."""
    if not facts:
        return []
    lines = [
        "| task | sites | optimiser headroom | optimum ≥ (h) | optimum ≤ (h) | gap | "
        "never beaten |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for task, f in facts.items():
        lines.append(
            f"| {task} | {f['n_sites']} | {f['optimiser_headroom']:.3f} | "
            f"{f['optimum_lower_h']:.2f} | {f['optimum_upper_h']:.2f} | {f['gap']:.3f} | "
            f"{f['reference_never_beaten']} |"
        )
    return [
        *lines,
        "",
        "optimiser headroom = BestFixedSet / Optimiser (the reference, which starts from every "
        "deployable baseline's episode; `powertrip headroom`'s beam headroom divides by "
        "BeamPlanner instead); optimum ≤ is the reference's feasible plan, optimum ≥ the lower "
        "bound; gap = their ratio; never beaten: no deployable baseline was faster than the "
        "reference in any episode.",
        "",
    ]


def chain_lines(facts: Facts) -> list[str]:
    """The measured tasks' room chains (``room_chain``), one row each."""
    rows = [(task, f) for task, f in facts.items() if "chain" in f]
    if not rows:
        return []
    steps = [link["step"] for link in rows[0][1]["chain"]]
    told = "told the draw (h)" if "monitor-perfect" in steps else "Informed (h)"
    heads = {"PowerTrip": "PowerTrip (h)", "nominal": "stated model (h)",
             "adaptive": "adaptive (h)", "informed": told,
             "monitor-perfect": "monitor-perfect (h)", "optimiser": "Optimiser (h)"}  # fmt: skip
    lines = chain_table(rows, heads, "tta_h", 2)
    return [
        *lines,
        "",
        (
            "The moving track's room, split: each step's policy, its mean TTA and (in brackets) "
            "its share of PowerTrip → Optimiser; told the draw is InformedDraw, monitor-perfect "
            "the best of Informed and InformedMPC; learnable room = best adaptive / "
            "monitor-perfect."
            if "monitor-perfect" in steps
            else "The measured track's room, split: each step's policy, its mean TTA and (in "
            "brackets) its share of PowerTrip → Optimiser; learnable room = best adaptive / "
            "Informed."
        ),
        "",
    ]


def chain_figure(chains: Facts, path: Path) -> None:
    """Each measured task's room chain as bars of mean TTA, PowerTrip at the top and the
    Optimiser at the bottom: what trusting the stated model, measuring, being told the draw and
    knowing the future each buy. The learnable room is the gap between the third and fourth."""
    from powertrip_env.render import agg_figure, save_png

    fig = agg_figure(7.0, 1.0 + 1.6 * len(chains), layout="constrained")
    axes = fig.subplots(len(chains), 1, squeeze=False)[:, 0]
    labels = {"PowerTrip": "PowerTrip", "nominal": "stated model", "adaptive": "measuring",
              "informed": "told the draw", "monitor-perfect": "monitor-perfect",
              "optimiser": "clairvoyant"}  # fmt: skip
    palette = {"PowerTrip": "#999999", "nominal": "#4c72b0", "adaptive": "#55a868",
               "informed": "#dd8452", "monitor-perfect": "#8172b3",
               "optimiser": "#c44e52"}  # fmt: skip
    for ax, (task, entry) in zip(axes, chains.items(), strict=True):
        steps = entry["chain"][::-1]
        hours = [step["tta_h"] for step in steps]
        names = [
            step["policy"]
            if step["policy"] == labels[step["step"]]
            else f"{labels[step['step']]}: {step['policy']}"
            for step in steps
        ]
        ax.barh(range(len(steps)), hours, color=[palette[step["step"]] for step in steps])
        ax.set_yticks(range(len(steps)), names, fontsize=8)
        ax.set_xlim(min(hours) * 0.9, max(hours) * 1.02)
        for y, h in enumerate(hours):
            ax.text(h, y, f" {h:.2f}", va="center", fontsize=7)
        ax.set_title(f"{task}: learnable room {entry['learnable_room']:.3f}", fontsize=9)
        ax.set_xlabel("mean time to accuracy (h)", fontsize=8)
    save_png(fig, path)


KNOWN = TimeTrack(
    "known",
    title="Leaderboard",
    rules=lambda n_sites, measured: common_rules(n_sites),
    references=REFERENCES,
    board_references=(FIXED, TOP),
    top=TOP,
    final_policies=KNOWN_FINAL_POLICIES,
    about="task: one of the benchmark's sequential problems (`powertrip_env.SUITE_IDS`)",
)
"""The world as the scenario states it: the flagship and its variants."""

MEASURED = MeasuredTrack(
    "measured",
    title="Leaderboard: the measured track",
    rules=lambda n_sites, measured: [*common_rules(n_sites), *ADAPTIVE],
    told=lambda measured: list(INFORMED),
    references=REFERENCES,
    board_references=(FIXED, TOP),
    top=TOP,
    final_policies=MEASURED_FINAL_POLICIES,
    about="task of the measured track: the world departs from what the scenario states "
    "(`powertrip_env.MEASURED_SUITE_IDS`, [the measured track](../measured.md))",
)
"""What the scenario states, departed from per episode: a policy must measure it."""


MOVING_FINAL_POLICIES = (
    "PowerTrip,ForecastMPC,AdaptiveHorizon,AdaptiveMPC,TrackingHorizon,TrackingMPC,InformedDraw,"
    "Informed,InformedMPC,Optimiser"
)
"""On the moving track: the measured track's table with the change-detecting rules and the rule
told the draw alone beside the perfect monitors."""

MOVING = MovingTrack(
    "moving",
    title="Leaderboard: the moving track",
    rules=lambda n_sites, measured: [*common_rules(n_sites), *ADAPTIVE, *TRACKING],
    told=lambda measured: list(MOVING_TOLD),
    references=REFERENCES,
    board_references=(FIXED, TOP),
    top=TOP,
    final_policies=MOVING_FINAL_POLICIES,
    about="task of the moving track: the measured track's world moves while the job runs "
    "(`powertrip_env.MOVING_SUITE_IDS`, [the moving track](../moving.md))",
)
"""The measured track's world, moving while the job runs: a policy must keep measuring."""
