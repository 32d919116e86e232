"""``PowerTripVectorEnv``: the Gymnasium vector adapter over ``dynamics``, a batch of B episodes.

The dynamics are the simulator's batched functions, the very ones the single env calls with a
batch of one, so sub-environment i behaves exactly like ``gym.make(ID)`` reset with the same
seed: same observations, rewards, flags and infos, bit for bit (``tests/test_vector_env.py``
checks it against Gymnasium's ``SyncVectorEnv``). Randomness is counter-based: seeding a
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
from powertrip_env.env import PowerTripEnv
from powertrip_env.episodes import base_from
from powertrip_env.errors import is_whole
from powertrip_env.options import ENV_OPTIONS, configure
from powertrip_env.scenario import Scenario
from powertrip_env.view import DecisionView, decision_view

# The single env's signature is where the options' defaults are written (and documented).
_SINGLE_ENV_DEFAULTS = {
    name: inspect.signature(PowerTripEnv.__init__).parameters[name].default for name in ENV_OPTIONS
}


class PowerTripVectorEnv(gym.vector.VectorEnv):
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
      skrl) take a ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP`` (README, "Other RL
      libraries").
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
        unknown = sorted(set(options) - set(ENV_OPTIONS))
        if unknown:
            raise TypeError(
                f"PowerTripVectorEnv got unexpected keyword arguments {unknown}; it takes "
                f"num_envs, scenario, max_episode_steps and {', '.join(ENV_OPTIONS)}"
            )
        if sites is not None:
            raise ValueError(
                f"sites={sites!r}: the native vector env steps one site catalogue for every "
                "sub-environment; for catalogues drawn per episode use "
                "gym.make_vec(ID, num_envs, vectorization_mode='sync')"
            )
        if learner != "surrogate":
            raise ValueError(
                f"learner={learner!r}: the vector env runs the surrogate learner only (real "
                "training keeps one model per episode); use gym.make(ID, learner=...)"
            )
        if not is_whole(num_envs) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r}: give a whole number of at least 1")
        if max_episode_steps is not None and (
            not is_whole(max_episode_steps) or max_episode_steps < 1
        ):
            raise ValueError(
                f"max_episode_steps={max_episode_steps!r}: give a whole number of at least 1, "
                "or None"
            )
        options = {**_SINGLE_ENV_DEFAULTS, **options}
        setup = configure(scenario, render_modes=tuple(self.metadata["render_modes"]), **options)
        setup.apply(self)  # sim, params, scenario, interface, starts, reward_fn, ...
        self.num_envs = int(num_envs)
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        self.single_action_space = self.interface.action_space
        self.single_observation_space = self.interface.observation_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        # as Gymnasium's own vector envs expose it (TorchRL and others read the attribute)
        self.autoreset_mode = AutoresetMode.NEXT_STEP

        b = self.num_envs
        self.state: dynamics.SimState | None = None
        self._bases = np.zeros(b, dtype=np.int64)  # per sub-env, from its seeding (base_from)
        self._seeded = np.zeros(b, dtype=bool)
        self._episodes = np.zeros(b, dtype=np.int64)  # episodes since each sub-env's seeding
        self._autoreset = np.zeros(b, dtype=bool)

    # ------------------------------------------------------------------ gym API

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-environment, or those in ``options["reset_mask"]``."""
        b = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * b
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(b)]
        else:
            seeds = list(seed)
            if len(seeds) != b:
                raise ValueError(
                    f"seed: a list of seeds needs one per sub-environment ({b}), got {len(seeds)}"
                )
        options = dict(options) if options else {}
        reset_mask = options.pop("reset_mask", None)
        if reset_mask is None:
            rows = np.ones(b, dtype=bool)
        else:
            rows = self._check_reset_mask(reset_mask)
            if self.state is None:
                raise RuntimeError("call reset() without a reset_mask first")
        for i in np.flatnonzero(rows):
            if seeds[i] is not None or not self._seeded[i]:  # as a single env's reset(seed)
                self._bases[i] = base_from(seeding.np_random(seeds[i])[0])
                self._seeded[i], self._episodes[i] = True, 0
        self._restart(rows, options or None)
        self._autoreset[rows] = False
        return self.interface.observe(self.state), self._reset_info(rows)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        masks = self.interface.as_masks(actions, self.action_space, self.num_envs)
        restart = self._autoreset
        # Every row steps (one kernel call is cheapest whole); rows that restart are then
        # replaced by their reset, and their action is ignored.
        result, obs = self.interface.step(self.state, masks)
        stepped = result.state
        rewards = self.reward_fn(self.params, result)  # as the single env's reward
        terminated, truncated = result.terminated, result.truncated
        limit = self._step_limit()
        if limit is not None:
            truncated = truncated | (stepped.rounds >= limit)  # as TimeLimit does
        # every key for every row: after the round, or (rows that restart) their reset info
        info = self.interface.round_info(result)

        self.state = stepped
        if restart.any():
            self._restart(restart, None)
            index = np.flatnonzero(restart)
            fresh_state = self.state.take(index)
            self.interface.put(obs, index, self.interface.observe(fresh_state))
            rewards[restart] = 0.0
            terminated[restart] = False
            truncated[restart] = False
            for key, value in self.interface.reset_info(fresh_state).items():
                info[key][index] = value
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
        return self.interface.action_masks(self.available())

    def decision_view(self, i: int = 0) -> DecisionView:
        """What a policy may know now in sub-environment ``i`` (``PowerTripEnv.decision_view``)."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        return decision_view(self.params, self.state, self.scenario, int(i))

    def candidates(
        self, rules: Sequence[tuple[float, float]] | None = None
    ) -> dynamics.CandidateBatch:
        """Every sub-environment's candidate sets for the coming round, in one compiled call
        (``PowerTripEnv.candidates``)."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        return dynamics.build_candidates(self.params, self.state, rules)

    def clairvoyant(self) -> Clairvoyant:
        """CLAIRVOYANT: every sub-environment's future from now (``PowerTripEnv.clairvoyant``),
        for the references and teachers whose names say they read it; its ``state`` is the
        batch, and it works on copies."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        return Clairvoyant(self.params, self.state)

    def available(self) -> np.ndarray:
        """(B, N) bool: sites that have at least one powered GPU now."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        return dynamics.available_now(self.params, self.state)

    # ------------------------------------------------------------------ helpers

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

    def _restart(self, rows: np.ndarray, options: dict[str, Any] | None) -> None:
        """New episodes in the sub-environments at bool ``rows``: one call for all of them."""
        index = np.flatnonzero(rows)
        fresh, _ = self.starts.begin(self._bases[index], self._episodes[index], options)
        self._episodes[index] += 1
        if self.state is None or index.size == self.num_envs:
            self.state = fresh
        else:
            self.state = self.state.put(index, fresh)

    def _reset_info(self, rows: np.ndarray) -> dict[str, Any]:
        """The single env's reset info for the sub-environments at bool ``rows``; the other
        rows (a partial reset) are unreported: masked out and zero, as ``SyncVectorEnv``
        leaves them."""
        info = self.interface.reset_info(self.state)
        if not rows.all():
            for value in info.values():
                value[~rows] = 0
        return self._masked(info, rows)

    @staticmethod
    def _masked(info: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
        """``info`` in Gymnasium's vector format: each key with its ``_key`` mask of the rows
        that report it (a copy each, as ``SyncVectorEnv`` makes them)."""
        out = dict(info)
        for key in info:
            out[f"_{key}"] = rows.copy()
        return out
