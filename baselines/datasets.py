"""Offline datasets (Minari) of the clairvoyant references and the strongest deployable baselines.

Command line::

    powertrip datasets                       # Optimiser, HorizonRule, ForecastMPC
    powertrip datasets --env PowerTrip-v0 --policies Optimiser --episodes 30
    powertrip datasets --out data/minari --force

For each task (``--env``, default every ID of ``powertrip_env.SUITE_IDS``) and each policy
(``--policies``, default ``DEFAULT_POLICIES``: the reference the benchmark scores against and the
two lookahead rules, its strongest deployable baselines), ``--episodes`` episodes of the
``--split`` days (train by default: imitation learns on train days and is judged on test days)
are played as ``powertrip_env.baselines.evaluate`` plays them, episode e reset with seed ``--seed +
e``, and
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
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import powertrip_env
from powertrip_env.atomic import OutputDirError, probe_writable, result_dir
from powertrip_env.baselines import candidates
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.models import EvaluationError
from powertrip_env.baselines.registry import LOOKAHEAD, REFERENCES, make_policy
from powertrip_env.baselines.report_args import make_env
from powertrip_env.episodes import SPLITS

NAMESPACE = "powertrip"
DATASET_VERSION = 0
"""The version of every dataset ID: bump it when what a step records changes."""
DEFAULT_POLICIES: tuple[str, ...] = ("Optimiser", *LOOKAHEAD)
"""The reference the benchmark scores against (score 1) and the strongest deployable rules."""
DEFAULT_EPISODES = 10
DEFAULT_SPLIT = "train"
DOCS = "docs/datasets.md"
CANDIDATE_INFO: tuple[str, ...] = (
    "candidate_features",  # (N_FEATURES,) float32: what the candidate-set agent observes
    "candidate_masks",  # (N_SLOTS, N) bool: the sets of its slots
    "candidate_slot",  # int64: nearest_slot(masks, action); -1 after the episode's end
    "candidate_exact",  # bool: the action is one of the slots' sets
)
DATA_FORMAT = "hdf5"
_INSTALL_HINT = "pip install 'powertrip-env[datasets]'"


class DatasetError(EvaluationError):
    """Bad input to a dataset command: an unknown ID or policy, an existing dataset, ..."""


# --------------------------------------------------------------------------- labels


def nearest_slot(masks: Any, action: Any) -> int:
    """The candidate slot that stands for ``action``: the imitation label of a step.

    ``masks`` is (S, N), each row a slot's set; ``action`` the (N,) 0/1 mask the policy played.
    The first slot whose set equals the action's, else the slot of highest Jaccard overlap
    |slot ∩ action| / |slot ∪ action| (two empty sets overlap fully), ties to the lowest index.
    Raises ``ValueError`` for shapes that do not fit.
    """
    sets = np.asarray(masks) != 0
    chosen = np.asarray(action) != 0
    if sets.ndim != 2 or sets.shape[0] < 1 or chosen.shape != sets.shape[1:]:
        raise ValueError(
            f"nearest_slot: masks {np.shape(masks)} and action {np.shape(action)} do not fit; "
            "give masks (S, N) with S >= 1 and action (N,)"
        )
    equal = np.flatnonzero((sets == chosen).all(axis=1))
    if equal.size:
        return int(equal[0])
    inter = (sets & chosen).sum(axis=1)
    union = (sets | chosen).sum(axis=1)
    overlap = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    return int(np.argmax(overlap))  # argmax: the first of the highest


def dataset_id(env_id: str, policy: str, split: str = DEFAULT_SPLIT) -> str:
    """``powertrip/<env ID>/<policy lower case>[-<split>]-v<DATASET_VERSION>``; the split is
    named unless it is ``train``. Raises ``DatasetError`` for an ID Minari would not parse."""
    name = policy.lower() if split == DEFAULT_SPLIT else f"{policy.lower()}-{split}"
    out = f"{NAMESPACE}/{env_id}/{name}-v{DATASET_VERSION}"
    parse = _minari().dataset.minari_dataset.parse_dataset_id
    try:
        parsed = parse(out)
    except ValueError:
        parsed = None
    if parsed != (f"{NAMESPACE}/{env_id}", name, DATASET_VERSION):
        raise DatasetError(
            f"{env_id!r} and {policy!r} make the dataset ID {out!r}, which Minari reads as "
            f"{parsed}; IDs and policy names may hold letters, digits, '-' and '_'"
        )
    return out


def candidate_layout() -> dict[str, Any]:
    """What the recorded candidate features mean, stored in each dataset's metadata;
    ``load_imitation`` refuses a dataset whose layout is not the installed code's."""
    rules = [["inf" if math.isinf(h) else h, m] for h, m in candidates.SLOT_RULES]
    return {
        "n_slots": int(candidates.N_SLOTS),
        "n_features": int(candidates.N_FEATURES),
        "slot_rules": rules,  # (horizon, margin) of slots 1..; slot 0 keeps the current set
        "slot_features": list(candidates.SLOT_FEATURES),
        "global_features": list(candidates.GLOBAL_FEATURES),
    }


