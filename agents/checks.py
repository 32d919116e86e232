"""Checks of ``train_agent.py``'s arguments, done before anything is trained.

A training run that dies ten minutes in because of a typo in a policy name wastes the ten
minutes; one that dies with a traceback from deep inside Gymnasium does not say which argument
was wrong. Each check here either returns the value to use or raises ``UsageError`` with one line
that names the argument, the bad value and what is allowed; the script prints it and exits 2,
like argparse does for its own errors.
"""

from __future__ import annotations

import argparse
import json
import os
import zipfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml

from powertrip_env import ENV_IDS, SAMPLED_ENV_IDS
from powertrip_env.atomic import OutputDirError, check_output_dir, check_replaceable
from powertrip_env.harness.arguments import env_id_problem

# The argparse types of counts, shared by every tool's options (re-exported for the parsers here).
from powertrip_env.harness.arguments import non_negative_int as non_negative_int
from powertrip_env.harness.arguments import positive_int as positive_int
from powertrip_env.harness.tracks import KNOWN, Track, track_for


class UsageError(Exception):
    """A command-line argument that cannot be used; ``str()`` is the one-line message."""


def check_env(env_id: str, env_kwargs: Mapping[str, Any]) -> int:
    """Build the environment once to check ID, scenario and kwargs; returns its site count."""
    problem = env_id_problem(env_id)  # every registered PowerTrip ID (harness.arguments)
    if problem is not None:
        raise UsageError(f"argument --env: {problem}")
    try:
        env = gym.make(env_id, **env_kwargs)
    except (ValueError, TypeError, OSError) as exc:
        raise UsageError(f"{_argument_for(str(exc), env_kwargs)}{_one_line(exc)}") from None
    n_sites = int(env.unwrapped.n_sites)
    env.close()
    return n_sites


def registered_reward(env_id: str) -> str:
    """The reward an ID is registered with (its track's objective): the agent trains on it
    unless ``--reward-mode`` says otherwise."""
    problem = env_id_problem(env_id)  # every registered PowerTrip ID (harness.arguments)
    if problem is not None:
        raise UsageError(f"argument --env: {problem}")
    return str(gym.spec(env_id).kwargs.get("reward_mode", "excess_gain"))


def final_track(env_id: str, env_kwargs: Mapping[str, Any]) -> tuple[Track, bool]:
    """The track of the environment (checked by ``check_env``) the final table runs on (the one
    its ID joined, or for a scenario given in its place, measured or known by whether it draws
    unknowns: ``powertrip_env.harness.tracks.track_for``), and whether its scenario draws
    unknowns."""
    env = gym.make(env_id, **env_kwargs)
    try:
        track = track_for(env_id, env, scenario_given="scenario" in env_kwargs)
        return track, bool(env.unwrapped.scenario.unknowns.drawn)
    finally:
        env.close()


def final_env_for(env_id: str) -> str:
    """Where the final table runs by default: the env itself, or for an ID that draws its
    sites, the fixed ID of the same scenario (PowerTrip-Random-v0 -> PowerTrip-v0)."""
    if env_id in SAMPLED_ENV_IDS:
        scenario = SAMPLED_ENV_IDS[env_id][0]
        return next(eid for eid, name in ENV_IDS.items() if name == scenario)
    return env_id


def _argument_for(message: str, env_kwargs: Mapping[str, Any]) -> str:
    if "max_sites" in message:
        return f"argument --max-sites: {env_kwargs.get('max_sites')!r}: "
    if "reward_mode" in message:
        return f"argument --reward-mode: {env_kwargs.get('reward_mode')!r}: "
    if "scenario" in env_kwargs:
        return f"argument --scenario: {os.fspath(env_kwargs['scenario'])!r}: "
    return "argument --env: "


def check_final_policies(
    spec: str, n_sites: int, tracks: Sequence[Track] = (), measured: bool = False
) -> list[str]:
    """Baseline names for the final table, each checked: a comma-separated list in which
    ``all`` stands for the deployable baselines of the final environment's ``tracks`` (on a
    scenario that draws unknowns when ``measured``) and ``references`` for their clairvoyant
    ones."""
    from powertrip_env.baselines.registry import make_policy

    names: list[str] = []
    for name in (part.strip() for part in spec.split(",")):
        if name.lower() == "all":
            names += [n for track in tracks or [KNOWN] for n in track.rules(n_sites, measured)]
        elif name.lower() == "references":
            names += [n for track in tracks or [KNOWN] for n in track.references]
        elif name:
            names.append(name)
    names = list(dict.fromkeys(names))  # each once, in the order given
    if not names:
        raise UsageError(
            "argument --final-policies: give 'all', 'references' or a comma-separated list "
            "such as 'PowerTrip,AllSites'"
        )
    for name in names:
        try:
            make_policy(name, n_sites, seed=0)
        except ValueError as exc:
            raise UsageError(f"argument --final-policies: {_one_line(exc)}") from None
    return names


