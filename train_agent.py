"""Train a Stable-Baselines3 agent on a PowerTrip environment and compare it with the baselines.

    python train_agent.py                          # PPO + SitePolicy on PowerTrip-v0, ~9 min
    python train_agent.py --algo a2c --extractor mlp --timesteps 500_000
    python train_agent.py --resume runs/PowerTrip-v0-ppo-0/interrupted.zip --timesteps 200_000
    python train_agent.py --env PowerTrip-Random-v0        # one agent for any site catalogue
    python train_agent.py --scenario a.toml --scenario b.toml --max-sites 16
    tensorboard --logdir runs

The run directory (``--out``, default ``runs/<env>-<algo>-<seed>``) receives:

    tb/            TensorBoard: SB3's scalars, powertrip/* (agents/callbacks.py), eval/*
    checkpoints/   model_<steps>_steps.zip every --checkpoint-freq steps
    best_model.zip the best model on the periodic test-split evaluation (+ best_model.json)
    final_model.zip, or interrupted.zip after Ctrl-C
    config.yaml    the command line and the hyperparameters that were used
    summary.md, episodes.csv, ...   the final comparison, written by baselines.evaluate

Reads top to bottom: the arguments, the environment thunk, then the training and the final
table. The pieces with logic in them live in ``agents/`` (site encoder and policy, callbacks,
hyperparameter files, argument checks, atomic saving) and ``baselines/`` (policies, harness).
Every file is written atomically; every bad argument is a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import yaml
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import powertrip_env  # registers the environment IDs
from agents import callbacks, checks, hyperparams
from agents.checks import UsageError
from agents.hyperparams import ConfigError
from agents.reference import PowerTripReference
from agents.saving import save_model, write_text

# Measured on 2 cores: 700k steps of the default config on PowerTrip-v0 take ~7 min at ~1,700
# steps/s and the final table (BeamPlanner plans each episode) ~2 min: README's main-job command
# took 616 s in a fresh virtual environment, the install included.
DEFAULT_TIMESTEPS = 700_000
# One PowerTrip step costs less than the policy's forward pass, so many envs in one process
# (one batched forward for all) beat worker processes: 60k PPO steps took 17 s with 16 envs
# in-process, 29 s with 4, 44 s with 2 or 4 forkserver workers.
DEFAULT_N_ENVS = 16
# The final table: the paper's heuristic, the best one-round rule, and the two clairvoyant
# references that say how much of the sequential headroom the agent took.
DEFAULT_FINAL_POLICIES = "PowerTrip,MyopicOptimal,BestFixedSet,BeamPlanner"


# --------------------------------------------------------------------------- 1. arguments


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block; exit 2 as argparse does
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; see ``--help``. Only shapes are checked here, meanings in ``setup``."""
    p = _Parser(
        prog="train_agent.py",
        description="Train an SB3 agent on a PowerTrip environment, then compare it with the "
        "baselines on the test split.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--env", default="PowerTrip-v0", help="registered environment ID")
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        help="scenario name or TOML file for the env; repeat it to train on several (the "
        "training envs take them in turn, padded to --max-sites)",
    )
    p.add_argument(
        "--max-sites",
        type=checks.positive_int,
        default=None,
        help="pad observations and actions to this many sites, so that the agent can act on "
        "any scenario with at most that many (default: none; with several --scenario, their "
        "largest site count; PowerTrip-Random-v0 registers 32)",
    )
    p.add_argument(
        "--final-env",
        default=None,
        help="ID of the final comparison (default: --env; for PowerTrip-Random-v0, "
        "PowerTrip-v0, whose job it draws sites for)",
    )
    p.add_argument("--algo", default="ppo", choices=sorted(hyperparams.ALGOS))
    p.add_argument(
        "--timesteps",
        type=checks.positive_int,
        default=DEFAULT_TIMESTEPS,
        help="environment steps to train (with --resume: steps to add)",
    )
    p.add_argument(
        "--n-envs",
        type=checks.positive_int,
        default=DEFAULT_N_ENVS,
        help="parallel training environments",
    )
    p.add_argument(
        "--vec-env",
        choices=("dummy", "subproc"),
        default="dummy",
        help="run the envs in this process (dummy) or in worker processes "
        "(subproc, forkserver); one PowerTrip step is cheaper than the IPC",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reward-mode", default="excess_gain", help="excess_gain or gain_rate")
    p.add_argument(
        "--extractor",
        choices=hyperparams.EXTRACTORS,
        default="sites",
        help="sites: dict observation, site encoder and shared per-site action head "
        "(agents/site_policy.py); mlp: flat observation and SB3's MlpPolicy",
    )
    p.add_argument(
        "--config", default=None, help="hyperparameter YAML (default: agents/configs/<algo>.yaml)"
    )
    p.add_argument(
        "--hp",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter of the config (repeatable), e.g. "
        "--hp gamma=0.999 --hp policy_kwargs.net_arch=[64,64]",
    )
    p.add_argument("--out", default=None, help="run directory (default runs/<env>-<algo>-<seed>)")
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue training a saved model .zip; the step count continues",
    )
    p.add_argument(
        "--eval-freq",
        type=checks.non_negative_int,
        default=50_000,
        help="evaluate on the test split every this many steps (0: never)",
    )
    p.add_argument("--eval-episodes", type=checks.positive_int, default=10)
    p.add_argument(
        "--checkpoint-freq",
        type=checks.non_negative_int,
        default=100_000,
        help="save a checkpoint every this many steps (0: never)",
    )
    p.add_argument(
        "--final-episodes",
        type=checks.non_negative_int,
        default=30,
        help="test episodes of the final comparison (0: skip it)",
    )
    p.add_argument(
        "--final-policies",
        default=DEFAULT_FINAL_POLICIES,
        help="baselines in the final table: a comma-separated list of names, 'all' (every "
        "deployable baseline) and 'references' (BestFixedSet, BeamPlanner)",
    )
    p.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="seed of the test episodes in the final table (the same for every run)",
    )
    p.add_argument(
        "--torch-threads",
        type=checks.positive_int,
        default=1,
        help="torch CPU threads; small networks gain nothing from more",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- 2. environments


def make_env(
    env_id: str, env_kwargs: dict[str, Any], in_worker: bool = False
) -> Callable[[], gym.Env]:
    """A thunk that builds one monitored environment, for SB3's vector envs.

    ``import powertrip_env`` registers the IDs in worker processes too (forkserver and spawn
    start fresh interpreters). Workers ignore Ctrl-C: the main process catches it, saves the
    model and closes them, instead of every worker printing its own traceback.
    """

    def thunk() -> gym.Env:
        import powertrip_env  # noqa: F401  (registers the IDs in a fresh worker)

        if in_worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return Monitor(gym.make(env_id, **env_kwargs))

    return thunk


def make_vec_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    n_envs: int,
    kind: str = "dummy",
    scenarios: Sequence[str] = (),
) -> VecEnv:
    """``n_envs`` envs in this process (``dummy``, always for 1) or in forkserver workers.

    With ``scenarios``, env i runs scenario ``i mod len(scenarios)``.
    """
    per_env = [
        {**env_kwargs, "scenario": scenarios[i % len(scenarios)]} if scenarios else env_kwargs
        for i in range(n_envs)
    ]
    if n_envs == 1 or kind == "dummy":
        return DummyVecEnv([make_env(env_id, kwargs) for kwargs in per_env])
    thunks = [make_env(env_id, kwargs, in_worker=True) for kwargs in per_env]
    return SubprocVecEnv(thunks, start_method="forkserver")


