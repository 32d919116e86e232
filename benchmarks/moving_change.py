"""Does a student that sees the telemetry's age and change recover the moving track's room?

    python benchmarks/moving_change.py                 # PowerTrip-Moving-v0, 30 test episodes
    python benchmarks/moving_change.py --steps 1000    # more labelled states

On ``PowerTrip-Moving-v0`` the benchmark's learnable room is ``AdaptiveHorizon`` against
``Informed`` (the same rule told the draw and each site's present state). The candidate-set
agent's slots are built on the telemetry's smoothed estimates and its features describe the
slots, not how stale or how surprising each site's last reading is. This experiment adds, per
slot, the largest departure of a set's site's last compute reading from the estimate (in σ of
the jitter: a fail-slow shows as a reading several σ slower than believed) and the mean hours
since the set's sites were last measured, and globally the largest departure among the powered
sites and the share of them departing by more than 3 σ; it trains a student of ``Informed``
(behaviour cloning and DAgger, ``agents/imitation.py``) with and without them, and plays both
and ``AdaptiveHorizon`` on the same test episodes (episode e seeded e, jitter on, as
``powertrip evaluate`` plays them). A measurement for docs/agents.md, not a shipped feature.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import imitation
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
from powertrip_env.agents.candidates import N_SLOTS
from powertrip_env.baselines.registry import make_policy

EXTRA_SLOT = 2  # per slot: largest departure (σ), mean age (h)
EXTRA_GLOBAL = 2  # largest departure among powered sites (σ), share departing > 3 σ
ROUNDS_PER_H = 12.0  # the flagship's rounds last about five minutes (docs/moving.md)


def change_features(venv: CandidateVecEnv) -> np.ndarray:
    """(B, N_SLOTS · 2 + 2) the telemetry's change and age features of every env's slots."""
    tel = venv.vector.telemetry()
    est = venv.estimates
    sigma = venv.vector.decision_view(0).scenario.episode.jitter_sigma
    b, n_slots, _ = venv.masks.shape
    out = np.zeros((b, n_slots * EXTRA_SLOT + EXTRA_GLOBAL), dtype=np.float32)
    for i in range(b):
        e = est.estimators[i]
        reading = tel.seen[i, 0]
        measured = (tel.seen[i, 3] >= 0) & (reading > 0)
        depart = np.where(measured, (np.log(np.where(measured, reading, 1.0)) - e.log[0]), 0.0)
        depart = np.clip(depart / max(sigma, 1e-9), -10.0, 10.0)
        # rounds since the last reading, in rounds of about five minutes: hours on the flagship
        age_h = np.where(measured, tel.rounds[i] - 1 - tel.seen[i, 3], 0.0) / ROUNDS_PER_H
        for k in range(n_slots):
            inset = venv.masks[i, k]
            if inset.any():
                out[i, k * EXTRA_SLOT] = depart[inset].max()
                out[i, k * EXTRA_SLOT + 1] = min(float(age_h[inset].mean()), 10.0)
        powered = tel.available[i]
        if powered.any():
            out[i, -2] = depart[powered].max()
            out[i, -1] = float(np.mean(depart[powered] > 3.0))
    return out


class ChangeVecEnv(CandidateVecEnv):
    """``CandidateVecEnv`` whose observation adds ``change_features``."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        width = self.observation_space.shape[0] + N_SLOTS * EXTRA_SLOT + EXTRA_GLOBAL
        self.observation_space = spaces.Box(-10.0, 10.0, (width,), np.float32)

    def _observe(self) -> np.ndarray:
        base = super()._observe()
        return np.concatenate([base, change_features(self)], axis=1)


def train_student(env_id: str, change: bool, steps: int, seed: int) -> Any:
    """A student of ``Informed``, with or without the change features."""
    original = imitation.make_venv

    def make(env: str, kwargs: dict[str, Any], n_envs: int, s: int) -> CandidateVecEnv:
        venv = (ChangeVecEnv if change else CandidateVecEnv)(
            gym.make_vec(env, num_envs=n_envs, **kwargs)
        )
        venv.seed(s)
        return venv

    imitation.make_venv = make
    try:
        model, summary = imitation.train(env_id, steps=steps, seed=seed, teacher="informed")
    finally:
        imitation.make_venv = original
    print(json.dumps({"change": change, **summary}))
    return model


def play_student(env_id: str, model: Any, change: bool, episodes: int) -> np.ndarray:
    """Each test episode's TTA (h) with the student's greedy slot, episode e seeded e."""
    cls = ChangeVecEnv if change else CandidateVecEnv
    venv = cls(gym.make_vec(env_id, num_envs=episodes, split="test"))
    venv.seed(0)  # SB3's: env i takes seed 0 + i
    obs = venv.reset()
    act = imitation.student_of(model.policy)
    tta = np.full(episodes, math.nan)
    while np.isnan(tta).any():
        obs, _, dones, infos = venv.step(act(obs))
        for i in np.flatnonzero(dones):
            if math.isnan(tta[i]):
                tta[i] = infos[i]["tta_h"]
    return tta


def play_rule(env_id: str, name: str, episodes: int) -> np.ndarray:
    out = []
    for e in range(episodes):
        env = gym.make(env_id, split="test").unwrapped
        rule = make_policy(name, env.n_sites, 0)
        obs, info = env.reset(seed=e)
        rule.reset(env)
        while True:
            obs, _, terminated, truncated, info = env.step(rule.act(obs, info))
            if terminated or truncated:
                out.append(info["tta_h"])
                break
    return np.array(out)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-Moving-v0")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = {
        name: play_rule(args.env, name, args.episodes) for name in ("AdaptiveHorizon", "Informed")
    }
    for change in (False, True):
        model = train_student(args.env, change, args.steps, args.seed)
        rows["student+change" if change else "student"] = play_student(
            args.env, model, change, args.episodes
        )
    base = rows["AdaptiveHorizon"]
    out = {}
    for name, tta in rows.items():
        diff = tta - base
        half = 1.96 * diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
        out[name] = {
            "tta_h": round(float(tta.mean()), 3),
            "vs_adaptive_h": round(float(diff.mean()), 3),
            "pm": round(half, 3),
        }
        print(
            f"{name:<18} {tta.mean():7.3f} h   vs AdaptiveHorizon {diff.mean():+.3f} ± {half:.3f}"
        )
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