# --------------------------------------------------------------------------- Minari


def _minari() -> Any:
    """``minari``, imported when needed: ``nearest_slot`` and the rest of the package run
    without it (it is the ``datasets`` extra)."""
    try:
        import minari
        import minari.dataset.minari_dataset
        import minari.namespace
    except ImportError:
        raise DatasetError(f"Minari is not installed: {_INSTALL_HINT}") from None
    try:
        import h5py  # noqa: F401  # Minari's default storage, its 'hdf5' extra
    except ImportError:
        raise DatasetError(
            f"h5py (Minari's HDF5 storage) is not installed: {_INSTALL_HINT}"
        ) from None
    return minari


def default_root() -> Path:
    """Minari's data folder: ``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


@contextlib.contextmanager
def minari_root(root: str | os.PathLike[str] | None) -> Iterator[Path]:
    """Point Minari's functions (which read ``MINARI_DATASETS_PATH`` on every call) at ``root``
    for the block; ``None`` keeps its own folder."""
    if root is None:
        yield default_root()
        return
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = os.fspath(root)
    try:
        yield Path(root)
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def _namespaces(env_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            NAMESPACE,
            {
                "description": "powertrip-env: episodes of geo-distributed training's site "
                "choices (which datacenters train each round), played by the clairvoyant "
                "references and the strongest deployable baselines, for offline RL and "
                f"imitation. See {DOCS} in powertrip-env.",
                "docs": DOCS,
            },
        ),
        (
            f"{NAMESPACE}/{env_id}",
            {
                "description": f"Episodes of the Gymnasium environment {env_id} "
                "(import powertrip_env to register it), one dataset per policy and split. "
                f"See {DOCS} in powertrip-env.",
                "env_id": env_id,
                "docs": DOCS,
            },
        ),
    ]


def _write_namespaces(env_id: str) -> None:
    """Create (or bring up to date) the namespaces of ``env_id``'s datasets in Minari's
    current folder, with their descriptions."""
    namespace = _minari().namespace
    for name, meta in _namespaces(env_id):
        if name not in namespace.list_local_namespaces():
            namespace.create_namespace(name, **meta)
        elif namespace.get_namespace_metadata(name) != meta:
            namespace.update_namespace_metadata(name, **meta)


# --------------------------------------------------------------------------- recording


@dataclasses.dataclass
class Recording:
    """One dataset in memory before it is written: its episodes as Minari buffers."""

    dataset_id: str
    env_id: str
    policy: str
    buffers: list[Any]
    seeds: list[int]
    tta_h: list[float]
    success: list[bool]
    exact: int  # decisions whose action was one of the candidate slots' sets
    decisions: int  # steps, over every episode


def _neutral_candidates(n_sites: int) -> dict[str, Any]:
    """The candidate infos of the entry after the episode's end, where nothing is decided."""
    return {
        "candidate_features": np.zeros(candidates.N_FEATURES, dtype=np.float32),
        "candidate_masks": np.zeros((candidates.N_SLOTS, n_sites), dtype=bool),
        "candidate_slot": np.int64(-1),
        "candidate_exact": np.array(False),
    }


