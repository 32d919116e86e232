"""The kernel's formulas, for tools that reason about the model rather than step it.

The dynamics live in ``powertrip_env.core``, which policies and tools do not import: they read
the environment through ``decision_view``, ``predict_round`` and, for the clairvoyant
references, ``clairvoyant()``. A report that checks the model against published figures
(``baselines.fidelity``) and a bound that relaxes it (``baselines.references.lower_bound_h``)
need the formulas themselves: learning progress and a round's communication time. This module
hands over exactly those, computed by the same compiled functions the environment steps with
(docs/model.md, "Learning progress" and "A round").
"""

from __future__ import annotations

from powertrip_env.core import (
    SimParams,
    accuracy,
    comm_time_s,
    delta_progress,
    noise_scale,
    progress_needed,
)

__all__ = [
    "accuracy",
    "comm_time_s",
    "delta_progress",
    "noise_scale",
    "progress_needed",
    "rounds_to_target",
]


def rounds_to_target(params: SimParams, sites: float, site_batch: float | None = None) -> float:
    """Rounds that ``sites`` equally fast sites need to the target at full coverage.

    Each round's global batch is ``sites · site_batch`` (the scenario's largest per-site batch if
    not given), as under equal steps with no site dropping out; the last round counts by the
    share of it that was needed, so the result is smooth in ``sites``.
    """
    need = progress_needed(params)
    batch = float(sites) * float(site_batch if site_batch is not None else params.site_batch.max())
    progress, rounds = 0.0, 0
    while True:
        dp = delta_progress(params, progress, batch)
        if progress + dp >= need:
            return rounds + (need - progress) / dp
        progress += dp
        rounds += 1
