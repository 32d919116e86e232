"""Playing joint policies on the multi-job tasks, episode by episode; the jobs alone; the
hindsight reference."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from powertrip_env import multijob
from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.baselines.multijob import (
    CANDIDATES,
    Coordinated,
    Independent,
    JointPolicy,
    LearnedCandidates,
)
from powertrip_env.baselines.registry import make_policy

BOUND = "Alone-Bound"
"""The lower bound: each job's lower bound alone on all the power (``lower_bound_h``, a
relaxation no policy beats, whatever it knows): a job that shares the sites has at most the
power it would have alone, so no joint schedule beats it either."""
HINDSIGHT = "JointHindsight"
"""The hindsight reference: the best, in hindsight, of a family of joint schedules played on the
same episode (``hindsight_family``). Clairvoyant, as it chooses after seeing each's outcome; a
reference for the rules' family, not a bound on every schedule."""
ALONE_RULE = "HorizonRule"  # each job alone under it: the slowdowns' yardstick


def play(env: Any, policy: JointPolicy | Callable[[str, np.ndarray], Any], seed: int) -> dict:
    """One episode of ``env`` (``multijob.env``) from ``seed`` under ``policy`` (a
    ``JointPolicy``, or a callable ``(agent, observation) -> action`` such as a trained agent);
    returns ``MultiJobEnv.job_results``."""
    env.reset(seed=seed)
    raw = env.unwrapped
    joint = isinstance(policy, JointPolicy)
    if joint:
        policy.reset(raw)
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
        elif joint:
            env.step(policy.act(agent, info))
        else:
            env.step(policy(agent, obs))
    return raw.job_results()


def alone(env: Any, rule: str = ALONE_RULE) -> tuple[np.ndarray, np.ndarray]:
    """(K,) each job's TTA (h) alone on all the power under the single-job ``rule``, and its
    lower bound alone, from the start and seed it had in ``env``'s current episode."""
    raw = env.unwrapped
    tta, bound = [], []
    for agent in raw.possible_agents:
        lone, seed, options = raw.alone(agent)
        policy = make_policy(rule, lone.n_sites)
        obs, info = lone.reset(seed=seed, options=options)
        bound.append(lower_bound_h(lone))
        policy.reset(lone)
        done = False
        while not done:
            obs, _, terminated, truncated, info = lone.step(policy.act(obs, info))
            done = terminated or truncated
        tta.append(float(info["tta_h"]))
    return np.array(tta), np.array(bound)


def hindsight_family(k: int) -> list[JointPolicy]:
    """The joint schedules the hindsight reference chooses among: each job on its own
    (HorizonRule, PowerTrip), the central scheduler with each rule, and, with HorizonRule, every
    fixed ranking of the jobs (K ≤ 4) or the arrival order and its reverse."""
    orders = (
        list(itertools.permutations(range(k)))
        if k <= 4
        else [tuple(range(k)), tuple(reversed(range(k)))]
    )
    return [
        Independent("HorizonRule"),
        Independent("PowerTrip"),
        Coordinated("HorizonRule"),
        Coordinated("PowerTrip"),
        *(Coordinated("HorizonRule", order) for order in orders),
    ]


def hindsight(env: Any, seed: int, played: dict[str, dict] | None = None) -> tuple[dict, str]:
    """The hindsight reference on episode ``seed``: every schedule of ``hindsight_family``
    played on it, and the one with the least mean TTA (its results and name). Each is played
    from the same seed, so each sees the same episode; ``played`` gives the results of those
    already played on it, by name, which are not played again."""
    best, name = None, ""
    for policy in hindsight_family(len(env.unwrapped.possible_agents)):
        jobs = (played or {}).get(policy.name) or play(env, policy, seed)
        if best is None or jobs["tta_h"].mean() < best["tta_h"].mean():
            best, name = jobs, policy.name
    return best, name


def task_env(task: str, split: str = "test", jitter: bool = True) -> Any:
    """The wrapped env of ``task`` on ``split`` (the board plays the test days)."""
    return multijob.env(task, split=split, jitter=jitter)


def as_policy(model: Any) -> Callable[[str, np.ndarray], np.ndarray]:
    """A trained SB3 model shared by every job, as the board plays it: ``(agent, observation)
    -> action``, deterministic."""

    def act(agent: str, obs: np.ndarray) -> np.ndarray:
        action, _ = model.predict(obs, deterministic=True)
        return np.asarray(action, dtype=np.int8)

    act.observation_shape = tuple(model.observation_space.shape)  # type: ignore[attr-defined]
    return act


def fits(agent: Any, task: str) -> bool:
    """Whether a loaded agent (``load_agent``) reads the observation of ``task``'s jobs: an
    agent trained on one task's sites cannot play another number of them."""
    raw = multijob.raw_env(task)
    shape = raw.observation_space(raw.possible_agents[0]).shape
    if isinstance(agent, LearnedCandidates):
        shape = (shape[0] + len(CANDIDATES) * raw.n_sites,)
    return tuple(getattr(agent, "observation_shape", shape)) == tuple(shape)


def load_agent(path: str, name: str) -> JointPolicy | Callable[[str, np.ndarray], np.ndarray]:
    """A shared-parameter PPO agent saved by ``model.save`` (examples/multijob_ppo.py), as the
    board plays it: a candidate-set agent (a ``Discrete`` action) as ``LearnedCandidates``, a
    raw one (``MultiBinary``) through ``as_policy``. Needs the train extra."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    model = PPO.load(path, device="cpu")
    if isinstance(model.action_space, gym.spaces.Discrete):
        return LearnedCandidates(model, name)
    return as_policy(model)