# --------------------------------------------------------------------------- 3. the run


def setup(args: argparse.Namespace) -> dict[str, Any]:
    """Check every argument and resolve defaults, before anything is trained."""
    env_kwargs: dict[str, Any] = {
        "reward_mode": args.reward_mode,
        "obs_mode": "dict" if args.extractor == "sites" else "flat",
    }
    scenarios = list(args.scenario or [])
    if len(scenarios) > args.n_envs:
        raise UsageError(
            f"argument --n-envs: {args.n_envs} training envs for {len(scenarios)} --scenario "
            f"files; each env runs one file, so give --n-envs {len(scenarios)} or more"
        )
    each = [{"scenario": sc} for sc in scenarios] or [{}]
    site_counts = [checks.check_env(args.env, {**env_kwargs, **sc}) for sc in each]
    # The padding: asked for, or the one the ID registers, or the largest of several scenarios.
    max_sites = args.max_sites or gym.spec(args.env).kwargs.get("max_sites")
    if max_sites is not None or len(scenarios) > 1:
        env_kwargs["max_sites"] = max_sites or max(site_counts)
        for sc in each:  # each scenario fits the padding
            checks.check_env(args.env, {**env_kwargs, **sc})
    final_env = args.final_env or checks.final_env_for(args.env)
    final_kwargs = {k: v for k, v in env_kwargs.items() if k != "reward_mode"}
    final_counts = [checks.check_env(final_env, {**final_kwargs, **sc}) for sc in each]
    config_path = args.config or hyperparams.default_config_path(args.algo)
    config = hyperparams.load_config(config_path, args.algo)
    config = hyperparams.apply_overrides(config, args.hp, args.algo)
    if args.resume is not None:
        checks.check_readable_file(args.resume, "--resume")
    final_policies = (
        checks.check_final_policies(args.final_policies, max(final_counts))
        if args.final_episodes
        else []
    )
    out = checks.check_out_dir(args.out or Path("runs") / f"{args.env}-{args.algo}-{args.seed}")
    return {
        "env_kwargs": env_kwargs,
        "scenarios": scenarios,
        "final_env": final_env,
        "config_path": str(config_path),
        "config": config,
        "final_policies": final_policies,
        "out": out,
        "n_sites": max(site_counts),
    }


