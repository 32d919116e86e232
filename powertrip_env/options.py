"""The keyword arguments both environments take, checked in one place before either exists.

``configure`` turns them into an ``EnvSetup``: the simulation (jitter applied), the reward, the
``interface.Interface`` and the ``episodes.EpisodeStarts`` an environment runs on. Every bad value
raises a ``ValueError`` naming the argument, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from powertrip_env.episodes import EpisodeStarts
from powertrip_env.errors import check_choice, is_whole
from powertrip_env.interface import Interface
from powertrip_env.rewards import RewardFn, reward_fn
from powertrip_env.scenario import Scenario
from powertrip_env.scenario.sampling import SiteSampler
from powertrip_env.simulation import Simulation, load_simulation

# the keyword arguments both environments take and `configure` checks
ENV_OPTIONS = (
    "reward_mode", "obs_mode", "action_mode", "split", "jitter", "render_mode", "max_sites",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class EnvSetup:
    """The checked constructor arguments both environments share, and what they imply."""

    sim: Simulation  # with the jitter applied
    reward: RewardFn
    render_mode: str | None
    interface: Interface
    starts: EpisodeStarts

    def drawn(self, scenario: Scenario) -> EnvSetup:
        """The same arguments on a site catalogue drawn for one episode (``sites=``), with the
        jitter asked for at construction."""
        sim = load_simulation(scenario).with_jitter(self.sim.params.jitter_sigma)
        return dataclasses.replace(
            self, sim=sim, interface=self.interface.on(sim.params),
            starts=EpisodeStarts(sim, self.starts.split),
        )  # fmt: skip

    def apply(self, env: Any) -> None:
        """Set the attributes both environments expose (their spaces differ, and are theirs)."""
        env.sim, env.params, env.scenario = self.sim, self.sim.params, self.sim.scenario
        env.site_names = tuple(s.name for s in self.sim.scenario.sites)
        env.interface, env.starts = self.interface, self.starts
        env.reward_fn, env.reward_mode = self.reward, self.reward.name
        env.obs_mode, env.split = self.interface.obs_mode, self.starts.split
        env.render_mode, env.max_sites = self.render_mode, self.interface.max_sites


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
    """Check the keyword arguments of ``PowerTripEnv`` and ``PowerTripVectorEnv``.

    The defaults of ``ENV_OPTIONS`` are those of ``PowerTripEnv``'s signature, which the vector
    env reads too.
    """
    sim = load_simulation(scenario).with_jitter(jitter)
    reward = reward_fn(reward_mode)
    starts = EpisodeStarts(sim, split)  # checks split against the scenario's days now
    if render_mode is not None:
        check_choice("render_mode", render_mode, render_modes)
    if sampler is not None:
        sampler.check(sim.scenario)
    max_sites = _check_max_sites(sim, max_sites, sampler)
    interface = Interface(
        sim.params, obs_mode=obs_mode, action_mode=action_mode, max_sites=max_sites
    )
    return EnvSetup(
        sim=sim, reward=reward, render_mode=render_mode, interface=interface, starts=starts
    )


def _check_max_sites(
    sim: Simulation, max_sites: int | None, sampler: SiteSampler | None = None
) -> int | None:
    """Validate ``max_sites`` against the site count (a sampler's largest, if drawn).

    Drawn catalogues change N every episode, so they need the padding: ``None`` then means the
    sampler's most sites.
    """
    if sampler is not None:
        n, what = sampler.max_sites, f"the site sampler draws up to {sampler.max_sites} sites"
        if max_sites is None:
            return n
    else:
        n = sim.params.n_sites
        what = f"the scenario {sim.scenario.name!r} ({sim.scenario.source}) has {n} sites"
        if max_sites is None:
            return None
    if not is_whole(max_sites):
        raise ValueError(f"max_sites={max_sites!r}: give a whole number >= {n}, or None")
    if max_sites < n:
        raise ValueError(f"max_sites={max_sites}: {what}; give max_sites >= {n}, or None")
    return int(max_sites)
