"""Checks of ``train_agent.py``'s arguments, done before anything is trained.

A training run that dies ten minutes in because of a typo in a policy name wastes the ten
minutes; one that dies with a traceback from deep inside Gymnasium does not say which argument
was wrong. Each check here either returns the value to use or raises ``UsageError`` with one line
that names the argument, the bad value and what is allowed; the script prints it and exits 2,
like argparse does for its own errors.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import registry

from powertrip_env import ENTRY_POINT, ENV_IDS, SAMPLED_ENV_IDS
from powertrip_env.env import PowerTripEnv


class UsageError(Exception):
    """A command-line argument that cannot be used; ``str()`` is the one-line message."""


def positive_int(text: str) -> int:
    """argparse ``type=`` for counts that must be at least 1 (``--timesteps``, ``--n-envs``)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse ``type=`` for counts where 0 means "off" (``--eval-freq``, ``--final-episodes``)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or a positive integer, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def check_env(env_id: str, env_kwargs: Mapping[str, Any]) -> int:
    """Build the environment once to check ID, scenario and kwargs; returns its site count."""
    known = ", ".join([*ENV_IDS, *SAMPLED_ENV_IDS])
    if env_id not in registry:
        raise UsageError(f"argument --env: unknown environment {env_id!r}; allowed: {known}")
    if registry[env_id].entry_point not in (ENTRY_POINT, PowerTripEnv):
        raise UsageError(
            f"argument --env: {env_id!r} is not a PowerTrip environment; allowed: {known}"
        )
    try:
        env = gym.make(env_id, **env_kwargs)
    except (ValueError, TypeError, OSError) as exc:
        raise UsageError(f"{_argument_for(str(exc), env_kwargs)}{_one_line(exc)}") from None
    n_sites = int(env.unwrapped.params.n_sites)
    env.close()
    return n_sites


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


def check_final_policies(spec: str, n_sites: int) -> list[str]:
    """Baseline names for the final table, each checked: a comma-separated list in which
    ``all`` stands for every deployable baseline and ``references`` for the clairvoyant ones."""
    from baselines.policies import REFERENCES, default_policy_names, make_policy

    names: list[str] = []
    for name in (part.strip() for part in spec.split(",")):
        if name.lower() == "all":
            names += default_policy_names(n_sites)
        elif name.lower() == "references":
            names += REFERENCES
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


def check_out_dir(path: str | os.PathLike[str]) -> Path:
    """Create the output directory (and parents) or explain why it cannot be used."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"argument --out: cannot create {os.fspath(path)!r}: {exc.strerror}"
        ) from None
    if not os.access(p, os.W_OK):
        raise UsageError(f"argument --out: directory {os.fspath(path)!r} is not writable")
    return p


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
