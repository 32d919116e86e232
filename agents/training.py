"""A training run: what ``python train_agent.py`` does, and ``maintainers.pretrain`` runs.

``main(argv)`` takes ``train_agent.py``'s command line (``build_parser``; the usage and the run
directory it fills are in that script's docstring), trains a Stable-Baselines3 agent on a
PowerTrip environment and compares it with the baselines on the test split; it returns the
exit code. It lives here, not in the root script, because ``maintainers.pretrain`` trains
with it too, and nothing imports the root script (``tests/test_imports.py``).

A used ``--out`` is refused unless ``--force`` (which empties it once every argument is
checked) or ``--resume`` continues the run in it. ``--resume`` takes the run's settings from its
``config.yaml`` and trains up to the run's ``--timesteps``; given options that would change the
run are refused (``powertrip_env.agents.checks.FIXED_ON_RESUME``), the others (``--timesteps`` to
extend it, ``--final-episodes``, ...) apply from then on.

Reads top to bottom: the environment thunk, then the training and the final table; the
arguments are ``powertrip_env.agents.arguments``'. The pieces with logic in them live in the
other modules of ``agents/`` (site encoder and policy, callbacks, hyperparameter files, argument
checks, atomic saving), in ``baselines/`` (the policies) and in ``harness/`` (the evaluation).
Every file is written atomically; every bad argument is a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import functools
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
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor

import powertrip_env  # registers the environment IDs
from powertrip_env.agents import (
    callbacks,
    candidates,  # noqa: F401  (registers the time slots' action interface)
    carbon_slots,  # noqa: F401  (registers the carbon slots')
    checks,
    hyperparams,
)
from powertrip_env.agents.arguments import build_parser, given_options, parse_args
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
from powertrip_env.agents.checks import UsageError
from powertrip_env.agents.hyperparams import ConfigError
from powertrip_env.agents.powertrip_return import PowerTripReturn
from powertrip_env.agents.saving import (
    append_to_list,
    clear_folder,
    install_results,
    save_model,
    write_text,
)
from powertrip_env.atomic import write_error
from powertrip_env.harness.arguments import draws_sites
from powertrip_env.harness.models.registry import INTERFACES

# --------------------------------------------------------------------------- 1. environments

# The env arguments of the training reward, which the final table (scored on the final env's
# own objective) leaves out.
TRAINING_ONLY = ("reward_mode", "shaping")


def action_interface(extractor: str, reward_mode: str) -> str | None:
    """The registered action interface (``harness.models.registry.INTERFACES``) an agent with
    ``extractor`` acts through on a task scored by ``reward_mode``; None: the env's own action.

    The candidate-set agent chooses among the sets the rules of its objective would consider:
    the time slots (``agents/candidates.py``) on the time objectives, the carbon slots
    (``agents/carbon_slots.py``: idle, CarbonGreedy's pick, the cleanest prefixes) on carbon.
    """
    if extractor != "candidates":
        return None
    return "carbon_slots" if reward_mode == "carbon" else "candidates"


def env_thunk(
    env_id: str, env_kwargs: dict[str, Any], in_worker: bool = False, interface: str | None = None
) -> Callable[[], gym.Env]:
    """A thunk that builds one monitored environment, for SB3's vector envs.

    ``interface``: the agent acts through that registered wrapper (``action_interface``), for
    example choosing among candidate site sets (``powertrip_env.agents.candidates``).

    ``import powertrip_env`` registers the IDs in worker processes too (forkserver and spawn
    start fresh interpreters). Workers ignore Ctrl-C: the main process catches it, saves the
    model and closes them, instead of every worker printing its own traceback.
    """

    def thunk() -> gym.Env:
        import powertrip_env  # noqa: F401  (registers the IDs in a fresh worker)

        if in_worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        env = gym.make(env_id, **env_kwargs)
        return Monitor(INTERFACES[interface].wrap(env) if interface else env)

    return thunk


def make_vec_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    n_envs: int,
    kind: str = "dummy",
    scenarios: Sequence[str] = (),
    interface: str | None = None,
) -> VecEnv:
    """``n_envs`` envs in this process (``dummy``, always for 1) or in forkserver workers.

    With ``scenarios``, env i runs scenario ``i mod len(scenarios)``. The candidate-set agent on
    one catalogue runs on the native vector env (``CandidateVecEnv``): one compiled call per
    step for every env, the same episodes as a ``DummyVecEnv`` of ``CandidateSets``.
    """
    # PowerTripVectorEnv steps one site catalogue for every episode, never drawn ones
    native = interface == "candidates" and kind == "dummy" and len(scenarios) <= 1
    if native and not draws_sites(env_id):
        kwargs = {**env_kwargs, **({"scenario": scenarios[0]} if scenarios else {})}
        return VecMonitor(CandidateVecEnv(gym.make_vec(env_id, num_envs=n_envs, **kwargs)))
    per_env = [
        {**env_kwargs, "scenario": scenarios[i % len(scenarios)]} if scenarios else env_kwargs
        for i in range(n_envs)
    ]
    if n_envs == 1 or kind == "dummy":
        return DummyVecEnv([env_thunk(env_id, kwargs, interface=interface) for kwargs in per_env])
    thunks = [env_thunk(env_id, kwargs, True, interface) for kwargs in per_env]
    return SubprocVecEnv(thunks, start_method="forkserver")


# --------------------------------------------------------------------------- 2. the run


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
    own = checks.registered_reward(args.env)
    args.reward_mode = args.reward_mode or own
    if args.reward_mode != own:  # a choice the user made: said, and recorded in config.yaml
        print(f"training on --reward-mode {args.reward_mode}; {args.env}'s own objective is {own}")
    env_kwargs: dict[str, Any] = {
        "reward_mode": args.reward_mode,
        "obs_mode": "dict" if args.extractor == "sites" else "flat",
    }
    if args.shaping:  # the training reward's; the final table scores the objective alone
        env_kwargs["shaping"] = args.shaping
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
    final_kwargs = {k: v for k, v in env_kwargs.items() if k not in TRAINING_ONLY}
    final_counts = [checks.check_env(final_env, {**final_kwargs, **sc}) for sc in each]
    config_path = args.config or hyperparams.default_config_path(args.algo)
    if saved is None:
        config = hyperparams.load_config(config_path, args.algo)
        config = hyperparams.apply_overrides(config, args.hp, args.algo)
    else:
        config = saved.hyperparameters
    # the final environment's track decides the comparison (each distinct one's, in order)
    found = [checks.final_track(final_env, {**final_kwargs, **sc}) for sc in each]
    tracks = list(dict.fromkeys(track for track, _ in found))
    measured = any(drawn for _, drawn in found)
    if args.final_policies is None:
        args.final_policies = ",".join(track.final_policies for track in tracks)
    final_policies = (
        checks.check_final_policies(args.final_policies, max(final_counts), tracks, measured)
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
    """Train, save, and print the comparison table; returns the exit code.

    The steps: build the envs and the model (a bad config or ``--resume`` is refused before
    anything is deleted), then clear and fill the run folder, train (``_learn``), and compare
    the kept model with the baselines on the test split (``_final_comparison``).
    """
    out: Path = run["out"]
    algo_cls = hyperparams.ALGOS[args.algo]
    torch.set_num_threads(args.torch_threads)
    scenarios = run["scenarios"]
    interface = action_interface(args.extractor, args.reward_mode)
    env = make_vec_env(args.env, run["env_kwargs"], args.n_envs, args.vec_env, scenarios, interface)
    first = {"scenario": scenarios[0]} if scenarios else {}
    eval_kwargs = {**run["env_kwargs"], **first, "split": "test"}
    eval_env = DummyVecEnv([env_thunk(args.env, eval_kwargs, interface=interface)])
    done = 0 if run["saved"] is None else run["saved"].timesteps_done
    model = _build_model(algo_cls, args, run, env, eval_env)

    # Every argument is checked and the model is built: only now may --force delete anything.
    if run["clear"]:
        clear_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.yaml", config_text(args, run, done))

    callback_list = _callbacks(args, run, eval_env, first)
    final = _learn(model, args, out, done, callback_list, (env, eval_env))
    if final is None:
        return 130

    # The comparison: best model if one was kept, else the final one, on the test split.
    if not args.final_episodes:
        return 0
    return _final_comparison(args, run, algo_cls, final, interface)


def _build_model(
    algo_cls: type, args: argparse.Namespace, run: dict[str, Any], env: VecEnv, eval_env: VecEnv
) -> Any:
    """A new model from the run's config, or the ``--resume`` model loaded onto ``env``.

    A config or model SB3 refuses closes both envs and becomes a one-line ``UsageError``
    naming the option at fault, so a bad run stops here, before its folder is touched.
    """
    out: Path = run["out"]
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
    return model


def _callbacks(
    args: argparse.Namespace, run: dict[str, Any], eval_env: VecEnv, first: dict[str, Any]
) -> list[BaseCallback]:
    """Callbacks: powertrip/* scalars, periodic test-split evaluation, checkpoints.

    ``first`` is the first scenario's ``gym.make`` argument (empty without ``--scenario``),
    the one catalogue PowerTrip's return (``PowerTripReturn``) is played on.
    """
    out: Path = run["out"]
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
    fixed = len(run["scenarios"]) <= 1 and args.env not in powertrip_env.SAMPLED_ENV_IDS
    powertrip = PowerTripReturn(args.env, {**run["env_kwargs"], **first}) if fixed else None
    callback_list = [callbacks.PowerTripMetrics(powertrip), evaluation]
    if args.checkpoint_freq:
        callback_list.append(callbacks.Checkpoint(args.checkpoint_freq, out / "checkpoints"))
    return callback_list


def _learn(
    model: Any,
    args: argparse.Namespace,
    out: Path,
    done: int,
    callback_list: list[BaseCallback],
    envs: tuple[VecEnv, VecEnv],
) -> Path | None:
    """Train up to ``--timesteps`` and save the final model; its path, or None after Ctrl-C.

    A Ctrl-C saves the model as ``interrupted.zip`` and prints the command that continues the
    run from it. The training and evaluation ``envs`` are closed either way.
    """
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
        return None
    finally:
        for env in envs:
            env.close()
    final = save_model(model, out / "final_model.zip")
    print(
        f"trained {model.num_timesteps:,} steps in {time.monotonic() - started:.0f} s; "
        f"final model: {final}"
    )
    return final


def _final_comparison(
    args: argparse.Namespace,
    run: dict[str, Any],
    algo_cls: type,
    final: Path,
    interface: str | None,
) -> int:
    """The final table: the best model if one was kept, else ``final``, against the baselines
    on ``--final-episodes`` test episodes of each scenario; 1 if the evaluation failed or its
    files could not be written (a full disk: the table is printed first, so it is not lost).

    Imported here, not at the top: a run with ``--final-episodes 0`` never loads the harness.
    """
    from powertrip_env.errors import EvaluationError
    from powertrip_env.harness.evaluation.evaluate import evaluate, write_files
    from powertrip_env.harness.models.policies import SB3Policy

    out: Path = run["out"]
    scenarios = run["scenarios"]
    best = out / "best_model.zip"
    chosen = best if best.exists() else final
    label = f"{args.algo} ({chosen.stem})"
    trained = algo_cls.load(chosen, device="cpu")
    agent = INTERFACES[interface].policy(trained, label) if interface else SB3Policy(trained, label)
    env_kwargs = {k: v for k, v in run["env_kwargs"].items() if k not in TRAINING_ONLY}
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
                progress=not args.no_progress,
            )
        except EvaluationError as exc:
            print(f"train_agent.py: error: final comparison failed: {exc}", file=sys.stderr)
            return 1
        print(result.to_markdown())  # before the write: a failed one must not lose the table
        try:
            _install_table(functools.partial(write_files, result), out, table_dir)
        except OSError as exc:  # a full disk: one line naming the folder, as the harness's tools
            print(f"train_agent.py: error: {write_error(table_dir, exc)}", file=sys.stderr)
            return 1
        print(f"results written to {table_dir}")
    return 0


def _install_table(write: Callable[[Path], None], out: Path, table_dir: Path) -> None:
    """Write the final table's files (``write(folder)``) into a hidden folder of ``out`` and
    move them into ``table_dir`` as a set (``install_results``), so that a stop or a failed
    write half-way never leaves a new episodes.csv beside an earlier summary.md."""
    staging = Path(tempfile.mkdtemp(dir=out, prefix=".final-"))
    try:
        (staging / "results").mkdir()
        write(staging / "results")
        install_results(staging / "results", table_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# Run settings in the order a command line shows them; (dest, option). Written out whole in the
# command printed after Ctrl-C, so it reads as the run it finishes.
RUN_OPTIONS = (
    ("env", "--env"), ("scenario", "--scenario"), ("max_sites", "--max-sites"),
    ("algo", "--algo"), ("extractor", "--extractor"), ("reward_mode", "--reward-mode"),
    ("shaping", "--shaping"),
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
