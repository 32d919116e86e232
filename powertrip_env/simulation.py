"""What the single and the vector environment share besides the dynamics.

``Simulation`` holds a scenario, its power data and the simulator tables built from them, and knows
the parts of the environment contract that are not physics: where episodes may start, how
observations are laid out (padded to ``max_sites`` or not), how actions are checked, what the
step info holds and when an episode ends; ``configure`` checks the constructor arguments. Both
adapters call them, so none of this is written twice (the rewards are in ``rewards.py``).
Instances are cached per scenario file (and re-read when any of its input files changes), so
every environment in a process shares one read-only copy of the power data and tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from powertrip_env import dynamics
from powertrip_env.errors import ScenarioError
from powertrip_env.rewards import RewardFn, reward_fn
from powertrip_env.scenario import Scenario, load_scenario, scenario_path
from powertrip_env.scenario.portable import from_portable
from powertrip_env.scenario.power import SitePower, site_power
from powertrip_env.scenario.power_data import iso_utc
from powertrip_env.scenario.sampling import SiteSampler

OBS_MODES = ("flat", "dict")
ACTION_MODES = ("multibinary", "multidiscrete")
SPLITS = ("train", "test", "all")


# the keyword arguments both environments take and `configure` checks
ENV_OPTIONS = (
    "reward_mode", "obs_mode", "action_mode", "split", "jitter", "render_mode", "max_sites",
)  # fmt: skip

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


def base_from(rng: np.random.Generator) -> int:
    """The one draw an environment makes from its generator when seeded: every episode's
    start time and jitter then follow from it and the episode's index (``new_episodes``)."""
    return int(rng.integers(dynamics.KEY_LIMIT))


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Validate a keyword argument against its allowed values, naming both."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; allowed: {', '.join(allowed)}")
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class Simulation:
    """A scenario bound to its power data and simulator tables."""

    scenario: Scenario
    power: SitePower
    params: dynamics.SimParams
    _start_rows: dict[str, tuple[int, int]] = dataclasses.field(
        default_factory=dict, init=False, repr=False
    )

    # ------------------------------------------------------------------ episodes

    def split_start_rows(self, split: str) -> tuple[int, int]:
        """Half-open range of trace rows where an episode of ``split`` may start.

        An episode must be able to run its whole time budget inside its days, so the range
        ends one budget before the split does. Remembered per split: every reset asks.
        """
        known = self._start_rows.get(split)
        if known is None:
            known = self._start_rows[split] = self._split_start_rows(split)
        return known

    def _split_start_rows(self, split: str) -> tuple[int, int]:
        check_choice("split", split, SPLITS)
        ep = self.scenario.episode
        if split == "all":
            lo, hi = 0, self.power.rows
        else:
            days = ep.train_days if split == "train" else ep.test_days
            where = f"{self.scenario.source}: [trace] field '{split}_days'"
            lo, hi = self.power.day_rows(*days, where)
        budget_rows = int(np.ceil(self.params.time_budget_s / self.params.interval_s))
        if hi - budget_rows <= lo:
            hours = (hi - lo) * self.params.interval_s / 3600
            start = iso_utc(self.power.t0_s + lo * self.power.interval_s)
            raise ScenarioError(
                f"{self.scenario.source}: the {split} split ({hours:g} h of power data from "
                f"{start}) is not longer than [episode] time_budget_h = {ep.time_budget_h}; an "
                "episode must fit inside its split: shorten time_budget_h or widen the split's days"
            )
        return lo, hi - budget_rows

    def new_episodes(
        self, bases: np.ndarray, episodes: np.ndarray, split: str, options: Mapping[str, Any] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start times (seconds since trace row 0), jitter keys and learner seeds of new episodes.

        Counter-based: episode ``episodes[b]`` of an environment whose generator gave the
        whole number ``bases[b]`` (``base_from``) at its last seeding, so a batch costs one
        kernel call and sub-environment i of the vector env draws what a single env seeded
        alike does. ``options["start_time"]`` fixes the start instead.
        """
        lo, hi = self.split_start_rows(split)
        rows, keys, seeds = dynamics.episode_draws(bases, episodes, lo, hi)
        if options and options.get("start_time") is not None:
            starts = np.full(len(rows), self.parse_start_time(options["start_time"]))
        else:
            starts = rows * self.params.interval_s
        return starts, keys, seeds

    def parse_start_time(self, value: Any) -> float:
        """``options["start_time"]``: seconds since trace start, an ISO string or a datetime."""
        t0 = self.params.trace_t0_s
        if isinstance(value, str):
            try:
                value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(
                    f"options['start_time']={value!r} is not an ISO-8601 time"
                ) from None
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            seconds = value.timestamp() - t0
        elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(
            value, bool
        ):
            seconds = float(value)
        else:
            raise ValueError(
                f"options['start_time']={value!r}: give seconds since the trace start, "
                "an ISO-8601 string or a datetime"
            )
        length = self.params.trace_rows * self.params.interval_s
        if not 0.0 <= seconds < length:
            raise ValueError(
                f"options['start_time']={value!r} is outside the power data: allowed 0 <= "
                f"seconds < {length:.0f} (from {iso_utc(t0)} to {iso_utc(t0 + length)})"
            )
        return seconds

    # ------------------------------------------------------------------ spaces
    #
    # ``max_sites`` (M >= N) pads the per-site parts of the spaces to M rows, so that one agent
    # can act on scenarios of any N <= M. A padded row is all zeros, and the observation gains a
    # per-site ``valid`` flag (1 for the N real sites); padded actions are checked like real
    # ones and then ignored. ``None`` keeps the unpadded spaces of N sites.

    def check_max_sites(
        self, max_sites: int | None, sampler: SiteSampler | None = None
    ) -> int | None:
        """Validate ``max_sites`` against the site count (a sampler's largest, if drawn).

        Drawn catalogues change N every episode, so they need the padding: ``None`` then
        means the sampler's most sites.
        """
        if sampler is not None:
            n, what = sampler.max_sites, f"the site sampler draws up to {sampler.max_sites} sites"
            if max_sites is None:
                return n
        else:
            n = self.params.n_sites
            what = f"the scenario {self.scenario.name!r} ({self.scenario.source}) has {n} sites"
            if max_sites is None:
                return None
        if isinstance(max_sites, bool) or not isinstance(max_sites, int | np.integer):
            raise ValueError(f"max_sites={max_sites!r}: give a whole number >= {n}, or None")
        if max_sites < n:
            raise ValueError(f"max_sites={max_sites}: {what}; give max_sites >= {n}, or None")
        return int(max_sites)

    def action_space(self, action_mode: str, max_sites: int | None = None) -> spaces.Space:
        n = max_sites or self.params.n_sites
        if check_choice("action_mode", action_mode, ACTION_MODES) == "multibinary":
            return spaces.MultiBinary(n)
        return spaces.MultiDiscrete(np.full(n, 2, dtype=np.int64))

    def observation_space(self, obs_mode: str, max_sites: int | None = None) -> spaces.Space:
        n = max_sites or self.params.n_sites
        site_low = np.tile(dynamics.SITE_LOW, (n, 1))
        site_high = np.tile(dynamics.SITE_HIGH, (n, 1))
        valid = spaces.Box(0.0, 1.0, (n,), dtype=np.float32)
        if check_choice("obs_mode", obs_mode, OBS_MODES) == "dict":
            parts = {
                "sites": spaces.Box(site_low, site_high, dtype=np.float32),
                "global": spaces.Box(dynamics.GLOBAL_LOW, dynamics.GLOBAL_HIGH, dtype=np.float32),
            }
            return spaces.Dict(parts if max_sites is None else {**parts, "valid": valid})
        low = [site_low.ravel(), dynamics.GLOBAL_LOW]
        high = [site_high.ravel(), dynamics.GLOBAL_HIGH]
        if max_sites is not None:
            low.append(valid.low)
            high.append(valid.high)
        return spaces.Box(np.concatenate(low), np.concatenate(high), dtype=np.float32)

    def observe(self, state: dynamics.SimState, obs_mode: str, max_sites: int | None = None) -> Any:
        """Batched observation: (B, N·F + G) float32, or a dict of (B, N, F) and (B, G).

        With ``max_sites`` M: (B, M·F + G + M), the valid flags last, or a dict that adds
        ``"valid"`` (B, M) to the (B, M, F) sites.
        """
        width = max_sites or self.params.n_sites
        flat = dynamics.observe(self.params, state, width, max_sites is not None)
        return self.shaped(flat, obs_mode, max_sites)

    def step(
        self, state: dynamics.SimState, mask: np.ndarray, obs_mode: str, max_sites: int | None
    ) -> tuple[dynamics.RoundResult, Any]:
        """One round of every episode and the observations after it, from one kernel call."""
        width = max_sites or self.params.n_sites
        result, flat = dynamics.step_observe(self.params, state, mask, width, max_sites is not None)
        return result, self.shaped(flat, obs_mode, max_sites)

    def shaped(self, flat: np.ndarray, obs_mode: str, max_sites: int | None) -> Any:
        """The kernel's flat observations in ``obs_mode``'s shape (a dict is split into copies)."""
        if obs_mode != "dict":
            return flat
        width = max_sites or self.params.n_sites
        g = width * dynamics.N_SITE_FEATURES
        out = {
            "sites": flat[:, :g].reshape(-1, width, dynamics.N_SITE_FEATURES).copy(),
            "global": flat[:, g : g + dynamics.N_GLOBAL].copy(),
        }
        if max_sites is not None:
            out["valid"] = flat[:, g + dynamics.N_GLOBAL :].copy()
        return out

    # ------------------------------------------------------------------ actions and rewards

    def as_masks(
        self, actions: Any, space: spaces.Space, batch: int, max_sites: int | None = None
    ) -> np.ndarray:
        """Check a batch of actions and return them as a (B, N) bool mask.

        Accepts 0/1 values of any integer, bool or float dtype (SB3 emits float32), and refuses
        everything else with a message that names the expected space. With ``max_sites`` the
        actions are (B, M) and the padded columns are dropped after the check.
        """
        n = self.params.n_sites
        width = max_sites or n
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

    def tta_h(self, state: dynamics.SimState, terminated: np.ndarray) -> np.ndarray:
        """Time to accuracy: the elapsed time on success, the time budget on failure.

        A failed episode did not reach the target within its budget; counting it at the budget
        keeps every policy's mean comparable (an episode cut short by the round limit would
        otherwise look fast).
        """
        elapsed = state.time_s - state.start_s
        return np.where(terminated, elapsed, self.params.time_budget_s) / 3600.0

    def reset_info(
        self, state: dynamics.SimState, max_sites: int | None, row: int | None = None
    ) -> dict[str, Any]:
        """The info of new episodes: every key of ``INFO_KEYS``, as after a round.

        There was no round yet, so the keys that describe the last round hold their neutral
        values (0, False, no site, ``straggler`` -1), as do the episode's end (``tta_h`` 0.0,
        ``success`` False); the others say where the episode starts. Batched (``row`` None):
        (B,) and (B, N) arrays (N padded to ``max_sites``); for one ``row``: numpy scalars and
        (N,) arrays, as the single env reports them.
        """
        b = state.batch
        width = max_sites or self.params.n_sites
        info = {
            "round_time_s": np.zeros(b),
            "compute_s": np.zeros(b),
            "comm_s": np.zeros(b),
            "elapsed_s": state.time_s - state.start_s,
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
            "available": pad_sites(dynamics.available_now(self.params, state), max_sites),
            "straggler": np.full(b, -1, dtype=np.int64),
            "round_energy_kwh": np.zeros(b),
            "energy_kwh": state.energy_j / 3.6e6,
            "rounds": state.rounds,
            "tta_h": np.zeros(b),
            "success": np.zeros(b, dtype=bool),
        }
        if row is None:
            return info
        out = {key: value[row] for key, value in info.items()}
        for key in INFO_FLAGS:
            out[key] = info[key][row, ...]  # 0-d
        return out

    def round_info(
        self,
        result: dynamics.RoundResult,
        max_sites: int | None,
        row: int | None = None,
        record: list[float] | None = None,
    ) -> dict[str, Any]:
        """The info after a round: every key of ``INFO_KEYS`` (the single env's class docstring).

        ``tta_h`` and ``success`` hold their neutral 0.0 and False until the episode itself ends
        (target, time budget or round limit; not a ``TimeLimit`` wrapper, which the simulation
        does not see). Batched (``row`` None): (B,) arrays, or (B, N) per site padded to
        ``max_sites``, each a fresh array the vector env may overwrite in the rows that
        restart. For one ``row``: numpy scalars, and (N,) (or (M,)) per-site arrays;
        ``record`` is that row's ``result.record`` as a list, if the caller has made it.
        """
        if row is not None:
            if record is None:
                record = result.record[row].tolist()
            return self._row_info(result, max_sites, row, record)
        rec, st = result.record.T, result.state.data.T
        flags = result.sites[:, : dynamics.POWERED_NOW] > 0.0
        terminated = rec[dynamics.R_TERMINATED] > 0.0
        ended = terminated | (rec[dynamics.R_TRUNCATED] > 0.0)
        return {
            "round_time_s": rec[dynamics.R_ROUND_S].copy(),
            "compute_s": rec[dynamics.R_COMPUTE_S].copy(),
            "comm_s": rec[dynamics.R_COMM_S].copy(),
            "elapsed_s": st[dynamics.TIME] - st[dynamics.START],
            "start_time_s": st[dynamics.START].copy(),
            "trace_time": self.params.trace_t0_s + st[dynamics.TIME],
            "accuracy": st[dynamics.ACC].copy(),
            "selected": self._pad(flags[:, dynamics.SELECTED], max_sites),
            "n_selected": rec[dynamics.R_N_SELECTED].astype(np.int64),
            "dropped": self._pad(flags[:, dynamics.DROPPED], max_sites),
            "invalid_selections": rec[dynamics.R_INVALID].astype(np.int64),
            "idle": rec[dynamics.R_IDLE] > 0.0,
            "cut": rec[dynamics.R_CUT] > 0.0,
            "powered_gpus": self._pad(
                result.sites[:, dynamics.POWERED_NOW].astype(np.int64), max_sites
            ),
            "available": pad_sites(dynamics.available_now(self.params, result.state), max_sites),
            "straggler": rec[dynamics.R_STRAGGLER].astype(np.int64),
            "round_energy_kwh": rec[dynamics.R_ENERGY_J] / 3.6e6,
            "energy_kwh": st[dynamics.ENERGY] / 3.6e6,
            "rounds": st[dynamics.ROUNDS].astype(np.int64),
            "tta_h": np.where(ended, self.tta_h(result.state, terminated), 0.0),
            "success": terminated,
        }

    def _row_info(
        self, result: dynamics.RoundResult, max_sites: int | None, row: int, r: list[float]
    ) -> dict[str, Any]:
        """``round_info`` of one episode: the same numbers as the batched path, built for speed.

        The single env pays for this at every step. Converting a numpy scalar with ``astype``
        costs about ten times more than building one from a Python number, so the whole
        numbers and flags are read from the row as Python values: the whole numbers are
        shared int64 scalars (immutable, ``_small_ints``), the flags new 0-d arrays. The floats
        are the row's own float64 scalars and take the batched path's arithmetic, bit for bit
        (the vector env tests compare the two).
        """
        rec, st, site = result.record[row], result.state.data[row], result.sites[row]
        params, ints = self.params, self._small_ints
        # both flags; the kernel writes 0.0 or 1.0
        flags = site[: dynamics.POWERED_NOW].astype(bool)
        selected, dropped = flags[dynamics.SELECTED], flags[dynamics.DROPPED]
        powered = site[dynamics.POWERED_NOW].astype(np.int64)
        time_s, start = st[dynamics.TIME], st[dynamics.START]
        # the row dynamics.available_now reads (dynamics.current_row), for one clock
        available = params.available[min(int(time_s / params.interval_s), params.rows - 1)].copy()
        if max_sites is not None:
            selected, dropped = self._pad(selected, max_sites), self._pad(dropped, max_sites)
            powered, available = self._pad(powered, max_sites), self._pad(available, max_sites)
        rounds = int(st[dynamics.ROUNDS])
        terminated = r[dynamics.R_TERMINATED] > 0.0
        if terminated or r[dynamics.R_TRUNCATED] > 0.0:  # as Simulation.tta_h
            tta_h = (time_s - start if terminated else np.float64(params.time_budget_s)) / 3600.0
        else:
            tta_h = _NO_TTA
        return {
            "round_time_s": rec[dynamics.R_ROUND_S],
            "compute_s": rec[dynamics.R_COMPUTE_S],
            "comm_s": rec[dynamics.R_COMM_S],
            "elapsed_s": time_s - start,
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
            "round_energy_kwh": rec[dynamics.R_ENERGY_J] / 3.6e6,
            "energy_kwh": st[dynamics.ENERGY] / 3.6e6,
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

    @staticmethod
    def _pad(values: np.ndarray, max_sites: int | None) -> np.ndarray:
        """Per-site info, (N,) or (B, N), padded to ``max_sites`` on its last axis."""
        if max_sites is None or values.shape[-1] == max_sites:
            return values
        out = np.zeros((*values.shape[:-1], max_sites), dtype=values.dtype)
        out[..., : values.shape[-1]] = values
        return out

    def with_jitter(self, jitter: bool | float) -> Simulation:
        """This simulation with the scenario's jitter (True), none (False) or a given sigma."""
        if jitter is True:
            return self
        if isinstance(jitter, bool) or jitter is None:
            sigma = 0.0
        elif isinstance(jitter, int | float) and 0.0 <= jitter <= 1.0:
            sigma = float(jitter)
        else:
            raise ValueError(f"jitter={jitter!r}: give True, False or a sigma in [0, 1]")
        params = self.params.with_constants(jitter_sigma=sigma)
        return dataclasses.replace(self, params=params)


@dataclasses.dataclass(frozen=True)
class EnvSetup:
    """The checked constructor arguments both environments share, and what they imply."""

    sim: Simulation  # with the jitter applied
    reward: RewardFn
    obs_mode: str
    split: str
    render_mode: str | None
    max_sites: int | None
    action_space: spaces.Space  # of one episode
    observation_space: spaces.Space

    def apply(self, env: Any) -> None:
        """Set the attributes both environments expose from the checked arguments."""
        env.reward_fn, env.reward_mode = self.reward, self.reward.name
        env.obs_mode, env.split = self.obs_mode, self.split
        env.render_mode, env.max_sites = self.render_mode, self.max_sites


def configure(
    scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any],
    *,
    render_modes: tuple[str, ...],
    reward_mode: str | RewardFn,
    obs_mode: str,
    action_mode: str,
    split: str,
    jitter: bool | float,
    render_mode: str | None,
    max_sites: int | None,
    sampler: SiteSampler | None = None,
) -> EnvSetup:
    """Check the keyword arguments of ``PowerTripEnv`` and ``PowerTripVectorEnv`` in one place.

    Every bad value raises a ``ValueError`` naming the argument, the value and what is allowed,
    before an environment exists. The defaults of ``ENV_OPTIONS`` are those of
    ``PowerTripEnv``'s signature, which the vector env reads too.
    """
    sim = load_simulation(scenario).with_jitter(jitter)
    reward = reward_fn(reward_mode)
    obs_mode = check_choice("obs_mode", obs_mode, OBS_MODES)
    sim.split_start_rows(split)  # validates split against the scenario now
    if render_mode is not None:
        check_choice("render_mode", render_mode, render_modes)
    if sampler is not None:
        sampler.check(sim.scenario)
    max_sites = sim.check_max_sites(max_sites, sampler)
    return EnvSetup(
        sim=sim,
        reward=reward,
        obs_mode=obs_mode,
        split=split,
        render_mode=render_mode,
        max_sites=max_sites,
        action_space=sim.action_space(action_mode, max_sites),
        observation_space=sim.observation_space(obs_mode, max_sites),
    )


