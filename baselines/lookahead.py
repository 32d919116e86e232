"""Deployable rules that look past the coming round: the horizon rule and a forecast MPC.

A site that sat out the last round pays a join (starting a worker, fetching the training state:
minutes on the flagship) before it trains. Charged to one round, the join makes every absent
site look unprofitable (``MyopicOptimal`` changes sets often and pays joins again and again);
ignored, it makes every set look free to change (PowerTrip's steady-state rule). Both rules here
charge it over the rounds a set will be kept, and both keep the current set unless another is
clearly better, since a forecast's error would eat a small predicted gain.

* ``HorizonRule``: each round, among ``powertrip_env.baselines.candidates``' pool (the prefixes of
  three rankings, the current set with one site added or removed, the current set), the set with the
  best predicted progress per second when its joins are spread over ``horizon`` rounds
  (``predict_round`` twice: with and without joins), kept unless it beats the current set by
  ``margin``. It is slot "sticky h" of the candidate-set agent, with h and the margin tuned.
* ``ForecastMPC``: a receding-horizon planner. Each round it plays every pooled set for
  ``lookahead`` rounds on the forecast issued now (``env.predict_plan``: the true dynamics on
  the world the forecast describes, no jitter, no future actual), takes the one that would reach
  the target first (at the pace of those rounds if it does not reach it in them), keeps the
  current set unless that one is ``margin`` faster, plays one round and plans again.

Both read only ``decision_view`` and the what-ifs; they are deployable baselines, not
references. ``TUNED`` holds their parameters as tuned on the flagship's train days
(``powertrip tune``); the registry builds them with those.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.candidates import build, index_of, pool_of

# Tuned on PowerTrip-v0's train days (``powertrip tune``, docs/agents.md gives the
# grid and every cell's mean TTA): the parameters the registry builds the rules with.
# HorizonRule's is also the candidate-set agent's last slot (dynamics.candidates.TUNED_RULE).
TUNED: dict[str, dict[str, float]] = {
    "HorizonRule": {"horizon": 6.0, "margin": 0.02},
    "ForecastMPC": {"lookahead": 12.0, "margin": 0.1},
}


def _check(name: str, value: float, low: float) -> None:
    if not np.isfinite(value) or value < low:
        raise ValueError(f"{name}={value!r}: expected a finite number >= {low}")


class HorizonRule(Policy):
    """Joins spread over ``horizon`` rounds; the current set kept unless the best beats it by
    ``margin`` (a share: 0.05 is 5%). Deployable: ``decision_view`` and ``predict_round``."""

    name = "HorizonRule"

    def __init__(self, horizon: float, margin: float) -> None:
        super().__init__()
        _check("horizon", horizon, 1.0)
        _check("margin", margin, 0.0)
        self.horizon, self.margin = float(horizon), float(margin)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        # slot 1 of a single rule: all-zero when no site is available
        return build(self.env, ((self.horizon, self.margin),)).masks[1].astype(np.int8)


class ForecastMPC(Policy):
    """A receding-horizon planner on the forecast issued now: each pooled set played for
    ``lookahead`` rounds (``env.predict_plan``), the one that would reach the target first, kept
    unless it is ``margin`` faster than the current set; one round played, then planned again.
    Deployable."""

    name = "ForecastMPC"

    def __init__(self, lookahead: int, margin: float) -> None:
        super().__init__()
        _check("lookahead", lookahead, 1.0)
        _check("margin", margin, 0.0)
        self.lookahead, self.margin = int(lookahead), float(margin)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        if not now.available.any():
            return np.zeros(now.n_sites, dtype=np.int8)
        sets = pool_of(self.env)
        score = self.scores(sets)
        best = int(np.argmax(score))
        current = now.joined & now.available
        if self.margin > 0.0 and current.any():
            keep = index_of(sets, current)
            if -score[best] * (1.0 + self.margin) > -score[keep]:  # not `margin` faster
                best = keep
        return sets[best].astype(np.int8)

    def scores(self, sets: np.ndarray) -> np.ndarray:
        """(M,) minus the predicted time to the target (s) of each set kept for ``lookahead``
        rounds: its time if it reaches the target in them, else the time at which it would at
        the progress rate of those rounds (never, if the coverage it ends with caps the accuracy
        below the target). Higher is better."""
        now = self.env.decision_view()
        out = self.env.predict_plan(sets, rounds=self.lookahead)
        elapsed = out.state.time_s - now.clock_s
        gained = out.state.progress - now.surrogate_progress
        # at the coverage the set leaves the model with: a set that leaves label-skewed sites
        # out may cap the accuracy below the target, which no progress rate overcomes
        remaining = out.progress_needed - now.surrogate_progress
        with np.errstate(divide="ignore", invalid="ignore"):
            projected = np.where(gained > 0, elapsed * remaining / gained, np.inf)
        return -np.where(out.success, elapsed, projected)
