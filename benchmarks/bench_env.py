"""Speed and memory of the environments, against Gymnasium's CartPole in the same process.

    python benchmarks/bench_env.py            # the full run (15-30 seconds)
    python benchmarks/bench_env.py --quick    # a rough look in a few seconds

Measures the budgets docs/performance.md states: steps per second of
``gym.make("PowerTrip-v0")`` against ``gym.make("CartPole-v1")`` (at least 45%; the carbon task,
``PowerTrip-Carbon-v2`` with its carbon reward and its terms in info, too; ``PowerTrip-Moving-v0``,
whose rounds advance and apply the episode's path, is reported beside them), and of the native
vector env at 1,024 envs against Gymnasium's CartPole vector env (at least 25%); also ``PowerTrip-
Large-v0``, ``predict_round`` calls per second, MyopicOptimal's decisions per second, and the
resident memory of 16 env instances (traces are shared, so the first instance costs the data and
the others almost nothing). Two fresh interpreters on an empty numba cache time the kernel's
compilation (the first run after an install: at most 60 s) and then, with the cache warm, the
import plus first ``make``, ``reset`` and ``step`` (at most 3 s). Both sides of a
ratio run the same number of steps of pre-generated random actions, resetting when an episode ends,
after a warm-up; the repeats of the two sides alternate so that a busy machine slows both alike, and
the best repeat counts. It prints a table and, as its last line, one JSON object with every figure.

This is a measurement, not a test: timings depend on the machine, and CI does not assert them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numba
import numpy as np

import powertrip_env  # registers the PowerTrip IDs

VECTOR_ENVS = 1024
MEMORY_INSTANCES = 16
SINGLE_BUDGET = 0.45
VECTOR_BUDGET = 0.25
WARM_START_BUDGET_S = 3.0
COLD_COMPILE_BUDGET_S = 60.0

# Run in a fresh interpreter: the import and first step, then every other kernel once.
STARTUP_SCRIPT = """
import json, time
t0 = time.perf_counter()
import gymnasium as gym
import numpy as np
import powertrip_env
env = gym.make("PowerTrip-v0")
env.reset(seed=0)
env.step(env.action_space.sample())
t1 = time.perf_counter()
from powertrip_env import dynamics
n = env.unwrapped.params.n_sites
env.unwrapped.predict_round(np.ones((3, n), dtype=bool))
env.unwrapped.clairvoyant().simulate(np.ones((2, n), dtype=bool), rounds=2)
env.unwrapped.clairvoyant().finish_s(np.zeros((2, n)), np.ones(n))
venv = gym.make_vec("PowerTrip-v0", num_envs=dynamics.PARALLEL_MIN_BATCH)
venv.reset(seed=0)
for _ in range(3):
    venv.step(venv.action_space.sample())
print(json.dumps({"first_step_s": t1 - t0, "all_kernels_s": time.perf_counter() - t0}))
"""


def rss_mib() -> float:
    """Resident set size now, in MiB (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def measure_memory() -> dict[str, float]:
    """RSS added by the first PowerTrip-v0 instance and by 15 more (run before anything else
    loads the trace, so the first instance pays for it)."""
    import pandas  # noqa: F401  (imported by the trace loader; not the env's own memory)

    import powertrip_env.env  # noqa: F401

    gc.collect()
    before = rss_mib()
    envs = [gym.make("PowerTrip-v0")]
    envs[0].reset(seed=0)
    gc.collect()
    first = rss_mib()
    for i in range(1, MEMORY_INSTANCES):
        envs.append(gym.make("PowerTrip-v0"))
        envs[-1].reset(seed=i)
    gc.collect()
    after = rss_mib()
    shared = all(e.unwrapped.sim.power is envs[0].unwrapped.sim.power for e in envs)
    return {
        "memory_first_instance_mib": first - before,
        "memory_16_instances_mib": after - before,
        "memory_per_extra_instance_mib": (after - first) / (MEMORY_INSTANCES - 1),
        "traces_shared": shared,
    }


def single_env_loop(env_id: str, steps: int, seed: int) -> Callable[[], float]:
    """A timer of ``steps`` steps of ``gym.make(env_id)`` with pre-generated random actions."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]

    def run() -> float:
        step, reset = env.step, env.reset
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()
        return time.perf_counter() - start

    return run


def vector_env_loop(env_id: str, num_envs: int, steps: int, seed: int) -> Callable[[], float]:
    """A timer of ``steps`` steps of the env's native vector env (it autoresets itself)."""
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(steps)]

    def run() -> float:
        step = env.step
        start = time.perf_counter()
        for action in actions:
            step(action)
        return time.perf_counter() - start

    return run


