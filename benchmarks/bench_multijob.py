"""Speed of the multi-job env, against Gymnasium's CartPole and the single-job env, in one process.

    python benchmarks/bench_multijob.py            # a few seconds

Steps per second of ``multijob.env()`` (each step one round of one job: the allocation's offers,
the share written into the job's state, the job's round and its observation) driven by
``agent_iter``, against ``gym.make("CartPole-v1")`` and ``gym.make("PowerTrip-v0")`` run the same
number of steps of random actions, resetting when an episode ends. The repeats alternate, and the
best repeat of each counts. It prints a table and, as its last line, one JSON object.

This is a measurement, not a test: timings depend on the machine, and CI does not assert them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import powertrip_env  # noqa: F401  (registers the single-job IDs)
from powertrip_env import multijob

STEPS = 20_000
REPEATS = 3


def gym_steps(env_id: str, steps: int) -> Callable[[], float]:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    actions = [env.action_space.sample() for _ in range(256)]

    def run() -> float:
        env.reset(seed=int(rng.integers(1 << 30)))
        start = time.perf_counter()
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(actions[i % 256])
            if terminated or truncated:
                env.reset()
        return steps / (time.perf_counter() - start)

    return run


def multijob_steps(steps: int) -> Callable[[], float]:
    env = multijob.env()
    n = env.unwrapped.n_sites
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(256, n)).astype(np.int8)

    def run() -> float:
        env.reset(seed=int(rng.integers(1 << 30)))
        start = time.perf_counter()
        done = 0
        while done < steps:
            for _agent in env.agent_iter():
                _, _, terminated, truncated, _ = env.last()
                env.step(None if terminated or truncated else actions[done % 256])
                done += 1
                if done >= steps:
                    break
            else:
                env.reset()
        return done / (time.perf_counter() - start)

    return run


def main() -> int:
    runs = {
        "CartPole-v1": gym_steps("CartPole-v1", STEPS),
        "PowerTrip-v0": gym_steps("PowerTrip-v0", STEPS),
        "multijob.env()": multijob_steps(STEPS),
    }
    best = dict.fromkeys(runs, 0.0)
    for run in runs.values():  # warm-up: the kernel's first calls
        run()
    for _ in range(REPEATS):
        for name, run in runs.items():
            best[name] = max(best[name], run())
    cartpole = best["CartPole-v1"]
    print("| env | steps/s | over CartPole |")
    print("|---|---:|---:|")
    for name, rate in best.items():
        print(f"| {name} | {rate:,.0f} | {rate / cartpole:.3f} |")
    print(json.dumps({name: round(rate) for name, rate in best.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
