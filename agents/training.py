"""A training run: what ``python train_agent.py`` does, and ``powertrip_env.agents.pretrain`` runs.

``main(argv)`` takes ``train_agent.py``'s command line (``build_parser``; the usage and the run
directory it fills are in that script's docstring), trains a Stable-Baselines3 agent on a
PowerTrip environment and compares it with the baselines on the test split; it returns the
exit code. It lives here, not in the root script, because ``powertrip_env.agents.pretrain`` trains
with it too, and nothing imports the root script (``tests/test_imports.py``).

A used ``--out`` is refused unless ``--force`` (which empties it once every argument is
checked) or ``--resume`` continues the run in it. ``--resume`` takes the run's settings from its
``config.yaml`` and trains up to the run's ``--timesteps``; given options that would change the
run are refused (``powertrip_env.agents.checks.FIXED_ON_RESUME``), the others (``--timesteps`` to
extend it, ``--final-episodes``, ...) apply from then on.

Reads top to bottom: the arguments, the environment thunk, then the training and the final
table. The pieces with logic in them live in the other modules of ``agents/`` (site encoder and
policy, callbacks, hyperparameter files, argument checks, atomic saving) and in ``baselines/``
(policies, harness). Every file is written atomically; every bad argument is a one-line error
and exit code 2.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import yaml
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor

import powertrip_env  # registers the environment IDs
from powertrip_env.agents import callbacks, checks, hyperparams
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv, native_vector
from powertrip_env.agents.candidates import CandidatePolicy, CandidateSets
from powertrip_env.agents.checks import UsageError
from powertrip_env.agents.hyperparams import ConfigError
from powertrip_env.agents.reference import PowerTripReference
from powertrip_env.agents.saving import (
    append_to_list,
    clear_folder,
    install_results,
    save_model,
    write_text,
)

# The candidate-set agent on PowerTrip-v0, whose last slot is the tuned horizon rule: over a
# 300k-step run its best model on the periodic test-split evaluation came at the first one, 50k
# steps, and it tied the rule on 30 test episodes (26.55 h against 26.51). 100k steps leave
# room for a second evaluation; on the native candidate vector env they take about 35 s.
DEFAULT_TIMESTEPS = 100_000
# One PowerTrip step costs less than the policy's forward pass, so many envs in one process
# (one batched forward for all) beat worker processes: 60k PPO steps took 17 s with 16 envs
# in-process, 29 s with 4, 44 s with 2 or 4 forkserver workers.
DEFAULT_N_ENVS = 16
# The final table: the paper's heuristic, the best one-round rule, the strongest deployable
# baselines (the lookahead rules), and the two clairvoyant references that say how much of the
# sequential headroom the agent took: the best fixed set and the optimiser (the benchmark's 1).
DEFAULT_FINAL_POLICIES = "PowerTrip,MyopicOptimal,HorizonRule,ForecastMPC,BestFixedSet,Optimiser"


# --------------------------------------------------------------------------- 1. arguments


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block; exit 2 as argparse does
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; see ``--help``. Only shapes are checked here, meanings in ``setup``."""
    return build_parser().parse_args(argv)