def pad_sites(values: np.ndarray, max_sites: int | None) -> np.ndarray:
    """A (B, N, ...) per-site array as (B, M, ...), zeros in the padded rows; as is for None."""
    n = values.shape[1]
    if max_sites is None or max_sites == n:
        return values
    out = np.zeros((values.shape[0], max_sites, *values.shape[2:]), dtype=values.dtype)
    out[:, :n] = values
    return out


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


def load_simulation(
    scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any],
) -> Simulation:
    """The simulation for a scenario name, TOML path, ``Scenario`` or portable scenario.

    A file is cached per path, and the cache holds only while every file the scenario reads
    (the TOMLs it extends, the catalogues, the traces) is unchanged: an edited input is read
    again. A portable scenario (``powertrip_env.scenario.portable``) carries its power data
    and reads no file at all.
    """
    if isinstance(scenario, Scenario):
        return _build(scenario)
    if isinstance(scenario, Mapping):
        loaded, power = from_portable(scenario)
        return Simulation(scenario=loaded, power=power, params=dynamics.build_params(loaded, power))
    path = str(scenario_path(scenario))
    with _LOCK:
        hit = _CACHE.get(path)
        if hit is not None and _stamps(hit[0]) == hit[1]:
            return hit[2]
    sim = _build(load_scenario(path))
    files = sim.scenario.inputs
    with _LOCK:
        _CACHE[path] = (files, _stamps(files), sim)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
    return sim


_CACHE: dict[str, tuple[tuple[Any, ...], tuple[Any, ...], Simulation]] = {}
_CACHE_SIZE = 32
_LOCK = threading.Lock()


def _stamps(files: tuple[Any, ...]) -> tuple[Any, ...]:
    """(mtime, size) of each file, None for one that is gone: a change in any means re-read."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _build(scenario: Scenario) -> Simulation:
    power = site_power(scenario)
    params = dynamics.build_params(scenario, power)
    return Simulation(scenario=scenario, power=power, params=params)
