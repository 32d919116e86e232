"""``Engine``: B episodes of one environment, the one implementation under both adapters.

``PowerTripEnv`` is an engine with a batch of one and ``PowerTripVectorEnv`` one with a batch of
B; each adds only what its Gymnasium base class asks of it (spaces of its shape, a generator, a
``TimeLimit`` or the vector env's autoreset). So the episodes, their seeding, a step, what a
policy may know and a planner may try are written once, here, and sub-environment i of the
vector env is the single env seeded alike, bit for bit.

Randomness is counter-based: seeding row i draws one number from a generator (``seed_row``),
and that row's episodes then follow from it and their index (``episodes.EpisodeStarts.begin``),
so a batch of new episodes is one kernel call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env import dynamics
from powertrip_env.clairvoyant import Clairvoyant
from powertrip_env.episodes import EpisodeStarts, base_from
from powertrip_env.interface import Interface
from powertrip_env.options import EnvSetup
from powertrip_env.rewards import RewardFn
from powertrip_env.scenario import Scenario
from powertrip_env.simulation import Simulation
from powertrip_env.view import DecisionView, decision_view


@dataclass(frozen=True, eq=False)
class EngineState:
    """An engine's episodes as they stand: the kernel's state, the setup they run on (a drawn
    catalogue differs per episode) and each row's seeding (``Engine.snapshot``)."""

    sim_state: dynamics.SimState | None
    setup: EnvSetup
    bases: np.ndarray
    seeded: np.ndarray
    episodes: np.ndarray


