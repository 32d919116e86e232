"""Rules for the measured track: what a rule reaches by measuring, and what it would reach if told.

On the measured track (a scenario with ``[unknowns]``) each episode's sites run at speeds, over
links and with joins that differ from the stated values, and the job's progress curve is known
only to a scaling-law fit's error (docs/model.md, "What is unknown"). A rule that trusts the
stated values (the ``HorizonRule`` and ``ForecastMPC`` of ``lookahead.py``) plans a world that is
not there. The rules here run those same rules with their what-ifs assuming another world, a
*belief* (``predict_round(..., belief=...)``):

* ``Adaptive``: the belief is estimated online from each site's telemetry, as a careful engineer
  would ship it: per site, the measured-over-stated ratio of its compute, exchange and join
  (an exponentially weighted mean in log space, so one noisy round moves it little), and the
  job's pace and noise scale fitted to the progress each round measured. A site not yet
  measured is taken as stated.
* ``Exploring``: ``Adaptive`` with optimism for what it has not measured: an unmeasured site is
  believed faster, better linked and quicker to join than stated, by ``TUNED_OPTIMISM`` σ of
  the scenario's spreads. The rule then tries it when that optimistic estimate says it would
  win, and its telemetry settles the question.
* ``Adaptive`` with ``tracking`` (``TrackingHorizon``, ``TrackingMPC``): the moving track's
  (docs/moving.md) estimator. There a site's speed and link change while the job runs, and an
  estimate that smooths every measurement lags each change by several rounds and, once the
  site sits out, keeps its worst reading for ever. ``TrackingEstimator`` jumps to a
  measurement that departs from the estimate by more than the jitter explains, keeps each
  site's long-run level apart from its current one, and lets the belief about a site it has
  not measured for a while drift back to that long-run level, so the rule tries it again.
  Tuned (``TUNED_TRACKING``), it lets the flagship's fail-slows pass and reacts to its link
  dips only: reacting to 24-minute events costs more than it saves there.
* ``Informed``: the belief is the episode's drawn unknowns themselves, read through the
  clairvoyant door: what perfect identification reaches, a reference and not deployable. It
  knows the world but not the future (the forecast, never future power). On the moving track
  it also reads every process's present state (a perfect monitor), never its future path.

The gap between the best adaptive rule and ``Informed`` is what measuring costs: the room a
learning agent may take (the benchmark's learnable room).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.dynamics.formulas import noise_scale_array
from powertrip_env.scenario import Scenario
from powertrip_env.units import s_to_h
from powertrip_env.view import DecisionView, UnknownFactors

# The smoothing of the per-site estimates: the weight of the newest measurement. A round's
# compute carries the scenario's jitter (σ = 0.05 on the flagship), so a few rounds average it.
SMOOTHING = 0.3
# The grid the job's noise-scale factor is fitted on (log-spaced, both ways of the stated one).
NOISE_GRID = np.exp(np.linspace(-0.5, 0.5, 21))
# ExploringHorizon's optimism, in σ of the scenario's spreads: tuned on PowerTrip-Measured-v0's
# train days (20 episodes, no jitter; docs/measured.md has the sweep: 0, 0.5, 1, 2, 3 σ gave
# 26.68, 26.59, 26.69, 26.86, 26.91 h). The inner rules keep lookahead.TUNED.
TUNED_OPTIMISM = 0.5


@dataclass(frozen=True)
class Tracking:
    """The moving track's change detection, forgetting and re-probing (``TrackingEstimator``).

    ``threshold`` is in units of the scenario's jitter (``[episode] jitter_sigma``) because the
    jitter is what a stable site's measurements scatter by: a departure of a few σ is a change,
    not noise. ``tau_h`` is in hours, not rounds, because the events it forgets are timed in
    hours whatever a round lasts: a belief formed ``age`` hours ago is still the site's with
    weight ``exp(-age / tau_h)``, as the chance that a memoryless event of mean length
    ``tau_h`` is still on.
    """

    threshold: float  # σ of the jitter a measurement must depart by to be a change
    tau_h: float  # h: how fast an unmeasured site's belief returns to its long-run level

    def __post_init__(self) -> None:
        if not self.threshold >= 0.0 or not self.tau_h > 0.0:
            raise ValueError(f"Tracking: threshold >= 0 and tau_h > 0, not {self!r}")


# TrackingHorizon's and TrackingMPC's change detection, tuned on train days only
# (benchmarks/tracking_tune.py). On PowerTrip-Moving-v0 (60 paired episodes, AdaptiveHorizon
# 26.14 h) mean TTA (h) for tau_h 0.25 0.5 1 2 4 8 h:
#     2σ: 26.34 26.41 26.37 26.40 26.47 26.52      6σ: 26.24 26.28 26.31 26.37 26.48 26.48
#     3σ: 26.28 26.31 26.32 26.37 26.37 26.43      8σ: 26.24 26.29 26.32 26.37 26.47 26.50
#     4σ: 26.23 26.28 26.32 26.36 26.46 26.45     12σ: 26.15 26.15 26.16 26.16 26.15 26.16
#     5σ: 26.23 26.28 26.31 26.37 26.45 26.43
# Every cell loses to AdaptiveHorizon: its fail-slows last 24 min (a few rounds) and slow a
# site 1.6x (9σ of its jitter), and reacting to them costs more set changes than it saves;
# the loss grows with tau_h (a slow site tried again too soon) and shrinks with the band, to
# a tie within error at 12σ (+0.013 ± 0.012 h), which only a link dip crosses. In a harsher
# world on the same train days (``--stress``: events ×2 for 3 h, 2 a day) the rule gains
# 0.38 ± 0.09 h over AdaptiveHorizon at 8σ and tau_h 2 h, and re-probing is what gains it.
TUNED_TRACKING = Tracking(threshold=12.0, tau_h=0.25)


class BeliefEnv:
    """An environment as a rule sees it when its what-ifs assume ``belief``: everything else is
    the environment's own (attribute access passes through)."""

    def __init__(self, env: Any, belief: UnknownFactors) -> None:
        self._env = env
        self.belief = belief

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    @property
    def unwrapped(self) -> BeliefEnv:
        return self

    def predict_round(self, mask: Any, *, steady_state: bool = False) -> Any:
        return self._env.predict_round(mask, steady_state=steady_state, belief=self.belief)

    def predict_plan(self, plan: Any, rounds: int | None = None, **kwargs: Any) -> Any:
        return self._env.predict_plan(plan, rounds, belief=self.belief, **kwargs)

    def candidates(self, rules: Any = None) -> Any:
        return self._env.candidates(rules, belief=self.belief)


