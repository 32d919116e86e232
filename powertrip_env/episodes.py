"""Where and when episodes start: a split's trace rows, ``options["start_time"]``, and the draws.

Randomness is counter-based: an environment draws one whole number from its generator when it
is seeded (``base_from``), and every later episode's start row, jitter key and learner seed are
hashes of that number and the episode's index (``dynamics.episode_draws``). So a batch of new
episodes costs one kernel call, and sub-environment i of the vector env starts exactly where a
single env seeded alike does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env import dynamics
from powertrip_env.errors import ScenarioError, check_choice
from powertrip_env.scenario.power_data import iso_utc
from powertrip_env.units import s_to_h

if TYPE_CHECKING:
    from powertrip_env.simulation import Simulation

SPLITS = ("train", "test", "all")


def base_from(rng: np.random.Generator) -> int:
    """The one draw an environment makes from its generator when seeded: every episode's
    start time and jitter then follow from it and the episode's index (``EpisodeStarts.begin``)."""
    return int(rng.integers(dynamics.KEY_LIMIT))


class EpisodeStarts:
    """The episodes of one simulation in one split, checked when an environment is made.

    The split's rows are worked out here once, so a split too short for the time budget is an
    error at construction, not at the first reset, and a reset only draws.
    """

    def __init__(self, sim: Simulation, split: str) -> None:
        self.params = sim.params
        self.split = check_choice("split", split, SPLITS)
        unknowns = sim.scenario.unknowns
        self.spreads = np.array(unknowns.spreads()) if unknowns.drawn else None
        self.rows = _start_rows(sim, split)

    def begin(
        self, bases: np.ndarray, episodes: np.ndarray, options: Mapping[str, Any] | None
    ) -> tuple[dynamics.SimState, np.ndarray]:
        """New episodes, as a batch: their initial state and their learners' seeds.

        Episode ``episodes[b]`` of an environment whose generator gave ``bases[b]``
        (``base_from``) at its last seeding starts at a row drawn from the split with a jitter
        key drawn alike; ``options["start_time"]`` fixes the start instead. On the measured
        track the episode's unknowns are drawn from its key (``dynamics.draw_unknowns``); on the
        moving track its path starts from its key and start row (``dynamics.start_paths``).
        """
        lo, hi = self.rows
        rows, keys, seeds = dynamics.episode_draws(bases, episodes, lo, hi)
        if options and options.get("start_time") is not None:
            starts = np.full(len(rows), self.start_time(options["start_time"]))
        else:
            starts = rows * self.params.interval_s
        unknowns = None
        if self.spreads is not None:
            unknowns = dynamics.draw_unknowns(self.spreads, keys, self.params.n_sites)
        state = dynamics.initial_state(self.params, starts, keys, unknowns)
        if self.params.moving:
            dynamics.start_paths(self.params, state.data)
        return state, seeds

    def start_time(self, value: Any) -> float:
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


def _start_rows(sim: Simulation, split: str) -> tuple[int, int]:
    """Half-open range of trace rows where an episode of ``split`` may start.

    An episode must be able to run its whole time budget inside its days, so the range ends
    one budget before the split does.
    """
    ep, power, params = sim.scenario.episode, sim.power, sim.params
    if split == "all":
        lo, hi = 0, power.rows
    else:
        days = ep.train_days if split == "train" else ep.test_days
        lo, hi = power.day_rows(*days, f"{sim.scenario.source}: [trace] field '{split}_days'")
    budget_rows = int(np.ceil(params.time_budget_s / params.interval_s))
    if hi - budget_rows <= lo:
        hours = s_to_h((hi - lo) * params.interval_s)
        start = iso_utc(power.t0_s + lo * power.interval_s)
        raise ScenarioError(
            f"{sim.scenario.source}: the {split} split ({hours:g} h of power data from "
            f"{start}) is not longer than [episode] time_budget_h = {ep.time_budget_h}; an "
            "episode must fit inside its split: shorten time_budget_h or widen the split's days"
        )
    return lo, hi - budget_rows
