"""Deployable rules for the carbon objective: reach the target before the deadline with the
least grid carbon (``powertrip_env.rewards.CarbonCost``, docs/carbon.md).

The time rules spend the whole time budget's slack on nothing: they finish as early as they can.
A carbon task's deadline leaves slack, and these rules spend it on cleaner sites and hours, as
carbon-aware schedulers shift work in space and time (Wiesner et al., "Let's Wait Awhile",
Middleware '21; Hanafy et al., CarbonScaler, 2024):

* ``CarbonGreedy``: the available sites ranked by the grid carbon of a sample now (what a site's
  powered GPUs draw above its PV, at its zone's intensity, over its samples per second); of the
  ranking's prefixes, the one with the least carbon per unit of progress that keeps the deadline
  at its predicted pace (``predict_round``); the fastest if none does.
* ``DeadlineHorizon``: the horizon rule made deadline-aware: the horizon rule's pool of sets and
  the greedy's prefixes, each played for ``horizon`` rounds on the forecast issued now
  (``predict_plan``: joins charged over the rounds a set is kept, the grid's intensity and PV
  guessed as the same hour yesterday), and the same sets after waiting ``wait_rounds`` idle
  rounds; the one with the least projected carbon among those projected to finish in time, kept
  unless another is ``margin`` cleaner.
* ``FedZeroExcess``: FedZero (Wiesner et al., e-Energy '24) on excess renewables: only the sites
  whose on-site PV covers at least half of what they would draw train; with none, it waits while
  the deadline allows; when they cannot finish in time, sites are added in the greedy's order.

All three read only ``decision_view`` (whose carbon intensity and PV are the current row's, known
when a round starts, as its power is) and the what-ifs; none reads a future actual.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy, _mask, prefix_masks, rank_available
from powertrip_env.baselines.candidates import pool_of
from powertrip_env.units import kg_to_g, per_kwh_to_per_j
from powertrip_env.view import DecisionView

# The share of the time left that a rule keeps in reserve against its predicted pace being
# optimistic (the progress per round falls as training goes on, and forecasts err). Tuned on
# PowerTrip-Carbon-v2's 20 first train episodes without jitter (benchmarks/carbon_reserve.py;
# docs/carbon.md has the sweep over 0, 0.05, 0.1 and 0.2): the least carbon cost of CarbonGreedy
# and DeadlineHorizon is at 0.05, where they meet all 20 deadlines (at 0 they miss 1 and 2).
# FedZeroExcess, which waits for PV, needs more: its least cost is at 0.3 (swept to 0.5).
TUNED_RESERVE = 0.05
FEDZERO_RESERVE = 0.3


def grid_g_per_s(now: DecisionView) -> np.ndarray:
    """(N,) grams of grid carbon per second at each site now, busy: its powered GPUs' draw above
    its PV output (which is used first), at its zone's intensity (docs/model.md, "Carbon")."""
    return per_kwh_to_per_j(np.maximum(now.power_w - now.pv_w, 0.0) * now.grid_g_per_kwh)


def grid_g_per_sample(now: DecisionView) -> np.ndarray:
    """(N,) grams of grid carbon per sample at each site now: ``grid_g_per_s`` over the samples
    per second its powered GPUs compute (inf where nothing is powered)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(now.rate > 0, grid_g_per_s(now) / now.rate, np.inf)


def time_left_s(now: DecisionView, reserve: float) -> float:
    """Seconds to the deadline, less ``reserve`` of them."""
    return (now.time_budget_s - now.elapsed_s) * (1.0 - reserve)


def finish_s(now: DecisionView, pace: np.ndarray) -> np.ndarray:
    """(K,) seconds each set would take to the target at its predicted ``pace`` (progress per
    second now; inf where it makes none)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pace > 0, (now.progress_needed - now.surrogate_progress) / pace, np.inf)


