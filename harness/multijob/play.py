"""Playing joint policies on the multi-job tasks, episode by episode, and the alone bound."""

from __future__ import annotations

from typing import Any

import numpy as np

from powertrip_env import multijob
from powertrip_env.baselines.multijob import JointPolicy, joint_policy
from powertrip_env.baselines.registry import make_policy

ALONE = "Alone-Optimiser"
"""The lower bound: each job alone on all the power, planned by the clairvoyant Optimiser (no
job can finish sooner sharing the sites than alone)."""


def play(env: Any, policy: JointPolicy | Any, seed: int) -> dict[str, Any]:
    """One episode of ``env`` (``multijob.env``) from ``seed`` under ``policy`` (a
    ``JointPolicy``, or a callable ``(agent, observation) -> action`` such as a trained agent);
    each job's TTA (h), arrival (h), energy (kWh) and carbon (kg)."""
    env.reset(seed=seed)
    raw = env.unwrapped
    if isinstance(policy, JointPolicy):
        policy.reset(raw)
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if isinstance(policy, JointPolicy):
            action = policy.act(agent, info)
        else:
            action = policy(agent, obs)
        env.step(action)
    return raw.job_results()


def play_alone(env: Any, rule: str = "Optimiser") -> np.ndarray:
    """(K,) each job's TTA (h) alone on all the power, from the start and seed it had in
    ``env``'s current episode, under the single-job ``rule``: the lower bound's episodes."""
    raw = env.unwrapped
    out = []
    for agent in raw.possible_agents:
        lone, seed, options = raw.alone(agent)
        policy = make_policy(rule, lone.n_sites)
        obs, info = lone.reset(seed=seed, options=options)
        policy.reset(lone)
        done = False
        while not done:
            obs, _, terminated, truncated, info = lone.step(policy.act(obs, info))
            done = terminated or truncated
        out.append(float(info["tta_h"]))
    return np.array(out)


def joint(name: str) -> JointPolicy:
    """The joint policy called ``name`` (``baselines.multijob.joint_policy``)."""
    return joint_policy(name)


def task_env(task: str, split: str = "test", jitter: bool = True) -> Any:
    """The wrapped env of ``task`` on ``split`` (the board plays the test days)."""
    return multijob.env(task, split=split, jitter=jitter)
