"""Offline datasets (Minari) of the clairvoyant references and the strongest deployable baselines.

Command line::

    powertrip datasets                       # Optimiser, HorizonRule, ForecastMPC
    powertrip datasets --env PowerTrip-v0 --policies Optimiser --episodes 30
    powertrip datasets --out data/minari --force

For each task (``--env``, default every ID of ``powertrip_env.SUITE_IDS``) and each policy
(``--policies``, default ``DEFAULT_POLICIES``: the reference the benchmark scores against and the
two lookahead rules, its strongest deployable baselines), ``--episodes`` episodes of the
``--split`` days (train by default: imitation learns on train days and is judged on test days)
are played as ``powertrip_env.harness.evaluation.evaluate`` plays them, episode e reset with seed
``--seed + e``, and
saved as one Minari dataset with the ID ``dataset_id(env_id, policy, split)``::

    powertrip/<env ID>/<policy in lower case>-v<DATASET_VERSION>          (train days)
    powertrip/<env ID>/<policy in lower case>-<split>-v<DATASET_VERSION>  (--split test or all)

e.g. ``powertrip/PowerTrip-v0/optimiser-v0``. Minari reads that as the namespace
``powertrip/<env ID>`` (nested in ``powertrip``), the dataset name and its version. The env
ID's own ``-v0`` sits inside the namespace, where Minari allows it, so the ID names the task
exactly. ``DATASET_VERSION`` changes whenever what is recorded changes (the infos, the
candidate layout: ``load_imitation`` refuses a dataset of another layout); the seeds and
episode count are in the metadata.

Each step holds the flat observation, the policy's (N,) 0/1 action, the reward, termination and
truncation, and in ``infos`` everything the env's info holds plus the candidate-set agent's view
of the decision (``CANDIDATE_INFO``): ``infos[key][t]`` describes the decision taken at
``observations[t]`` (``infos[key][0]`` is the reset's), and the last entry, after the episode
ended, holds none (slot -1). ``load_imitation`` reads the (features, slot) pairs back.

A dataset is recorded in memory, written into a hidden staging folder under ``--out`` (Minari's
data folder, by default ``MINARI_DATASETS_PATH`` or ``~/.minari/datasets``) and moved into place
only when complete (``powertrip_env.atomic.result_dir``): a stop leaves the earlier dataset as it
was, or none. An existing dataset is refused before anything runs unless ``--force``. Bad
arguments (an unknown ID or policy, fewer than one episode) exit with code 2 and one line.
docs/datasets.md says why each choice was made.

This module is the command and its checks, the atomic write and the loader; the IDs and Minari's
folder are ``powertrip_env.harness.datasets.store``'s, and what a step and a dataset hold
(``record_episode``, the metadata) is ``powertrip_env.harness.datasets.recording``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import powertrip_env
from powertrip_env.atomic import OutputDirError, probe_writable, result_dir, write_error
from powertrip_env.baselines import candidates
from powertrip_env.baselines.registry import LOOKAHEAD, make_policy
from powertrip_env.episodes import SPLITS
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import (
    CLAIRVOYANT,
    SHIPPED,
    add_env,
    add_episodes,
    add_force,
    add_out,
    add_seed,
    env_id_problem,
    make_env,
)
from powertrip_env.harness.datasets.recording import (
    Recording,
    RecordSettings,
    candidate_layout,
    record_episode,
    stage_dataset,
)
from powertrip_env.harness.datasets.store import (
    DEFAULT_SPLIT,
    DatasetError,
    dataset_id,
    default_root,
    minari_root,
    require_minari,
    write_namespaces,
)

DEFAULT_POLICIES: tuple[str, ...] = ("Optimiser", *LOOKAHEAD)
"""The reference the benchmark scores against (score 1) and the strongest deployable rules."""
DEFAULT_EPISODES = 10


# --------------------------------------------------------------------------- recording


@dataclasses.dataclass(frozen=True)
class _Plan:
    """One dataset to record, checked: its env, policy and where it goes."""

    env_id: str
    policy: str
    dataset_id: str
    path: Path  # the dataset's folder: <root>/<dataset ID>


def _check_settings(env_ids: list[str], policies: list[str], run: RecordSettings) -> None:
    if not env_ids:
        raise DatasetError("argument --env: give at least one environment ID")
    for env_id in env_ids:
        problem = env_id_problem(env_id, SHIPPED, fixed_sites=CLAIRVOYANT)
        if problem is not None:
            raise DatasetError(f"argument --env: {problem}")
    if not policies:
        raise DatasetError("argument --policies: give at least one policy name")
    episodes, seed = run.episodes, run.seed
    if isinstance(episodes, bool) or not isinstance(episodes, int | np.integer) or episodes < 1:
        raise DatasetError(f"argument --episodes: {episodes!r} must be an integer >= 1")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise DatasetError(f"argument --seed: {seed!r} must be an integer >= 0")
    if run.split not in SPLITS:
        raise DatasetError(f"argument --split: {run.split!r} is not one of {', '.join(SPLITS)}")
    for argument, names in (("--env", env_ids), ("--policies", policies)):
        twice = [name for name in names if names.count(name) > 1]
        if twice:
            raise DatasetError(f"argument {argument}: {twice[0]!r} is given twice; give it once")


def _plan(env_ids: list[str], policies: list[str], run: RecordSettings, root: Path) -> list[_Plan]:
    """Every check that can fail, before any episode runs: IDs, policies, episodes, seed, split,
    the output folder, and datasets that exist already (unless ``force``)."""
    require_minari()
    _check_settings(env_ids, policies, run)
    plans = []
    for env_id in env_ids:
        probe = make_env(env_id, **run.env_kwargs)
        n_sites = int(probe.action_space.shape[0])
        probe.close()
        for name in policies:
            try:
                make_policy(name, n_sites)
            except ValueError as exc:
                raise DatasetError(f"argument --policies: {exc} (on {env_id})") from None
            ident = dataset_id(env_id, name, run.split)
            path = root / ident
            if (path / "data").exists() and not run.force:
                raise DatasetError(
                    f"dataset {ident!r} already exists in {os.fspath(root)!r}; pass --force to "
                    "replace it, or give another --out"
                )
            plans.append(_Plan(env_id, name, ident, path))
    try:
        probe_writable(root)
    except OSError as exc:
        raise DatasetError(
            f"argument --out: {os.fspath(root)!r} cannot be written: {exc.strerror or exc}"
        ) from None
    return plans


def _record(plan: _Plan, run: RecordSettings) -> tuple[Recording, Any]:
    """Play ``plan``'s episodes; the recording and the env's spec (what Minari stores)."""
    env = make_env(plan.env_id, **run.env_kwargs)
    try:
        policy = make_policy(plan.policy, int(env.action_space.shape[0]), run.seed)
        buffers, outcomes = [], []
        for e in range(run.episodes):
            buffer, outcome = record_episode(env, policy, run.seed + e)
            buffers.append(buffer)
            outcomes.append(outcome)
        spec = env.spec
    finally:
        env.close()
    recording = Recording(
        dataset_id=plan.dataset_id,
        env_id=plan.env_id,
        policy=plan.policy,
        buffers=buffers,
        seeds=[run.seed + e for e in range(run.episodes)],
        tta_h=[o["tta_h"] for o in outcomes],
        success=[o["success"] for o in outcomes],
        exact=sum(o["exact"] for o in outcomes),
        decisions=sum(len(b.rewards) for b in buffers),
    )
    return recording, spec


def _write(recording: Recording, spec: Any, run: RecordSettings, path: Path, root: Path) -> None:
    """Write ``recording`` as a Minari dataset at ``path`` (``<root>/<ID>``), whole or not at
    all: Minari writes it into a hidden staging folder under ``root``, whose ``data`` folder
    then replaces ``path/data`` in one rename (``result_dir``); the namespaces' descriptions
    follow. A stop before the rename leaves no new folder behind."""
    new = [p for p in (path, *path.parents) if root in p.parents and not p.exists()]
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".powertrip-staging-"))
    try:
        staged = stage_dataset(recording, spec, run, staging)
        with result_dir(path / "data", force=run.force) as folder:
            for item in staged.iterdir():
                os.replace(item, folder / item.name)
        with minari_root(root):
            write_namespaces(recording.env_id)
    except BaseException as exc:
        if not (path / "data").exists():  # the folders made for a dataset that never came
            for folder in new:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        if isinstance(exc, OSError):  # a full disk: one line naming the dataset's folder
            exc = write_error(path, exc)
        if isinstance(exc, OutputDirError):
            raise DatasetError(str(exc)) from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def record(
    env_ids: Sequence[str] | str | None = None,
    policies: Sequence[str] | str | None = None,
    *,
    episodes: int = DEFAULT_EPISODES,
    split: str = DEFAULT_SPLIT,
    seed: int = 0,
    root: str | os.PathLike[str] | None = None,
    force: bool = False,
    env_kwargs: Mapping[str, Any] | None = None,
    log: Any = None,
) -> list[str]:
    """Record one Minari dataset per (env ID, policy) into ``root``; returns their IDs.

    Args:
        env_ids: shipped IDs (``powertrip_env.ENV_IDS``); default ``SUITE_IDS``.
        policies: registry names (``powertrip_env.baselines.registry.make_policy``); default
            ``DEFAULT_POLICIES``.
        episodes: per dataset; episode e resets with ``seed + e``.
        split: ``"train"`` (default), ``"test"`` or ``"all"``.
        seed: base seed of the episodes and of randomised policies.
        root: Minari's data folder; default ``MINARI_DATASETS_PATH`` or ``~/.minari/datasets``.
        force: replace datasets that exist (each once its new one is complete).
        env_kwargs: extra ``gym.make`` arguments (e.g. ``jitter=False``, ``max_episode_steps``),
            kept in the dataset's env spec so ``recover_environment`` makes the same env.
        log: a file for one line per dataset (default: none).

    Raises ``DatasetError`` (a ``ValueError``) for bad input before any episode runs.
    """
    env_ids = [env_ids] if isinstance(env_ids, str) else list(env_ids or powertrip_env.SUITE_IDS)
    policies = [policies] if isinstance(policies, str) else list(policies or DEFAULT_POLICIES)
    where = Path(root) if root is not None else default_root()
    kwargs = {**dict(env_kwargs or {}), "split": split, "obs_mode": "flat"}
    run = RecordSettings(episodes, split, seed, kwargs, force)
    plans = _plan(env_ids, policies, run, where)
    done = []
    for plan in plans:
        started = time.monotonic()
        recording, spec = _record(plan, run)
        _write(recording, spec, run, plan.path, where)
        done.append(plan.dataset_id)
        if log is not None:
            tta = float(np.mean(recording.tta_h))
            share = recording.exact / max(recording.decisions, 1)
            print(
                f"{plan.dataset_id}: {episodes} episodes, {recording.decisions} steps, mean TTA "
                f"{tta:.2f} h, action in the candidate slots {share:.0%} "
                f"({time.monotonic() - started:.0f} s)",
                file=log,
                flush=True,
            )
    return done


# --------------------------------------------------------------------------- loading


def load_imitation(
    dataset_ids: Sequence[str] | str,
    *,
    root: str | os.PathLike[str] | None = None,
    exact_only: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The (candidate features, slot) pairs of every decision in ``dataset_ids``, for imitation.

    Returns ``features`` (T, N_FEATURES) float32 and ``slots`` (T,) int64, one row per step of
    every episode in the order given (the entry after each episode's end, which decides
    nothing, is left out). With ``exact_only``, only the steps whose action was a slot's set.
    ``root`` is Minari's data folder (default its own). Raises ``DatasetError`` for a dataset
    that is missing, not one of this module's, or recorded with another candidate layout.
    """
    minari = require_minari()
    ids = [dataset_ids] if isinstance(dataset_ids, str) else list(dataset_ids)
    if not ids:
        raise DatasetError("load_imitation: give at least one dataset ID")
    features: list[np.ndarray] = []
    slots: list[np.ndarray] = []
    layout = candidate_layout()
    with minari_root(root) as where:
        for ident in ids:
            try:
                dataset = minari.load_dataset(ident)
            except (FileNotFoundError, ValueError) as exc:
                raise DatasetError(f"dataset {ident!r} in {os.fspath(where)!r}: {exc}") from None
            meta = dataset.storage.metadata.get("powertrip") or {}
            if meta.get("candidate_layout") != layout:
                raise DatasetError(
                    f"dataset {ident!r} was not recorded with this version's candidate layout "
                    f"({candidates.N_SLOTS} slots, {candidates.N_FEATURES} features); record it "
                    "again: powertrip datasets --force"
                )
            for episode in dataset.iterate_episodes():
                keep = np.ones(len(episode), dtype=bool)
                if exact_only:
                    keep = np.asarray(episode.infos["candidate_exact"][:-1], dtype=bool)
                features.append(np.asarray(episode.infos["candidate_features"][:-1])[keep])
                slots.append(np.asarray(episode.infos["candidate_slot"][:-1])[keep])
    x = np.concatenate(features).astype(np.float32, copy=False)
    y = np.concatenate(slots).astype(np.int64, copy=False)
    return x, y


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip datasets",
        description="Record Minari datasets of the references and the strongest baselines.",
    )
    add_env(
        parser,
        [],
        ids=SHIPPED,
        repeat=True,
        fixed_sites=CLAIRVOYANT,
        what="a task to record (a dataset names it, for its reader to remake the env)",
        default_text="every ID of powertrip_env.SUITE_IDS",
    )
    parser.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help=f"comma-separated policy names ({','.join(DEFAULT_POLICIES)})",
    )
    add_episodes(parser, DEFAULT_EPISODES, "episodes per dataset")
    parser.add_argument(
        "--split", default=DEFAULT_SPLIT, help=f"trace days: {', '.join(SPLITS)} ({DEFAULT_SPLIT})"
    )
    add_seed(parser)
    add_out(
        parser,
        None,
        what="Minari's data folder",
        default_text="MINARI_DATASETS_PATH or ~/.minari/datasets",
    )
    add_force(parser, "replace datasets that exist (each once its new one is complete)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad arguments, 130 on Ctrl-C)."""
    args = _parser().parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    root = Path(args.out) if args.out else default_root()
    done: list[str] = []
    try:
        done = record(
            args.env or None,
            policies,
            episodes=args.episodes,
            split=args.split,
            seed=args.seed,
            root=root,
            force=args.force,
            log=sys.stdout,
        )
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted; the datasets listed above are complete, the one being recorded was "
            "not written",
            file=sys.stderr,
        )
        return 130
    print(f"{len(done)} datasets written to {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