class _Believing(Policy):
    """A rule (``inner``) whose what-ifs assume this policy's belief."""

    def __init__(self, inner: Policy, name: str) -> None:
        super().__init__()
        self.inner = inner
        self.name = name

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.inner.reset(env)
        self.inner.env = BeliefEnv(self.env, self.first_belief())

    def first_belief(self) -> UnknownFactors:
        raise NotImplementedError

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        return self.inner.act(obs, info)


class Informed(_Believing):
    """REFERENCE (reads the draw): ``inner`` told the episode's drawn unknowns, never the future.

    What perfect identification of the sites and the job would reach with this rule. On the
    known track the draw is the stated world and ``Informed`` plays ``inner`` exactly.
    ``told`` names the factors it is told (``UnknownFactors``' fields); the others it believes as
    stated: which unknown holds the room (``powertrip room``). On the moving track
    (docs/moving.md) it is also a perfect monitor (``monitor``): before each round it reads
    every process's state at that moment (``Clairvoyant.monitored``), and believes it will
    last; ``monitor=False`` is told the draw alone.
    """

    def __init__(
        self,
        inner: Policy,
        name: str,
        told: tuple[str, ...] | None = None,
        monitor: bool = True,
    ) -> None:
        super().__init__(inner, name)
        fields = UnknownFactors.__dataclass_fields__
        if told is not None and not set(told) <= set(fields):
            raise ValueError(f"Informed: told={told!r}; the factors are {', '.join(fields)}")
        self.told = told
        self.monitor = monitor
        self.moving = False

    def first_belief(self) -> UnknownFactors:
        door = self.env.clairvoyant()
        self.moving = self.monitor and bool(door.params.moving)
        return self._told(door.monitored() if self.moving else door.drawn())

    def _told(self, drawn: UnknownFactors) -> UnknownFactors:
        if self.told is None:
            return drawn
        stated = UnknownFactors.nominal(self.env.decision_view().n_sites)
        return stated.replace(**{name: getattr(drawn, name) for name in self.told})

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        if self.moving:
            self.inner.env.belief = self._told(self.env.clairvoyant().monitored())
        return self.inner.act(obs, info)