class Engine:
    """The episodes of a batch of ``batch`` rows on one ``EnvSetup``."""

    def __init__(self, setup: EnvSetup, batch: int) -> None:
        self.batch = batch
        self.setup = setup  # the catalogue, interface and episode starts (property below)
        self.state: dynamics.SimState | None = None  # None until the first reset
        self.bases = np.zeros(batch, dtype=np.int64)  # per row, from its seeding (seed_row)
        self.seeded = np.zeros(batch, dtype=bool)
        self.episodes = np.zeros(batch, dtype=np.int64)  # episodes since each row's seeding

    @property
    def setup(self) -> EnvSetup:
        return self._setup

    @setup.setter
    def setup(self, setup: EnvSetup) -> None:
        """A new setup (a catalogue drawn for the coming episode, under ``sites=``): the views
        below read it from now on."""
        self._setup = setup
        self.sim, self.params, self.scenario = setup.sim, setup.sim.params, setup.sim.scenario
        self.interface, self.starts = setup.interface, setup.starts
        self._scratch = setup.interface.scratch(self.batch)  # what a step lends its caller
        self.site_names = tuple(s.name for s in self.scenario.sites)

    # ------------------------------------------------------------------ episodes

    def seed_row(self, i: int, rng: np.random.Generator) -> None:
        """Row ``i``'s next episodes follow from one draw of ``rng`` (a ``reset(seed=...)``)."""
        self.bases[i], self.seeded[i], self.episodes[i] = base_from(rng), True, 0

    def restart(self, index: np.ndarray, options: Mapping[str, Any] | None) -> np.ndarray:
        """New episodes in rows ``index``, in one call; returns their learners' seeds."""
        fresh, seeds = self.starts.begin(self.bases[index], self.episodes[index], options)
        self.episodes[index] += 1
        if self.state is None or index.size == self.batch:
            self.state = fresh
        else:
            self.state = self.state.put(index, fresh)
        return seeds

    def step(
        self, masks: np.ndarray, *, lend: bool = True
    ) -> tuple[dynamics.RoundResult, Any, dynamics.Info]:
        """One round of every row (a (B, N) mask), the observations and the info's numbers.

        With ``lend`` the round's record and the info's values are this engine's scratch
        arrays, overwritten by the next step: the caller reads them before it (both envs do);
        a real learner, which may keep what it is shown, gets arrays of its own.
        """
        state = self.state
        if state is None:
            raise RuntimeError("call reset() first")
        return self.interface.step(state, masks, self._scratch if lend else None)

    def observe(self, state: dynamics.SimState | None = None) -> Any:
        """The batch's observations (or ``state``'s), in ``obs_mode``'s shape."""
        return self.interface.observe(self.require_state() if state is None else state)

    def report(self, state: dynamics.SimState | None = None) -> dynamics.Info:
        """The info's numbers of episodes that have just started (``Interface.report``)."""
        return self.interface.report(self.require_state() if state is None else state)

    def require_state(self) -> dynamics.SimState:
        if self.state is None:
            raise RuntimeError("call reset() first")
        return self.state

    # ------------------------------------------------------------------ what a policy may know

    def available(self) -> np.ndarray:
        """(B, N) bool: sites with at least one powered GPU now."""
        return dynamics.available_now(self.params, self.require_state())

    def action_masks(self) -> np.ndarray:
        """(B, 2M) bool, MaskablePPO's: per site [may choose 0, may choose 1]."""
        return self.interface.action_masks(self.available())

    def telemetry(self) -> dynamics.Telemetry:
        """Every row's telemetry now (``dynamics.Telemetry``): what the estimates read, copied
        out of the state."""
        return dynamics.telemetry(self.params, self.require_state())

    def decision_view(self, i: int = 0) -> DecisionView:
        """What a policy may know now in row ``i`` (``powertrip_env.view``): no future actual."""
        return decision_view(self.params, self.require_state(), self.scenario, self._row(i))

    def predict_round(
        self, mask: Any, *, steady_state: bool = False, i: int = 0, belief: Any = None
    ) -> dynamics.RoundPrediction:
        """Row ``i``'s what-if of one set (N,) or candidate sets (M, N), from the forecast issued
        now, in the world ``belief`` describes (default: as the scenario states it): floats for
        one set, (M,) arrays for many."""
        m = self._sets(mask, "mask", (1, 2))
        pred = dynamics.predict_round(
            self.params,
            self._one(i),
            m.reshape(1, -1, m.shape[-1]),
            steady_state=steady_state,
            belief=belief,
        )
        if m.ndim == 1:
            return dynamics.RoundPrediction(*(float(a[0, 0]) for a in pred))
        return dynamics.RoundPrediction(*(a[0] for a in pred))

    def predict_plan(
        self,
        plan: Any,
        rounds: int | None = None,
        i: int = 0,
        belief: Any = None,
        carbon_forecast: str = "yesterday",
    ) -> dynamics.Trajectory:
        """Row ``i``'s what-if of M plans, (M, N) or (M, R, N), over several rounds."""
        return dynamics.predict_plan(
            self.params,
            self._one(i),
            self._sets(plan, "plan", (2, 3)),
            rounds,
            belief,
            carbon_forecast,
        )

    def forecast_rows(
        self, i: int = 0, carbon_forecast: str = "week", power_forecast: str = "hold"
    ) -> dynamics.RowsAhead:
        """Row ``i``'s rows to its deadline as the forecast issued now sees them
        (``dynamics.rows_ahead``): no future actual."""
        return dynamics.rows_ahead(self.params, self._one(i), carbon_forecast, power_forecast)

    def candidates(
        self,
        rules: Sequence[tuple[float, float]] | None = None,
        *,
        belief: Any = None,
        estimates: dynamics.EstimateRows | None = None,
    ) -> dynamics.CandidateBatch:
        """Every row's candidate sets for the coming round, in one compiled call."""
        return dynamics.build_candidates(
            self.params, self.require_state(), rules, belief, estimates
        )

    def clairvoyant(self, i: int | None = None) -> Clairvoyant:
        """CLAIRVOYANT: every row's future from now (or row ``i``'s), on copies of the state.

        On the measured track a row's world is the scenario folded with its drawn unknowns
        (``dynamics.unknowns.fold``), played from the state with its unknowns set to 1: the
        same numbers the episode computes, and a world the lower bound can read.
        """
        state = self.require_state() if i is None else self._one(i)
        if not self.params.measured:
            return Clairvoyant(self.params, state)
        if state.batch != 1:
            raise ValueError(
                "clairvoyant(): on the measured track each episode's world is its own; name one "
                f"(i = 0..{self.batch - 1})"
            )
        drawn = dynamics.episode_unknowns(state)[0].copy()
        world = dynamics.fold(self.params, drawn)
        nominal = dynamics.with_belief(state, dynamics.nominal_belief(self.params.n_sites))
        return Clairvoyant(world, nominal, dynamics.UnknownFactors.from_vector(drawn))

    # ------------------------------------------------------------------ for planners

    def snapshot(self) -> EngineState:
        """The episodes as they stand (the state is immutable; the counters are copied)."""
        return EngineState(
            sim_state=self.state,
            setup=self.setup,
            bases=self.bases.copy(),
            seeded=self.seeded.copy(),
            episodes=self.episodes.copy(),
        )

    def restore(self, saved: EngineState) -> None:
        """Continue from ``saved`` (``snapshot``), of an engine on the same scenario (a drawn
        catalogue comes back with it) and batch."""
        if saved.bases.shape != (self.batch,):
            raise ValueError(
                f"set_state: the state is of a batch of {saved.bases.shape[0]} episodes, this "
                f"environment runs {self.batch}"
            )
        self.setup = saved.setup
        self.state = saved.sim_state
        self.bases, self.seeded = saved.bases.copy(), saved.seeded.copy()
        self.episodes = saved.episodes.copy()

    # ------------------------------------------------------------------ helpers

    def _row(self, i: int) -> int:
        if not 0 <= int(i) < self.batch:
            raise IndexError(
                f"episode {i!r}: this environment runs {self.batch} (0..{self.batch - 1})"
            )
        return int(i)

    def _one(self, i: int) -> dynamics.SimState:
        """Row ``i`` as a batch of one (the state itself when it is one)."""
        state = self.require_state()
        return state if self.batch == 1 else state.take(np.array([self._row(i)]))

    def _sets(self, sets: Any, what: str, ndims: tuple[int, int]) -> np.ndarray:
        """Site sets as bool, with the scenario's N on the last axis and one of ``ndims``."""
        m = np.asarray(sets, dtype=bool)
        n = self.params.n_sites
        if m.ndim not in ndims or m.shape[-1] != n:
            shapes = {1: f"({n},)", 2: f"(M, {n})", 3: f"(M, R, {n})"}
            raise ValueError(
                f"{what} of shape {m.shape}: expected {' or '.join(shapes[d] for d in ndims)}"
            )
        return m


