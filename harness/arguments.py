"""What every tool checks the same way: its common options, the ID, the environment, the
shared report arguments and the output folder.

**The common options.** ``--env``, ``--episodes``, ``--seed``, ``--out``, ``--force`` and
``--no-progress`` mean the same thing in every tool (``powertrip evaluate``, ``benchmark``,
``headroom``, ``fidelity``, ``sensitivity``, ``calibrate``, ``validate``, ``tune``,
``datasets``, ``imitation``, ``train`` and the maintainers' ``readme-tables`` and
``pretrain``), so each is declared here once, with one help text and one check: ``add_env``,
``add_episodes``, ``add_seed``, ``add_out``, ``add_force`` and ``add_no_progress``. A tool
gives what is its own: its defaults, and a word of help where its meaning is narrower (what
``--episodes`` counts, what ``--force`` replaces). Every check runs while argparse parses, so a
bad value is an argparse error (exit 2) naming the argument, the value and what is allowed,
before anything runs.

**Which IDs ``--env`` takes: every registered PowerTrip ID** (``powertrip_env_ids``: every
Gymnasium registration whose entry point is ``PowerTripEnv``: the shipped ``ENV_IDS`` and
``SAMPLED_ENV_IDS``, and a user's own registrations of the env alike), because that is what
``gym.make`` runs, and a result on an ID is reproducible by whoever registers it the same way.
A tool narrows that set only for a reason of one of two kinds, which its ``--help`` states:

* its output is defined on a fixed list of IDs: ``benchmark`` scores the suite's tasks
  (``SUITE``, ``powertrip_env.suite_ids()``); ``datasets`` names each Minari dataset by its ID,
  which a reader's ``recover_environment`` remakes, so it takes only IDs every install
  registers (``SHIPPED``), and ``readme-tables`` fills the docs' blocks, which exist for the
  shipped IDs (``SHIPPED``);
* its computation needs one site catalogue for every episode (``fixed_sites``: the clairvoyant
  references, real training, the native vector env), so it refuses an ID that draws a new
  catalogue per episode (``draws_sites``), saying why.

Each bad input a run meets later becomes one ``EvaluationError`` (``make_env``,
``check_out_dir``), which the command lines print as one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id, registry

import powertrip_env
from powertrip_env.atomic import OutputDirError, check_output_dir
from powertrip_env.errors import EvaluationError, ScenarioError, TraceError
from powertrip_env.scenario import scenario_names
from powertrip_env.tasks import is_entry_point

REGISTERED = "registered"
"""Every registered PowerTrip ID: the rule."""
SHIPPED = "shipped"
"""The IDs ``import powertrip_env`` registers, for an output others must remake by its ID."""
SUITE = "suite"
"""The benchmark's tasks of every track, as registered (``powertrip_env.suite_ids()``)."""

_KINDS = {
    REGISTERED: ("PowerTrip environment", "registered PowerTrip IDs"),
    SHIPPED: ("shipped PowerTrip ID", "the IDs powertrip_env registers"),
    SUITE: (
        "suite task",
        "the benchmark's tasks, powertrip_env.suite_ids()",
    ),
}
"""Per set of IDs: what one of them is called, and the list of them."""

# The reasons a tool needs one site catalogue (``fixed_sites``), as its help and errors give them.
CLAIRVOYANT = "the clairvoyant references plan on one catalogue"
REAL_TRAINING = "real training keeps one model per catalogue"

EPISODE_SEED = "episode e uses seed + e"
RESULTS_FORCE = "replace the results already in --out (once the new set is complete)"


def powertrip_env_ids() -> list[str]:
    """Registered Gymnasium IDs whose environment is ``PowerTripEnv``: the shipped ones in the
    package's order (the flagship first), then a user's own, by name."""
    shipped = [*powertrip_env.ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS]
    ids = [eid for eid, spec in registry.items() if is_entry_point(spec.entry_point)]
    return sorted(
        ids, key=lambda eid: (shipped.index(eid) if eid in shipped else len(shipped), eid)
    )


def draws_sites(env_id: str) -> bool:
    """Whether the registered ``env_id`` draws a new site catalogue every episode."""
    return gym.spec(env_id).kwargs.get("sites") is not None