def check_readable_file(path: str | os.PathLike[str], argument: str) -> Path:
    """The path of an existing, readable file, or a ``UsageError`` naming ``argument``."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"argument {argument}: file {os.fspath(path)!r} does not exist")
    if not os.access(p, os.R_OK):
        raise UsageError(f"argument {argument}: file {os.fspath(path)!r} is not readable")
    return p


def check_out_dir(path: str | os.PathLike[str], force: bool = False) -> Path:
    """The run folder ``--out``: new or empty, or (with ``force``) one whose files may go.

    A folder that holds an earlier run's files is refused (``powertrip_env.atomic``'s
    ``check_output_dir``): a new ``config.yaml`` beside an old ``final_model.zip``, summary
    and checkpoints is a folder no run produced. Nothing is created or deleted here; ``force``
    only lets the check pass (``clear_folder`` empties the folder once every argument is
    checked). When the folder holds an interrupted run, the message says how to resume it.
    """
    p = Path(path)
    try:
        check_output_dir(p, force=force)
    except OutputDirError as exc:
        hint = ""
        if (p / "interrupted.zip").is_file() and not (p / "final_model.zip").exists():
            hint = f", or continue its run with --resume {p / 'interrupted.zip'}"
        raise UsageError(f"argument --out: {_one_line(exc)}{hint}") from None
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise UsageError(f"argument --out: directory {os.fspath(path)!r} is not writable")
    return p


def check_clearable(out: Path, inputs: Sequence[str | os.PathLike[str] | None]) -> None:
    """Refuse ``--force`` on a folder whose deletion would lose more than an earlier run
    (``powertrip_env.atomic.check_replaceable``: the working directory, a home directory, a
    repository, a folder of other runs, or one holding a file this run reads)."""
    try:
        check_replaceable(out, inputs)
    except OutputDirError as exc:
        raise UsageError(f"argument {exc}") from None


# --------------------------------------------------------------------------- --resume

FIXED_ON_RESUME = (
    "env", "scenario", "max_sites", "algo", "extractor", "reward_mode", "shaping",
    "config", "hp", "n_envs", "seed", "eval_episodes",
)  # fmt: skip
"""Settings that define a run: a resume takes them from ``config.yaml`` and refuses others.

