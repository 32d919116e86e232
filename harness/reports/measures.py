"""What a leaderboard measures, and how its captions and notes say it: the score's ends, the
measure a board's tasks are scored on (time to accuracy; the carbon track's carbon cost), the
facts each task's JSON entry must carry, and what the never-finished mark means.
``powertrip_env.harness.reports.leaderboard`` lays the boards out with them."""

from __future__ import annotations

from dataclasses import dataclass

from powertrip_env.harness.evaluation.results import NEVER_FINISHED

__all__ = [
    "CAPTION_START",
    "CARBON",
    "NEVER_FINISHED",
    "NEVER_FINISHED_NOTE",
    "TASK_FACTS",
    "TASK_NOTES_START",
    "TIME",
    "Measure",
    "caption",
    "never_note",
]  # NEVER_FINISHED: the mark itself, which the notes explain

TASK_FACTS = ("optimiser_headroom", "optimum_upper_h", "optimum_lower_h", "gap",
              "reference_never_beaten")  # fmt: skip
"""The per-task facts ``to_json`` requires from its caller, the last a bool, the others floats
(on a board of another measure, the bracket's keys end in its unit: ``Measure.facts``)."""


@dataclass(frozen=True)
class Measure:
    """What a board's tasks are scored on: lower is better, and a score is a share of the gap
    between the zero's mean and the top's. Its ``name`` and ``unit`` label the tables, ``key``
    names each policy's mean in the JSON (and the column of the episodes that holds it), and
    ``failed`` says what a failed episode counts. ``bracketed``: its tasks' facts bracket the
    optimum (a bound below, a best fixed set for the headroom); a track without a bound
    reports the top's mean alone."""

    name: str
    unit: str
    key: str
    failed: str
    bracketed: bool = True

    @property
    def facts(self) -> tuple[str, ...]:
        """The facts each task's JSON entry must carry, the bracket's keys in its unit."""
        if not self.bracketed:
            return (f"optimum_upper_{self.unit}", "reference_never_beaten")
        return tuple(f"{k[:-2]}_{self.unit}" if k.endswith("_h") else k for k in TASK_FACTS)


TIME = Measure("TTA", "h", "tta_h", "a failed episode counts at the time budget")
CARBON = Measure(
    "carbon cost",
    "kg",
    "cost_kg",
    "a failed episode counts its grid carbon plus the price of the missed deadline "
    "([episode] carbon_ref_kg)",
)
"""The carbon tasks' measure (``rewards.CarbonCost``'s return times −carbon_ref_kg)."""

NEVER_FINISHED_NOTE = (
    f"{NEVER_FINISHED} never finished: no episode reached the target accuracy (in the aggregate: "
    "on any task; in a task's table or column: on that task), so every one counted at the time "
    "budget; the score is an upper bound on the policy's, and policies marked so tie at the "
    "budget, not on merit."
)
"""What the mark means, under every table that may carry it: a failed episode counts at the
time budget, so policies that never finish get the same score, which is not a tie."""

CAPTION_START = "Normalised score per task"
"""How the board's caption begins (what 0 and 1 are), which pages that quote a task's table
pick up with it (``maintainers.docs_envs``)."""

TASK_NOTES_START = "Mean TTA intervals"
"""How the notes under the tasks' tables begin, picked up the same way."""


def never_note(measure: Measure) -> str:
    """What the never-finished mark means on a board of ``measure``: on time, such policies tie
    at the budget; on another measure a miss is priced, so their scores still rank them."""
    if measure == TIME:
        return NEVER_FINISHED_NOTE
    return (
        f"{NEVER_FINISHED} never finished: no episode reached the target accuracy in time; "
        f"{measure.failed}."
    )


def caption(zero: str, top: str, measure: Measure = TIME) -> str:
    """What a normalised score is: a score means nothing without its ends."""
    m = measure.name
    worse = "slower" if measure == TIME else f"worse on {m}"
    return (
        f"{CAPTION_START}: 0 = {zero}, 1 = {top} (the optimiser's feasible plan); higher is "
        f"better, above 1 beats the plan, below 0 is {worse} than {zero}. Score = (mean {m} of "
        f"{zero} − mean {m} of the policy) / (mean {m} of {zero} − mean {m} of {top}) over the "
        "task's paired episodes."
    )
