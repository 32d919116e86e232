"""One dataset recorded: episodes played into Minari buffers, then staged as Minari's files.

``powertrip_env.harness.datasets.build`` checks the arguments, calls ``record_episode`` for each
episode and moves what ``stage_dataset`` wrote into place; this module is the part in between,
what a step and a dataset hold. Each step records the candidate-set agent's view of the decision
(``CANDIDATE_INFO``) with ``nearest_slot`` as its imitation label, and each dataset the
candidate layout (``candidate_layout``) its features were computed with, which is what lets a
loader refuse a dataset of another layout.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import powertrip_env
from powertrip_env.baselines import candidates
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import REFERENCES
from powertrip_env.harness.datasets.store import (
    DATASET_VERSION,
    DOCS,
    DatasetError,
    minari_root,
    require_minari,
)

CANDIDATE_INFO: tuple[str, ...] = (
    "candidate_features",  # (N_FEATURES,) float32: what the candidate-set agent observes
    "candidate_masks",  # (N_SLOTS, N) bool: the sets of its slots
    "candidate_slot",  # int64: nearest_slot(masks, action); -1 after the episode's end
    "candidate_exact",  # bool: the action is one of the slots' sets
)
DATA_FORMAT = "hdf5"


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


@dataclasses.dataclass(frozen=True)
class RecordSettings:
    """How every dataset of one ``record`` call is played and written."""

    episodes: int
    split: str
    seed: int
    env_kwargs: dict[str, Any]  # what gym.make is given: the caller's, the split, flat obs
    force: bool


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
    require_minari()
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


# --------------------------------------------------------------------------- staging


def _metadata(recording: Recording, run: RecordSettings) -> dict[str, Any]:
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


def stage_dataset(recording: Recording, spec: Any, run: RecordSettings, staging: Path) -> Path:
    """Minari writes the dataset under ``staging``; returns its ``data`` folder."""
    minari = require_minari()
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
