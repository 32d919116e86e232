"""The learning model the kernel steps: progress, accuracy, data coverage and the rewards.

docs/model.md, "Learning progress" and "Reward and episode end". These read only the scalars
(``c``, SimParams.consts) and the data shares; ``formulas.py`` hands them to Python callers.
"""

from __future__ import annotations

import math

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    C_A0,
    C_ALPHA,
    C_AMAX,
    C_B0,
    C_CARBON_REF,
    C_ETA,
    C_GAMMA,
    C_H_REF,
    C_KAPPA,
    C_LOCAL_STEPS,
    C_NON_IID,
    C_P0,
    C_PB,
    C_SPAN,
    C_TAU,
    R_CARBON_G,
    R_CARBON_REWARD,
    R_CARBON_TERM,
    R_DEADLINE_TERM,
    R_DELTA_ACC,
    R_EXCESS_GAIN,
    R_GAIN_RATE,
    R_ROUND_S,
    R_TERMINATED,
    R_TRUNCATED,
    S_SHARE,
)
from powertrip_env.units import G_PER_KG


@jit
def _noise_scale(c: np.ndarray, noise: float, progress: float) -> float:
    """Gradient noise scale ``B_noise(P) = B0 · (1 + P / P_B)^γ`` (McCandlish et al. 2018),
    ``B0`` times the episode's factor ``noise`` (1 as stated)."""
    return (c[C_B0] * noise) * (1.0 + progress / c[C_PB]) ** c[C_GAMMA]


@jit
def _accuracy(c: np.ndarray, progress: float, cover: float) -> float:
    """Surrogate accuracy curve ``a(P) = a_max − (a_max − a0)(1 + P/P0)^−α``.

    Written as ``a0 + (a_max − a0)(1 − (1 + P/P0)^−α)`` so that ``a(0)`` is exactly ``a0`` in
    floating point: an idle round must not move the accuracy by a rounding error.

    Under non-IID data the ceiling also falls with the data the model covers: ``a_max`` becomes
    ``a_max · coverage^κ`` (``coverage_ceiling`` κ; 0, the default, leaves it alone). A model
    trained only on some sites' label-skewed shards cannot classify what it never sees, so
    leaving sites out caps its accuracy, and taking them back lifts the cap (docs/model.md).
    """
    a_max = c[C_AMAX]
    if c[C_KAPPA] > 0.0:
        a_max = a_max * cover ** c[C_KAPPA]
    return c[C_A0] + (a_max - c[C_A0]) * (1.0 - (1.0 + progress / c[C_P0]) ** (-c[C_ALPHA]))


@jit
def _coverage(c: np.ndarray, site: np.ndarray, absent: np.ndarray) -> float:
    """Fraction of the data a round's update reflects under non-IID data (1 when IID).

    A site away for ``r`` rounds has its share forgotten as ``1 − exp(−r/τ)``; ``non_iid``
    scales how much that matters.
    """
    if c[C_NON_IID] == 0.0:
        return 1.0
    lost = 0.0
    for i in range(absent.shape[0]):
        lost += (1.0 - math.exp(-absent[i] / c[C_TAU])) * site[S_SHARE, i]
    return 1.0 - c[C_NON_IID] * lost


@jit
def _delta_progress(
    c: np.ndarray, pace: float, noise: float, progress: float, batch: float, cover: float
) -> float:
    """``ΔP = local_steps · η · coverage / (1 + B_noise(P) / B_r)``; zero for an empty round.
    ``pace`` and ``noise`` are the episode's factors on ``η`` and ``B0`` (1 as stated;
    ``unknowns.fold`` multiplies them in the same order)."""
    if batch <= 0.0:
        return 0.0
    eff = 1.0 / (1.0 + _noise_scale(c, noise, progress) / batch)
    return c[C_LOCAL_STEPS] * (c[C_ETA] * pace) * eff * cover


@jit
def _delta_progress_many(c, progress, batch, cover, out):
    for j in range(out.shape[0]):
        out[j] = _delta_progress(c, 1.0, 1.0, progress, batch[j], cover)


@jit
def _rewards(c: np.ndarray, rec: np.ndarray) -> None:
    """The round's rewards (``powertrip_env.rewards``), from its accuracy gain and time.

    * excess gain ``(Δa − ρ_ref·T_r) / (a* − a0)`` with ``ρ_ref = (a* − a0) / H_ref``: the gain
      minus what the reference rate gains in the same time. Its sum over a successful episode
      is exactly ``1 − TTA/H_ref``, so maximising the return minimises the time to accuracy.
    * gain rate ``Δa / (a* − a0) · H_ref / T_r``: the literal gain per unit time; 0 for a round
      of no time (only an episode already at its budget has one).
    * the carbon objective's terms (``rewards.CarbonCost``): ``−carbon / C_ref`` and ``−1`` in
      the round that ends the episode without reaching the target, and their sum; 0 where the
      scenario poses no carbon objective (``carbon_ref_kg`` 0). Reached through the record, as
      the others, they cost a step no Python arithmetic.
    """
    gain = rec[R_DELTA_ACC] / c[C_SPAN]
    rec[R_EXCESS_GAIN] = gain - rec[R_ROUND_S] / c[C_H_REF]
    rec[R_GAIN_RATE] = gain * (c[C_H_REF] / rec[R_ROUND_S]) if rec[R_ROUND_S] > 0.0 else 0.0
    ref_g = c[C_CARBON_REF] * G_PER_KG
    rec[R_CARBON_TERM] = rec[R_CARBON_G] / -ref_g if ref_g > 0.0 else 0.0
    missed = rec[R_TRUNCATED] > 0.0 and not rec[R_TERMINATED] > 0.0
    rec[R_DEADLINE_TERM] = -1.0 if missed else 0.0
    rec[R_CARBON_REWARD] = rec[R_CARBON_TERM] + rec[R_DEADLINE_TERM]