class Estimator:
    """Online estimates of the unknowns from one episode's telemetry.

    ``update`` reads the decision view at the start of each round: the telemetry each site
    last gave (``measured_*``, with the round it was taken in) and the progress the last round
    made against what the stated curve predicts for its global batch.
    """

    def __init__(self, optimism: float = 0.0, spreads: Any = None) -> None:
        self.optimism = float(optimism)  # in σ of the scenario's spreads, for unmeasured sites
        self.spreads = spreads
        # per site, (3, N): the log of measured over stated compute, exchange and join, and
        # how many measurements each holds
        self.log = np.zeros((3, 0))
        self.weight = np.zeros((3, 0))
        self.seen_round = np.zeros(0, dtype=np.int64)
        # per round measured, the log of its progress over the stated curve's, for every
        # noise-scale factor of NOISE_GRID: (grid, capacity), the first ``fitted`` columns
        # filled. Kept as rounds arrive, so a fit costs O(grid) reductions, not a rebuild.
        self.resid = np.zeros((NOISE_GRID.shape[0], 0))
        self.fitted = 0
        self.workload: Any = None
        self.n_sites = 0
        self.last: tuple[float, float] | None = None  # (progress, batch) of the round played

    def reset(self, scenario: Scenario) -> None:
        """A new episode of ``scenario`` (its stated workload is what the fit starts from)."""
        n = scenario.n_sites
        self.workload = scenario.workload
        self.n_sites = n
        self.log = np.zeros((3, n))
        self.weight = np.zeros((3, n))
        self.seen_round = np.full(n, -1, dtype=np.int64)
        self.resid = np.zeros((NOISE_GRID.shape[0], 64))
        self.fitted = 0
        self.last = None

    def update(self, now: DecisionView) -> None:
        fresh = now.measured_round > self.seen_round
        for f, ratio in enumerate((now.measured_compute, now.measured_transfer)):
            got = fresh & (ratio > 0.0)
            x = np.log(np.where(got, ratio, 1.0))
            self._measure(f, got, x, now)
            self.weight[f] += got
        # a join has no jitter: its one measurement is the site's join (1: never joined yet)
        joined = now.measured_join != 1.0
        self.log[2] = np.where(joined, np.log(np.maximum(now.measured_join, 1e-9)), 0.0)
        self.weight[2] = joined.astype(np.float64)
        self.seen_round = np.maximum(self.seen_round, now.measured_round)
        if self.last is not None and now.rounds > 0:
            before, batch = self.last
            gained = now.surrogate_progress - before
            if batch > 0.0 and gained > 0.0:
                self._measured(before, batch, gained)
        self.last = None

    def _measure(self, f: int, got: np.ndarray, x: np.ndarray, now: DecisionView) -> None:
        """Fold the new log-ratios ``x`` of field ``f`` (0 compute, 1 exchange) into the
        estimate where ``got``: a site's first measurement is its estimate, later ones are
        smoothed in (``SMOOTHING``), since on a world that holds still only the jitter moves
        them."""
        first = got & (self.weight[f] == 0.0)
        smoothed = (1.0 - SMOOTHING) * self.log[f] + SMOOTHING * x
        self.log[f] = np.where(first, x, np.where(got, smoothed, self.log[f]))

    def site_logs(self) -> np.ndarray:
        """(3, N) the log of each site's believed compute, exchange and join over stated: what
        ``belief`` is built on, and what a subclass that forgets reshapes."""
        return self.log

    def _measured(self, before: float, batch: float, gained: float) -> None:
        """One round's progress ``gained`` from ``before`` with global ``batch``: its residual
        against the stated curve at every noise factor of the grid."""
        if self.fitted == self.resid.shape[1]:
            grown = np.zeros((self.resid.shape[0], 2 * self.resid.shape[1] + 1))
            grown[:, : self.fitted] = self.resid
            self.resid = grown
        wl = self.workload
        eff = 1.0 / (1.0 + noise_scale_array(wl, before, NOISE_GRID) / batch)
        stated = wl.local_steps * wl.eta_local * eff
        self.resid[:, self.fitted] = np.log(gained / stated)
        self.fitted += 1

    def played(self, now: DecisionView, mask: np.ndarray) -> None:
        """Remember the round about to be played: its start's progress and global batch."""
        batch = float(self.workload.site_batch * np.count_nonzero((mask > 0) & now.available))
        self.last = (now.surrogate_progress, batch)

    def pace_noise(self) -> tuple[float, float]:
        """The job's pace and noise-scale factors that best explain the progress measured: a
        least-squares fit in log space over ``NOISE_GRID``, the pace then in closed form."""
        if self.fitted == 0:
            return 1.0, 1.0
        resid = self.resid[:, : self.fitted]
        log_pace = np.log(np.exp(resid.mean(axis=1)))  # as the pace is applied: exp, then log
        err = np.sum((resid - log_pace[:, None]) ** 2, axis=1)
        best, at = math.inf, None
        for g in range(err.shape[0]):  # the first of near-equal fits wins
            if err[g] < best - 1e-12:
                best, at = float(err[g]), g
        if at is None:  # no finite fit
            return 1.0, 1.0
        return float(np.exp(resid[at].mean())), float(NOISE_GRID[at])

    def belief(self) -> UnknownFactors:
        """What the telemetry says so far (with ``optimism``, about the sites it has not
        measured too)."""
        log = self.site_logs()
        thr = np.exp(-log[0])  # compute time over stated: its inverse is the speed
        transfer = np.exp(log[1])
        join = np.exp(log[2])
        if self.optimism > 0.0 and self.spreads is not None:
            s = self.spreads
            unseen = self.weight[0] == 0.0
            thr = np.where(unseen, math.exp(self.optimism * s.throughput_sigma), thr)
            link = math.exp(-self.optimism * math.hypot(s.rtt_sigma, s.bandwidth_sigma))
            transfer = np.where(self.weight[1] == 0.0, link, transfer)
            join = np.where(self.weight[2] == 0.0, math.exp(-self.optimism * s.join_sigma), join)
        pace, noise = self.pace_noise()
        # an exchange measured r times the stated one: its RTT times r and its bandwidth over r
        return UnknownFactors(pace, noise, thr, transfer, 1.0 / transfer, join)