def _copy_info(info: Mapping[str, Any]) -> dict[str, Any]:
    return {key: np.array(value) for key, value in info.items()}  # never a view of the env's


def record_episode(env: gym.Env, policy: Policy, seed: int) -> tuple[Any, dict[str, Any]]:
    """Play one episode of ``policy`` from ``env.reset(seed=seed)``; its Minari
    ``EpisodeBuffer`` and its outcome (``tta_h``, ``success``, ``exact``: decisions whose action
    was a slot's set)."""
    _minari()
    from minari.data_collector import EpisodeBuffer

    obs, info = env.reset(seed=seed)
    policy.reset(env)
    width = env.action_space.shape[0]
    observations = [np.array(obs)]
    actions: list[np.ndarray] = []
    rewards: list[float] = []
    terminations: list[bool] = []
    truncations: list[bool] = []
    infos: dict[str, list[Any]] = {}
    exact = 0
    while True:
        options = candidates.build(env.unwrapped)  # before the policy acts: what it saw
        action = np.asarray(policy.act(obs, info))
        if action.shape != (width,):
            raise DatasetError(
                f"policy {policy.name!r} returned an action of shape {action.shape}; the env "
                f"takes ({width},)"
            )
        action = (action != 0).astype(env.action_space.dtype)
        slot = nearest_slot(options.masks, action)
        hit = bool(np.array_equal(options.masks[slot], action != 0))
        exact += hit
        step_info = {
            **_copy_info(info),
            "candidate_features": np.array(options.features, dtype=np.float32),
            "candidate_masks": np.array(options.masks, dtype=bool),
            "candidate_slot": np.int64(slot),
            "candidate_exact": np.array(hit),
        }
        for key, value in step_info.items():
            infos.setdefault(key, []).append(value)
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(np.array(obs))
        actions.append(action)
        rewards.append(float(reward))
        terminations.append(bool(terminated))
        truncations.append(bool(truncated))
        if terminated or truncated:
            break
    for key, value in {**_copy_info(info), **_neutral_candidates(width)}.items():
        infos[key].append(value)
    buffer = EpisodeBuffer(
        seed=int(seed),
        observations=observations,
        actions=actions,
        rewards=rewards,
        terminations=terminations,
        truncations=truncations,
        infos=infos,
    )
    outcome = {"tta_h": float(info["tta_h"]), "success": bool(terminated), "exact": exact}
    return buffer, outcome


@dataclasses.dataclass(frozen=True)
class _Settings:
    """How every dataset of one ``record`` call is played and written."""

    episodes: int
    split: str
    seed: int
    env_kwargs: dict[str, Any]  # what gym.make is given: the caller's, the split, flat obs
    force: bool


@dataclasses.dataclass(frozen=True)
class _Plan:
    """One dataset to record, checked: its env, policy and where it goes."""

    env_id: str
    policy: str
    dataset_id: str
    path: Path  # the dataset's folder: <root>/<dataset ID>


def _check_settings(env_ids: list[str], policies: list[str], run: _Settings) -> None:
    if not env_ids:
        raise DatasetError("argument --env: give at least one environment ID")
    for env_id in env_ids:
        if env_id not in powertrip_env.ENV_IDS:
            raise DatasetError(
                f"argument --env: {env_id!r} is not a shipped PowerTrip ID; allowed: "
                f"{', '.join(powertrip_env.ENV_IDS)} (default: the suite tasks "
                f"{', '.join(powertrip_env.SUITE_IDS)})"
            )
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


def _plan(env_ids: list[str], policies: list[str], run: _Settings, root: Path) -> list[_Plan]:
    """Every check that can fail, before any episode runs: IDs, policies, episodes, seed, split,
    the output folder, and datasets that exist already (unless ``force``)."""
    _minari()
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


def _record(plan: _Plan, run: _Settings) -> tuple[Recording, Any]:
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


