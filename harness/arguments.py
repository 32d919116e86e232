"""What every tool of the harness checks the same way: the ID, the environment, the shared
report arguments and the output folder. Each turns bad input into one ``EvaluationError`` (or an
argparse error, exit 2) naming the argument, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import registry

import powertrip_env
from powertrip_env.atomic import OutputDirError, check_output_dir
from powertrip_env.errors import EvaluationError, ScenarioError, TraceError


def powertrip_env_ids() -> list[str]:
    """Registered Gymnasium IDs whose environment is ``PowerTripEnv``."""
    ids = [eid for eid, spec in registry.items() if spec.entry_point == powertrip_env.ENTRY_POINT]
    return sorted(ids, key=lambda eid: (eid not in powertrip_env.ENV_IDS, eid))


def check_env_id(env_id: str) -> None:
    if env_id not in powertrip_env_ids():
        raise EvaluationError(
            f"unknown environment {env_id!r}; registered PowerTrip IDs: "
            f"{', '.join(powertrip_env_ids())}"
        )


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` for the tools: a bad scenario, trace or argument becomes one
    ``EvaluationError`` naming what was wrong, which the command lines print as one line."""
    try:
        return gym.make(env_id, **kwargs)
    except (ScenarioError, TraceError) as exc:
        raise EvaluationError(str(exc)) from None
    except (TypeError, ValueError, gym.error.Error) as exc:
        raise EvaluationError(f"cannot make {env_id} with {kwargs}: {exc}") from None


def report_parser(prog: str, description: str, episodes: int) -> argparse.ArgumentParser:
    """The arguments every report of one shipped ID shares: ``--env``, ``--episodes``, ``--seed``
    (checked by ``parse_report_args``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--env", default="PowerTrip-v0", help="registered ID (PowerTrip-v0)")
    parser.add_argument(
        "--episodes", type=int, default=episodes, help=f"paired test episodes ({episodes})"
    )
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    return parser


def parse_report_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """Parse, refusing an ID that is not shipped and fewer than one episode (exit 2)."""
    args = parser.parse_args(argv)
    if args.env not in powertrip_env.ENV_IDS:
        parser.error(
            f"argument --env: {args.env!r} is not one of {', '.join(powertrip_env.ENV_IDS)}"
        )
    if args.episodes < 1:
        parser.error(f"argument --episodes: {args.episodes} must be >= 1")
    return args


def report_cli(compute: Callable[[], dict[str, Any]], to_markdown: Callable[..., str]) -> int:
    """Run a report, print its table and, as the last line, its JSON; exit 2 on bad input."""
    try:
        report = compute()
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(report))
    print(json.dumps(report))
    return 0


def check_out_dir(out_dir: Path, force: bool) -> None:
    """Refuse a results folder that holds an earlier run, or one that cannot be written.

    Checked before any episode runs, so a long evaluation does not fail at its end; nothing is
    created here (``write_outputs`` moves the finished set into place).
    """
    try:
        check_output_dir(out_dir, force=force)
    except OutputDirError as exc:
        raise EvaluationError(str(exc)) from None
