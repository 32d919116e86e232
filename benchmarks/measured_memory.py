"""Agents with memory on the measured track: can a recurrent or a frame-stacked policy learn the
estimating that ``baselines/adaptive.py`` does by hand?

Why: on ``PowerTrip-Measured-v0`` each episode draws its sites' throughput, links and joins and
the job's pace and noise (docs/model.md, "What is unknown"). One observation holds only each
site's *last* measurement and its age; the estimate a good choice needs (a smoothed ratio, a fit
of the job's pace) is a function of the telemetry's history. The candidate-set agent gets it
from the hand-built ``Estimator`` (its slots are built on the online estimates). A deployable
policy with memory could learn it instead, so this script measures two such policies that see
only what a deployable policy sees, the estimator off:

* the candidate slots' features built on the *stated* values (``CandidateVecEnv`` without
  estimates), and
* each site's current telemetry, as the env's flat observation has it
  (``powertrip_env.dynamics.TELEMETRY_FEATURES``): ``ln`` of the measured-over-stated compute,
  exchange and join, clipped to ±1 (0 if never measured), and the measurement's age in rounds
  over 20, clipped to 1 (1 if never measured).

The variants: ``recurrent``, sb3-contrib's ``RecurrentPPO`` with ``MlpLstmPolicy`` (default
LSTM, 256 units), and ``stacked``, PPO on the last 4 observations (SB3's ``VecFrameStack``).
Both take ``agents/configs/ppo.yaml``'s hyperparameters (16 envs × 128 steps per update), train
on the train split with one CPU thread for ``--timesteps`` steps (timed), and are then played
deterministically on ``--episodes`` paired test episodes by the harness's ``evaluate``, beside
``AdaptiveHorizon``, ``AdaptiveMPC`` (the hand-built estimator) and ``InformedMPC`` (told the
draw: the reference). The policies played there compute the same observation from the
unwrapped env and keep their LSTM state or frame stack through the episode.

It prints a table of the variants (steps, training time, mean TTA and its 95 % CI), the
evaluation's own table, and writes a JSON summary (``--out``). Time, on one core of a shared
two-core machine: the stacked PPO trains at some 4,700 steps/s (100k steps in about 20 s), the
recurrent one at 210-290 steps/s (6-8 min for 100k, hence ``--recurrent-timesteps``); the
30-episode evaluation of the five policies takes about 25 s.

    python benchmarks/measured_memory.py --variant all --timesteps 100000 \
        --recurrent-timesteps 65536
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

import gymnasium as gym
import numba
import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack, VecMonitor

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import hyperparams
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
from powertrip_env.agents.candidates import N_FEATURES, build
from powertrip_env.baselines.base import Policy
from powertrip_env.dynamics.features import AGE_SCALE_ROUNDS, N_TELEMETRY
from powertrip_env.harness.evaluation.evaluate import evaluate

ENV_ID = "PowerTrip-Measured-v0"
N_ENVS = 16
N_STACK = 4
SEED = 0
VARIANTS = ("recurrent", "stacked")
LABELS = {"recurrent": "RecurrentPPO-LSTM", "stacked": f"PPO-stack{N_STACK}"}
BASELINES = ("AdaptiveHorizon", "AdaptiveMPC", "InformedMPC")


# --------------------------------------------------------------------------- the observation


def telemetry(view: Any) -> np.ndarray:
    """(N · N_TELEMETRY,) float32: each site's telemetry columns from a decision view, site by
    site, as the env's flat observation computes them (``dynamics.observation``): ``ln`` of the
    three measured-over-stated ratios clipped to ±1 (0 if never measured), then the age of the
    measurement, (rounds − 1 − its round) / 20 clipped to 1 (1 if never measured). A round's
    measurement carries the round's index, and ``rounds`` has counted it once played, so a
    measurement from the round just played is 0 rounds old."""
    seen = view.measured_round >= 0
    ratios = np.stack([view.measured_compute, view.measured_transfer, view.measured_join])
    logs = np.log(np.where((ratios > 0.0) & seen, ratios, 1.0))
    age = np.minimum((view.rounds - 1.0 - view.measured_round) / AGE_SCALE_ROUNDS, 1.0)
    columns = np.vstack([np.clip(logs, -1.0, 1.0), np.where(seen, age, 1.0)])
    return columns.T.reshape(-1).astype(np.float32)


def observation(env: Any) -> tuple[np.ndarray, np.ndarray]:
    """(slots' masks, observation) of the unwrapped env ``env``: the candidates on the stated
    values, their features followed by the sites' telemetry."""
    candidates = build(env)  # no belief: the stated values
    return candidates.masks, np.concatenate([candidates.features, telemetry(env.decision_view())])


class StatedTelemetryVecEnv(CandidateVecEnv):
    """``CandidateVecEnv`` with the estimator off and each site's telemetry after the slots'
    features: slots built on the stated values, the memory left to do the estimating."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        n_sites = self.vector.n_sites
        width = N_FEATURES + N_TELEMETRY * n_sites
        self.observation_space = spaces.Box(-10.0, 10.0, (width,), dtype=np.float32)

    # Whatever the base class keeps as its online estimates, this env keeps none.
    @property
    def estimates(self) -> None:
        return None

    @estimates.setter
    def estimates(self, value: Any) -> None:
        pass

    def _observe(self) -> np.ndarray:
        batch = self.vector.candidates()  # no belief: the stated values
        self.masks = batch.masks
        views = [telemetry(self.vector.decision_view(i)) for i in range(self.num_envs)]
        return np.concatenate([batch.features, np.stack(views)], axis=1).astype(np.float32)


def make_env(variant: str) -> VecEnv:
    """The training envs: 16 of the train split (the env's default), as ``train_agent.py``."""
    vector = gym.make_vec(ENV_ID, num_envs=N_ENVS, reward_mode="excess_gain", obs_mode="flat")
    env: VecEnv = VecMonitor(StatedTelemetryVecEnv(vector))
    return VecFrameStack(env, N_STACK) if variant == "stacked" else env


# --------------------------------------------------------------------------- the policies


class MemoryPolicy(Policy):
    """A trained variant behind the baselines' interface: it builds the training observation
    from the unwrapped env and keeps the LSTM state (``recurrent``) or the frame stack
    (``stacked``, zeros before the episode's first observation, as ``VecFrameStack``) across
    the episode, restarting it in ``reset``."""

    def __init__(self, model: Any, variant: str) -> None:
        super().__init__()
        self.model = model
        self.variant = variant
        self.name = LABELS[variant]
        self.state: Any = None
        self.start = True
        self.stack = np.zeros(0, dtype=np.float32)

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.state = None
        self.start = True
        self.stack = np.zeros(self.model.observation_space.shape[0], dtype=np.float32)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        masks, x = observation(self.env)
        if self.variant == "recurrent":
            action, self.state = self.model.predict(
                x[None], state=self.state, episode_start=np.array([self.start]), deterministic=True
            )
            self.start = False
        else:
            self.stack = np.roll(self.stack, -x.shape[0])
            self.stack[-x.shape[0] :] = x
            action, _ = self.model.predict(self.stack[None], deterministic=True)
        return masks[int(np.asarray(action).reshape(-1)[0])].astype(np.int8)


# --------------------------------------------------------------------------- the run


def train(variant: str, timesteps: int) -> tuple[Any, dict[str, float]]:
    """A model of ``variant`` trained for ``timesteps`` steps, and its training time."""
    raw = hyperparams.load_config(hyperparams.default_config_path("ppo"), "ppo")
    _, kwargs = hyperparams.model_kwargs(raw, "ppo", "candidates")
    env = make_env(variant)
    if variant == "recurrent":
        model = RecurrentPPO("MlpLstmPolicy", env, seed=SEED, device="cpu", **kwargs)
    else:
        model = PPO("MlpPolicy", env, seed=SEED, device="cpu", **kwargs)
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    seconds = time.perf_counter() - start
    env.close()
    steps = int(model.num_timesteps)
    return model, {"steps": steps, "train_s": seconds, "steps_per_s": steps / seconds}


def _number(value: Any) -> Any:
    """A JSON-safe scalar: NaN becomes null, numpy numbers Python ones."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", choices=[*VARIANTS, "all"], default="all")
    p.add_argument("--timesteps", type=int, default=100_000, help="training steps per variant")
    p.add_argument(
        "--recurrent-timesteps",
        type=int,
        default=None,
        help="RecurrentPPO's own budget (default --timesteps): it trains several times slower",
    )
    p.add_argument("--episodes", type=int, default=30, help="paired test episodes")
    p.add_argument("--out", default="/tmp/measured_memory.json", help="the JSON summary")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # one core for training; the env's steps stay serial too
    numba.set_num_threads(1)

    variants = VARIANTS if args.variant == "all" else (args.variant,)
    trained: dict[str, dict[str, float]] = {}
    policies: list[Policy | str] = []
    for variant in variants:
        budget = args.timesteps
        if variant == "recurrent" and args.recurrent_timesteps is not None:
            budget = args.recurrent_timesteps
        print(f"training {LABELS[variant]} on {ENV_ID} for {budget:,} steps", flush=True)
        model, timing = train(variant, budget)
        print(
            f"  {timing['steps']:,} steps in {timing['train_s']:.1f} s "
            f"({timing['steps_per_s']:.0f} steps/s)",
            flush=True,
        )
        trained[variant] = timing
        policies.append(MemoryPolicy(model, variant))

    start = time.perf_counter()
    result = evaluate(
        ENV_ID,
        [*policies, *BASELINES],
        episodes=args.episodes,
        split="test",
        seed=SEED,
        env_kwargs={},
        progress=False,
    )
    eval_s = time.perf_counter() - start
    summary = result.summary.set_index("policy")

    print()
    print("| variant | steps | training (s) | steps/s | mean TTA (h) | ± 95% CI (h) |")
    print("|---|---:|---:|---:|---:|---:|")
    for variant, timing in trained.items():
        row = summary.loc[LABELS[variant]]
        print(
            f"| {LABELS[variant]} | {timing['steps']:,} | {timing['train_s']:.1f} | "
            f"{timing['steps_per_s']:.0f} | {row['mean_tta_h']:.2f} | {row['ci95_tta_h']:.2f} |"
        )
    for name in BASELINES:
        row = summary.loc[name]
        print(f"| {name} | – | – | – | {row['mean_tta_h']:.2f} | {row['ci95_tta_h']:.2f} |")
    print()
    print(result.to_markdown())
    print(f"\nevaluation: {eval_s:.0f} s")

    out = {
        "env_id": ENV_ID,
        "command": " ".join(["python", *sys.argv]) if argv is None else None,
        "timesteps": args.timesteps,
        "recurrent_timesteps": args.recurrent_timesteps,
        "episodes": args.episodes,
        "n_envs": N_ENVS,
        "evaluation_s": eval_s,
        "variants": {
            LABELS[v]: {
                **timing,
                "mean_tta_h": _number(summary.loc[LABELS[v], "mean_tta_h"]),
                "ci95_tta_h": _number(summary.loc[LABELS[v], "ci95_tta_h"]),
            }
            for v, timing in trained.items()
        },
        "summary": [
            {k: _number(v) for k, v in row.items()}
            for row in result.summary.to_dict(orient="records")
        ],
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2, default=str)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
