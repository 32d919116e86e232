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
from powertrip_env.agents.hyperparams import default_config_path, load_config, model_kwargs
from powertrip_env.baselines.multijob import CANDIDATES, JointCandidates, with_candidates


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
        self._began()
        return self._observe()

    def _began(self) -> None:
        """A new episode of the AEC env has begun (before its first observation)."""

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

    def close(self) -> None:
        self.aec.close()

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


class CandidateTurnEnv(TurnEnv):
    """``TurnEnv`` whose action picks one of the job's candidate sets (``JointCandidates``:
    HorizonRule's alone, the central scheduler's, the sites held whole, every site offered, or
    none) and whose observation appends those sets."""

    def __init__(self, task: str | None = None, **kwargs: Any) -> None:
        super().__init__(task, **kwargs)
        self.candidates = JointCandidates()
        n = self.aec.unwrapped.n_sites
        base = self.observation_space
        extra = len(CANDIDATES) * n
        self.observation_space = gym.spaces.Box(
            np.concatenate([base.low, np.zeros(extra, np.float32)]),
            np.concatenate([base.high, np.ones(extra, np.float32)]),
            dtype=np.float32,
        )
        self.action_space = gym.spaces.Discrete(len(CANDIDATES))
        self._sets = np.zeros((len(CANDIDATES), n), dtype=bool)

    def _began(self) -> None:
        self.candidates.reset(self.aec.unwrapped)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return super().step(self._sets[int(action)].astype(np.int8))

    def _observe(self) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super()._observe()
        if not self.aec.agents:
            return np.zeros(self.observation_space.shape, np.float32), info
        agent = info["agent"]
        self._sets = self.candidates.sets(agent, self.aec.unwrapped.infos[agent])
        return with_candidates(obs, self._sets), info


def ppo_settings() -> dict[str, Any]:
    """PPO's settings: ``agents/configs/ppo.yaml``'s (tuned for the single job: episodes of
    hundreds of rounds whose return is ``1 - TTA / H_ref``, hence a gamma near 1), but
    ``N_STEPS`` per env on ``N_ENVS`` envs: 2,048 job-rounds per update, as the file's 128 on
    16 envs."""
    raw = load_config(default_config_path("ppo"), "ppo")
    return model_kwargs(raw, "ppo", "mlp")[1] | {"n_steps": N_STEPS}


N_STEPS = 256
N_ENVS = 8


def train(
    task: str | None = None,
    steps: int = 20_000,
    seed: int = 0,
    candidates: bool = False,
    torch_threads: int = 1,
    **ppo: Any,
) -> Any:
    """A PPO agent (SB3, MLP, ``ppo_settings()`` updated by ``ppo``) trained for ``steps``
    job-rounds of ``task``'s training days, on ``N_ENVS`` envs: on the raw sites
    (``TurnEnv``) or, with ``candidates``, choosing among the candidate sets
    (``CandidateTurnEnv``). Networks this small train fastest on ``torch_threads`` = 1
    (torch's default, a thread per core, oversubscribes a machine that runs anything else)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(torch_threads)
    kind = CandidateTurnEnv if candidates else TurnEnv
    envs = DummyVecEnv([lambda: kind(task) for _ in range(N_ENVS)])
    model = PPO("MlpPolicy", envs, seed=seed, verbose=0, **(ppo_settings() | ppo))
    model.learn(total_timesteps=steps)
    return model
