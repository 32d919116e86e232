"""``PowerTripVectorEnv``: the Gymnasium vector adapter over ``dynamics``, a batch of B episodes.

It is an ``engine.Engine`` of B rows, as the single env is one of a single row, so
sub-environment i behaves exactly like ``gym.make(ID)`` reset with the same seed: same
observations, rewards, flags and infos, bit for bit (``tests/test_vector_env.py`` checks it
against Gymnasium's ``SyncVectorEnv``). Randomness is counter-based: seeding a
sub-environment draws one number from a generator seeded alike (``episodes.base_from``), and
each episode's start time and jitter key are hashes of it and the episode's index, its jitter a
hash of the key, the round and the site. So a step, autoresets included, is one call of the
compiled simulator over the whole batch, with no Python loop over sub-environments.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from powertrip_env import dynamics
from powertrip_env.clairvoyant import Clairvoyant
from powertrip_env.engine import Engine, EngineViews
from powertrip_env.env import PowerTripEnv
from powertrip_env.options import ENV_OPTIONS, configure, vector_arguments
from powertrip_env.scenario import Scenario
from powertrip_env.view import DecisionView

# The single env's signature is where the options' defaults are written (and documented).
_SINGLE_ENV_DEFAULTS = {
    name: inspect.signature(PowerTripEnv.__init__).parameters[name].default for name in ENV_OPTIONS
}


class PowerTripVectorEnv(EngineViews, gym.vector.VectorEnv):
    """B PowerTrip episodes advanced together by one call of the compiled simulator.

    Created by ``gym.make_vec("PowerTrip-v0", num_envs=B)`` (the registered
    ``vector_entry_point``), which passes the same keyword arguments as ``gym.make`` (see
    `PowerTripEnv`; ``reward_mode``, ``obs_mode``, ``action_mode``, ``split``, ``jitter``,
    ``render_mode`` and ``max_sites`` with its defaults) plus ``max_episode_steps`` from the
    registration.

    * Spaces: ``single_observation_space`` and ``single_action_space`` are those of the single
      env; ``observation_space`` and ``action_space`` are them batched: observations
      ``(B, N·15 + 6)`` float32 (``obs_mode="dict"``: a dict of ``(B, N, 15)`` and ``(B, 6)``),
      actions ``(B, N)`` of 0/1; with ``max_sites`` M they are padded to M sites as in the single
      env. ``sites`` (a catalogue per episode) is refused: use a ``SyncVectorEnv``.
    * ``step`` returns rewards float64 ``(B,)``, terminations and truncations bool ``(B,)``, and
      the single env's info in Gymnasium's vector format: every key of
      ``interface.INFO_KEYS`` as a numeric ``(B,)`` or ``(B, N)`` array, at reset and at every
      step (a restarting sub-environment reports its reset info), each with a ``_key`` bool
      mask of the sub-environments that reported it: all of them, except after a partial
      ``reset`` (``options["reset_mask"]``), whose other rows are 0 and masked out, as in
      ``SyncVectorEnv``.
    * Autoreset follows ``AutoresetMode.NEXT_STEP`` (``metadata["autoreset_mode"]`` and the
      ``autoreset_mode`` attribute, as on Gymnasium's vector envs): the step after a
      sub-environment ends returns its reset observation and reset info, reward 0, and both
      flags False, and ignores its action. Libraries that need same-step resets (TorchRL,
      skrl) take a ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP`` (docs/other-libraries.md).
    * Seeding: ``reset(seed=s)`` seeds sub-environment i with ``s + i`` (a list gives one seed
      each); later autoresets start that sub-environment's next episode, as a single env's
      ``reset()`` without a seed does.
    * Truncation at ``max_episode_steps`` (from the registration, as ``TimeLimit`` does for
      the single env) as well as at the scenario's time budget and round limit.
    * ``action_masks()`` gives ``(B, 2N)``; ``render()`` with ``render_mode="ansi"`` gives the
      first sub-environment's table.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi"],
        "render_fps": 4,
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        num_envs: int = 1,
        scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any] = "default",
        *,
        max_episode_steps: int | None = None,
        learner: str = "surrogate",
        sites: str | None = None,
        **options: Any,
    ) -> None:
        self.num_envs, self.max_episode_steps = vector_arguments(
            num_envs, max_episode_steps, learner, sites, options
        )
        options = {**_SINGLE_ENV_DEFAULTS, **options}
        setup = configure(scenario, render_modes=tuple(self.metadata["render_modes"]), **options)
        self._engine = Engine(setup, self.num_envs)
        self.declare(setup)
        self.single_action_space = setup.interface.action_space
        self.single_observation_space = setup.interface.observation_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        # as Gymnasium's own vector envs expose it (TorchRL and others read the attribute)
        self.autoreset_mode = AutoresetMode.NEXT_STEP
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    # ------------------------------------------------------------------ gym API

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-environment, or those in ``options["reset_mask"]``."""
        engine, b = self._engine, self.num_envs
        seeds = self._seeds(seed)
        options = dict(options) if options else {}
        reset_mask = options.pop("reset_mask", None)
        if reset_mask is None:
            rows = np.ones(b, dtype=bool)
        else:
            rows = self._check_reset_mask(reset_mask)
            engine.require_state()  # a partial reset continues a batch
        for i in np.flatnonzero(rows):
            if seeds[i] is not None or not engine.seeded[i]:  # as a single env's reset(seed)
                engine.seed_row(i, seeding.np_random(seeds[i])[0])
        engine.restart(np.flatnonzero(rows), options or None)
        self._autoreset[rows] = False
        info = engine.interface.batch_info(engine.report())
        for name in self.reward_fn.term_names:  # the reward's terms: none before a round
            info[f"reward_{name}"] = np.zeros(b)
        if not rows.all():  # the other rows are unreported: zero and masked out
            for value in info.values():
                value[~rows] = 0
        return engine.observe(), self._masked(info, rows)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        engine = self._engine
        if engine.state is None:
            raise RuntimeError("call reset() before step()")
        interface = engine.interface
        masks = interface.as_masks(actions, self.action_space, self.num_envs)
        restart = self._autoreset
        # Every row steps (one kernel call is cheapest whole); rows that restart are then
        # replaced by their reset, and their action is ignored.
        result, obs, report = engine.step(masks)
        rewards, terms = self.reward_fn.evaluate(engine.params, result)  # as the single env's
        terminated, truncated = result.terminated, result.truncated
        limit = self._step_limit()
        if limit is not None:
            truncated = truncated | (result.state.rounds >= limit)  # as TimeLimit does
        # every key for every row: after the round, or (rows that restart) their reset info
        info = interface.batch_info(report)
        for name, term in terms.items():
            info[f"reward_{name}"] = term  # the reward's terms, as the single env reports them
        engine.state = result.state
        if restart.any():
            index = np.flatnonzero(restart)
            engine.restart(index, None)
            fresh = engine.state.take(index)
            interface.put(obs, index, engine.observe(fresh))
            rewards[restart] = 0.0
            terminated[restart] = False
            truncated[restart] = False
            for key, value in interface.batch_info(engine.report(fresh)).items():
                info[key][index] = value
            for name in self.reward_fn.term_names:
                info[f"reward_{name}"][index] = 0.0  # a restarting row's reward is 0
        self._autoreset = terminated | truncated
        return obs, rewards, terminated, truncated, self._masked(info, np.ones(self.num_envs, bool))

    def render(self) -> str | None:
        """The first sub-environment's site table (``render_mode="ansi"``)."""
        if self.render_mode is None:
            gym.logger.warn(
                "render() called without a render_mode; pass render_mode='ansi' to make_vec()"
            )
            return None
        from powertrip_env import render

        return render.ansi(None if self.state is None else self.decision_view(0))

    # ------------------------------------------------------------------ for policies

    def action_masks(self) -> np.ndarray:
        """(B, 2N) bool for MaskablePPO: per site [may choose 0, may choose 1]; (B, 2M) padded."""
        return self._engine.action_masks()

    def decision_view(self, i: int = 0) -> DecisionView:
        """What a policy may know now in sub-environment ``i`` (``PowerTripEnv.decision_view``)."""
        return self._engine.decision_view(i)

    def predict_round(
        self, mask: Any, i: int = 0, *, steady_state: bool = False, belief: Any = None
    ) -> dynamics.RoundPrediction:
        """Sub-environment ``i``'s what-if of one set or candidate sets
        (``PowerTripEnv.predict_round``)."""
        return self._engine.predict_round(mask, steady_state=steady_state, i=i, belief=belief)

    def candidates(
        self,
        rules: Sequence[tuple[float, float]] | None = None,
        *,
        belief: Any = None,
        estimates: dynamics.EstimateRows | None = None,
    ) -> dynamics.CandidateBatch:
        """Every sub-environment's candidate sets for the coming round, in one compiled call
        (``PowerTripEnv.candidates``); ``belief`` one for all, or (B, width) one each;
        ``estimates`` one row each."""
        return self._engine.candidates(rules, belief=belief, estimates=estimates)

    def clairvoyant(self, i: int | None = None) -> Clairvoyant:
        """CLAIRVOYANT: every sub-environment's future from now (``PowerTripEnv.clairvoyant``),
        for the references and teachers whose names say they read it; its ``state`` is the
        batch, and it works on copies. On the measured track each sub-environment's world is
        its own: name one (``i``)."""
        return self._engine.clairvoyant(i)

    def telemetry(self) -> dynamics.Telemetry:
        """Every sub-environment's telemetry now (``PowerTripEnv.telemetry``), one row each."""
        return self._engine.telemetry()

    def available(self) -> np.ndarray:
        """(B, N) bool: sites that have at least one powered GPU now."""
        return self._engine.available()

    # ------------------------------------------------------------------ helpers

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """One seed per sub-environment: ``s + i`` from one int, a list as given."""
        b = self.num_envs
        if seed is None:
            return [None] * b
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            return [int(seed) + i for i in range(b)]
        seeds = list(seed)
        if len(seeds) != b:
            raise ValueError(
                f"seed: a list of seeds needs one per sub-environment ({b}), got {len(seeds)}"
            )
        return seeds

    def _step_limit(self) -> int | None:
        """``max_episode_steps``, from the constructor or else the registration."""
        if self.max_episode_steps is not None:
            return self.max_episode_steps
        spec = self.spec
        return None if spec is None else spec.max_episode_steps

    def _check_reset_mask(self, reset_mask: Any) -> np.ndarray:
        b = self.num_envs
        if (
            not isinstance(reset_mask, np.ndarray)
            or reset_mask.shape != (b,)
            or reset_mask.dtype != np.bool_
            or not reset_mask.any()
        ):
            raise ValueError(
                f"options['reset_mask']={reset_mask!r}: give a bool numpy array of shape ({b},) "
                "with at least one True"
            )
        return reset_mask.copy()

    @staticmethod
    def _masked(info: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
        """``info`` in Gymnasium's vector format: each key with its ``_key`` mask of the rows
        that report it (a copy each, as ``SyncVectorEnv`` makes them)."""
        out = dict(info)
        for key in info:
            out[f"_{key}"] = rows.copy()
        return out
