"""Rules for several jobs sharing sites (``powertrip_env.multijob``): each job on its own, and a
central scheduler that assigns sites to jobs jointly.

A ``JointPolicy`` is reset on the multi-job env (unwrapped) after ``reset`` and asked for the
acting job's sites at each of its rounds. The single-job rules (``baselines/registry.py``) play
each job through its own single-job env (``MultiJobEnv.job``), reading what they read alone:
the forecast's what-if knows nothing of the other jobs, as jobs that are scheduled one by one
today know nothing of each other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import make_policy


class JointPolicy:
    """Sites for every job of a multi-job episode: ``reset`` once per episode, ``act`` once per
    round of the acting job."""

    name = "JointPolicy"

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.env: Any = None
        self.rules: dict[str, Policy] = {}

    def reset(self, env: Any) -> None:
        """Bind to the multi-job env (``env.unwrapped``) and each job's rule to its job."""
        self.env = env.unwrapped
        self.rules = {}
        for agent in self.env.possible_agents:
            rule = make_policy(self.rule, self.env.n_sites)
            rule.reset(self.env.job(agent))
            self.rules[agent] = rule

    def act(self, agent: str, info: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError


class Independent(JointPolicy):
    """Every job plays ``rule`` as if it ran alone (``"PowerTrip"``, ``"HorizonRule"``)."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.name = f"Independent-{rule}"

    def act(self, agent: str, info: dict[str, Any]) -> np.ndarray:
        return self.rules[agent].act(None, info)


class Coordinated(JointPolicy):
    """A central scheduler that ranks the jobs: each plays ``rule`` on the sites that no job
    ranked above it asked for in its latest round. The first plays ``rule`` on every site; the
    others' choices are cut to what is left them, and a job left none of its choice takes every
    powered site left it (a job never idles while power is left to it).

    ``order="srpt"`` (the default) ranks the unfinished jobs by the time each still needs at
    its reference pace (its ``h_ref_h`` times the share of the way to its target still to go;
    ties: the earlier-arrived), shortest first: the order that minimises the mean completion
    time on one machine (Schrage, Operations Research 1968). The estimate is rough: accuracy
    grows ever more slowly with progress, so the last part of the way takes longer than its
    share. A tuple of job indices is a fixed
    ranking instead (the hindsight reference tries several).
    """

    def __init__(self, rule: str = "HorizonRule", order: str | tuple[int, ...] = "srpt") -> None:
        super().__init__(rule)
        if order != "srpt" and not (
            isinstance(order, tuple) and all(isinstance(j, int) and j >= 0 for j in order)
        ):
            raise ValueError(f"Coordinated: order={order!r}; give 'srpt' or a tuple of job indices")
        self.order = order
        named = "" if rule == "HorizonRule" else f"-{rule}"
        ranked = "" if order == "srpt" else "[" + ",".join(map(str, order)) + "]"
        self.name = f"Coordinated{named}{ranked}"

    def ranking(self) -> list[str]:
        """The unfinished jobs, the first ranked first."""
        env = self.env
        live = [a for a in env.agents if not _finished(env, a)]
        if self.order != "srpt":
            rank = {env.possible_agents[j]: r for r, j in enumerate(self.order)}
            return sorted(live, key=lambda a: rank.get(a, len(rank)))

        def left(agent: str) -> float:
            job = env.job(agent)
            return (1.0 - job.decision_view().progress) * job.scenario.episode.h_ref_h

        return sorted(live, key=left)

    def claimed(self, agent: str) -> np.ndarray:
        """(N,) bool: the sites the jobs ranked above ``agent`` asked for."""
        wanted = self.env.wanted()
        out = np.zeros(self.env.n_sites, dtype=bool)
        for other in self.ranking():
            if other == agent:
                break
            out |= wanted[other]
        return out

    def cut(self, agent: str, chosen: np.ndarray) -> np.ndarray:
        """(N,) bool: ``chosen`` cut to the sites left to ``agent``, or, if none of it is,
        every powered site left to it."""
        left = ~self.claimed(agent)
        kept = chosen & left
        return kept if kept.any() else left & self.env.job(agent).decision_view().available

    def act(self, agent: str, info: dict[str, Any]) -> np.ndarray:
        return self.cut(agent, self.rules[agent].act(None, info).astype(bool)).astype(np.int8)


def _finished(env: Any, agent: str) -> bool:
    return bool(env.terminations.get(agent, False) or env.truncations.get(agent, False))


def joint_policy(name: str) -> JointPolicy:
    """The joint policy called ``name``: ``Independent-<rule>``, ``Coordinated`` (HorizonRule on
    each job's sites) or ``Coordinated-<rule>``."""
    if name.startswith("Independent-"):
        return Independent(name.removeprefix("Independent-"))
    if name == "Coordinated":
        return Coordinated()
    if name.startswith("Coordinated-"):
        return Coordinated(name.removeprefix("Coordinated-"))
    raise ValueError(
        f"unknown joint policy {name!r}; valid: 'Independent-<rule>', 'Coordinated', "
        "'Coordinated-<rule>' with <rule> a single-job policy's name"
    )


CANDIDATES = ("alone", "coordinated", "whole", "offered", "idle")
"""The sets a candidate-set agent chooses among for a job's round (``candidate_sets``)."""


class JointCandidates:
    """The candidate sets of a job's round, built from the rules: what HorizonRule would play
    alone; the central scheduler's cut of it (``Coordinated``); HorizonRule's set cut to the
    sites the job would hold whole now; every site it is offered any share of; and no site
    (the job yields its turn to the others). An empty cut falls back to the scheduler's set.
    """

    def __init__(self) -> None:
        self.coordinated = Coordinated()

    def reset(self, env: Any) -> None:
        self.coordinated.reset(env)

    def sets(self, agent: str, info: dict[str, Any]) -> np.ndarray:
        """(len(CANDIDATES), N) bool, in ``CANDIDATES``' order."""
        coord = self.coordinated
        env = coord.env
        alone = coord.rules[agent].act(None, info).astype(bool)
        available = env.job(agent).decision_view().available
        scheduled = coord.cut(agent, alone)
        offered = env.offers(agent)
        whole = alone & (offered >= 1.0)
        offered_any = available & (offered > 0.0)
        return np.stack(
            [
                alone,
                scheduled,
                whole if whole.any() else scheduled,
                offered_any if offered_any.any() else scheduled,
                np.zeros(env.n_sites, dtype=bool),
            ]
        )


def with_candidates(obs: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """A job's observation followed by its candidate sets (0/1, set by set): what a
    candidate-set agent reads."""
    return np.concatenate([obs, sets.reshape(-1).astype(np.float32)])


class LearnedCandidates(JointPolicy):
    """A trained agent shared by every job that picks one of ``JointCandidates``' sets each
    round: ``model.predict`` (SB3's) on ``with_candidates`` of the job's observation."""

    def __init__(self, model: Any, name: str = "PPO-candidates") -> None:
        super().__init__("HorizonRule")
        self.model = model
        self.name = name
        self.candidates = JointCandidates()
        self.observation_shape = tuple(model.observation_space.shape)

    def reset(self, env: Any) -> None:
        self.env = env.unwrapped
        self.candidates.reset(self.env)

    def act(self, agent: str, info: dict[str, Any]) -> np.ndarray:
        sets = self.candidates.sets(agent, info)
        obs = with_candidates(self.env.observe(agent), sets)
        choice, _ = self.model.predict(obs, deterministic=True)
        return sets[int(choice)].astype(np.int8)