def available_prefixes(now: DecisionView, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The available sites by ``score``, best first, and that ranking's prefixes (K, N): the
    sets the carbon rules (and the agent's carbon slots) choose among."""
    n_avail = int(now.available.sum())
    order = rank_available(score, now.available)[:n_avail]
    return order, prefix_masks(order)[:n_avail]


class _CarbonRule(Policy):
    """What the carbon rules share: they need carbon intensity, and rank the available sites."""

    def reset(self, env: Any) -> None:
        super().reset(env)
        if not self.env.decision_view().carbon_known:
            raise ValueError(
                f"{self.name} needs a scenario with a carbon intensity file ([trace] "
                "carbon_file), such as the carbon tasks (PowerTrip-Carbon-v2)"
            )


class CarbonGreedy(_CarbonRule):
    """The least carbon per progress among the prefixes of the cleanest-sample ranking that keep
    the deadline at their predicted steady-state pace; the fastest prefix if none does."""

    name = "CarbonGreedy"

    def __init__(self, reserve: float = TUNED_RESERVE) -> None:
        super().__init__()
        self.reserve = float(reserve)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        if not now.available.any():
            return np.zeros(now.n_sites, dtype=np.int8)
        order, masks = available_prefixes(now, -grid_g_per_sample(now))
        return _mask(now.n_sites, order[: self.choose(now, masks) + 1])

    def choose(self, now: DecisionView, masks: np.ndarray) -> int:
        """Index of the prefix to play among ``masks`` (K, N)."""
        pace = self.env.predict_round(masks, steady_state=True).efficiency  # progress / s
        return greedy_choice(now, masks, pace, self.reserve)


def grams_per_progress(now: DecisionView, masks: np.ndarray, pace: np.ndarray) -> np.ndarray:
    """(K,) grams of grid carbon per unit of progress of each set of ``masks`` (K, N) at its
    ``pace`` (progress per second) and the grid now; inf where it makes none."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pace > 0, (masks @ grid_g_per_s(now)) / pace, np.inf)


def greedy_choice(now: DecisionView, masks: np.ndarray, pace: np.ndarray, reserve: float) -> int:
    """``CarbonGreedy``'s pick among ``masks`` (K, N) at their ``pace``: the least carbon per
    progress among the sets on time with ``reserve`` of the time left kept back; the fastest if
    none is. The candidate agent's carbon slots (``agents/carbon_slots.py``) offer it as a slot."""
    finish = finish_s(now, pace)
    on_time = finish <= time_left_s(now, reserve)
    if on_time.any():
        return int(np.argmin(np.where(on_time, grams_per_progress(now, masks, pace), np.inf)))
    return int(np.argmin(finish))


class DeadlineHorizon(_CarbonRule):
    """The horizon rule's sets (and the greedy's prefixes), each kept for ``horizon`` rounds on
    the forecast, now or after ``wait_rounds`` idle rounds: the least projected carbon among
    those projected on time (the fastest if none is), kept unless ``margin`` cleaner."""

    name = "DeadlineHorizon"

    def __init__(
        self,
        horizon: int = 12,
        margin: float = 0.05,
        wait_rounds: int = 12,
        reserve: float = TUNED_RESERVE,
        carbon_forecast: str = "yesterday",
    ) -> None:
        super().__init__()
        if horizon < 1 or wait_rounds < 0 or margin < 0.0 or not 0.0 <= reserve < 1.0:
            raise ValueError(
                f"DeadlineHorizon: horizon={horizon} >= 1, wait_rounds={wait_rounds} >= 0, "
                f"margin={margin} >= 0 and 0 <= reserve={reserve} < 1 expected"
            )
        self.horizon, self.margin, self.wait_rounds = int(horizon), float(margin), int(wait_rounds)
        self.reserve, self.carbon_forecast = float(reserve), carbon_forecast

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        if not now.available.any():
            return np.zeros(now.n_sites, dtype=np.int8)
        _, prefixes = available_prefixes(now, -grid_g_per_sample(now))
        sets = np.unique(np.concatenate([pool_of(self.env), prefixes]), axis=0)
        sets = sets[sets.any(axis=1)]
        # each set from now, and (when waiting is allowed) after the idle rounds, for as many
        # rounds in all, so the two are projected alike
        plans = np.repeat(sets[:, None, :], self.wait_rounds + self.horizon, axis=1)
        if self.wait_rounds:
            waits = plans.copy()
            waits[:, : self.wait_rounds] = False
            plans = np.concatenate([plans, waits])
        grams, finish = self.project(now, plans)
        on_time = finish <= time_left_s(now, self.reserve)
        if not on_time.any():
            return sets[int(np.argmin(finish[: sets.shape[0]]))].astype(np.int8)  # the fastest
        best = int(np.argmin(np.where(on_time, grams, np.inf)))
        current = now.joined & now.available
        if self.margin > 0.0 and current.any():
            keep = np.flatnonzero((sets == current).all(axis=1))
            if keep.size and on_time[keep[0]]:
                if grams[best] * (1.0 + self.margin) > grams[keep[0]]:  # not `margin` cleaner
                    best = int(keep[0])
        if best >= sets.shape[0]:  # waiting is best: an idle round, and plan again after it
            return np.zeros(now.n_sites, dtype=np.int8)
        return sets[best].astype(np.int8)

    def project(self, now: DecisionView, plans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(M,) projected grid carbon (g) and time (s) to the target of each plan (M, R, N):
        its own if it reaches the target within its rounds, else its rounds' carbon and time
        scaled up by the progress still missing at the pace of its rounds that trained."""
        out = self.env.predict_plan(plans, carbon_forecast=self.carbon_forecast)
        elapsed = out.state.time_s - now.clock_s
        grams = out.state.carbon_g - kg_to_g(now.carbon_kg)
        gained = out.state.progress - now.surrogate_progress
        remaining = out.progress_needed - now.surrogate_progress
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(gained > 0, remaining / gained, np.inf)
            grams = np.where(gained > 0, grams * scale, np.inf)
            finish = np.where(gained > 0, elapsed * scale, np.inf)
        return np.where(out.success, out.state.carbon_g - kg_to_g(now.carbon_kg), grams), np.where(
            out.success, out.state.time_s - now.clock_s, finish
        )


class FedZeroExcess(_CarbonRule):
    """Train on excess renewables only: the sites whose PV covers at least ``pv_share`` of their
    draw; with none, wait while the deadline allows; when they cannot finish in time, add sites
    in ``CarbonGreedy``'s order until they can (all of them, if nothing can)."""

    name = "FedZeroExcess"

    def __init__(self, pv_share: float = 0.5, reserve: float = FEDZERO_RESERVE) -> None:
        super().__init__()
        self.pv_share, self.reserve = float(pv_share), float(reserve)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        if not now.available.any():
            return np.zeros(now.n_sites, dtype=np.int8)
        excess = (now.pv_w >= self.pv_share * now.power_w) & now.available
        # the excess sites first, then the others by the grid carbon of a sample
        order, masks = available_prefixes(now, -grid_g_per_sample(now) + np.where(excess, 1e9, 0.0))
        n_avail = order.size
        finish = finish_s(now, self.env.predict_round(masks, steady_state=True).efficiency)
        left = time_left_s(now, self.reserve)
        k = int(excess.sum())
        fastest = float(finish.min())
        if k == 0:
            if fastest + now.interval_s <= left:  # an idle round still leaves time: wait
                return np.zeros(now.n_sites, dtype=np.int8)
            k = 1
        while k < n_avail and finish[k - 1] > left:
            k += 1
        if finish[k - 1] > left:  # nothing is on time: the fastest
            k = int(np.argmin(finish)) + 1
        return _mask(now.n_sites, order[:k])