The model's spaces come from the env, scenario files and padding; its algorithm, policy and
hyperparameters from ``--algo``, ``--extractor``, ``--config`` and ``--hp``; its rollout size
from ``--n-envs``; its episodes from ``--seed``; ``best_model.json``'s reward is a mean over
``--eval-episodes`` episodes, which a different count would not compare with."""

CHANGEABLE_ON_RESUME = (
    "timesteps", "eval_freq", "checkpoint_freq", "final_env", "final_episodes",
    "final_policies", "eval_seed", "vec_env", "torch_threads", "no_progress",
)  # fmt: skip
"""Settings a resume takes from ``config.yaml`` unless given: ``--timesteps`` (the run's new
total, to extend it), how often to evaluate and checkpoint, the final comparison, and how the
run uses the machine. None of them changes what the model learns from."""

PER_INVOCATION = ("resume", "out", "force")
"""Never taken from ``config.yaml``: they say what this command does, not what the run is."""


@dataclass
class SavedRun:
    """The run that ``--resume`` continues, read from its folder's ``config.yaml``.

    Attributes:
        folder: the run folder (``config.yaml``'s; the model is in it or in ``checkpoints/``).
        text: ``config.yaml`` as written, which a resume extends but never rewrites.
        settings: the run's arguments: the original ones with each earlier resume's changes.
        hyperparameters: the resolved hyperparameters the run started with.
        timesteps_done: ``num_timesteps`` of the model being resumed.
    """

    folder: Path
    text: str
    settings: dict[str, Any]
    hyperparameters: dict[str, Any]
    timesteps_done: int


def read_saved_run(resume: str | os.PathLike[str]) -> SavedRun:
    """Find and read the run that the model ``resume`` belongs to; ``UsageError`` if none.

    The run folder is the model's folder, or its parent for a model in ``checkpoints/``.
    """
    model = check_readable_file(resume, "--resume")
    done = saved_timesteps(model)
    folders = [model.parent]
    if model.parent.name == "checkpoints":
        folders.append(model.parent.parent)
    config = next((f / "config.yaml" for f in folders if (f / "config.yaml").is_file()), None)
    if config is None:
        raise UsageError(
            f"argument --resume: no config.yaml beside {os.fspath(resume)!r}; --resume "
            "continues a train_agent.py run from the model in its run folder"
        )
    try:
        text = config.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(
            f"argument --resume: cannot read {os.fspath(config)!r}: {_one_line(exc)}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("args"), dict):
        raise UsageError(
            f"argument --resume: {os.fspath(config)!r} does not record a run's arguments "
            "(no 'args' table)"
        )
    settings = dict(data["args"])
    for resumed in data.get("resumes") or []:
        if isinstance(resumed, dict):
            settings.update(resumed.get("changed") or {})
    return SavedRun(config.parent, text, settings, dict(data.get("hyperparameters") or {}), done)


def saved_timesteps(path: Path) -> int:
    """``num_timesteps`` of an SB3 model zip, read from its ``data`` JSON without loading it."""
    try:
        with zipfile.ZipFile(path) as archive:
            return int(json.loads(archive.read("data"))["num_timesteps"])
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, OSError) as exc:
        raise UsageError(
            f"argument --resume: {os.fspath(path)!r} is not a saved SB3 model: {_one_line(exc)}"
        ) from None


def restore_run(
    args: argparse.Namespace, given: Collection[str], defaults: argparse.Namespace
) -> tuple[argparse.Namespace, SavedRun, dict[str, Any]]:
    """The arguments of the run ``args.resume`` continues, checked against those given.

    Every setting comes from the run's ``config.yaml``; one given on the command line must
    match it if it is in ``FIXED_ON_RESUME`` and replaces it if it is in
    ``CHANGEABLE_ON_RESUME``. ``--out`` defaults to the run folder, and the run's total
    ``--timesteps`` must be above the steps the model has trained.

    Args:
        args: the parsed command line.
        given: the names (argparse ``dest``) of the options given on it.
        defaults: the parser's defaults, for settings an older ``config.yaml`` lacks.

    Returns:
        The arguments to run with, the saved run, and the settings this resume changes.
    """
    saved = read_saved_run(args.resume)
    where = os.fspath(saved.folder / "config.yaml")
    merged = argparse.Namespace(**vars(defaults))
    for dest, value in saved.settings.items():
        if dest in FIXED_ON_RESUME or dest in CHANGEABLE_ON_RESUME:
            setattr(merged, dest, value)
    for dest in sorted(set(given) & set(FIXED_ON_RESUME)):
        mine, theirs = getattr(args, dest), getattr(merged, dest)
        if _normalised(dest, mine, merged) != _normalised(dest, theirs, merged):
            raise UsageError(
                f"argument --{dest.replace('_', '-')}: {_shown(mine)} differs from the run being "
                f"resumed ({_shown(theirs)}, in {where!r}); a resumed run keeps its settings, so "
                "leave it out or start a new run in another --out"
            )
    changed: dict[str, Any] = {}
    for dest in CHANGEABLE_ON_RESUME:
        if dest in given and getattr(args, dest) != getattr(merged, dest):
            changed[dest] = getattr(args, dest)
            setattr(merged, dest, getattr(args, dest))
    merged.resume = args.resume
    merged.force = getattr(args, "force", False)
    merged.out = args.out if args.out is not None else os.fspath(saved.folder)
    done, total = saved.timesteps_done, merged.timesteps
    if total <= done and "timesteps" in given:
        raise UsageError(
            f"argument --timesteps: the run's total, {total:,}, must be above the {done:,} "
            f"steps {os.fspath(args.resume)!r} has trained"
        )
    if total <= done:
        raise UsageError(
            f"argument --resume: {os.fspath(args.resume)!r} has trained all {total:,} steps of "
            f"its run; give --timesteps above {done:,} (the run's new total) to train it on"
        )
    return merged, saved, changed


def _normalised(dest: str, value: Any, run: argparse.Namespace) -> Any:
    """A setting in a form where equal meanings compare equal (paths resolved, None = [])."""
    if dest == "config":
        from powertrip_env.agents.hyperparams import default_config_path

        return Path(value or default_config_path(run.algo)).resolve()
    if dest == "scenario":
        return [os.fspath(Path(s).resolve()) if Path(s).is_file() else s for s in value or []]
    if dest == "hp":
        return list(value or [])
    return value


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return " ".join(map(str, value)) or "none"
    return repr(value) if isinstance(value, str) else str(value)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