def given_options(argv: Sequence[str]) -> set[str]:
    """The options (argparse ``dest`` names) that ``argv`` gives, whatever their values.

    ``--resume`` takes every setting from the run's ``config.yaml`` except those given, so it
    must tell ``--seed 0`` typed by the user from the default 0: the same parser with every
    default suppressed leaves only the given options in the namespace.
    """
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def build_parser() -> argparse.ArgumentParser:
    """``train_agent.py``'s argument parser (``parse_args`` and ``given_options`` share it)."""
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
        help="environment steps of the whole run (with --resume: default the run's own; a "
        "larger total extends it)",
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
        default="candidates",
        help="candidates: choose one of a few candidate site sets built each round from "
        "predict_round, MlpPolicy on their features (agents/candidates.py); sites: per-site "
        "actions, dict observation, site encoder and shared per-site action head "
        "(agents/site_policy.py); mlp: per-site actions, flat observation and SB3's MlpPolicy",
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
    p.add_argument(
        "--out",
        default=None,
        help="run directory, new or empty (default runs/<env>-<algo>-<seed>; with --resume, "
        "the run's own)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="use a non-empty --out: delete its files (once every argument is checked)",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue the run a saved model .zip belongs to (interrupted.zip, a checkpoint, "
        "final_model.zip) with the settings in its config.yaml, up to its --timesteps",
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
        "deployable baseline) and 'references' (BestFixedSet, BeamPlanner, Optimiser)",
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
    return p


# --------------------------------------------------------------------------- 2. environments


def make_env(
    env_id: str, env_kwargs: dict[str, Any], in_worker: bool = False, candidates: bool = False
) -> Callable[[], gym.Env]:
    """A thunk that builds one monitored environment, for SB3's vector envs.

    ``candidates``: the agent chooses among candidate site sets
    (``powertrip_env.agents.candidates``).

    ``import powertrip_env`` registers the IDs in worker processes too (forkserver and spawn
    start fresh interpreters). Workers ignore Ctrl-C: the main process catches it, saves the
    model and closes them, instead of every worker printing its own traceback.
    """

    def thunk() -> gym.Env:
        import powertrip_env  # noqa: F401  (registers the IDs in a fresh worker)

        if in_worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        env = gym.make(env_id, **env_kwargs)
        return Monitor(CandidateSets(env) if candidates else env)

    return thunk


def make_vec_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    n_envs: int,
    kind: str = "dummy",
    scenarios: Sequence[str] = (),
    candidates: bool = False,
) -> VecEnv:
    """``n_envs`` envs in this process (``dummy``, always for 1) or in forkserver workers.

    With ``scenarios``, env i runs scenario ``i mod len(scenarios)``. The candidate-set agent on
    one catalogue runs on the native vector env (``CandidateVecEnv``): one compiled call per
    step for every env, the same episodes as a ``DummyVecEnv`` of ``CandidateSets``.
    """
    if candidates and kind == "dummy" and len(scenarios) <= 1 and native_vector(env_id):
        kwargs = {**env_kwargs, **({"scenario": scenarios[0]} if scenarios else {})}
        return VecMonitor(CandidateVecEnv(gym.make_vec(env_id, num_envs=n_envs, **kwargs)))
    per_env = [
        {**env_kwargs, "scenario": scenarios[i % len(scenarios)]} if scenarios else env_kwargs
        for i in range(n_envs)
    ]
    if n_envs == 1 or kind == "dummy":
        return DummyVecEnv([make_env(env_id, kwargs, candidates=candidates) for kwargs in per_env])
    thunks = [make_env(env_id, kwargs, True, candidates) for kwargs in per_env]
    return SubprocVecEnv(thunks, start_method="forkserver")


# --------------------------------------------------------------------------- 3. the run


def setup(args: argparse.Namespace, saved: checks.SavedRun | None = None) -> dict[str, Any]:
    """Check every argument and resolve defaults, before anything is trained or deleted.

    ``saved`` is the run that ``--resume`` continues (``args`` are then its settings, from
    ``checks.restore_run``): its hyperparameters are the ones it recorded, not the config file
    read again, and its own folder may be ``--out`` although it is not empty.
    """
    out = Path(args.out or Path("runs") / f"{args.env}-{args.algo}-{args.seed}")
    same_run = saved is not None and out.resolve() == saved.folder.resolve()
    if same_run and args.force:
        raise UsageError(
            f"argument --force: --resume continues the run in {str(out)!r}, which --force "
            "would delete; leave --force out, or give another --out"
        )
    if not same_run:
        checks.check_out_dir(out, force=args.force)
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
    if saved is None:
        config = hyperparams.load_config(config_path, args.algo)
        config = hyperparams.apply_overrides(config, args.hp, args.algo)
    else:
        config = saved.hyperparameters
    final_policies = (
        checks.check_final_policies(args.final_policies, max(final_counts))
        if args.final_episodes
        else []
    )
    clear = args.force and not same_run and out.is_dir() and any(out.iterdir())
    if clear:
        read = [p for sc in scenarios if sc for p in powertrip_env.load_scenario(sc).inputs]
        checks.check_clearable(out, [args.resume, args.config, *scenarios, *read])
    return {
        "env_kwargs": env_kwargs,
        "scenarios": scenarios,
        "final_env": final_env,
        "config_path": str(config_path),
        "config": config,
        "final_policies": final_policies,
        "out": out,
        "n_sites": max(site_counts),
        "clear": clear,
        "saved": saved,
    }


