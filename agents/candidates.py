"""The candidate-set action space for agents: ``CandidateSets`` wraps a ``PowerTripEnv`` so its
action is one of the ``N_SLOTS`` sets ``powertrip_env.baselines.candidates.build`` proposes this
round, and ``CandidatePolicy`` plays a model trained on it behind the baselines' policy interface.

The pool, the slots and their features are built inside the compiled kernel
(``powertrip_env.dynamics.candidates``, through the env's ``candidates()``), and
``powertrip_env.baselines.candidates`` gives one episode's slots their shape (``Candidates``,
``build``). Both stand below this module and the deployable rule built on the same slots
(``powertrip_env.baselines.lookahead.HorizonRule``), so one implementation serves the rule and
the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from powertrip_env.baselines.adaptive import Estimates
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
from powertrip_env.dynamics.jit import compiled
from powertrip_env.harness.models.registry import ActionInterface, register_action_interface

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
    "chosen_mask",
    "compiled_actor",
    "estimates_for",
    "slots_of",
]


def estimates_for(env: Any, batch: int = 1) -> Estimates | None:
    """The estimates the slots assume on the measured track, for ``batch`` episodes of the
    unwrapped env ``env``; None on the known track, where the stated values are the truth.

    On the measured track the stated speeds, links, joins and progress curve are not the
    episode's (docs/model.md, "What is unknown"). Slots ranked on them rank a world that is not
    there, and the features say nothing of what the telemetry has shown. Built on the online
    estimates instead (``baselines.adaptive.Estimates``), the slots are what
    ``AdaptiveHorizon`` chooses among and the features describe the world as measured so far.
    """
    view = env.decision_view(0) if batch > 1 else env.decision_view()
    if not view.measured_track:
        return None
    return Estimates(view.scenario, batch)


def slots_of(env: Any, estimates: Estimates | None) -> Candidates:
    """This round's candidates of the unwrapped env ``env``, on ``estimates`` (updated with
    the telemetry now) where there are any (``estimates_for``), else on the stated values."""
    if estimates is None:
        return build(env)
    return build(env, estimates=estimates)


def _as_action(env: gym.Env, mask: np.ndarray) -> np.ndarray:
    """``mask`` of the N real sites as ``env``'s action: int8, zeros over ``max_sites``' padding."""
    shape = env.action_space.shape
    if shape == mask.shape:  # no padding: one conversion, not an allocation and a copy
        return mask.astype(np.int8)
    action = np.zeros(shape, dtype=np.int8)
    action[: mask.shape[0]] = mask
    return action


def chosen_mask(masks: np.ndarray, action: Any) -> np.ndarray:
    """The set that ``action``, a slot's index, selects among ``masks`` (K, N): what a
    slot wrapper plays; anything but an index in [0, K) is refused, naming the action."""
    k = masks.shape[0]
    if not spaces.Discrete(k).contains(np.int64(np.asarray(action).reshape(()))):
        raise ValueError(f"action={action!r}: expected an integer in [0, {k})")
    return masks[int(np.asarray(action).reshape(()))]


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
        self.estimates: Estimates | None = None  # the measured track's (``estimates_for``)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self.estimates = estimates_for(self.env.unwrapped)
        self.candidates = slots_of(self.env.unwrapped, self.estimates)
        return self.candidates.features, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.candidates is None:
            raise RuntimeError("call reset() first")
        mask = chosen_mask(self.candidates.masks, action)
        if self.estimates is not None:
            self.estimates.played(mask[None, :])
        _, reward, terminated, truncated, info = self.env.step(_as_action(self.env, mask))
        self.candidates = slots_of(self.env.unwrapped, self.estimates)
        return self.candidates.features, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Every slot may be chosen (a slot repeats another when the pool is small); for
        MaskablePPO, which asks every env for masks."""
        return np.ones(N_SLOTS, dtype=bool)