def allowed_env_ids(ids: str = REGISTERED, *, fixed_sites: bool = False) -> list[str]:
    """The IDs a tool's ``--env`` takes: those of ``ids`` (``REGISTERED``, ``SHIPPED`` or
    ``SUITE``), without the ones that draw their sites if the tool needs ``fixed_sites``."""
    registered = powertrip_env_ids()
    shipped = {*powertrip_env.ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS}
    chosen = {
        REGISTERED: registered,
        SHIPPED: [eid for eid in registered if eid in shipped],
        SUITE: [eid for eid in powertrip_env.suite_ids() if eid in registered],
    }[ids]
    return [eid for eid in chosen if not (fixed_sites and draws_sites(eid))]


def env_id_problem(
    env_id: str,
    ids: str = REGISTERED,
    *,
    fixed_sites: str | None = None,
    scenario_hint: bool = False,
) -> str | None:
    """Why a tool refuses ``env_id`` (one clause naming the value and what is allowed), or
    None. ``fixed_sites`` is the tool's reason to need one site catalogue, if it does;
    ``scenario_hint`` points a scenario given as the ID to the tool's ``--scenario``."""
    allowed = allowed_env_ids(ids, fixed_sites=fixed_sites is not None)
    if env_id in allowed:
        return None
    noun, listing = _KINDS[ids]
    if fixed_sites is not None:
        noun, listing = f"{noun} with one site catalogue", f"{listing} with one site catalogue"
    allowed_text = f"allowed ({listing}): {', '.join(allowed)}"
    if env_id in allowed_env_ids(ids):
        return f"{env_id!r} draws a site catalogue per episode; {fixed_sites}; {allowed_text}"
    if env_id in registry:
        return f"{env_id!r} is not a {noun}; {allowed_text}"
    if scenario_hint and _looks_like_a_scenario(env_id):
        return (
            f"{env_id!r} looks like a scenario, but --env takes a registered environment ID; "
            f"give the scenario with --scenario: --env PowerTrip-v0 --scenario {env_id}; "
            f"{allowed_text}"
        )
    return f"unknown environment {env_id!r}{_other_version(env_id, allowed)}; {allowed_text}"


def _looks_like_a_scenario(env_id: str) -> bool:
    """Whether an ``--env`` value is a scenario (a TOML file or a shipped name): passing the
    scenario as the environment is the natural first guess, and the generic message would not
    say that ``--scenario`` exists."""
    return env_id.endswith(".toml") or env_id in scenario_names() or Path(env_id).is_file()


def _other_version(env_id: str, allowed: Sequence[str]) -> str:
    """A note naming the allowed IDs that are later versions of ``env_id`` (or, for a name
    without a version, any): an ID's version changes when its results do
    (tests/test_versions.py), so an old one is a likely mistake."""
    try:
        namespace, name, version = parse_env_id(env_id)
    except gym.error.Error:
        return ""
    later = []
    for eid in allowed:
        other_namespace, other_name, other_version = parse_env_id(eid)
        if (other_namespace, other_name) == (namespace, name) and (
            version is None or (other_version or 0) > version
        ):
            later.append(eid)
    if not later:
        return ""
    return f" (now {' or '.join(later)}: an ID's version changes when its results do)"


def check_env_id(env_id: str, ids: str = REGISTERED) -> None:
    """``env_id_problem`` for callers of the Python API: an ``EvaluationError``."""
    problem = env_id_problem(env_id, ids)
    if problem is not None:
        raise EvaluationError(problem)


def env_id_type(
    ids: str = REGISTERED,
    *,
    fixed_sites: str | None = None,
    scenario_hint: bool = False,
    also: Collection[str] = (),
) -> Callable[[str], str]:
    """argparse ``type=`` of an ID option: the ID if ``env_id_problem`` has none (or it is one
    of the words in ``also``, such as ``all``), else an argparse error naming it."""

    def env_id(text: str) -> str:
        if text in also:
            return text
        problem = env_id_problem(text, ids, fixed_sites=fixed_sites, scenario_hint=scenario_hint)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return text

    return env_id


