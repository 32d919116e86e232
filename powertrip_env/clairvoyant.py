"""CLAIRVOYANT: an episode's future, for the references whose names say they read it.

``env.unwrapped.clairvoyant()`` returns a `Clairvoyant` bound to the episode as it stands: it
plays plans on the true power trace with the episode's own jitter (`simulate`), gives that
jitter (`jitter`) and the true time a site needs for some work (`finish_s`). The references in
``baselines/references.py`` (``BestFixedSet``, ``BeamPlanner``, ``lower_bound_h``) use it, and
nothing else should: a policy may see the forecast issued now (``decision_view``,
``predict_round``), never future actuals. Plans are played by ``dynamics.step_round``, the one
implementation of the dynamics, on copies of the episode's state, so a plan's outcome here is
exactly what the environment reports when it is played there, and the episode is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powertrip_env import dynamics


@dataclass(frozen=True, eq=False)
class Clairvoyant:
    """The true dynamics from an episode's current state (``state``, a batch of one)."""

    params: dynamics.SimParams
    state: dynamics.SimState
    # the episode's drawn unknowns (the measured track); the world as stated otherwise
    unknowns: dynamics.UnknownFactors | None = None

    def drawn(self) -> dynamics.UnknownFactors:
        """The episode's unknowns: what ``Informed`` is told. All ones on the known track."""
        if self.unknowns is not None:
            return self.unknowns
        return dynamics.UnknownFactors.nominal(self.params.n_sites)

    def monitored(self) -> dynamics.UnknownFactors:
        """The episode's unknowns as a perfect monitor reads them now: the draw, with each
        site's throughput and bandwidth as the moving world's processes leave them at this
        moment (``dynamics.path_now``), not as they will be. The draw on a static world."""
        drawn = self.drawn()
        if not self.params.moving:
            return drawn
        speed, link, _ = dynamics.path_now(self.params, self.state)[0]
        return drawn.replace(throughput=drawn.throughput * speed, bandwidth=drawn.bandwidth * link)

    @property
    def progress_needed(self) -> float:
        """Surrogate progress at which the accuracy reaches the target."""
        return dynamics.progress_needed(self.params)

    def jitter(self, rounds: int) -> np.ndarray:
        """(rounds, N + 1) jitter factors of the episode's next ``rounds`` rounds: N compute
        factors, then the network's, exactly as the environment will apply them."""
        return dynamics.jitter_factors(self.params, self.state, rounds)[0]

    def simulate(
        self, plan: np.ndarray, state: dynamics.SimState | None = None, rounds: int | None = None
    ) -> dynamics.Trajectory:
        """Play M plans on the true trace with the episode's jitter.

        ``plan`` is (M, N) bool, one set requested every round, or (M, R, N), a set per round.
        ``state`` is where they start: M episodes, or one (default: the episode now) copied M
        times. At most ``rounds`` rounds are played (default: R, or until every plan's episode
        ends); an episode that ends stops there.
        """
        state = self.state if state is None else state
        return dynamics.play_plans(self.params, state, plan, rounds)

    def follow(
        self,
        first: np.ndarray,
        rule: tuple[float, float],
        state: dynamics.SimState | None = None,
        rounds: int | None = None,
    ) -> dynamics.Trajectory:
        """Play M first sets (M, N), then a candidate rule every round after, on the true trace
        with the episode's jitter: the rollouts by which a clairvoyant teacher scores a choice.

        ``rule`` is a ``(horizon, margin)`` slot of ``dynamics.build_candidates`` (the horizon
        rule's), which each simulated episode plays from the forecast issued at its own time,
        as the rule would there. At most ``rounds`` rounds (default: until each episode ends).
        """
        state = self.state if state is None else state
        return dynamics.play_rule(self.params, state, first, rule, rounds)

    def rows(self) -> dynamics.RowsAhead:
        """The true trace's rows from now to the deadline (``dynamics.clairvoyant_rows_ahead``): the
        samples/s, draw, PV and grid intensity ``env.forecast_rows`` forecasts, as they will
        be."""
        return dynamics.clairvoyant_rows_ahead(self.params, self.state)

    def available(self, state: dynamics.SimState) -> np.ndarray:
        """(B, N) bool: the sites of each episode of ``state`` with a powered GPU now."""
        return dynamics.available_now(self.params, state)

    def predict_round(
        self, state: dynamics.SimState, masks: np.ndarray
    ) -> dynamics.RoundPrediction:
        """``predict_round`` (forecast-based, no future actual) from a simulated ``state``."""
        return dynamics.predict_round(self.params, state, masks)

    def finish_s(self, begin: np.ndarray, work: np.ndarray) -> np.ndarray:
        """When each site, starting at ``begin`` (J, N) seconds since row 0, has processed
        ``work`` (N,) samples on the true trace."""
        begin = np.ascontiguousarray(begin, dtype=np.float64)
        work = np.broadcast_to(np.asarray(work, dtype=np.float64), begin.shape[-1:])
        return dynamics.finish_times(self.params, begin, np.ascontiguousarray(work))