class CandidatePolicy(Policy):
    """A model trained on ``CandidateSets`` behind the baselines' policy interface.

    Deterministic play of an ``MlpPolicy`` (what ``train_agent.py`` trains) runs the actor's
    layers in one compiled call (``compiled_actor``): SB3's ``predict`` spends some 20 times
    longer on tensors, modes and a distribution object than on the three small products, and a
    decision's cost is what this agent is measured on against ``MyopicOptimal``. Other networks
    go through ``predict``.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        policy = getattr(model, "policy", None)
        self.actor = compiled_actor(policy) if deterministic and policy is not None else None
        self.estimates: Estimates | None = None  # the measured track's (``estimates_for``)

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.estimates = estimates_for(self.env)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        candidates = slots_of(self.env, self.estimates)
        if self.actor is not None:
            slot = self.actor(candidates.features)
        else:
            action, _ = self.model.predict(candidates.features, deterministic=self.deterministic)
            slot = int(np.asarray(action).reshape(()))
        mask = candidates.masks[slot]
        if self.estimates is not None:
            self.estimates.played(mask[None, :])
        return _as_action(self.env, mask)


def compiled_actor(policy: Any) -> Callable[[np.ndarray], int] | None:
    """The most likely action of an SB3 ``ActorCriticPolicy`` over a flat observation with a
    categorical action, computed by one compiled call (``_forward_argmax``); None for any other
    network (then use ``predict``).

    The layers are packed into one float32 buffer, so one call runs the whole network: numpy
    would spend a microsecond on each of some ten small operations, about as long as the
    candidates' whole pool takes to predict.
    """
    from stable_baselines3.common.distributions import CategoricalDistribution
    from stable_baselines3.common.torch_layers import FlattenExtractor
    from torch import nn

    if not isinstance(getattr(policy, "action_dist", None), CategoricalDistribution):
        return None
    if not isinstance(getattr(policy, "pi_features_extractor", None), FlattenExtractor):
        return None
    if getattr(policy, "normalize_images", False) and len(policy.observation_space.shape) > 1:
        return None
    modules = [*policy.mlp_extractor.policy_net, policy.action_net]
    linear = [m for m in modules if isinstance(m, nn.Linear)]
    activations = [m for m in modules if not isinstance(m, nn.Linear)]
    kinds = {nn.Tanh: ACT_TANH, nn.ReLU: ACT_RELU}
    if not activations:
        activation = ACT_TANH  # one layer: no activation is applied
    elif len({type(m) for m in activations}) == 1 and type(activations[0]) in kinds:
        activation = kinds[type(activations[0])]
    else:
        return None
    # Linear, activation, Linear, activation, ..., Linear: SB3's MlpExtractor and action net
    expected = [nn.Linear if k % 2 == 0 else type(activations[0]) for k in range(len(modules))]
    if [type(m) for m in modules] != expected:
        return None
    dims = np.array([linear[0].in_features, *(m.out_features for m in linear)], dtype=np.int64)
    parts = []
    for m in linear:
        parts.append(m.weight.detach().cpu().numpy().astype(np.float32).ravel())
        parts.append(m.bias.detach().cpu().numpy().astype(np.float32))
    flat = np.concatenate(parts)
    scratch = np.empty((2, int(dims.max())), dtype=np.float32)

    def actor(features: np.ndarray) -> int:
        x = np.ascontiguousarray(features, dtype=np.float32).reshape(-1)
        return int(_forward_argmax(x, flat, dims, activation, scratch))

    return actor


ACT_TANH, ACT_RELU = 0, 1


@compiled(package_stamp=False, nogil=True, fastmath={"reassoc", "contract"})
def _forward_argmax(x, flat, dims, activation, scratch):
    """argmax of an MLP's output: layer l maps ``dims[l]`` inputs to ``dims[l + 1]`` outputs
    with the weights (output-major, torch's ``Linear.weight``) then the bias packed in ``flat``;
    ``activation`` (tanh or ReLU) after every layer but the last. The first largest wins, as
    ``np.argmax``. Reassociation lets each output's sum run in vector lanes: the sums may differ
    from torch's in the last bits, which moves the argmax only between near-equal slots. NaN
    keeps its meaning (no ``nnan``): a NaN feature makes every logit NaN, and slot 0 wins, as
    with ``np.argmax``."""
    src, dst = 0, 1
    for i in range(dims[0]):
        scratch[src, i] = x[i]
    offset = 0
    layers = dims.shape[0] - 1
    for layer in range(layers):
        n_in, n_out = dims[layer], dims[layer + 1]
        bias = offset + n_in * n_out
        h = scratch[src]
        for j in range(n_out):
            w = flat[offset + j * n_in : offset + (j + 1) * n_in]
            acc = np.float32(0.0)
            for i in range(n_in):
                acc += w[i] * h[i]
            v = acc + flat[bias + j]
            if layer < layers - 1:
                v = np.tanh(v) if activation == ACT_TANH else max(v, np.float32(0.0))
            scratch[dst, j] = v
        offset = bias + n_out
        src, dst = dst, src
    best = 0
    for j in range(dims[layers]):
        if scratch[src, j] > scratch[src, best]:
            best = j
    return best


# ``powertrip evaluate --model`` (and ``pretrained``) plays a saved candidate agent.
register_action_interface(ActionInterface("candidates", CandidateSets, CandidatePolicy))