def _metadata(recording: Recording, run: _Settings) -> dict[str, Any]:
    """What Minari's metadata does not say: under one key, ``powertrip``."""
    return {
        "powertrip": {
            "env_id": recording.env_id,
            "policy": recording.policy,
            "clairvoyant": recording.policy in REFERENCES,
            "split": run.split,
            "seed": run.seed,
            "episode_seeds": recording.seeds,  # episode e was reset with seed + e
            "episode_tta_h": recording.tta_h,
            "episode_success": recording.success,
            "env_kwargs": run.env_kwargs,
            "candidate_exact_share": recording.exact / max(recording.decisions, 1),
            "candidate_layout": candidate_layout(),
            "candidate_info": list(CANDIDATE_INFO),
            "powertrip_env_version": powertrip_env.__version__,
            "dataset_version": DATASET_VERSION,
            "docs": DOCS,
        }
    }


def _description(recording: Recording, split: str) -> str:
    kind = (
        "a clairvoyant reference (it read the episode's future: its actions are not deployable)"
        if recording.policy in REFERENCES
        else "a deployable baseline (it read only what is known at each round)"
    )
    return (
        f"{len(recording.buffers)} episodes of {recording.env_id} on its {split} days played by "
        f"{recording.policy}, {kind}. Observations are the env's flat observation, actions the "
        "(N,) 0/1 sites chosen; infos add the candidate-set agent's features and the slot that "
        f"stands for the action. See {DOCS} in powertrip-env."
    )


def _stage(recording: Recording, spec: Any, run: _Settings, staging: Path) -> Path:
    """Minari writes the dataset under ``staging``; returns its ``data`` folder."""
    minari = _minari()
    eval_spec = dataclasses.replace(spec, kwargs={**spec.kwargs, "split": "test"})
    with minari_root(staging), warnings.catch_warnings():
        # No e-mail or web link to give; everything else Minari asks for is given.
        warnings.filterwarnings(
            "ignore", r"`(author_email|code_permalink)` is set to None", UserWarning
        )
        dataset = minari.create_dataset_from_buffers(
            recording.dataset_id,
            recording.buffers,
            env=spec,
            eval_env=eval_spec,
            algorithm_name=recording.policy,
            author="powertrip-env",
            description=_description(recording, run.split),
            data_format=DATA_FORMAT,
            requirements=[f"powertrip-env=={powertrip_env.__version__}"],
        )
        dataset.storage.update_metadata(_metadata(recording, run))
    return staging / recording.dataset_id / "data"


def _write(recording: Recording, spec: Any, run: _Settings, path: Path, root: Path) -> None:
    """Write ``recording`` as a Minari dataset at ``path`` (``<root>/<ID>``), whole or not at
    all: Minari writes it into a hidden staging folder under ``root``, whose ``data`` folder
    then replaces ``path/data`` in one rename (``result_dir``); the namespaces' descriptions
    follow. A stop before the rename leaves no new folder behind."""
    new = [p for p in (path, *path.parents) if root in p.parents and not p.exists()]
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".powertrip-staging-"))
    try:
        staged = _stage(recording, spec, run, staging)
        with result_dir(path / "data", force=run.force) as folder:
            for item in staged.iterdir():
                os.replace(item, folder / item.name)
        with minari_root(root):
            _write_namespaces(recording.env_id)
    except BaseException as exc:
        if not (path / "data").exists():  # the folders made for a dataset that never came
            for folder in new:
                with contextlib.suppress(OSError):
                    folder.rmdir()
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
    run = _Settings(episodes, split, seed, kwargs, force)
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
    minari = _minari()
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
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="a shipped ID; may repeat (default: every ID of powertrip_env.SUITE_IDS)",
    )
    parser.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help=f"comma-separated policy names ({','.join(DEFAULT_POLICIES)})",
    )
    parser.add_argument(
        "--episodes", type=int, default=DEFAULT_EPISODES, help=f"per dataset ({DEFAULT_EPISODES})"
    )
    parser.add_argument(
        "--split", default=DEFAULT_SPLIT, help=f"trace days: {', '.join(SPLITS)} ({DEFAULT_SPLIT})"
    )
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    parser.add_argument(
        "--out",
        default=None,
        help="Minari's data folder (default: MINARI_DATASETS_PATH or ~/.minari/datasets)",
    )
    parser.add_argument("--force", action="store_true", help="replace datasets that exist")
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
