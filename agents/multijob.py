"""Independent learners with shared parameters on the multi-job track, with Stable-Baselines3.

Every job is played by one policy (parameter sharing: the jobs' experience trains the same
network, which each job runs on its own observation; Gupta, Egorov and Kochenderfer, AAMAS '17
workshops). ``TurnEnv`` makes the AEC environment a Gymnasium env whose step is the acting
job's round: it returns the next job's observation and the acting job's reward, so an episode's
return is the sum of the jobs' returns (each ``1 − TTA / H_ref`` on success), the team's.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from powertrip_env import multijob


class TurnEnv(gym.Env):
    """The multi-job AEC env as one Gymnasium env: each step is the acting job's round."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's attribute)

    def __init__(self, task: str | None = None, **kwargs: Any) -> None:
        self.aec = multijob.env(task, **kwargs)
        raw = self.aec.unwrapped
        agent = raw.possible_agents[0]
        self.observation_space = raw.observation_space(agent)
        self.action_space = raw.action_space(agent)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.aec.reset(seed=seed, options=options)
        return self._observe()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        aec = self.aec
        agent = aec.agent_selection
        aec.step(np.asarray(action, dtype=np.int8))
        reward = float(aec.unwrapped.rewards.get(agent, 0.0))
        self._skip_finished()
        if not aec.agents:
            return np.zeros(self.observation_space.shape, np.float32), reward, True, False, {}
        obs, info = self._observe()
        return obs, reward, False, False, info

    def _skip_finished(self) -> None:
        aec = self.aec
        while aec.agents and (
            aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]
        ):
            aec.step(None)

    def _observe(self) -> tuple[np.ndarray, dict[str, Any]]:
        self._skip_finished()
        agent = self.aec.agent_selection
        return self.aec.observe(agent), {"agent": agent}


def train(task: str | None = None, steps: int = 20_000, seed: int = 0, **ppo: Any) -> Any:
    """A PPO agent (SB3, MLP) trained for ``steps`` job-rounds of ``task``'s training days."""
    from stable_baselines3 import PPO

    env = TurnEnv(task)
    model = PPO("MlpPolicy", env, seed=seed, verbose=0, **ppo)
    model.learn(total_timesteps=steps)
    return model
