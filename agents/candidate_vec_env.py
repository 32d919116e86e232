"""``CandidateVecEnv``: the candidate-set agent's Stable-Baselines3 vector env, one compiled
call per step for the whole batch.

A ``DummyVecEnv`` of ``CandidateSets`` steps each env in Python and builds each env's
candidates in its own call; here the native ``PowerTripVectorEnv`` steps every episode in one
call of the compiled round and builds every episode's candidates in one call of the compiled
builder. It needs SB3 (the ``train`` extra), which ``powertrip_env.agents.candidates`` does not.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

from powertrip_env.agents.candidates import N_FEATURES, N_SLOTS, estimates_for


class CandidateVecEnv(VecEnv):
    """B candidate-set envs stepped together: an SB3 ``VecEnv`` over a ``PowerTripVectorEnv``.

    What a ``DummyVecEnv`` of B ``CandidateSets`` gives, bit for bit (the same observations,
    rewards, dones and infos for the same seeds, ``tests/test_candidates.py``), at a fraction
    of its cost: a step is one call of the compiled round for the batch and one of the compiled
    candidates (``PowerTripVectorEnv.candidates``), with no Python loop over envs but the
    per-env ``infos`` SB3 asks for. As SB3's vector envs do, an episode that ends is reset at
    once: its last observation is in ``infos[i]["terminal_observation"]``, and
    ``infos[i]["TimeLimit.truncated"]`` says it was cut, not finished. Episode statistics
    (``info["episode"]``) come from a ``VecMonitor`` around it.
    """

    def __init__(self, env: Any) -> None:
        vector = getattr(env, "unwrapped", env)
        if not hasattr(vector, "candidates") or not hasattr(vector, "num_envs"):
            raise TypeError(
                f"CandidateVecEnv wraps a PowerTripVectorEnv (gym.make_vec(ID, num_envs=B)); "
                f"got {type(env).__name__}"
            )
        self.vector = vector
        self._env = env
        self._action_shape = vector.single_action_space.shape
        super().__init__(
            vector.num_envs,
            spaces.Box(-10.0, 10.0, (N_FEATURES,), dtype=np.float32),
            spaces.Discrete(N_SLOTS),
        )
        self.masks: np.ndarray | None = None  # (B, N_SLOTS, N) this round's slots
        self.estimates = None  # the measured track's, one per episode (``estimates_for``)
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        seeds = list(self._seeds)
        options = self._options[0] if self._options and self._options[0] else None
        _, info = self.vector.reset(
            seed=seeds if any(s is not None for s in seeds) else None, options=options
        )
        self._reset_seeds()
        self._reset_options()
        self.estimates = estimates_for(self.vector, self.num_envs)
        self.reset_infos = self._split(info, np.ones(self.num_envs, dtype=bool))
        return self._observe()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self.masks is None or self._actions is None:
            raise RuntimeError("call reset() first")
        slots = self._actions
        if slots.dtype.kind not in "iu" or ((slots < 0) | (slots >= N_SLOTS)).any():
            raise ValueError(f"actions={slots!r}: expected integers in [0, {N_SLOTS})")
        b = self.num_envs
        chosen = self.masks[np.arange(b), slots]
        if self.estimates is not None:
            self.estimates.played(chosen)
        actions = np.zeros((b, *self._action_shape), dtype=np.int8)
        actions[:, : chosen.shape[1]] = chosen
        _, rewards, terminated, truncated, info = self.vector.step(actions)
        dones = terminated | truncated
        infos = self._split(info, np.ones(b, dtype=bool))
        obs = self._observe()
        if dones.any():
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = obs[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            _, reset_info = self.vector.reset(options={"reset_mask": dones})
            fresh = self._split(reset_info, dones)
            for i in np.flatnonzero(dones):
                self.reset_infos[i] = fresh[i]
            if self.estimates is not None:
                self.estimates.restart(dones)
            obs = self._observe()
        for i in np.flatnonzero(~dones):
            infos[i]["TimeLimit.truncated"] = False
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self._env.close()

    def _observe(self) -> np.ndarray:
        if self.estimates is None:
            batch = self.vector.candidates()
        else:
            batch = self.estimates.candidates(self.vector)
        self.masks = batch.masks
        return batch.features

    @staticmethod
    def _split(info: dict[str, Any], rows: np.ndarray) -> list[dict[str, Any]]:
        """Gymnasium's vector info as SB3's list of per-env dicts (the rows in ``rows``)."""
        keys = [k for k in info if not k.startswith("_")]
        return [
            {k: _item(info[k][i]) for k in keys} if rows[i] else {} for i in range(rows.shape[0])
        ]

    # SB3's VecEnv interface for attributes and methods of the envs: the batch is one env
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.vector, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.vector, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list:
        method = getattr(self.vector, method_name)
        return [method(*args, **kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def action_masks(self) -> np.ndarray:
        """Every slot may be chosen, in every env (``CandidateSets.action_masks``)."""
        return np.ones((self.num_envs, N_SLOTS), dtype=bool)


def _item(value: Any) -> Any:
    """One env's entry of a vector info value: a Python scalar, as the single env's info has,
    or its per-site array."""
    return value.item() if np.ndim(value) == 0 else value
