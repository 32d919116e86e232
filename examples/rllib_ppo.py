"""Train RLlib PPO on a PowerTrip ID or a user scenario, on this machine or a Ray cluster.

    pip install -e ".[rllib]"
    python examples/rllib_ppo.py --iterations 20                         # PowerTrip-v0, locally
    python examples/rllib_ppo.py --scenario my.toml --num-env-runners 4   # a user's scenario
    ray start --head                                                      # or an existing cluster:
    python examples/rllib_ppo.py --address auto --num-env-runners 16

Reads top to bottom: the arguments, the configuration (the env, the per-site RLModule, PPO's
hyperparameters), the training loop that prints one line per iteration, the checkpoint, and the
paired comparison with the baselines by ``powertrip_env.harness.evaluation.evaluate``. The scenario
travels
to the env runners by value (``powertrip_env.integrations.rllib.env_config``), so the cluster's
nodes need the package but none of the data files. Everything goes to ``--out``: ``rllib_ppo/``
(``Algorithm.save``), ``progress.csv``, and the evaluation's ``summary.md`` and ``episodes.csv``
in ``comparison/``. A used ``--out`` is refused unless ``--force`` is given, before anything
trains.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import powertrip_env
from powertrip_env.atomic import OutputDirError, check_output_dir, write_text
from powertrip_env.errors import ScenarioError, TraceError

# PPO's hyperparameters, after agents/configs/ppo.yaml (tuned for SB3 on PowerTrip-v0).
PPO_HYPERPARAMETERS: dict[str, Any] = {
    "lr": 3e-4,
    "gamma": 0.999,
    "lambda_": 0.98,
    "clip_param": 0.2,
    "entropy_coeff": 0.005,
    "vf_loss_coeff": 0.5,
    "grad_clip": 0.5,
    "num_epochs": 5,
    "minibatch_size": 256,
    "train_batch_size_per_learner": 2048,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python examples/rllib_ppo.py",
        description="Train RLlib PPO on a PowerTrip ID or scenario, then compare it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--env", default="PowerTrip-v0", help="registered PowerTrip ID")
    p.add_argument("--scenario", default=None, help="a scenario TOML or name to run --env on")
    p.add_argument("--iterations", type=int, default=10, help="PPO iterations")
    p.add_argument("--num-env-runners", type=int, default=1, help="remote env runners")
    p.add_argument("--envs-per-runner", type=int, default=1, help="envs per runner")
    p.add_argument("--address", default=None, help="an existing Ray cluster ('auto' or host:port)")
    p.add_argument("--out", default="runs/rllib-ppo", help="output folder")
    p.add_argument("--force", action="store_true", help="replace what an earlier run left in --out")
    p.add_argument("--episodes", type=int, default=10, help="test episodes of the comparison")
    p.add_argument(
        "--policies",
        default="PowerTrip,MyopicOptimal",
        help="baselines of the comparison ('all', 'references' or names)",
    )
    p.add_argument(
        "--by-reference",
        action="store_true",
        help="pass the scenario by name or path, not by value",
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for name in ("iterations", "num_env_runners", "envs_per_runner", "episodes"):
        if getattr(args, name) < (0 if name == "num_env_runners" else 1):
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be a positive number")
    if args.env not in powertrip_env.ENV_IDS:
        allowed = ", ".join(powertrip_env.ENV_IDS)
        p.error(
            f"--env {args.env!r}: not a PowerTrip ID; allowed: {allowed} (a scenario file "
            "goes in --scenario)"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from powertrip_env.errors import EvaluationError
    from powertrip_env.harness.evaluation.evaluate import evaluate
    from powertrip_env.integrations import rllib

    # 1. The configuration: the scenario is resolved here, once, and shipped by value.
    try:
        env_config = rllib.env_config(args.env, args.scenario, by_value=not args.by_reference)
        gym.make(args.env, **{k: v for k, v in env_config.items() if k != "env"}).close()
    except (ScenarioError, TraceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rllib.register()
    config = (
        PPOConfig()
        .environment(rllib.ENV_NAME, env_config=env_config)
        .env_runners(
            num_env_runners=args.num_env_runners,
            num_envs_per_env_runner=args.envs_per_runner,
            gym_env_vectorize_mode="vector_entry_point",  # the native vector env: one array call
        )
        .rl_module(rl_module_spec=RLModuleSpec(module_class=rllib.SiteRLModule))
        .training(**PPO_HYPERPARAMETERS)
        .debugging(seed=args.seed)
    )
    out = Path(args.out)
    try:
        check_output_dir(out, force=args.force)
    except OutputDirError as exc:
        print(f"error: argument --out: {exc}", file=sys.stderr)
        return 2
    if args.force and out.is_dir():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)

    # 2. Training: one line per iteration.
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    try:
        algo = config.build_algo()
        rows = ["iteration,env_steps,episode_return_mean,episode_len_mean,seconds"]
        started = time.monotonic()
        print("iteration  env steps  return mean  episode length  seconds")
        for i in range(1, args.iterations + 1):
            runners = algo.train()["env_runners"]
            row = (
                i,
                int(runners.get("num_env_steps_sampled_lifetime", 0)),
                float(runners.get("episode_return_mean", float("nan"))),
                float(runners.get("episode_len_mean", float("nan"))),
                time.monotonic() - started,
            )
            print(f"{row[0]:9d}  {row[1]:9d}  {row[2]:11.3f}  {row[3]:14.1f}  {row[4]:7.1f}")
            rows.append(",".join(str(v) for v in row))
        checkpoint = out / "rllib_ppo"  # the agent's label in the comparison
        algo.save(str(checkpoint.resolve()))
        algo.stop()
    finally:
        ray.shutdown()
    write_text(out / "progress.csv", "\n".join(rows) + "\n")
    print(f"checkpoint saved to {checkpoint}")

    # 3. The paired comparison with the baselines on the test split.
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    try:
        result = evaluate(
            args.env,
            policies,
            episodes=args.episodes,
            seed=args.seed,
            models=[(str(checkpoint), "rllib")],
            out_dir=out / "comparison",
            progress=False,
            env_kwargs={"scenario": args.scenario} if args.scenario else None,
        )
    except EvaluationError as exc:
        print(f"error: the comparison failed: {exc}", file=sys.stderr)
        return 1
    print(result.to_markdown())
    print(f"results written to {out / 'comparison'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
