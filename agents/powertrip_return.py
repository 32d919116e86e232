"""What PowerTrip achieves on a given episode: what ``powertrip/return_vs_powertrip`` subtracts.

A training curve of raw returns mixes two things: how good the agent is and how easy the
episodes it happened to draw were (a start in a power-rich hour is easy for every policy).
Subtracting what the PowerTrip heuristic gets *from the same start time* removes most of the
second, so the curve crosses zero where the agent starts to beat PowerTrip.

Definition. For an agent episode that started at trace time ``s`` (seconds since trace row 0),
PowerTrip's return is that of ``powertrip_env.baselines.policies.PowerTrip`` on a separate copy of
the environment (same ID and kwargs, ``jitter=False``, flat observations) reset with
``options={"start_time": s}``. ``s`` is recovered from the episode's last info as
``info["trace_time"] − info["elapsed_s"] − trace_t0_s`` (the trace time at the start; no
extra bookkeeping in the vector env), rounded to the millisecond. The agent's episode has the
scenario's timing jitter and PowerTrip's has none, so a single difference is noisy; the mean
over many episodes is the signal. The returns are cached per start time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from powertrip_env.baselines.registry import make_policy


class PowerTripReturn:
    """PowerTrip's return from a start time, on a jitter-free copy of the environment.

    :param env_id: registered environment ID of the agent's environment.
    :param env_kwargs: the agent environment's kwargs (scenario, reward_mode, ...); the
        copy overrides ``jitter``, ``obs_mode`` and ``split``.
    :param policy: the name of the policy whose return is subtracted (PowerTrip by default;
        ``powertrip_env.baselines.registry.make_policy``).
    :param max_cache: start times remembered; the cache is cleared when it is full.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        policy: str = "PowerTrip",
        max_cache: int = 100_000,
    ) -> None:
        kwargs = {**(env_kwargs or {}), "jitter": False, "obs_mode": "flat", "split": "all"}
        self.env = gym.make(env_id, **kwargs)
        self.env.reset(seed=0)  # a view of the catalogue: its clock's origin
        self.trace_t0_s = float(self.env.unwrapped.decision_view().trace_t0_s)
        self.policy = make_policy(policy, n_sites=self.env.unwrapped.n_sites, seed=0)
        self.max_cache = max_cache
        self._cache: dict[float, float] = {}

    def start_time_s(self, final_info: Mapping[str, Any]) -> float:
        """Start of the finished episode (seconds since trace row 0) from its last info."""
        start = final_info["trace_time"] - final_info["elapsed_s"] - self.trace_t0_s
        return round(float(start), 3)

    def episode_return(self, start_time_s: float) -> float:
        """Undiscounted return of ``policy`` from ``start_time_s`` (cached)."""
        if start_time_s in self._cache:
            return self._cache[start_time_s]
        obs, info = self.env.reset(seed=0, options={"start_time": start_time_s})
        self.policy.reset(self.env)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = self.env.step(self.policy.act(obs, info))
            total += float(reward)
            done = terminated or truncated
        if len(self._cache) >= self.max_cache:
            self._cache.clear()
        self._cache[start_time_s] = total
        return total

    def close(self) -> None:
        """Close the reference environment."""
        self.env.close()
