"""The kernel's formulas, for tools that reason about the model rather than step it.

Policies and tools do not reach into the dynamics: they read the environment through
``decision_view``, ``predict_round`` and, for the clairvoyant references, ``clairvoyant()``. A
report that checks the model against published figures (``baselines.fidelity``) and a bound
that relaxes it (``baselines.references.lower_bound_h``) need the formulas themselves: learning
progress and a round's communication time. This module hands over exactly those, computed by
the same compiled functions the environment steps with (docs/model.md, "Learning progress" and
"A round").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env.dynamics.learning import (
    _accuracy,
    _delta_progress,
    _delta_progress_many,
    _noise_scale,
)
from powertrip_env.dynamics.round import _comm_time_many

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams

__all__ = [
    "accuracy",
    "comm_time_s",
    "delta_progress",
    "noise_scale",
    "progress_needed",
    "rounds_to_target",
]


def noise_scale(params: SimParams, progress: Any) -> np.ndarray:
    """The gradient noise scale ``B_noise(P)`` at each value of ``progress``."""
    p = np.asarray(progress, dtype=np.float64)
    return np.array([_noise_scale(params.consts, x) for x in p.ravel()]).reshape(p.shape)


def accuracy(params: SimParams, progress: Any, cover: Any = 1.0) -> np.ndarray:
    """The surrogate accuracy at each value of ``progress`` (and ``cover``, broadcast against
    it)."""
    p, cv = np.broadcast_arrays(np.asarray(progress, np.float64), np.asarray(cover, np.float64))
    values = [_accuracy(params.consts, x, y) for x, y in zip(p.ravel(), cv.ravel(), strict=True)]
    return np.array(values, dtype=np.float64).reshape(p.shape)


def delta_progress(params: SimParams, progress: float, batch: Any, cover: float = 1.0) -> Any:
    """What one round of global batch ``batch`` adds at ``progress``; for an array of batches,
    the array of what each would add (a bound asks for many at once)."""
    if np.ndim(batch) == 0:
        return float(_delta_progress(params.consts, float(progress), float(batch), float(cover)))
    b = np.asarray(batch, dtype=np.float64)
    out = np.empty(b.size)
    _delta_progress_many(params.consts, float(progress), b.ravel(), float(cover), out)
    return out.reshape(b.shape)


def progress_needed(params: SimParams) -> float:
    """Progress at which the accuracy curve reaches the target (its inverse at a*)."""
    ratio = (params.a_max - params.a_target) / (params.a_max - params.a0)
    return params.p0 * (ratio ** (-1.0 / params.alpha) - 1.0)


def comm_time_s(params: SimParams, n_done: Any, rtt_s: Any, site_tx_s: Any) -> np.ndarray:
    """The kernel's communication time of a round before jitter, elementwise (arguments
    broadcast), for tools that bound or report it without stepping a round."""
    k, r, x = np.broadcast_arrays(
        np.asarray(n_done, np.float64), np.asarray(rtt_s, np.float64),
        np.asarray(site_tx_s, np.float64),
    )  # fmt: skip
    out = np.empty(k.size)
    _comm_time_many(params.consts, k.ravel(), r.ravel(), x.ravel(), out)
    return out.reshape(k.shape)


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
