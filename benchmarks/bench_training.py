"""Training steps per second of the main job's agent, and where the time goes.

    python benchmarks/bench_training.py              # 30k steps on each path (about a minute)
    python benchmarks/bench_training.py --steps 100000
    python benchmarks/bench_training.py --env PowerTrip-v0   # the known flagship

Four figures, each measured in this process one after the other, on ``--env`` (the main job's
task by default, ``PowerTrip-Measured-v0``, whose slots are built on the telemetry's estimates):

* collection: PPO's environment steps alone, the model's forward pass included, on the native
  candidate vector env (``powertrip_env.agents.candidate_vec_env.CandidateVecEnv``, what
  ``train_agent.py`` trains on) and on SB3's ``DummyVecEnv`` of ``CandidateSets`` (one env at a
  time, as before);
* training: ``model.learn`` with the main job's hyperparameters (collection and PPO updates) on
  the native path, the number that sets the main job's training time;
* the reference: ``model.learn`` of SB3's PPO with an ``MlpPolicy`` and the main job's rollout
  and update sizes (``n_steps``, ``batch_size``, ``n_epochs``) on a ``CartPole-v1`` vector env of
  as many envs, so that the training rate reads as a ratio another machine can compare.

Each path runs a warm-up first (numba's compiled code and torch's first calls), and reports the
best of ``--repeats``. A measurement, not a test: CI does not assert timings. It prints a table
and, last, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import hyperparams
from powertrip_env.agents.arguments import DEFAULT_ENV, DEFAULT_N_ENVS, DEFAULT_TIMESTEPS
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
from powertrip_env.agents.candidates import CandidateSets


def _config() -> dict:
    return hyperparams.load_config(hyperparams.default_config_path("ppo"), "ppo")


def _agent_on(env: VecEnv) -> PPO:
    """The main job's model (the candidates extractor and its hyperparameters) on ``env``."""
    policy, kwargs = hyperparams.model_kwargs(_config(), "ppo", "candidates")
    return PPO(policy, env, seed=0, device="cpu", **kwargs)


def native(env_id: str, n_envs: int) -> PPO:
    return _agent_on(VecMonitor(CandidateVecEnv(gym.make_vec(env_id, num_envs=n_envs))))


def dummy(env_id: str, n_envs: int) -> PPO:
    envs = [lambda: CandidateSets(gym.make(env_id))] * n_envs
    return _agent_on(VecMonitor(DummyVecEnv(envs)))


def cartpole(_: str, n_envs: int) -> PPO:
    """The reference: an MlpPolicy with the main job's rollout and update sizes."""
    sizes = {key: _config()[key] for key in ("n_steps", "batch_size", "n_epochs")}
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=0)
    return PPO("MlpPolicy", env, seed=0, device="cpu", **sizes)


def collection_rate(model: PPO, steps: int) -> float:
    """Environment steps per second with the model choosing the actions (no updates)."""
    env = model.get_env()
    obs = env.reset()
    vector_steps = max(steps // env.num_envs, 1)
    started = time.perf_counter()
    for _ in range(vector_steps):
        with torch.no_grad():
            actions, _, _ = model.policy(torch.as_tensor(obs))
        obs, _, _, _ = env.step(actions.numpy())
    return vector_steps * env.num_envs / (time.perf_counter() - started)


def training_rate(model: PPO, steps: int) -> float:
    """Steps per second of ``model.learn`` (collection and PPO updates)."""
    started = time.perf_counter()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--n-envs", type=int, default=DEFAULT_N_ENVS)
    parser.add_argument("--env", default=DEFAULT_ENV, help=f"the task (default: {DEFAULT_ENV})")
    args = parser.parse_args()
    torch.set_num_threads(1)  # what train_agent.py uses (--torch-threads 1)
    print(f"{args.env}, {args.n_envs} envs, {args.steps:,} steps a path")
    figures: dict[str, float] = {}
    for name, make, measure in (
        ("collection, native vector env", native, collection_rate),
        ("collection, DummyVecEnv", dummy, collection_rate),
        ("training (learn), native vector env", native, training_rate),
        ("training (learn), CartPole-v1 reference", cartpole, training_rate),
    ):
        measure(make(args.env, args.n_envs), 2_048)  # warm-up
        figures[name] = max(
            measure(make(args.env, args.n_envs), args.steps) for _ in range(args.repeats)
        )
    print(f"{'path':40} {'steps/s':>10}")
    for name, rate in figures.items():
        print(f"{name:40} {rate:10,.0f}")
    ratio = figures["collection, native vector env"] / figures["collection, DummyVecEnv"]
    print(f"native over DummyVecEnv (collection): {ratio:.2f}x")
    reference = (
        figures["training (learn), native vector env"]
        / figures["training (learn), CartPole-v1 reference"]
    )
    print(f"training over CartPole's: {reference:.2f}x")
    main_job = DEFAULT_TIMESTEPS / figures["training (learn), native vector env"]
    print(f"the main job's {DEFAULT_TIMESTEPS:,} steps at this rate: {main_job:.0f} s")
    summary = {"env": args.env, **{k: round(v, 1) for k, v in figures.items()}}
    print(json.dumps({**summary, "vs_cartpole": reference, "main_job_s": main_job}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