class EngineViews:
    """What both environments expose of their engine, declared once: the simulation, its
    parameters and scenario, the sites' names, the interface and the episode starts (a drawn
    catalogue's, under ``sites=``, for the episode running), and the checked arguments."""

    _engine: Engine
    reward_fn: RewardFn
    reward_mode: str
    obs_mode: str
    split: str
    max_sites: int | None
    render_mode: str | None

    def declare(self, setup: EnvSetup) -> None:
        """The arguments the environment was made with, as attributes (``configure``'s)."""
        self.reward_fn, self.reward_mode = setup.reward, setup.reward.name
        self.obs_mode, self.split = setup.interface.obs_mode, setup.starts.split
        self.max_sites, self.render_mode = setup.interface.max_sites, setup.render_mode

    @property
    def sim(self) -> Simulation:
        return self._engine.sim

    @property
    def params(self) -> dynamics.SimParams:
        return self._engine.params

    @property
    def scenario(self) -> Scenario:
        return self._engine.scenario

    @property
    def site_names(self) -> tuple[str, ...]:
        return self._engine.site_names

    @property
    def interface(self) -> Interface:
        return self._engine.interface

    @property
    def starts(self) -> EpisodeStarts:
        return self._engine.starts

    @property
    def n_sites(self) -> int:
        """Sites of the catalogue the episode runs on (a drawn one's, under ``sites=``)."""
        return self._engine.params.n_sites

    @property
    def state(self) -> dynamics.SimState | None:
        """The kernel's state of the batch (None before the first reset)."""
        return self._engine.state

    @state.setter
    def state(self, state: dynamics.SimState) -> None:
        self._engine.state = state
