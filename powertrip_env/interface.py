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
    "tta_h", "success",
)  # fmt: skip
# The yes/no keys. One episode reports them as 0-d bool arrays, not np.bool_ scalars: Gymnasium's
# SyncVectorEnv and AsyncVectorEnv stack np.bool_ (which is not an np.number) into object arrays,
# and a Python bool has no dtype for TorchRL's reader; a 0-d array stacks as bool everywhere.
INFO_FLAGS = ("idle", "cut", "success")
_NO_TTA = np.float64(0.0)  # tta_h before the episode's end (a real TTA is > 0)


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
        site_low = np.tile(dynamics.SITE_LOW, (self.width, 1))
        site_high = np.tile(dynamics.SITE_HIGH, (self.width, 1))
        valid = spaces.Box(0.0, 1.0, (self.width,), dtype=np.float32)
        if self.obs_mode == "dict":
            parts = {
                "sites": spaces.Box(site_low, site_high, dtype=np.float32),
                "global": spaces.Box(dynamics.GLOBAL_LOW, dynamics.GLOBAL_HIGH, dtype=np.float32),
            }
            return spaces.Dict({**parts, "valid": valid} if self.padded else parts)
        low = [site_low.ravel(), dynamics.GLOBAL_LOW]
        high = [site_high.ravel(), dynamics.GLOBAL_HIGH]
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

    def step(self, state: dynamics.SimState, mask: np.ndarray) -> tuple[dynamics.RoundResult, Any]:
        """One round of every episode and the observations after it, from one kernel call."""
        result, flat = dynamics.step_observe(self.params, state, mask, self.width, self.padded)
        return result, self._shaped(flat)

    def _shaped(self, flat: np.ndarray) -> Any:
        """The kernel's flat observations in ``obs_mode``'s shape (a dict is split into copies)."""
        if self.obs_mode != "dict":
            return flat
        g = self.width * dynamics.N_SITE_FEATURES
        out = {
            "sites": flat[:, :g].reshape(-1, self.width, dynamics.N_SITE_FEATURES).copy(),
            "global": flat[:, g : g + dynamics.N_GLOBAL].copy(),
        }
        if self.padded:
            out["valid"] = flat[:, g + dynamics.N_GLOBAL :].copy()
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

    def as_masks(self, actions: Any, space: spaces.Space, batch: int) -> np.ndarray:
        """Check a batch of actions and return them as a (B, N) bool mask.

        Accepts 0/1 values of any integer, bool or float dtype (SB3 emits float32), and refuses
        everything else with a message that names the expected ``space`` (the caller's, single
        or batched). Padded, the actions are (B, M) and the padded columns are dropped after
        the check.
        """
        n, width = self.n_sites, self.width
        if type(actions) is np.ndarray and actions.shape[-1] == width:
            if actions.shape == (width,) and batch == 1:
                actions = actions.reshape(1, width)
            if actions.shape == (batch, width):
                mask = _fast_mask(actions)
                if mask is not None:
                    return mask if width == n else mask[:, :n]
        arr = np.asarray(actions)
        if arr.shape == (width,) and batch == 1:
            arr = arr.reshape(1, width)
        if (
            arr.shape != (batch, width)
            or arr.dtype.kind not in "biuf"
            or not np.all((arr == 0) | (arr == 1))
        ):
            shape = f"({width},)" if batch == 1 else f"({batch}, {width})"
            padded = f"; entries {n}..{width - 1} are padding and ignored" if width > n else ""
            raise ValueError(
                f"action {actions!r} is not in the action space {space}: expected an array of "
                f"shape {shape} with values 0 or 1 (1 = the site takes part this round){padded}"
            )
        return arr.astype(bool)[:, :n]

    def action_masks(self, available: np.ndarray) -> np.ndarray:
        """MaskablePPO's masks from per-site availability (..., N): (..., 2M) bool, per site
        [may choose 0, may choose 1]; a padded site may never be chosen."""
        available = self.pad(available)
        out = np.ones((*available.shape, 2), dtype=bool)
        out[..., 1] = available
        return out.reshape(*available.shape[:-1], -1)

    # ------------------------------------------------------------------ info

    def tta_h(self, state: dynamics.SimState, terminated: np.ndarray) -> np.ndarray:
        """Time to accuracy: the elapsed time on success, the time budget on failure.

        A failed episode did not reach the target within its budget; counting it at the budget
        keeps every policy's mean comparable (an episode cut short by the round limit would
        otherwise look fast).
        """
        elapsed = self.elapsed_s(state.time_s, state.start_s)
        return np.where(terminated, elapsed, self.params.time_budget_s) / 3600.0

    def elapsed_s(self, time_s: Any, start_s: Any) -> Any:
        """Seconds since the episode started, never past the time budget.

        The kernel stops a round that reaches the budget exactly at start + budget, but that
        sum minus start can come back one rounding step above the budget (7200.000000000001 s
        for a 2 h budget): the clock must not read past the deadline it stopped at.
        """
        return np.minimum(time_s - start_s, self.params.time_budget_s)

    def reset_info(self, state: dynamics.SimState) -> dict[str, Any]:
        """The info of new episodes: every key of ``INFO_KEYS``, as after a round, as (B,) and
        (B, M) arrays (``first_info`` takes the single env's one episode).

        There was no round yet, so the keys that describe the last round hold their neutral
        values (0, False, no site, ``straggler`` -1), as do the episode's end (``tta_h`` 0.0,
        ``success`` False); the others say where the episode starts.
        """
        b, width = state.batch, self.width
        return {
            "round_time_s": np.zeros(b),
            "compute_s": np.zeros(b),
            "comm_s": np.zeros(b),
            "elapsed_s": self.elapsed_s(state.time_s, state.start_s),
            "start_time_s": state.start_s.copy(),
            "trace_time": self.params.trace_t0_s + state.time_s,
            "accuracy": state.accuracy.copy(),
            "selected": np.zeros((b, width), dtype=bool),
            "n_selected": np.zeros(b, dtype=np.int64),
            "dropped": np.zeros((b, width), dtype=bool),
            "invalid_selections": np.zeros(b, dtype=np.int64),
            "idle": np.zeros(b, dtype=bool),
            "cut": np.zeros(b, dtype=bool),
            "powered_gpus": np.zeros((b, width), dtype=np.int64),
            "available": self.pad(dynamics.available_now(self.params, state)),
            "straggler": np.full(b, -1, dtype=np.int64),
            "round_energy_kwh": np.zeros(b),
            "energy_kwh": state.energy_j / dynamics.J_PER_KWH,
            "rounds": state.rounds,
            "tta_h": np.zeros(b),
            "success": np.zeros(b, dtype=bool),
        }

    @staticmethod
    def first_info(info: dict[str, Any]) -> dict[str, Any]:
        """The first episode of a batched info, as the single env reports it: numpy scalars,
        (M,) per-site arrays and 0-d flags (``INFO_FLAGS``)."""
        out = {key: value[0] for key, value in info.items()}
        for key in INFO_FLAGS:
            out[key] = info[key][0, ...]  # 0-d
        return out

    def round_info(self, result: dynamics.RoundResult) -> dict[str, Any]:
        """The info after a round: every key of ``INFO_KEYS`` (the single env's class docstring).

        ``tta_h`` and ``success`` hold their neutral 0.0 and False until the episode itself ends
        (target, time budget or round limit; not a ``TimeLimit`` wrapper, which the simulation
        does not see). (B,) arrays, or (B, M) per site, each a fresh array the vector env may
        overwrite in the rows that restart (``episode_info`` is the single env's).
        """
        rec, st = result.record.T, result.state.data.T
        flags = result.sites[:, : dynamics.POWERED_NOW] > 0.0
        terminated = rec[dynamics.R_TERMINATED] > 0.0
        ended = terminated | (rec[dynamics.R_TRUNCATED] > 0.0)
        return {
            "round_time_s": rec[dynamics.R_ROUND_S].copy(),
            "compute_s": rec[dynamics.R_COMPUTE_S].copy(),
            "comm_s": rec[dynamics.R_COMM_S].copy(),
            "elapsed_s": self.elapsed_s(st[dynamics.TIME], st[dynamics.START]),
            "start_time_s": st[dynamics.START].copy(),
            "trace_time": self.params.trace_t0_s + st[dynamics.TIME],
            "accuracy": st[dynamics.ACC].copy(),
            "selected": self.pad(flags[:, dynamics.SELECTED]),
            "n_selected": rec[dynamics.R_N_SELECTED].astype(np.int64),
            "dropped": self.pad(flags[:, dynamics.DROPPED]),
            "invalid_selections": rec[dynamics.R_INVALID].astype(np.int64),
            "idle": rec[dynamics.R_IDLE] > 0.0,
            "cut": rec[dynamics.R_CUT] > 0.0,
            "powered_gpus": self.pad(result.sites[:, dynamics.POWERED_NOW].astype(np.int64)),
            "available": self.pad(dynamics.available_now(self.params, result.state)),
            "straggler": rec[dynamics.R_STRAGGLER].astype(np.int64),
            "round_energy_kwh": rec[dynamics.R_ENERGY_J] / dynamics.J_PER_KWH,
            "energy_kwh": st[dynamics.ENERGY] / dynamics.J_PER_KWH,
            "rounds": st[dynamics.ROUNDS].astype(np.int64),
            "tta_h": np.where(ended, self.tta_h(result.state, terminated), 0.0),
            "success": terminated,
        }

    def episode_info(self, result: dynamics.RoundResult, r: list[float]) -> dict[str, Any]:
        """``round_info`` of a batch of one, whose ``result.record`` row is ``r`` as a list: numpy
        scalars and (M,) per-site arrays, the same numbers as the batched path, built for speed.

        The single env pays for this at every step. Converting a numpy scalar with ``astype``
        costs about ten times more than building one from a Python number, so the whole
        numbers and flags are read from the row as Python values: the whole numbers are
        shared int64 scalars (immutable, ``_small_ints``), the flags new 0-d arrays. The floats
        are the row's own float64 scalars and take the batched path's arithmetic, bit for bit
        (the vector env tests compare the two).
        """
        rec, st, site = result.record[0], result.state.data[0], result.sites[0]
        params, ints = self.params, self._small_ints
        # both flags; the kernel writes 0.0 or 1.0
        flags = site[: dynamics.POWERED_NOW].astype(bool)
        selected, dropped = flags[dynamics.SELECTED], flags[dynamics.DROPPED]
        powered = site[dynamics.POWERED_NOW].astype(np.int64)
        time_s, start = st[dynamics.TIME], st[dynamics.START]
        # the row dynamics.available_now reads (dynamics.current_row), for one clock
        available = params.available[min(int(time_s / params.interval_s), params.rows - 1)].copy()
        if self.padded:
            selected, dropped = self.pad(selected), self.pad(dropped)
            powered, available = self.pad(powered), self.pad(available)
        rounds = int(st[dynamics.ROUNDS])
        terminated = r[dynamics.R_TERMINATED] > 0.0
        if terminated or r[dynamics.R_TRUNCATED] > 0.0:  # as tta_h
            elapsed = self.elapsed_s(time_s, start)
            tta_h = (elapsed if terminated else np.float64(params.time_budget_s)) / 3600.0
        else:
            tta_h = _NO_TTA
        return {
            "round_time_s": rec[dynamics.R_ROUND_S],
            "compute_s": rec[dynamics.R_COMPUTE_S],
            "comm_s": rec[dynamics.R_COMM_S],
            "elapsed_s": self.elapsed_s(time_s, start),
            "start_time_s": start,
            "trace_time": params.trace_t0_s + time_s,
            "accuracy": st[dynamics.ACC],
            "selected": selected,
            "n_selected": ints[int(r[dynamics.R_N_SELECTED]) + 1],
            "dropped": dropped,
            "invalid_selections": ints[int(r[dynamics.R_INVALID]) + 1],
            "idle": np.array(r[dynamics.R_IDLE] > 0.0),  # 0-d (INFO_FLAGS)
            "cut": np.array(r[dynamics.R_CUT] > 0.0),
            "powered_gpus": powered,
            "available": available,
            "straggler": ints[int(r[dynamics.R_STRAGGLER]) + 1],
            "round_energy_kwh": rec[dynamics.R_ENERGY_J] / dynamics.J_PER_KWH,
            "energy_kwh": st[dynamics.ENERGY] / dynamics.J_PER_KWH,
            "rounds": ints[rounds + 1] if rounds < len(ints) - 1 else np.int64(rounds),
            "tta_h": tta_h,
            "success": np.array(terminated),
        }

    @functools.cached_property
    def _small_ints(self) -> tuple[np.int64, ...]:
        """int64 scalars -1, 0, 1, ... up to the round limit and the site count, by value + 1.

        Site indices, counts and (up to ``max_rounds``) rounds are all in it: looking one up
        costs a quarter of making it at every step of the single env.
        """
        top = max(self.params.n_sites, self.params.max_rounds) + 1
        return tuple(np.int64(i) for i in range(-1, top + 1))


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