def train(args: argparse.Namespace, run: dict[str, Any]) -> int:
    """Train, save, and print the comparison table; returns the exit code."""
    out: Path = run["out"]
    algo_cls = hyperparams.ALGOS[args.algo]
    torch.set_num_threads(args.torch_threads)
    scenarios = run["scenarios"]
    env = make_vec_env(args.env, run["env_kwargs"], args.n_envs, args.vec_env, scenarios)
    first = {"scenario": scenarios[0]} if scenarios else {}
    eval_env = DummyVecEnv([make_env(args.env, {**run["env_kwargs"], **first, "split": "test"})])
    try:
        if args.resume is None:
            policy, kwargs = hyperparams.model_kwargs(run["config"], args.algo, args.extractor)
            model = algo_cls(
                policy, env, seed=args.seed, device="cpu", tensorboard_log=str(out / "tb"), **kwargs
            )
        else:
            model = load_for_resume(algo_cls, args, env, out)
    except (ValueError, TypeError, KeyError) as exc:
        env.close()
        eval_env.close()
        what = f"--resume {args.resume!r}" if args.resume else f"--config {run['config_path']!r}"
        raise UsageError(f"argument {what}: {' '.join(str(exc).split())}") from None

    write_text(
        out / "config.yaml",
        yaml.safe_dump(
            {
                "command": shlex.join(["python", "train_agent.py", *run["argv"]]),
                "args": vars(args),
                "env_kwargs": run["env_kwargs"],
                "hyperparameters": run["config"],
            },
            sort_keys=False,
        ),
    )

    # Callbacks: powertrip/* scalars, periodic test-split evaluation, checkpoints.
    eval_cls = (
        callbacks.SeededMaskableEvalCallback
        if args.algo == "maskable_ppo"
        else callbacks.SeededEvalCallback
    )
    evaluation = eval_cls(
        eval_env,
        callback_on_new_best=callbacks.SaveBest(out),
        n_eval_episodes=args.eval_episodes,
        eval_freq=max(args.eval_freq // args.n_envs, 1) if args.eval_freq else 0,
        eval_seed=args.seed + 10_000,  # not the final table's episodes
        verbose=0,
    )
    if args.resume is not None:  # keep the earlier best unless this run really beats it
        evaluation.best_mean_reward = callbacks.SaveBest.read_best(out)
    else:  # a best model left by an earlier run in this directory is not this run's
        for stale in ("best_model.zip", "best_model.json"):
            (out / stale).unlink(missing_ok=True)
    # PowerTrip's return from the same start time says how far the agent is ahead, on one fixed
    # catalogue only: with several, or with catalogues drawn per episode, it has no single value.
    fixed = len(scenarios) <= 1 and args.env not in powertrip_env.SAMPLED_ENV_IDS
    reference = PowerTripReference(args.env, {**run["env_kwargs"], **first}) if fixed else None
    callback_list = [callbacks.PowerTripMetrics(reference), evaluation]
    if args.checkpoint_freq:
        callback_list.append(callbacks.Checkpoint(args.checkpoint_freq, out / "checkpoints"))

    print(
        f"training {args.algo} on {args.env} for {args.timesteps:,} steps "
        f"({args.n_envs} envs, {args.extractor} extractor) -> {out}"
    )
    started = time.monotonic()
    try:
        model.learn(
            args.timesteps,
            callback=callback_list,
            log_interval=1,  # a TensorBoard point per rollout
            tb_log_name=args.algo,
            reset_num_timesteps=args.resume is None,
            progress_bar=not args.no_progress,
        )
    except KeyboardInterrupt:
        path = save_model(model, out / "interrupted.zip")
        again = ["python", "train_agent.py", "--env", args.env, "--algo", args.algo]
        again += ["--extractor", args.extractor, "--reward-mode", args.reward_mode]
        for scenario in scenarios:
            again += ["--scenario", scenario]
        again += ["--max-sites", str(args.max_sites)] if args.max_sites else []
        again += ["--resume", str(path), "--out", str(out)]
        print(
            f"\ninterrupted at {model.num_timesteps:,} steps; model saved to {path}\n"
            f"continue with: {shlex.join(again)}"
        )
        return 130
    finally:
        env.close()
        eval_env.close()
    final = save_model(model, out / "final_model.zip")
    print(
        f"trained {model.num_timesteps:,} steps in {time.monotonic() - started:.0f} s; "
        f"final model: {final}"
    )

    # The comparison: best model if one was kept, else the final one, on the test split.
    if not args.final_episodes:
        return 0
    from baselines.evaluate import EvaluationError, evaluate
    from baselines.policies import SB3Policy

    best = out / "best_model.zip"
    chosen = best if best.exists() else final
    agent = SB3Policy(algo_cls.load(chosen, device="cpu"), f"{args.algo} ({chosen.stem})")
    env_kwargs = {k: v for k, v in run["env_kwargs"].items() if k != "reward_mode"}
    for scenario in scenarios or [None]:
        where = run["final_env"] + (f" (scenario {scenario})" if scenario else "")
        print(
            f"final comparison on {where}: {agent.name} against "
            f"{', '.join(run['final_policies'])} on {args.final_episodes} test episodes"
        )
        table_dir = out / Path(scenario).stem if len(scenarios) > 1 else out
        try:
            result = evaluate(
                run["final_env"],
                [*run["final_policies"], agent],
                episodes=args.final_episodes,
                split="test",
                seed=args.eval_seed,
                env_kwargs={**env_kwargs, **({"scenario": scenario} if scenario else {})},
                out_dir=table_dir,
                progress=not args.no_progress,
            )
        except EvaluationError as exc:
            print(f"train_agent.py: error: final comparison failed: {exc}", file=sys.stderr)
            return 1
        print(result.to_markdown())
        print(f"results written to {table_dir}")
    return 0


def load_for_resume(algo_cls: type, args: argparse.Namespace, env: VecEnv, out: Path) -> Any:
    """Load ``--resume`` onto the new envs; its saved hyperparameters are kept.

    The seed is moved on by the steps already done, so the resumed run does not replay the
    start times it trained on first.
    """
    if args.config or args.hp:
        print(
            "note: --config and --hp are ignored with --resume (the saved model's "
            "hyperparameters are used)"
        )
    model = algo_cls.load(args.resume, env=env, device="cpu", tensorboard_log=str(out / "tb"))
    model.set_random_seed(args.seed + model.num_timesteps)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns 0 on success, 2 on a bad argument, 130 after Ctrl-C."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        run = {**setup(args), "argv": argv}
        return train(args, run)
    except (UsageError, ConfigError) as exc:
        print(f"train_agent.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