class TrackingEstimator(Estimator):
    """``Estimator`` for a world that moves while the job runs (docs/moving.md).

    A site's speed and link change for minutes to hours at a time (a fail-slow, a link
    excursion, a power callback). Smoothing every measurement, as ``Estimator`` does, lags a
    change by several rounds, and a site that slowed and then sat out keeps its slow estimate
    for ever, so the rule never tries it again once it has recovered. Three changes, per site
    and for compute and exchange (the join is measured once and has no jitter, so it is kept
    as is):

    * change detection: a measurement that departs from the current level by more than
      ``threshold`` σ of the jitter replaces it; one within that band is smoothed in as before.
    * forgetting: a long-run level (the site's static draw) is kept apart from the current
      one. Every event slows a site down, so a measurement well above the long-run level is an
      event and leaves it alone; one well below it says the long-run level was itself measured
      in an event, and replaces it.
    * re-probing: the belief is the long-run level plus the current level's departure from it
      weighted ``exp(-age / tau_h)``, with ``age`` the hours since the site was last measured.
      A site that slowed and then sat out drifts back to its long-run level, and the inner rule
      tries it again when that would pay.

    On a world that holds still the current and long-run levels coincide (up to the rare
    departure of the jitter beyond the band) and the belief is ``Estimator``'s.
    """

    def __init__(self, tracking: Tracking, optimism: float = 0.0, spreads: Any = None) -> None:
        super().__init__(optimism, spreads)
        self.tracking = tracking
        self.band = 0.0  # the threshold in log-ratio: threshold x the scenario's jitter σ
        self.base = np.zeros((2, 0))  # per site, the long-run log-ratios of compute, exchange
        self.measured_s = np.zeros((2, 0))  # the clock (s) of each one's last measurement
        self.clock_s = 0.0

    def reset(self, scenario: Scenario) -> None:
        super().reset(scenario)
        n = scenario.n_sites
        self.band = self.tracking.threshold * scenario.episode.jitter_sigma
        self.base = np.zeros((2, n))
        self.measured_s = np.zeros((2, n))
        self.clock_s = 0.0

    def update(self, now: DecisionView) -> None:
        self.clock_s = now.clock_s  # the end of the round the fresh measurements come from
        super().update(now)

    def _measure(self, f: int, got: np.ndarray, x: np.ndarray, now: DecisionView) -> None:
        first = got & (self.weight[f] == 0.0)
        level, base = self.log[f], self.base[f]
        level_next = np.where(
            np.abs(x - level) > self.band, x, (1.0 - SMOOTHING) * level + SMOOTHING * x
        )
        base_next = np.where(
            x < base - self.band,
            x,
            np.where(x > base + self.band, base, (1.0 - SMOOTHING) * base + SMOOTHING * x),
        )
        self.log[f] = np.where(first, x, np.where(got, level_next, level))
        self.base[f] = np.where(first, x, np.where(got, base_next, base))
        self.measured_s[f] = np.where(got, now.clock_s, self.measured_s[f])

    def site_logs(self) -> np.ndarray:
        age_h = s_to_h(np.maximum(self.clock_s - self.measured_s, 0.0))
        kept = np.exp(-age_h / self.tracking.tau_h)
        log = self.log.copy()
        log[:2] = self.base + (self.log[:2] - self.base) * kept
        return log


