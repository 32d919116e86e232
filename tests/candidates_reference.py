"""The candidate sets of ``powertrip_env.dynamics.candidates`` written in numpy: the oracle.

The kernel builds the pool, the slots and their features in one compiled pass over a batch.
This is the same construction as plain array code, as ``baselines/candidates.py`` wrote it
before it moved into the kernel; ``tests/test_candidates.py`` checks that the two agree bit for
bit on whole episodes of every suite task. It reads only ``decision_view()`` and
``predict_round``, as a deployable policy may.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.dynamics.candidates import (
    HORIZONS,
    N_SLOTS,
    SLOT_FEATURES,
    STICKY_HORIZONS,
    STICKY_MARGIN,
    TUNED_RULE,
)


@dataclass(frozen=True)
class Candidates:
    """The sets the agent chooses among this round and what it is shown about them."""

    masks: np.ndarray  # (N_SLOTS, N) bool; slot 0 keeps the current set
    features: np.ndarray  # (N_FEATURES,) float32


def _pool(now: Any) -> np.ndarray:
    """(M, N) bool: the sets worth predicting, without enumerating 2^m of them."""
    available = now.available
    current = now.joined & available
    idx = np.flatnonzero(available)
    m, n = idx.size, now.n_sites
    rankings = (
        now.power_w / now.exchange_s,  # PowerTrip's order
        now.rate,  # the fastest first
        now.rate * (1.0 + 10.0 * current),  # the joined sites first, then the fastest
    )
    pool = np.zeros((3 * m + m + 1, n), dtype=bool)
    prefixes = np.tri(m, dtype=bool)  # row i: the first i + 1 of a ranking
    for r, score in enumerate(rankings):
        order = idx[np.argsort(-score[idx], kind="stable")]
        pool[r * m : (r + 1) * m, order] = prefixes
    flips = pool[3 * m : 4 * m]
    flips[:] = current
    flips[np.arange(m), idx] ^= True
    pool[4 * m] = current
    pool = pool[pool.any(axis=1)]
    _, first = np.unique(pool, axis=0, return_index=True)  # repeats dropped, the first kept
    return pool[np.sort(first)]


def _ratio(values: np.ndarray) -> np.ndarray:
    best = values.max(initial=0.0)
    return values / best if best > 0 else np.zeros_like(values)


@dataclass(frozen=True, eq=False)
class Pool:
    """This round's pooled sets (``_pool``) and their predicted rounds, with and without joins.

    The one place the pool is predicted: ``build`` makes the agent's slots from it and
    ``powertrip_env.baselines.lookahead.HorizonRule`` plays one slot's rule for any horizon and
    margin.
    """

    sets: np.ndarray  # (M, N) bool
    full: Any  # RoundPrediction of each set, joins included
    steady: Any  # RoundPrediction of each set once its sites have joined
    t_full: np.ndarray  # (M,) round time with joins
    t_steady: np.ndarray  # (M,) round time without
    gain: np.ndarray  # (M,) predicted progress of the round
    gain_steady: np.ndarray  # (M,) the same once its sites have joined
    join_s: np.ndarray  # (M,) the part of the round spent joining
    current: np.ndarray  # (N,) bool: the joined sites that are available now

    def efficiency(self, horizon: float) -> np.ndarray:
        """Predicted progress per second with each set's joins spread over ``horizon`` rounds
        (1: charged to this round, as MyopicOptimal does; ∞: ignored, PowerTrip's steady
        state).

        A join costs time (blocking joins: everyone waits for the joiner's fetch) or progress
        (non-blocking joins: the joiner adds nothing to its first round); both one-off costs
        are spread: the mean round of a set kept ``horizon`` rounds gains ``steady + (first −
        steady) / h`` and lasts ``steady + join / h``.
        """
        with np.errstate(divide="ignore", invalid="ignore"):
            t = self.t_steady + self.join_s / horizon
            gain = self.gain_steady + (self.gain - self.gain_steady) / horizon
            return np.where(t > 0, gain / t, 0.0)

    def keep(self) -> int:
        """Index of the current set; with none joined, the best set at horizon 1."""
        if self.current.any():
            return index_of(self.sets, self.current)
        return int(np.argmax(self.efficiency(1.0)))

    def pick(self, horizon: float, margin: float = 0.0) -> int:
        """The best set at ``horizon``, unless it beats the current set by less than
        ``margin`` (a share: 0.05 is 5%); then the current set. With no margin, the best."""
        eff = self.efficiency(horizon)
        best = int(np.argmax(eff))
        if margin <= 0.0:
            return best
        keep = self.keep()
        return keep if eff[best] < (1.0 + margin) * eff[keep] else best


def index_of(sets: np.ndarray, mask: np.ndarray) -> int:
    """Row of ``sets`` (M, N) equal to ``mask`` (N,)."""
    return int(np.flatnonzero((sets == mask).all(axis=1))[0])


def predict_pool(env: Any, now: Any) -> Pool:
    """The pool of the unwrapped env ``env`` at ``now`` (its ``decision_view()``, with at least
    one site available), predicted in two vectorised ``predict_round`` calls."""
    sets = _pool(now)
    full = env.predict_round(sets)
    steady = env.predict_round(sets, steady_state=True)
    t_full = np.asarray(full.round_time_s, dtype=np.float64)
    t_steady = np.asarray(steady.round_time_s, dtype=np.float64)
    return Pool(
        sets=sets,
        full=full,
        steady=steady,
        t_full=t_full,
        t_steady=t_steady,
        gain=np.asarray(full.delta_progress, dtype=np.float64),
        gain_steady=np.asarray(steady.delta_progress, dtype=np.float64),
        join_s=np.maximum(t_full - t_steady, 0.0),
        current=now.joined & now.available,
    )


def build(env: Any) -> Candidates:
    """The candidates of the unwrapped env ``env`` (a ``PowerTripEnv``) for the coming round."""
    now = env.decision_view()
    n = now.n_sites
    current = now.joined & now.available
    masks = np.zeros((N_SLOTS, n), dtype=bool)
    slot_features = np.zeros((N_SLOTS, len(SLOT_FEATURES)), dtype=np.float64)
    global_features = np.array(
        [
            now.progress,
            float(current.any()),
            now.available.sum() / n,
            current.sum() / n,
            np.log1p(now.last_round_s / 600.0),
        ]
    )
    if now.available.any():
        pool = predict_pool(env, now)
        keep = pool.keep()
        picks = [pool.pick(h) for h in (*HORIZONS, np.inf)]
        picks += [pool.pick(h, STICKY_MARGIN) for h in STICKY_HORIZONS]
        picks += [pool.pick(*TUNED_RULE)]
        rows = np.array([keep, *picks])
        masks[:] = pool.sets[rows]
        times = (pool.t_full, pool.t_steady, pool.join_s)
        features = _describe(now, pool.sets, pool.full, pool.steady, times, current, keep)
        slot_features[:] = features[rows]
    features = np.concatenate([slot_features.ravel(), global_features]).astype(np.float32)
    return Candidates(masks, np.clip(features, -10.0, 10.0))


def _describe(
    now: Any,
    pool: np.ndarray,
    full: Any,
    steady: Any,
    times: tuple[np.ndarray, np.ndarray, np.ndarray],
    current: np.ndarray,
    keep: int,
) -> np.ndarray:
    """(M, len(SLOT_FEATURES)): each pooled set in the terms of ``SLOT_FEATURES``; ``times``
    are ``build``'s round times with and without joins and their difference."""
    t_full, t_steady, join_s = times
    size = pool.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff_full = np.where(t_full > 0, full.delta_progress / t_full, 0.0)
        eff_steady = np.where(t_steady > 0, steady.delta_progress / t_steady, 0.0)
        t_ref = t_steady[int(np.argmax(eff_steady))]
        log_time = np.log(np.where(t_full > 0, t_full / t_ref, 1.0))
        join_share = np.where(t_full > 0, join_s / t_full, 0.0)
        joining = (pool & ~now.joined).sum(axis=1) / np.maximum(size, 1)
        union = (pool | current).sum(axis=1)
        overlap = np.where(union > 0, (pool & current).sum(axis=1) / union, 0.0)
        power = np.where(now.available, now.power_w, 0.0)
        coming = now.forecast_power_w.mean(axis=0)
        trend = np.where(
            pool @ power > 0, (pool @ coming) / (pool @ power), 0.0
        )  # > 1: the set's power is rising
        low = np.where(power > 0, now.forecast_power_w.min(axis=0) / power, 0.0)
        lowest = np.where(pool, low[None, :], np.inf).min(axis=1)
        eff_8 = full.delta_progress / (t_steady + join_s / 8.0)
        vs_keep_8 = _log_ratio(eff_8, eff_8[keep], current.any())
        vs_keep_steady = _log_ratio(eff_steady, eff_steady[keep], current.any())
    return np.column_stack(
        [
            _ratio(eff_full),
            _ratio(eff_steady),
            _ratio(np.asarray(full.delta_progress, dtype=np.float64)),
            log_time,
            join_share,
            size / now.n_sites,
            joining,
            overlap,
            np.minimum(trend, 3.0),
            np.minimum(lowest, 1.0),
            vs_keep_8,
            vs_keep_steady,
        ]
    )


def _log_ratio(values: np.ndarray, reference: float, has_reference: bool) -> np.ndarray:
    """log(values / reference) in [-3, 3]; 0 where there is nothing to compare with."""
    if not has_reference or not reference > 0:
        return np.zeros_like(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.maximum(values, 0.0) / reference)
    return np.clip(np.nan_to_num(out, nan=-3.0, neginf=-3.0, posinf=3.0), -3.0, 3.0)
