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
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.dynamics.estimates import (
    EstimateRows,
    Telemetry,
    belief_of,
    estimator_config,
    fit_pace_noise,
    fitted_rounds,
    new_estimates,
    played_estimates,
    played_row,
    restart_rows,
    site_block,
    update_estimates,
    update_row,
)
from powertrip_env.scenario import Scenario
from powertrip_env.units import h_to_s
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

    ``update`` reads, at the start of each round, the telemetry each site last gave
    (``measured_*``, with the round it was taken in) and the progress the last round made
    against what the stated curve predicts for its global batch, from a decision view
    (``Estimates`` reads a batch's ``telemetry()``, the same fields without the view's copies,
    into the same rows). The estimates are one row of floats, updated in compiled code
    (``powertrip_env.dynamics.estimates``), because a candidate-set agent updates them before
    every decision and its decision is otherwise a few tens of microseconds. The job's fit
    keeps, per noise factor, the running mean and squared deviations of the rounds' residuals,
    so it costs the grid, not the rounds measured.
    """

    tracking: Tracking | None = None

    def __init__(self, optimism: float = 0.0, spreads: Any = None) -> None:
        self.optimism = float(optimism)  # in σ of the scenario's spreads, for unmeasured sites
        self.spreads = spreads
        self.cfg = np.zeros(0)
        self.consts = np.zeros(0)
        self.est = np.zeros(0)
        self.n_sites = 0

    def configure(self, scenario: Scenario) -> None:
        """Take ``scenario``'s stated workload (what the fit starts from) and jitter (what a
        tracking band is counted in); the estimates themselves are ``attach``'s row."""
        band, tau_s = None, math.inf
        if self.tracking is not None:
            band = self.tracking.threshold * scenario.episode.jitter_sigma
            tau_s = h_to_s(self.tracking.tau_h)
        self.cfg, self.consts = estimator_config(
            scenario.workload, NOISE_GRID, SMOOTHING, self.optimism, self.spreads, band, tau_s
        )
        self.n_sites = scenario.n_sites

    def attach(self, row: np.ndarray) -> None:
        """Keep the estimates in ``row``, a row of an ``Estimates`` batch's array."""
        self.est = row

    def reset(self, scenario: Scenario) -> None:
        """A new episode of ``scenario``: every site as stated, nothing fitted."""
        self.configure(scenario)
        self.attach(new_estimates(1, scenario.n_sites, NOISE_GRID.shape[0])[0])

    def update(self, now: DecisionView) -> None:
        """Read one episode's telemetry from its decision view (``Estimates`` reads a batch's
        from the env's ``telemetry()``, into the same rows)."""
        update_row(
            self.cfg,
            self.consts,
            self.est,
            now.measured_compute,
            now.measured_transfer,
            now.measured_join,
            now.measured_round,
            now.available,
            float(now.surrogate_progress),
            float(now.rounds),
            float(now.clock_s),
        )

    def played(self, mask: np.ndarray) -> None:
        """Remember the round about to be played, requesting ``mask`` (N,): its start's progress
        and its global batch, as the last ``update`` read them."""
        played_row(self.cfg, self.est, np.asarray(mask))

    @property
    def fitted(self) -> int:
        """Rounds whose progress the fit holds."""
        return fitted_rounds(self.est)

    def _block(self, name: str) -> np.ndarray:
        return site_block(self.est, self.n_sites, NOISE_GRID.shape[0], name)

    @property
    def log(self) -> np.ndarray:
        """(3, N) per site, the log of measured over stated compute, exchange and join (the
        current level, on the moving track)."""
        return self._block("log")

    @property
    def weight(self) -> np.ndarray:
        """(3, N) how many measurements each of those holds."""
        return self._block("weight")

    @property
    def base(self) -> np.ndarray:
        """(2, N) the long-run log-ratios of compute and exchange (``TrackingEstimator``)."""
        return self._block("base")

    def pace_noise(self) -> tuple[float, float]:
        """The job's pace and noise-scale factors that best explain the progress measured: a
        least-squares fit in log space over ``NOISE_GRID``, the pace then in closed form."""
        pace, noise = fit_pace_noise(self.cfg, self.est)
        return float(pace), float(noise)

    def belief(self) -> UnknownFactors:
        """What the telemetry says so far (with ``optimism``, about the sites it has not
        measured too)."""
        return UnknownFactors.from_vector(belief_of(self.cfg, self.est, self.n_sites))


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
    its choice is the agent's last slot and the agent starts from that rule. ``candidates``
    folds the telemetry in and builds the slots on the beliefs it gives, in the kernel's one
    pass over the batch; ``update`` folds a batch's ``telemetry()`` in and gives the beliefs,
    one row each, for a rule that plans with them; ``played`` tells the estimates which sets
    the round plays (its global batch is what the progress it makes is fitted against).
    ``estimators[i]`` is episode i's ``Estimator``, on the same row.
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
        for estimator in self.estimators:
            estimator.configure(scenario)
        first = self.estimators[0]
        self.cfg, self.consts = first.cfg, first.consts
        self.est = new_estimates(batch, scenario.n_sites, NOISE_GRID.shape[0])
        for estimator, row in zip(self.estimators, self.est, strict=True):
            estimator.attach(row)
        self.none_played = np.zeros((0, scenario.n_sites), dtype=bool)
        self.pending = self.none_played  # the sets played, told at the next read
        self.ready = False  # whether the telemetry was read since the last ``played``

    def _tell(self) -> None:
        """Tell the estimates the sets played since the last read, if any."""
        if self.pending.shape[0]:
            played_estimates(self.cfg, self.est, self.pending)
            self.pending = self.none_played

    def restart(self, rows: np.ndarray) -> None:
        """New episodes in ``rows`` (B,) bool: their estimates start again from the stated
        values."""
        rows = np.asarray(rows, dtype=bool)
        if np.any(rows):
            self._tell()
            restart_rows(self.est, rows, self.scenario.n_sites, NOISE_GRID.shape[0])
            self.ready = False

    def update(self, telemetry: Telemetry) -> np.ndarray:
        """(B, width) the beliefs after this round's ``telemetry`` (the env's ``telemetry()``)."""
        self._tell()
        beliefs = update_estimates(self.cfg, self.consts, self.est, telemetry)
        self.ready = True
        return beliefs

    def candidates(self, env: Any, rules: Any = None) -> Any:
        """The candidates of ``env`` (unwrapped, or the vector env) for the coming round, built
        on the beliefs these estimates hold once they have read its telemetry now (and the
        sets played since the last read: one compiled pass for both)."""
        rows = EstimateRows(self.cfg, self.consts, self.est, self.pending)
        batch = env.candidates(rules, estimates=rows)
        self.pending = self.none_played
        self.ready = True
        return batch

    def played(self, masks: np.ndarray) -> None:
        """The sets (B, N) the coming round requests, after ``update`` or ``candidates``; the
        estimates take them in at the next read (or ``restart``), before its telemetry."""
        if not self.ready:
            raise RuntimeError("Estimates.played: call update() or candidates() first")
        self.pending = np.asarray(masks)
        self.ready = False


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
        self.estimates: Estimates | None = None

    @property
    def estimator(self) -> Estimator:
        """This episode's estimator (``Estimator``, or ``TrackingEstimator`` with tracking)."""
        if self.estimates is None:
            return estimator_for(self.optimism, None, self.tracking)
        return self.estimates.estimators[0]

    def first_belief(self) -> UnknownFactors:
        scenario = self.env.decision_view().scenario
        self.estimates = Estimates(scenario, 1, self.optimism, self.tracking)
        return self.estimates.estimators[0].belief()

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        if self.estimates is None:
            raise RuntimeError(f"{self.name}: call reset(env) first")
        beliefs = self.estimates.update(self.env.telemetry())
        self.inner.env.belief = UnknownFactors.from_vector(beliefs[0])
        mask = self.inner.act(obs, info)
        n = self.estimates.scenario.n_sites
        self.estimates.played(np.asarray(mask)[None, :n])
        return mask
