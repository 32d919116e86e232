"""``Evaluation``: what one run of the harness found, and its Markdown summary.

The columns of its two tables are declared here (``EPISODE_COLUMNS``, ``SUMMARY_COLUMNS``), so
the run (``evaluate``), the figures (``figures``) and the tools that read its files agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from powertrip_env.harness.evaluation.statistics import BOOTSTRAP_RESAMPLES, start_days

if TYPE_CHECKING:
    from powertrip_env.harness.evaluation.timeline import Timeline

EPISODE_COLUMNS = (
    "policy",
    "episode",
    "seed",
    "start_time",
    "tta_h",
    "success",
    "rounds",
    "energy_kwh",
    "carbon_kg",  # grid emissions (kg CO2eq); NaN without a carbon intensity file
    "mean_sites",
    "comm_share",
    "comm_s",
    "active_s",
)
SUMMARY_COLUMNS = (
    "policy",
    "episodes",
    "mean_tta_h",
    "ci95_tta_h",  # half the width of [ci95_lo_h, ci95_hi_h]
    "ci95_lo_h",
    "ci95_hi_h",
    "median_tta_h",
    "success_rate",
    "mean_rounds",
    "mean_energy_kwh",
    "mean_carbon_kg",
    "mean_carbon_cost_kg",  # a carbon task's objective: carbon + carbon_ref_kg per miss; else NaN
    "mean_sites",
    "vs_powertrip_pct",
)
# The paper's heuristic, the policy every table is compared with ("vs PowerTrip"): the zero of
# the leaderboard's score, whose one is the optimiser (``reports.scores.TOP``).
ZERO = "PowerTrip"
# The mark beside the result of a policy that reached the target in none of its episodes: each
# counts at the time budget, so such policies share one number, which is not a tie on merit.
NEVER_FINISHED = "†"


def never_finished(success: float) -> bool:
    """Whether a success rate says no episode reached the target."""
    return success == 0.0


def never_finished_mark(success: float) -> str:
    """What follows a result whose policy never finished (``NEVER_FINISHED``), else nothing."""
    return f" {NEVER_FINISHED}" if never_finished(success) else ""


@dataclass
class Evaluation:
    """Per-episode results, per-policy summary, accuracy curves and the timeline of one
    episode, of one evaluation."""

    env_id: str
    split: str
    episodes: pd.DataFrame  # columns EPISODE_COLUMNS
    summary: pd.DataFrame  # one row per policy, PowerTrip first if present; SUMMARY_COLUMNS
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    scenario: str = ""  # the scenario file run instead of the ID's own, if one was given
    timeline: Timeline | None = None  # every policy's rounds in one episode (timeline.png)

    @property
    def title(self) -> str:
        """What ran, for headings: the ID, and the scenario file when it is not the ID's own."""
        return f"{self.env_id} on {self.scenario}" if self.scenario else self.env_id

    def to_markdown(self) -> str:
        """The summary as a Markdown table with the notes a reader needs to interpret it."""
        n_eps = int(self.episodes["episode"].nunique()) if len(self.episodes) else 0
        n_days = len(set(start_days(self.episodes["start_time"]))) if len(self.episodes) else 0
        # the carbon column only where the scenario has carbon intensity (else it is NaN)
        carbon = bool(self.summary["mean_carbon_kg"].notna().any())
        # and the carbon cost where the task is scored on it (a carbon task)
        cost = bool(self.summary["mean_carbon_cost_kg"].notna().any())
        head = (
            "| policy | episodes | mean TTA (h) | 95% CI (h) | median TTA (h) | success | "
            f"rounds | energy (kWh) | {'carbon (kg) | ' if carbon else ''}"
            f"{'carbon cost (kg) | ' if cost else ''}sites/round | vs PowerTrip |"
        )
        lines = [
            f"# {self.title}: {n_eps} paired episodes, {self.split} split",
            "",
            head,
            "|---|" + "---:|" * (9 + carbon + cost),
        ]
        for row in self.summary.itertuples(index=False):
            ci = _fmt(row.ci95_tta_h, ".3f")  # "–" when undefined (one start day)
            mark = never_finished_mark(row.success_rate)
            lines.append(
                f"| {row.policy} | {row.episodes} | {row.mean_tta_h:.3f}{mark} | "
                f"{ci if ci == '–' else '±' + ci} | {row.median_tta_h:.3f} | "
                f"{row.success_rate:.0%} | {row.mean_rounds:.1f} | "
                f"{_energy(row.mean_energy_kwh)} | "
                f"{_energy(row.mean_carbon_kg) + ' | ' if carbon else ''}"
                f"{_energy(row.mean_carbon_cost_kg) + ' | ' if cost else ''}{row.mean_sites:.2f} | "
                f"{_fmt(row.vs_powertrip_pct, '+.1f', '%')} |"
            )
        lines += [
            "",
            "- TTA is the wall-clock time to the target accuracy. An unsuccessful episode counts "
            "at the time budget, so a mean over failures is a lower bound on their true TTA.",
            _ci_note(n_days),
            "- Every policy ran the same start times and jitter streams (episode e uses seed "
            "seed + e), so differences are paired.",
            f"- vs PowerTrip: change of mean TTA relative to {ZERO} (negative is faster).",
            "- sites/round: effective sites per non-idle round.",
            *(
                ["- carbon: the grid's emissions (kg CO₂-equivalent), on-site PV counting zero."]
                if carbon
                else []
            ),
            *(
                [
                    "- carbon cost: what a carbon task is scored on, the carbon plus the price of "
                    "a missed deadline (carbon_ref_kg) per episode that missed it; lower is better."
                ]
                if cost
                else []
            ),
            "- success: the share of the policy's episodes that reached the target accuracy.",
        ]
        if any(never_finished(rate) for rate in self.summary["success_rate"]):
            lines.append(
                f"- {NEVER_FINISHED} never finished: no episode reached the target, so every one "
                "counts at the time budget; the mean TTA is a lower bound on the policy's, and "
                "policies marked so tie at the budget, not on merit."
            )
        return "\n".join(lines) + "\n"


def _ci_note(n_days: int) -> str:
    """The notes line on the CI column: the method and how many independent days it had."""
    days = f"{n_days} distinct start day{'s' if n_days != 1 else ''}"
    if n_days < 2:
        return (
            f"- 95% CI: undefined (–): the episodes start on {days}, and the interval is a "
            "block bootstrap over start days, which needs at least two."
        )
    return (
        "- 95% CI: ± half the width of the 95% percentile interval of the mean TTA from a block "
        f"bootstrap over start days ({days}, UTC; {BOOTSTRAP_RESAMPLES:,} resamples of whole "
        "days with replacement, seeded from the days). Episodes that start on the same day "
        "share its weather, so the days, not the episodes, are the independent draws."
    )


def _energy(kwh: float) -> str:
    return f"{kwh:.1f}" if kwh >= 10 else f"{kwh:.3g}"


def _fmt(value: float, spec: str, suffix: str = "") -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:{spec}}{suffix}"