def estimator_for(
    optimism: float = 0.0, spreads: Any = None, tracking: Tracking | None = None
) -> Estimator:
    """The estimator ``Adaptive`` and ``Estimates`` keep per episode: ``Estimator``, or with
    ``tracking`` the moving track's ``TrackingEstimator``."""
    if tracking is None:
        return Estimator(optimism, spreads)
    return TrackingEstimator(tracking, optimism, spreads)


class Estimates:
    """``Estimator`` for each of B episodes, as a candidate-set agent's environments keep them.

    The agent's slots on the measured track are built on what the telemetry has said so far
    (``powertrip_env.agents.candidates``): the same estimates ``AdaptiveHorizon`` plans with, so
    its choice is the agent's last slot and the agent starts from that rule. ``update`` reads
    every episode's decision view and gives the beliefs the candidates assume, one row each;
    ``played`` tells the estimators which sets the round plays (its global batch is what the
    progress it makes is fitted against).
    """

    def __init__(
        self,
        scenario: Scenario,
        batch: int = 1,
        optimism: float = 0.0,
        tracking: Tracking | None = None,
    ) -> None:
        self.scenario = scenario
        self.optimism = float(optimism)
        self.estimators = [
            estimator_for(optimism, scenario.unknowns, tracking) for _ in range(batch)
        ]
        self.now: list[Any] = [None] * batch
        self.restart(np.ones(batch, dtype=bool))

    def restart(self, rows: np.ndarray) -> None:
        """New episodes in ``rows`` (B,) bool: their estimates start again from the stated
        values."""
        for i in np.flatnonzero(rows):
            self.estimators[i].reset(self.scenario)
            self.now[i] = None

    def update(self, view: Callable[[int], Any]) -> np.ndarray:
        """(B, width) the beliefs after this round's telemetry; ``view(i)`` is episode i's
        ``decision_view``."""
        rows = []
        for i, estimator in enumerate(self.estimators):
            now = view(i)
            estimator.update(now)
            self.now[i] = now
            rows.append(estimator.belief().vector)
        return np.stack(rows)

    def played(self, masks: np.ndarray) -> None:
        """The sets (B, N) the coming round requests, after ``update``."""
        for i, estimator in enumerate(self.estimators):
            if self.now[i] is None:
                raise RuntimeError("Estimates.played: call update() first")
            estimator.played(self.now[i], masks[i])
            self.now[i] = None


class Adaptive(_Believing):
    """Deployable: ``inner`` with its what-ifs fed the online estimates of ``Estimator`` (and,
    with ``optimism`` > 0, optimistic about sites it has not measured: ``Exploring``; with
    ``tracking``, those of ``TrackingEstimator``, for a world that moves: ``Tracking*``)."""

    def __init__(
        self,
        inner: Policy,
        name: str,
        optimism: float = 0.0,
        tracking: Tracking | None = None,
    ) -> None:
        super().__init__(inner, name)
        self.optimism = float(optimism)
        self.tracking = tracking
        self.estimator = estimator_for(optimism, None, tracking)

    def first_belief(self) -> UnknownFactors:
        scenario = self.env.decision_view().scenario
        self.estimator = estimator_for(self.optimism, scenario.unknowns, self.tracking)
        self.estimator.reset(scenario)
        return self.estimator.belief()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        self.estimator.update(now)
        self.inner.env.belief = self.estimator.belief()
        mask = self.inner.act(obs, info)
        self.estimator.played(now, mask)
        return mask
