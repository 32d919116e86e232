"""``Interface``: the environment's contract over the kernel, bound once per environment.

The kernel works in (B, N) arrays and one record row per episode. An environment promises more:
its spaces, observations in ``obs_mode``'s shape, actions checked against its space, and an info
dict whose keys never change, all padded to ``max_sites`` when asked. An ``Interface`` keeps that
promise over one simulation's tables with ``max_sites``, ``obs_mode`` and ``action_mode`` bound
when it is made, so the single and the vector env, which hold one each, lay out an episode
the same way: the vector env's sub-environment i is the single env, bit for bit.

``max_sites`` (M >= N) pads the per-site parts to M rows, so that one agent can act on
scenarios of any N <= M. A padded row is all zeros, and the observation gains a per-site
``valid`` flag (1 for the N real sites); padded actions are checked like real ones and then
ignored. ``None`` keeps the unpadded spaces of N sites.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces

from powertrip_env import dynamics
from powertrip_env.errors import check_choice

OBS_MODES = ("flat", "dict")
ACTION_MODES = ("multibinary", "multidiscrete")

# The keys of ``info``, the same at reset and after every round: libraries that read info as
# arrays (TorchRL's info reader, Tianshou's batches, vector envs) build their layout from the
# first info they see. Each value is a numpy number or array (PowerTripEnv's class docstring).
INFO_KEYS = (
    "round_time_s", "compute_s", "comm_s", "elapsed_s", "start_time_s", "trace_time",
    "accuracy", "selected", "n_selected", "dropped", "invalid_selections", "idle", "cut",
    "powered_gpus", "available", "straggler", "round_energy_kwh", "energy_kwh", "rounds",
    "tta_h", "success", "delta_progress", "measured_compute_s", "measured_transfer_s",
    "measured_join_s", "round_carbon_kg", "carbon_kg",
)  # fmt: skip
# The yes/no keys. One episode reports them as 0-d bool arrays, not np.bool_ scalars: Gymnasium's
# SyncVectorEnv and AsyncVectorEnv stack np.bool_ (which is not an np.number) into object arrays,
# and a Python bool has no dtype for TorchRL's reader; a 0-d array stacks as bool everywhere.
INFO_FLAGS = ("idle", "cut", "success")


class Interface:
    """Spaces, padding, observations, action checks and info of one environment's episodes."""

    def __init__(
        self, params: dynamics.SimParams, *, obs_mode: str, action_mode: str, max_sites: int | None
    ) -> None:
        self.params = params
        self.obs_mode = check_choice("obs_mode", obs_mode, OBS_MODES)
        self.action_mode = check_choice("action_mode", action_mode, ACTION_MODES)
        self.max_sites = max_sites  # checked against the scenario by options.configure
        self.n_sites = params.n_sites
        self.padded = max_sites is not None
        self.width = max_sites if self.padded else params.n_sites  # sites in every space
        # columns per site: the features, on a carbon task its carbon columns, and on the
        # measured track its telemetry; and the global ones (a carbon task's job columns last)
        self.per_site = dynamics.site_features(params)
        self.n_global = dynamics.global_features(params)
        self.action_space = self._action_space()
        self.observation_space = self._observation_space()

    def on(self, params: dynamics.SimParams) -> Interface:
        """This interface over a catalogue drawn for one episode: N changes, but M and the modes,
        and so the spaces an agent was built for, stay those the env was made with."""
        return Interface(
            params, obs_mode=self.obs_mode, action_mode=self.action_mode, max_sites=self.max_sites
        )

    # ------------------------------------------------------------------ spaces and padding

    def _action_space(self) -> spaces.Space:
        if self.action_mode == "multibinary":
            return spaces.MultiBinary(self.width)
        return spaces.MultiDiscrete(np.full(self.width, 2, dtype=np.int64))

    def _observation_space(self) -> spaces.Space:
        low, high = [dynamics.SITE_LOW], [dynamics.SITE_HIGH]
        glow, ghigh = [dynamics.GLOBAL_LOW], [dynamics.GLOBAL_HIGH]
        if self.params.carbon_obs:  # a carbon task's columns
            low.append(dynamics.CARBON_SITE_LOW)
            high.append(dynamics.CARBON_SITE_HIGH)
            glow.append(dynamics.CARBON_JOB_LOW)
            ghigh.append(dynamics.CARBON_JOB_HIGH)
        if self.params.measured:  # the measured track's telemetry
            low.append(dynamics.TELEMETRY_LOW)
            high.append(dynamics.TELEMETRY_HIGH)
        low, high = np.concatenate(low), np.concatenate(high)
        glow, ghigh = np.concatenate(glow), np.concatenate(ghigh)
        site_low = np.tile(low, (self.width, 1))
        site_high = np.tile(high, (self.width, 1))
        valid = spaces.Box(0.0, 1.0, (self.width,), dtype=np.float32)
        if self.obs_mode == "dict":
            parts = {
                "sites": spaces.Box(site_low, site_high, dtype=np.float32),
                "global": spaces.Box(glow, ghigh, dtype=np.float32),
            }
            return spaces.Dict({**parts, "valid": valid} if self.padded else parts)
        low = [site_low.ravel(), glow]
        high = [site_high.ravel(), ghigh]
        if self.padded:
            low.append(valid.low)
            high.append(valid.high)
        return spaces.Box(np.concatenate(low), np.concatenate(high), dtype=np.float32)

    def pad(self, values: np.ndarray) -> np.ndarray:
        """Per-site values, the sites on the last axis, with zeros for the padded sites.

        (N,), (B, N) or any leading shape; as they are when there is no padding. Every per-site
        array the envs hand out (info, action masks) is padded here, so a padded site reads as
        absent in all of them alike.
        """
        if values.shape[-1] == self.width:
            return values
        out = np.zeros((*values.shape[:-1], self.width), dtype=values.dtype)
        out[..., : values.shape[-1]] = values
        return out

    # ------------------------------------------------------------------ observations

    def observe(self, state: dynamics.SimState) -> Any:
        """Batched observation: (B, N·F + G) float32, or a dict of (B, N, F) and (B, G).

        Padded to M: (B, M·F + G + M), the valid flags last, or a dict that adds ``"valid"``
        (B, M) to the (B, M, F) sites.
        """
        return self._shaped(dynamics.observe(self.params, state, self.width, self.padded))

    def _shaped(self, flat: np.ndarray) -> Any:
        """The kernel's flat observations in ``obs_mode``'s shape (a dict is split into copies)."""
        if self.obs_mode != "dict":
            return flat
        g = self.width * self.per_site
        out = {
            "sites": flat[:, :g].reshape(-1, self.width, self.per_site).copy(),
            "global": flat[:, g : g + self.n_global].copy(),
        }
        if self.padded:
            out["valid"] = flat[:, g + self.n_global :].copy()
        return out

    def first(self, obs: Any) -> Any:
        """The one episode of a batched observation (the single env's batch of one)."""
        if self.obs_mode == "dict":
            return {key: value[0] for key, value in obs.items()}
        return obs[0]

    def put(self, obs: Any, index: np.ndarray, fresh: Any) -> None:
        """Write the batched observations ``fresh`` into rows ``index`` of ``obs``, in place:
        the vector env's restarting rows, which need not know ``obs_mode``'s shape."""
        if self.obs_mode == "dict":
            for key, value in fresh.items():
                obs[key][index] = value
        else:
            obs[index] = fresh

    # ------------------------------------------------------------------ actions

    def as_masks(self, actions: Any, space: spaces.Space, batch: int | None) -> np.ndarray:
        """Check a batch of actions and return them as a (B, N) bool mask.

        ``batch`` is the vector env's B, which takes (B, M) actions, or None for the single
        env's one action of shape (M,), returned as a batch of one. Accepts 0/1 values of any
        integer, bool or float dtype (SB3 emits float32), and refuses everything else with a
        message that names the expected ``space`` (the caller's, single or batched). Padded,
        the actions have M > N columns and the padded ones are dropped after the check.
        """
        n, width = self.n_sites, self.width
        shape = (width,) if batch is None else (batch, width)
        if type(actions) is np.ndarray and actions.shape == shape:
            mask = _fast_mask(actions)
            if mask is not None:
                mask = mask[None] if batch is None else mask
                return mask if width == n else mask[:, :n]
        arr = np.asarray(actions)
        if (
            arr.shape != shape
            or arr.dtype.kind not in "biuf"
            or not np.all((arr == 0) | (arr == 1))
        ):
            padded = f"; entries {n}..{width - 1} are padding and ignored" if width > n else ""
            raise ValueError(
                f"action {actions!r} is not in the action space {space}: expected an array of "
                f"shape {shape} with values 0 or 1 (1 = the site takes part this round){padded}"
            )
        return arr.reshape(-1, width).astype(bool)[:, :n]

    def action_masks(self, available: np.ndarray) -> np.ndarray:
        """MaskablePPO's masks from per-site availability (..., N): (..., 2M) bool, per site
        [may choose 0, may choose 1]; a padded site may never be chosen."""
        available = self.pad(available)
        out = np.ones((*available.shape, 2), dtype=bool)
        out[..., 1] = available
        return out.reshape(*available.shape[:-1], -1)

    # ------------------------------------------------------------------ info

    def step(
        self,
        state: dynamics.SimState,
        mask: np.ndarray,
        scratch: dynamics.Scratch | None = None,
    ) -> tuple[dynamics.RoundResult, Any, dynamics.Info]:
        """One round of every episode, the observations and the info's numbers after it, from
        one kernel call (``scratch``: ``dynamics.step_observe``'s)."""
        result, flat, info = dynamics.step_observe(
            self.params, state, mask, self.width, self.padded, scratch
        )
        return result, flat if self.obs_mode == "flat" else self._shaped(flat), info

    def scratch(self, batch: int) -> dynamics.Scratch:
        """What ``step`` may lend a batch of ``batch`` episodes laid out by this interface."""
        return dynamics.Scratch.fit(
            None, batch, self.n_sites, self.width, self.padded, self.per_site, self.n_global
        )

    def report(self, state: dynamics.SimState) -> dynamics.Info:
        """The info's numbers of episodes that have just started: as after a round that did
        nothing (the keys about the last round hold 0, False, no site and ``straggler`` -1;
        ``tta_h`` and ``success`` 0.0 and False), so a reset reports the same keys as a step."""
        return dynamics.report(self.params, state, self.width)

    def describe(self, result: dynamics.RoundResult) -> dynamics.Info:
        """The info's numbers after ``result``, a round whose accuracy a real learner has set
        (``RoundResult.with_accuracy``); ``step`` computes them for the surrogate's rounds."""
        return dynamics.describe(self.params, result, self.width)

    def batch_info(self, info: dynamics.Info) -> dict[str, Any]:
        """Every key of ``INFO_KEYS`` as (B,) or (B, M) arrays, the vector env's layout: each a
        fresh array the vector env may overwrite in the rows that restart."""
        values, out = info.values, {}
        for key, kind, col in _SPEC:
            if kind == _FLOAT:
                out[key] = values[:, col].copy()
            elif kind == _INT:
                out[key] = values[:, col].astype(np.int64)
            elif kind == _FLAG:
                out[key] = values[:, col] > 0.0
            elif kind == _SITE_FLAG:
                out[key] = info.flags[:, col].copy()
            elif kind == _TELEMETRY:
                out[key] = info.telemetry[:, col].copy()
            else:
                out[key] = info.powered
        return out

    def episode_info(self, info: dynamics.Info) -> dict[str, Any]:
        """The first episode's info, as the single env reports it: numpy float64 and int64
        scalars, 0-d bool arrays for the flags (``INFO_FLAGS``) and (M,) per-site arrays; the
        same numbers as ``batch_info``'s first row (the vector env's tests compare them).

        The single env pays for this at every step, so the kernel's ``first_info`` reads it,
        written out for speed beside the layout; the whole numbers are shared int64 scalars
        (immutable, ``_small_ints``) looked up by value.
        """
        return dynamics.first_info(info, self._small_ints)

    @functools.cached_property
    def _small_ints(self) -> tuple[np.int64, ...]:
        """int64 scalars -1, 0, 1, ... up to the round limit and the site count, by value + 1:
        site indices, counts and (up to ``max_rounds``) rounds are all in it."""
        top = max(self.params.n_sites, self.params.max_rounds) + 1
        return tuple(np.int64(i) for i in range(-1, top + 1))