def train(args: argparse.Namespace, run: dict[str, Any]) -> int:
    """Train, save, and print the comparison table; returns the exit code."""
    out: Path = run["out"]
    algo_cls = hyperparams.ALGOS[args.algo]
    torch.set_num_threads(args.torch_threads)
    scenarios = run["scenarios"]
    candidates = args.extractor == "candidates"
    env = make_vec_env(
        args.env, run["env_kwargs"], args.n_envs, args.vec_env, scenarios, candidates
    )
    first = {"scenario": scenarios[0]} if scenarios else {}
    eval_kwargs = {**run["env_kwargs"], **first, "split": "test"}
    eval_env = DummyVecEnv([make_env(args.env, eval_kwargs, candidates=candidates)])
    done = 0 if run["saved"] is None else run["saved"].timesteps_done
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

    # Every argument is checked and the model is built: only now may --force delete anything.
    if run["clear"]:
        clear_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.yaml", config_text(args, run, done))

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
    # PowerTrip's return from the same start time says how far the agent is ahead, on one fixed
    # catalogue only: with several, or with catalogues drawn per episode, it has no single value.
    fixed = len(scenarios) <= 1 and args.env not in powertrip_env.SAMPLED_ENV_IDS
    reference = PowerTripReference(args.env, {**run["env_kwargs"], **first}) if fixed else None
    callback_list = [callbacks.PowerTripMetrics(reference), evaluation]
    if args.checkpoint_freq:
        callback_list.append(callbacks.Checkpoint(args.checkpoint_freq, out / "checkpoints"))

    steps = f"{args.timesteps:,} steps"
    if done:
        steps = f"the last {args.timesteps - done:,} of its {steps} (resumed at {done:,})"
    print(
        f"training {args.algo} on {args.env} for {steps} "
        f"({args.n_envs} envs, {args.extractor} extractor) -> {out}"
    )
    started = time.monotonic()
    try:
        # Resumed: the rest of the run, counted on from the model's steps, so TensorBoard's
        # curves and the learning-rate schedules continue where they stopped. SB3 trains whole
        # rollouts, so the run ends at the first rollout boundary at or after the total.
        model.learn(
            args.timesteps - done,
            callback=callback_list,
            log_interval=1,  # a TensorBoard point per rollout
            tb_log_name=args.algo,
            reset_num_timesteps=args.resume is None,
            progress_bar=not args.no_progress,
        )
    except KeyboardInterrupt:
        path = save_model(model, out / "interrupted.zip")
        print(
            f"\ninterrupted at {model.num_timesteps:,} of {args.timesteps:,} steps; model saved "
            f"to {path}\ncontinue with: {shlex.join(continue_command(args, path, out))}"
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
    from powertrip_env.baselines.evaluate import evaluate
    from powertrip_env.baselines.models import EvaluationError, SB3Policy

    best = out / "best_model.zip"
    chosen = best if best.exists() else final
    label = f"{args.algo} ({chosen.stem})"
    trained = algo_cls.load(chosen, device="cpu")
    agent = CandidatePolicy(trained, label) if candidates else SB3Policy(trained, label)
    env_kwargs = {k: v for k, v in run["env_kwargs"].items() if k != "reward_mode"}
    for scenario in scenarios or [None]:
        where = run["final_env"] + (f" (scenario {scenario})" if scenario else "")
        print(
            f"final comparison on {where}: {agent.name} against "
            f"{', '.join(run['final_policies'])} on {args.final_episodes} test episodes"
        )
        table_dir = out / Path(scenario).stem if len(scenarios) > 1 else out
        # The table's files are written into a hidden folder and moved in as a set, so a stop
        # half-way never leaves a new episodes.csv beside an earlier summary.md.
        staging = Path(tempfile.mkdtemp(dir=out, prefix=".final-"))
        try:
            result = evaluate(
                run["final_env"],
                [*run["final_policies"], agent],
                episodes=args.final_episodes,
                split="test",
                seed=args.eval_seed,
                env_kwargs={**env_kwargs, **({"scenario": scenario} if scenario else {})},
                out_dir=staging / "results",
                progress=not args.no_progress,
            )
            install_results(staging / "results", table_dir)
        except EvaluationError as exc:
            print(f"train_agent.py: error: final comparison failed: {exc}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        print(result.to_markdown())
        print(f"results written to {table_dir}")
    return 0


# Run settings in the order a command line shows them; (dest, option). Written out whole in the
# command printed after Ctrl-C, so it reads as the run it finishes.
RUN_OPTIONS = (
    ("env", "--env"), ("scenario", "--scenario"), ("max_sites", "--max-sites"),
    ("algo", "--algo"), ("extractor", "--extractor"), ("reward_mode", "--reward-mode"),
    ("config", "--config"), ("hp", "--hp"), ("n_envs", "--n-envs"), ("seed", "--seed"),
    ("timesteps", "--timesteps"), ("eval_freq", "--eval-freq"),
    ("eval_episodes", "--eval-episodes"), ("checkpoint_freq", "--checkpoint-freq"),
    ("final_env", "--final-env"), ("final_episodes", "--final-episodes"),
    ("final_policies", "--final-policies"), ("eval_seed", "--eval-seed"),
)  # fmt: skip
# How the run used the machine: shown only when not the default.
RUNTIME_OPTIONS = (
    ("vec_env", "--vec-env"), ("torch_threads", "--torch-threads"), ("no_progress", "--no-progress")
)  # fmt: skip


def continue_command(args: argparse.Namespace, path: Path, out: Path) -> list[str]:
    """The command that finishes this run from ``path``, every setting of the run spelled out.

    ``--resume`` alone would do (it reads them from ``config.yaml``), but a command that names
    the total steps, envs, seed and the rest says which run it finishes, and ``--resume``
    accepts them because they match.
    """
    defaults = build_parser().parse_args([])
    cmd = ["python", "train_agent.py"]
    for dest, option in (*RUN_OPTIONS, *RUNTIME_OPTIONS):
        value = getattr(args, dest)
        runtime_default = (dest, option) in RUNTIME_OPTIONS and value == getattr(defaults, dest)
        if value is None or value is False or runtime_default:
            continue
        if value is True:
            cmd.append(option)
        else:
            for item in value if isinstance(value, list) else [value]:
                cmd += [option, str(item)]
    return [*cmd, "--resume", str(path), "--out", str(out)]


def config_text(args: argparse.Namespace, run: dict[str, Any], done: int) -> str:
    """``config.yaml``: the run's command and settings, or the resumed run's file plus an entry.

    A resume never rewrites the record of the run it continues (the original command, its
    arguments and hyperparameters stay as written); it appends to ``resumes`` the command, the
    model and step it started from, and the settings it changed, which later resumes apply.
    """
    command = shlex.join(["python", "train_agent.py", *run["argv"]])
    saved: checks.SavedRun | None = run["saved"]
    if saved is None:
        record = {
            "command": command,
            "args": vars(args),
            "env_kwargs": run["env_kwargs"],
            "hyperparameters": run["config"],
        }
        return yaml.safe_dump(record, sort_keys=False)
    entry = {
        "command": command,
        "model": str(args.resume),
        "at_timesteps": done,
        "out": str(run["out"]),
        "changed": run.get("changed", {}),
    }
    return append_to_list(saved.text, "resumes", entry)


def load_for_resume(algo_cls: type, args: argparse.Namespace, env: VecEnv, out: Path) -> Any:
    """Load ``--resume`` onto the new envs; its saved hyperparameters are kept.

    The seed is moved on by the steps already done, so the resumed run does not replay the
    start times it trained on first.
    """
    model = algo_cls.load(args.resume, env=env, device="cpu", tensorboard_log=str(out / "tb"))
    model.set_random_seed(args.seed + model.num_timesteps)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns 0 on success, 2 on a bad argument, 130 after Ctrl-C."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        saved, changed = None, {}
        if args.resume is not None:  # the run's own settings, with the ones it may change
            args, saved, changed = checks.restore_run(
                args, given_options(argv), build_parser().parse_args([])
            )
        run = {**setup(args, saved), "argv": argv, "changed": changed}
        return train(args, run)
    except (UsageError, ConfigError) as exc:
        print(f"train_agent.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
