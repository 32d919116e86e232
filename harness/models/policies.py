"""Saved agents played as policies: the same ``Policy`` interface as the hand-coded ones.

``powertrip_env.harness.models.loading`` loads a model and wraps it in one of these, so the
evaluation harness plays a trained agent exactly as it plays PowerTrip or a reference.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy


class SB3Policy(Policy):
    """A saved Stable-Baselines3 agent behind the same interface as the hand-coded policies.

    For MaskablePPO the env's current ``action_masks()`` are passed, as during training.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        self.maskable = "action_masks" in inspect.signature(model.predict).parameters

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        extra = {"action_masks": self.env.action_masks()} if self.maskable else {}
        action, _ = self.model.predict(obs, deterministic=self.deterministic, **extra)
        return (np.asarray(action).reshape(-1) > 0.5).astype(np.int8)


class RLlibPolicy(Policy):
    """A trained RLlib RLModule (``powertrip_env.integrations.rllib.load_module``) behind the
    same interface.

    It plays the module's most likely action (each site's likelier choice), as SB3Policy plays
    SB3's deterministic one. Needs the ``rllib`` extra, imported only when it acts.
    """

    def __init__(self, module: Any, name: str) -> None:
        super().__init__()
        self.module = module
        self.name = name

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        from powertrip_env.integrations.rllib import greedy_action

        return greedy_action(self.module, obs).astype(np.int8)