# How each key of ``INFO_KEYS`` is read from the kernel's ``dynamics.Info``: a float, whole
# number or flag of its values, one of its per-site flags, or the powered GPUs.
_FLOAT, _INT, _FLAG, _SITE_FLAG, _POWERED, _TELEMETRY = range(6)
_WHOLE = ("n_selected", "invalid_selections", "straggler", "rounds")


def _where(key: str) -> tuple[str, int, int]:
    """``key``, how it is read and from which column (-1: the powered GPUs' own array)."""
    if key == "powered_gpus":
        return key, _POWERED, -1
    if key in dynamics.INFO_SITE_FLAGS:
        return key, _SITE_FLAG, dynamics.INFO_SITE_FLAGS.index(key)
    if key in dynamics.INFO_TELEMETRY:
        return key, _TELEMETRY, dynamics.INFO_TELEMETRY.index(key)
    kind = _INT if key in _WHOLE else _FLAG if key in INFO_FLAGS else _FLOAT
    return key, kind, dynamics.INFO_FIELDS.index(key)


_SPEC = tuple(_where(key) for key in INFO_KEYS)


def _fast_mask(actions: np.ndarray) -> np.ndarray | None:
    """The bool mask of a well-formed numeric action array, or None to take the slow path.

    ``a != 0`` is the mask, and the values were all 0 or 1 exactly when ``a`` equals it
    everywhere (NaN, inf, 2 and -1 all differ); two numpy calls instead of `as_masks`' five.
    """
    kind = actions.dtype.kind
    if kind == "b":
        return actions
    if kind not in "iuf":
        return None
    if actions.itemsize == 1 and kind in "iu":  # (u)int8, as MultiBinary samples: check bytes
        valid = not actions.tobytes().translate(None, b"\x00\x01")
        return actions.view(np.bool_) if valid else None
    mask = actions != 0
    return mask if np.count_nonzero(actions == mask) == mask.size else None
