"""Candidate site sets, one episode at a time: what the horizon rule and the agent choose among.

A per-site action space asks the agent to find, among 2^N − 1 sets, one whose round is short
and whose sites will stay: it has to learn from scratch what ``predict_round`` already knows.
The candidate sets hand the agent that knowledge instead and ask only the question no one-round
prediction answers: how long will the sites chosen now stay chosen? A site that sat out the last
round pays a join before it trains. Charged to one round, the join makes every absent site look
unprofitable (``MyopicOptimal`` re-selects one or two sites every round and pays joins again and
again); left out, it makes every set look free to change (PowerTrip's steady-state rule). The
right charge is the join spread over the rounds the set will be kept: a horizon, and choosing it
is the agent's job.

The pool, the slots and the features are built inside the compiled kernel for a whole batch of
episodes (``powertrip_env.dynamics.candidates``; the env's ``candidates()`` method, the vector
env's for all its sub-environments in one call). This module gives one episode's slots the
shape the policies use, ``Candidates``; ``powertrip_env.baselines.lookahead`` plays one slot's rule
for any horizon and margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.dynamics.candidates import (
    GLOBAL_FEATURES,
    HORIZONS,
    N_FEATURES,
    N_SLOTS,
    SLOT_FEATURES,
    SLOT_RULES,
    STICKY_HORIZONS,
    STICKY_MARGIN,
)

__all__ = [
    "GLOBAL_FEATURES",
    "HORIZONS",
    "N_FEATURES",
    "N_SLOTS",
    "SLOT_FEATURES",
    "SLOT_RULES",
    "STICKY_HORIZONS",
    "STICKY_MARGIN",
    "Candidates",
    "build",
    "index_of",
    "pool_of",
]


@dataclass(frozen=True)
class Candidates:
    """The sets the agent chooses among this round and what it is shown about them."""

    masks: np.ndarray  # (N_SLOTS, N) bool; slot 0 keeps the current set
    features: np.ndarray  # (N_FEATURES,) float32


def build(
    env: Any,
    rules: Sequence[tuple[float, float]] | None = None,
    belief: Any = None,
    estimates: Any = None,
) -> Candidates:
    """The candidates of the unwrapped env ``env`` (a ``PowerTripEnv``) for the coming round:
    slot 0 the current set, then one slot per ``(horizon, margin)`` rule (default: the agent's
    ``SLOT_RULES``), their what-ifs assuming ``belief`` (default: the stated values), or the
    beliefs of ``estimates`` (``baselines.adaptive.Estimates``) updated with the telemetry now."""
    if estimates is not None:
        batch = estimates.candidates(env, rules)
    elif belief is None:
        batch = env.candidates(rules)
    else:
        batch = env.candidates(rules, belief=belief)
    return Candidates(batch.masks[0], batch.features[0])


def pool_of(env: Any) -> np.ndarray:
    """(M, N) bool: the sets this round's candidates were picked from (the prefixes of three
    rankings of the available sites, the current set with one site flipped, the current set);
    empty when no site is available."""
    batch = env.candidates(())
    return batch.pool[0, : int(batch.pool_size[0])]


def index_of(sets: np.ndarray, mask: np.ndarray) -> int:
    """Row of ``sets`` (M, N) equal to ``mask`` (N,): where the pool holds the current set."""
    return int(np.flatnonzero((sets == mask).all(axis=1))[0])