def best_of(timers: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Best time of each timer, after one warm-up round, with the timers' repeats interleaved."""
    for run in timers.values():
        run()  # warm-up: caches, lazily built tables, branch predictors
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(repeats):
        for name, run in timers.items():
            best[name] = min(best[name], run())
    return best


def calls_per_second(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
    return calls / best


def startup_times() -> dict[str, float]:
    """Cold compile and warm start, each in a fresh interpreter sharing an empty numba cache."""
    with tempfile.TemporaryDirectory(prefix="powertrip-numba-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        env.pop("NUMBA_DISABLE_JIT", None)
        runs = []
        for _ in range(2):  # the first compiles into the cache, the second loads from it
            done = subprocess.run(
                [sys.executable, "-c", STARTUP_SCRIPT],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    return {
        "cold_compile_s": cold["all_kernels_s"],
        "warm_first_step_s": warm["first_step_s"],
        "warm_all_kernels_s": warm["all_kernels_s"],
    }


def myopic_decisions_per_s(decisions: int, seed: int) -> float:
    """MyopicOptimal's ``act`` calls per second on PowerTrip-v0 (its own time, not the env's)."""
    from powertrip_env.baselines.policies import MyopicOptimal

    env = gym.make("PowerTrip-v0")
    policy = MyopicOptimal()
    env.reset(seed=seed)
    policy.reset(env)
    spent = 0.0
    for _ in range(decisions):
        start = time.perf_counter()
        action = policy.act(None, {})
        spent += time.perf_counter() - start
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
            policy.reset(env)
    return decisions / spent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    args = parser.parse_args(argv)
    steps, vec_steps, repeats = (3_000, 20, 2) if args.quick else (20_000, 150, 5)

    figures: dict[str, Any] = measure_memory()
    figures.update(startup_times())

    single = best_of(
        {
            "cartpole": single_env_loop("CartPole-v1", steps, seed=0),
            "powertrip": single_env_loop("PowerTrip-v0", steps, seed=0),
            # the carbon task with its own reward and its terms in info
            "carbon": single_env_loop("PowerTrip-Carbon-v2", steps, seed=0),
            # the moving track: each round advances and applies the episode's path
            "moving": single_env_loop("PowerTrip-Moving-v0", steps, seed=0),
        },
        repeats,
    )
    vector = best_of(
        {
            "cartpole": vector_env_loop("CartPole-v1", VECTOR_ENVS, vec_steps * 5, seed=0),
            "powertrip": vector_env_loop("PowerTrip-v0", VECTOR_ENVS, vec_steps, seed=0),
        },
        max(2, repeats - 2),
    )
    large_steps = steps // 4
    large = best_of({"large": single_env_loop("PowerTrip-Large-v0", large_steps, 0)}, repeats)

    env = gym.make("PowerTrip-v0")
    env.reset(seed=0)
    unwrapped = env.unwrapped
    n = unwrapped.params.n_sites
    one_mask = np.ones(n, dtype=bool)
    subsets = ((np.arange(1, 2**n)[:, None] >> np.arange(n)) & 1).astype(bool)  # (2^N − 1, N)
    calls = 2_000 if args.quick else 10_000
    figures.update(
        {
            "cartpole_steps_per_s": steps / single["cartpole"],
            "powertrip_steps_per_s": steps / single["powertrip"],
            "carbon_steps_per_s": steps / single["carbon"],
            "moving_steps_per_s": steps / single["moving"],
            "cartpole_vector_env_steps_per_s": VECTOR_ENVS * vec_steps * 5 / vector["cartpole"],
            "powertrip_vector_env_steps_per_s": VECTOR_ENVS * vec_steps / vector["powertrip"],
            "large_steps_per_s": large_steps / large["large"],
            "predict_round_one_mask_per_s": calls_per_second(
                lambda: unwrapped.predict_round(one_mask), calls, repeats
            ),
            "predict_round_all_subsets_per_s": calls_per_second(
                lambda: unwrapped.predict_round(subsets), calls // 5, repeats
            ),
            "myopic_decisions_per_s": myopic_decisions_per_s(calls // 5, seed=0),
        }
    )
    figures.update(gymnasium_benchmark_step(1 if args.quick else 5))
    figures["single_ratio_vs_cartpole"] = (
        figures["powertrip_steps_per_s"] / figures["cartpole_steps_per_s"]
    )
    figures["moving_ratio_vs_cartpole"] = (
        figures["moving_steps_per_s"] / figures["cartpole_steps_per_s"]
    )
    figures["carbon_ratio_vs_cartpole"] = (
        figures["carbon_steps_per_s"] / figures["cartpole_steps_per_s"]
    )
    figures["vector_ratio_vs_cartpole"] = (
        figures["powertrip_vector_env_steps_per_s"] / figures["cartpole_vector_env_steps_per_s"]
    )
    figures.update(
        {
            "single_budget": SINGLE_BUDGET,
            "vector_budget": VECTOR_BUDGET,
            "warm_start_budget_s": WARM_START_BUDGET_S,
            "cold_compile_budget_s": COLD_COMPILE_BUDGET_S,
            "num_envs": VECTOR_ENVS,
            "steps": steps,
            "vector_steps": vec_steps,
            "repeats": repeats,
            "quick": args.quick,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "numba": numba.__version__,
            "gymnasium": gym.__version__,
            "powertrip_env": powertrip_env.__version__,
            "cpus": os.cpu_count(),
            "cpu": cpu_name(),
        }
    )
    print_table(figures)
    print(json.dumps(figures, sort_keys=True))
    return figures


def gymnasium_benchmark_step(seconds: int) -> dict[str, float]:
    """Steps per second as Gymnasium's own ``gymnasium.utils.performance.benchmark_step``
    measures them (``gym.make``, a fresh ``action_space.sample()`` every step, resets
    included), for CartPole-v1 and PowerTrip-v0 in turn: the figure a Gymnasium user would
    get, beside this script's pre-sampled actions."""
    from gymnasium.utils.performance import benchmark_step

    out = {}
    for key, env_id in (("cartpole", "CartPole-v1"), ("powertrip", "PowerTrip-v0")):
        out[f"gymnasium_benchmark_step_{key}_per_s"] = benchmark_step(
            gym.make(env_id), target_duration=seconds, seed=0
        )
    out["gymnasium_benchmark_step_ratio"] = (
        out["gymnasium_benchmark_step_powertrip_per_s"]
        / out["gymnasium_benchmark_step_cartpole_per_s"]
    )
    return out


def cpu_name() -> str:
    """The processor's model name (Linux /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def print_table(f: dict[str, Any]) -> None:
    def rate(name: str, per_s: float, unit: str) -> str:
        return f"{name:<44} {per_s:>14,.0f} {unit:<14} {1e6 / per_s:>10.2f} µs"

    b = VECTOR_ENVS
    rows = [
        f"{'benchmark':<44} {'per second':>14} {'':<14} {'each':>13}",
        rate("CartPole-v1, gym.make", f["cartpole_steps_per_s"], "steps"),
        rate("PowerTrip-v0, gym.make", f["powertrip_steps_per_s"], "steps"),
        f"{'  single ratio (budget >= 0.45)':<44} {f['single_ratio_vs_cartpole']:>14.3f}",
        rate("PowerTrip-Carbon-v2 (carbon reward), gym.make", f["carbon_steps_per_s"], "steps"),
        f"{'  carbon ratio (budget >= 0.45)':<44} {f['carbon_ratio_vs_cartpole']:>14.3f}",
        rate("PowerTrip-Moving-v0 (a moving world), gym.make", f["moving_steps_per_s"], "steps"),
        f"{'  moving ratio':<44} {f['moving_ratio_vs_cartpole']:>14.3f}",
        rate(
            "CartPole-v1, Gymnasium's benchmark_step",
            f["gymnasium_benchmark_step_cartpole_per_s"],
            "steps",
        ),
        rate(
            "PowerTrip-v0, Gymnasium's benchmark_step",
            f["gymnasium_benchmark_step_powertrip_per_s"],
            "steps",
        ),
        f"{'  benchmark_step ratio':<44} {f['gymnasium_benchmark_step_ratio']:>14.3f}",
        rate(
            f"CartPole-v1 vector env, {b} envs", f["cartpole_vector_env_steps_per_s"], "env-steps"
        ),
        rate(
            f"PowerTrip-v0 vector env, {b} envs", f["powertrip_vector_env_steps_per_s"], "env-steps"
        ),
        f"{'  vector ratio (budget >= 0.25)':<44} {f['vector_ratio_vs_cartpole']:>14.3f}",
        rate("PowerTrip-Large-v0 (32 sites), gym.make", f["large_steps_per_s"], "steps"),
        rate("predict_round, one (N,) mask", f["predict_round_one_mask_per_s"], "calls"),
        rate("predict_round, all 2^N − 1 subsets", f["predict_round_all_subsets_per_s"], "calls"),
        rate("MyopicOptimal on PowerTrip-v0", f["myopic_decisions_per_s"], "decisions"),
        f"{'import + first make/reset/step, warm cache':<44} {f['warm_first_step_s']:>14.2f} s"
        f"   (budget <= {WARM_START_BUDGET_S:g} s)",
        f"{'compile every kernel, empty cache':<44} {f['cold_compile_s']:>14.2f} s"
        f"   (budget <= {COLD_COMPILE_BUDGET_S:g} s)",
        f"{'memory: first PowerTrip-v0 instance':<44} {f['memory_first_instance_mib']:>14.1f} MiB",
        f"{f'memory: {MEMORY_INSTANCES} instances':<44} {f['memory_16_instances_mib']:>14.1f} MiB",
        f"{'memory: each further instance':<44} {f['memory_per_extra_instance_mib']:>14.2f} MiB"
        f"   (trace shared: {f['traces_shared']})",
        f"machine: {f['cpu']}, {f['cpus']} cores; Python {f['python']}, numpy {f['numpy']}, "
        f"numba {f['numba']}, Gymnasium {f['gymnasium']}",
    ]
    print("\n".join(rows))


if __name__ == "__main__":
    main()
