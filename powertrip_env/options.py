"""The keyword arguments of both environments, checked here, in one place, before either exists.

``configure`` turns them into an ``EnvSetup``: the simulation (jitter applied), the reward, the
``interface.Interface`` and the ``episodes.EpisodeStarts`` an environment runs on;
``vector_arguments`` checks what only the vector env takes. Every bad value raises a
``ValueError`` (an unknown keyword a ``TypeError``) naming the argument, the value and what is
allowed.
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
    "reward_mode", "shaping", "obs_mode", "action_mode", "split", "jitter", "render_mode",
    "max_sites", "carbon_obs",
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
        sim = _with_carbon_obs(sim, self.sim.params.carbon_obs, f"scenario {scenario.name!r}")
        return dataclasses.replace(
            self,
            sim=sim,
            interface=self.interface.on(sim.params),
            starts=EpisodeStarts(sim, self.starts.split),
        )


def configure(
    scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any],
    *,
    render_modes: tuple[str, ...],
    reward_mode: str | RewardFn,
    shaping: str | None,
    obs_mode: str,
    action_mode: str,
    split: str,
    jitter: bool | float,
    render_mode: str | None,
    max_sites: int | None,
    carbon_obs: bool = False,
    sampler: SiteSampler | None = None,
) -> EnvSetup:
    """Check the keyword arguments of ``PowerTripEnv`` and ``PowerTripVectorEnv``.

    The defaults of ``ENV_OPTIONS`` are those of ``PowerTripEnv``'s signature, which the vector
    env reads too.
    """
    sim = load_simulation(scenario).with_jitter(jitter)
    where = f"scenario {sim.scenario.name!r}"
    sim = _with_carbon_obs(sim, carbon_obs, where)
    try:
        reward = reward_fn(reward_mode, shaping)
    except ValueError as exc:
        raise ValueError(f"{exc} (on {where})") from None
    reward.check(sim.params, where)
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


def _with_carbon_obs(sim: Simulation, carbon_obs: Any, where: str) -> Simulation:
    """``sim`` whose observations show a carbon task's columns (``carbon_obs=True``), which
    only a scenario with a carbon intensity file has."""
    if not isinstance(carbon_obs, bool):
        raise ValueError(f"carbon_obs={carbon_obs!r}: give True or False")
    if not carbon_obs:
        return sim
    if not sim.params.carbon:
        raise ValueError(
            f"carbon_obs=True on {where} ({sim.scenario.source}): the carbon observation needs "
            "a carbon intensity file ([trace] carbon_file), as the carbon tasks' scenarios have "
            "(PowerTrip-Carbon-v2); leave carbon_obs=False here"
        )
    return dataclasses.replace(sim, params=sim.params.with_constants(carbon_obs=1.0))


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


def vector_arguments(
    num_envs: Any, max_episode_steps: Any, learner: Any, sites: Any, options: Mapping[str, Any]
) -> tuple[int, int | None]:
    """Check what ``PowerTripVectorEnv`` takes besides ``ENV_OPTIONS``; returns ``num_envs``
    and ``max_episode_steps`` as ints."""
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
    if max_episode_steps is not None and (not is_whole(max_episode_steps) or max_episode_steps < 1):
        raise ValueError(
            f"max_episode_steps={max_episode_steps!r}: give a whole number of at least 1, or None"
        )
    return int(num_envs), None if max_episode_steps is None else int(max_episode_steps)


def learner_arguments(learner: Any, sites: Any, sampler: SiteSampler | None, learns: bool) -> None:
    """The single env's ``learner`` with ``sites``: real training keeps one model per catalogue."""
    if sampler is not None and learns:
        raise ValueError(
            f"learner={learner!r} with sites={sites!r}: real training keeps one model per "
            "site catalogue; drawn catalogues run the surrogate learner only"
        )
