"""The candidate-set action space for agents: ``CandidateSets`` wraps a ``PowerTripEnv`` so its
action is one of the ``N_SLOTS`` sets ``powertrip_env.baselines.candidates.build`` proposes this
round, and ``CandidatePolicy`` plays a model trained on it behind the baselines' policy interface.

The pool, the slots and the features live in ``baselines/candidates.py``, below both this
module and the deployable rules built on the same slots
(``powertrip_env.baselines.policies.HorizonRule``), so one implementation serves the rule and the
agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.candidates import (
    GLOBAL_FEATURES,
    HORIZONS,
    N_FEATURES,
    N_SLOTS,
    SLOT_FEATURES,
    STICKY_HORIZONS,
    STICKY_MARGIN,
    Candidates,
    build,
)
from powertrip_env.baselines.model_registry import ActionInterface, register_action_interface

__all__ = [
    "GLOBAL_FEATURES",
    "HORIZONS",
    "N_FEATURES",
    "N_SLOTS",
    "SLOT_FEATURES",
    "STICKY_HORIZONS",
    "STICKY_MARGIN",
    "CandidatePolicy",
    "CandidateSets",
    "Candidates",
    "build",
    "numpy_actor",
]


def _as_action(env: gym.Env, mask: np.ndarray) -> np.ndarray:
    """``mask`` of the N real sites as ``env``'s action: int8, zeros over ``max_sites``' padding."""
    action = np.zeros(env.action_space.shape, dtype=np.int8)
    action[: mask.shape[0]] = mask
    return action


class CandidateSets(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A ``PowerTripEnv`` whose action is one of ``N_SLOTS`` candidate sets (``build``).

    The observation is the candidates' ``features``; the reward, termination and ``info`` are
    the wrapped env's. ``candidates`` holds this round's sets, so a caller can see what each
    action would select.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.action_space = spaces.Discrete(N_SLOTS)
        self.observation_space = spaces.Box(-10.0, 10.0, (N_FEATURES,), dtype=np.float32)
        self.candidates: Candidates | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.candidates is None:
            raise RuntimeError("call reset() first")
        if not self.action_space.contains(np.int64(np.asarray(action).reshape(()))):
            raise ValueError(f"action={action!r}: expected an integer in [0, {N_SLOTS})")
        mask = self.candidates.masks[int(np.asarray(action).reshape(()))]
        _, reward, terminated, truncated, info = self.env.step(_as_action(self.env, mask))
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Every slot may be chosen (a slot repeats another when the pool is small); for
        MaskablePPO, which asks every env for masks."""
        return np.ones(N_SLOTS, dtype=bool)


class CandidatePolicy(Policy):
    """A model trained on ``CandidateSets`` behind the baselines' policy interface.

    Deterministic play of an ``MlpPolicy`` (what ``train_agent.py`` trains) runs the actor's
    layers in numpy (``numpy_actor``): SB3's ``predict`` spends some 20 times longer on tensors,
    modes and a distribution object than on the three small products, and a decision's cost
    is what this agent is measured on against ``MyopicOptimal``. Other networks go through
    ``predict``.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        policy = getattr(model, "policy", None)
        self.actor = numpy_actor(policy) if deterministic and policy is not None else None

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        candidates = build(self.env)
        if self.actor is not None:
            slot = self.actor(candidates.features)
        else:
            action, _ = self.model.predict(candidates.features, deterministic=self.deterministic)
            slot = int(np.asarray(action).reshape(()))
        mask = candidates.masks[slot]
        return _as_action(self.env, mask)


def numpy_actor(policy: Any) -> Callable[[np.ndarray], int] | None:
    """The most likely action of an SB3 ``ActorCriticPolicy`` over a flat observation with a
    categorical action, computed in numpy; None for any other network (then use ``predict``)."""
    from stable_baselines3.common.distributions import CategoricalDistribution
    from stable_baselines3.common.torch_layers import FlattenExtractor
    from torch import nn

    if not isinstance(getattr(policy, "action_dist", None), CategoricalDistribution):
        return None
    if not isinstance(getattr(policy, "pi_features_extractor", None), FlattenExtractor):
        return None
    if getattr(policy, "normalize_images", False) and len(policy.observation_space.shape) > 1:
        return None
    steps: list[tuple[np.ndarray, np.ndarray] | Callable[[np.ndarray], np.ndarray]] = []
    for module in [*policy.mlp_extractor.policy_net, policy.action_net]:
        if isinstance(module, nn.Linear):
            weight = module.weight.detach().cpu().numpy().T.copy()
            steps.append((weight, module.bias.detach().cpu().numpy().copy()))
        elif isinstance(module, nn.Tanh):
            steps.append(np.tanh)
        elif isinstance(module, nn.ReLU):
            steps.append(lambda x: np.maximum(x, 0.0))
        else:
            return None

    def actor(features: np.ndarray) -> int:
        x = np.asarray(features, dtype=np.float32)
        for step in steps:
            x = x @ step[0] + step[1] if isinstance(step, tuple) else step(x)
        return int(np.argmax(x))

    return actor


# ``powertrip evaluate --model`` (and ``pretrained``) plays a saved candidate agent.
register_action_interface(ActionInterface("candidates", CandidateSets, CandidatePolicy))