def positive_int(text: str) -> int:
    """argparse ``type=`` for counts that must be at least 1 (``--episodes``, ``--timesteps``)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse ``type=`` for counts where 0 means "off" (``--eval-freq``), and seeds (numpy
    and Gymnasium refuse a negative one)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or a positive integer, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def _with_default(text: str, default_text: str | None) -> str:
    """``text`` and its default: ``%(default)s``, or the tool's words for a default made at run
    time. Either way the help holds ``%(default)``, the mark by which a parser with
    ``ArgumentDefaultsHelpFormatter`` (train's, imitation's) knows not to add a second one;
    ``%(default).0s`` prints nothing."""
    if default_text is None:
        return f"{text} (default: %(default)s)"
    return f"{text} (default: {default_text})%(default).0s"


def add_env(
    parser: argparse.ArgumentParser,
    default: str | None = "PowerTrip-v0",
    *,
    ids: str = REGISTERED,
    repeat: bool = False,
    fixed_sites: str | None = None,
    scenario_hint: bool = False,
    also: Collection[str] = (),
    what: str = "",
    default_text: str | None = None,
    flag: str = "--env",
) -> None:
    """``--env``: one ID (or, with ``repeat``, a list of them) checked by ``env_id_type``.

    ``what`` leads the help with what the tool does with the ID; ``default_text`` describes a
    default that is not one ID (with ``repeat``, e.g. "every suite task"). ``fixed_sites`` is
    the tool's reason to need one site catalogue, which the help and the error give.
    """
    noun = {
        REGISTERED: "a registered PowerTrip ID",
        SHIPPED: "a shipped PowerTrip ID",
        SUITE: "a task of the benchmark, powertrip_env.suite_ids()",
    }[ids]
    if fixed_sites is not None:
        noun += f" with one site catalogue ({fixed_sites})"
    text = f"{what}: {noun}" if what else noun
    if also:
        text += f", or {' or '.join(repr(word) for word in also)}"
    if repeat:
        text += "; may repeat"
    parser.add_argument(
        flag,
        action="append" if repeat else "store",
        default=default,
        metavar="ID",
        type=env_id_type(ids, fixed_sites=fixed_sites, scenario_hint=scenario_hint, also=also),
        help=_with_default(text, default_text),
    )


def add_episodes(
    parser: argparse.ArgumentParser, default: int, what: str = "paired test episodes"
) -> None:
    """``--episodes``: a positive count, of what ``what`` says."""
    parser.add_argument(
        "--episodes", type=positive_int, default=default, help=_with_default(what, None)
    )


def add_seed(parser: argparse.ArgumentParser, what: str = EPISODE_SEED) -> None:
    """``--seed``: 0 or more (numpy and Gymnasium refuse a negative seed); default 0."""
    parser.add_argument("--seed", type=non_negative_int, default=0, help=_with_default(what, None))


def add_out(
    parser: argparse.ArgumentParser,
    default: str | None,
    *,
    what: str = "output folder, new or empty",
    default_text: str | None = None,
    required: bool = False,
) -> None:
    """``--out``: where the tool writes; ``default_text`` describes a default made at run time."""
    text = f"{what}%(default).0s" if required else _with_default(what, default_text)
    parser.add_argument("--out", default=default, required=required, help=text)


def add_force(parser: argparse.ArgumentParser, what: str = RESULTS_FORCE) -> None:
    """``--force``: replace what ``--out`` holds, as ``what`` says."""
    parser.add_argument("--force", action="store_true", help=what)


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    """``--no-progress``: no progress bar (one is drawn only when stderr is a terminal)."""
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar on stderr (drawn only on a terminal)",
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


def report_parser(
    prog: str, description: str, episodes: int, *, scenario: bool = False
) -> argparse.ArgumentParser:
    """The arguments every report of one ID shares: ``--env``, ``--episodes``, ``--seed`` and,
    if the report runs on another scenario, ``--scenario``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_env(parser, fixed_sites=CLAIRVOYANT, scenario_hint=scenario)
    add_episodes(parser, episodes)
    add_seed(parser)
    if scenario:
        parser.add_argument("--scenario", default=None, help="a scenario name or TOML file")
    return parser


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
