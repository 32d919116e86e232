"""The policy interface, and the helpers the policies and the references are built from.

The bottom of ``baselines``: the deployable policies (``baselines/policies.py``), the clairvoyant
references (``baselines/references.py``) and the saved agents (``harness/models/loading.py``) all
subclass ``Policy``, and this module imports none of them. ``baselines/registry.py`` builds any
of them by name.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

MAX_EXHAUSTIVE_SITES = 16  # MyopicOptimal enumerates 2^N − 1 sets; 2^16 is still one fast call
CHUNK_ROWS = 8192  # candidate sets per predict_round call when enumerating many


class Policy:
    """A site-selection rule: ``reset`` once per episode, then ``act`` once per round.

    Subclasses read the environment through ``self.env.decision_view()`` (what is known now)
    and ``self.env.predict_round`` (the what-if from the forecast) on every call, never caching
    either, so what they read is always the current round's.
    """

    name: str = "Policy"

    def __init__(self) -> None:
        self.env: Any = None

    def reset(self, env: Any) -> None:
        """Bind to ``env`` (possibly wrapped) for a new episode, after ``env.reset``."""
        self.env = env.unwrapped

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        """The (N,) int8 0/1 mask of sites that take part in the coming round."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _mask(n: int, sites: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=np.int8)
    out[np.asarray(sites, dtype=np.intp)] = 1
    return out


def rank_available(score: np.ndarray, available: np.ndarray) -> np.ndarray:
    """Indices of all sites, available ones first by descending score (ties: lower index)."""
    key = np.where(available, -np.asarray(score, dtype=np.float64), np.inf)
    return np.lexsort((np.arange(key.shape[0]), key))


def prefix_masks(order: np.ndarray) -> np.ndarray:
    """(N, N) bool: row j selects the first j + 1 sites of ``order``."""
    n = order.shape[0]
    masks = np.zeros((n, n), dtype=bool)
    masks[:, order] = np.tri(n, dtype=bool)
    return masks


def first_peak(values: np.ndarray, usable: int) -> int:
    """Index of the first prefix whose successor does not improve (PowerTrip's stopping rule)."""
    for j in range(usable - 1):
        if not values[j + 1] > values[j]:
            return j
    return max(usable - 1, 0)


@functools.cache
def subset_matrix(m: int) -> np.ndarray:
    """(2^m − 1, m) bool: every non-empty subset of m items, built once per m and shared."""
    codes = np.arange(1, 1 << m, dtype=np.int64)
    out = ((codes[:, None] >> np.arange(m)) & 1).astype(bool)
    out.flags.writeable = False
    return out


def _efficiency(env: Any, masks: np.ndarray) -> np.ndarray:
    """Predicted ΔP/T_r of (M, N) candidate sets, in chunks so memory stays bounded."""
    out = np.empty(masks.shape[0])
    for lo in range(0, masks.shape[0], CHUNK_ROWS):
        out[lo : lo + CHUNK_ROWS] = env.predict_round(masks[lo : lo + CHUNK_ROWS]).efficiency
    return out
