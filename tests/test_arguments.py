"""The tools' common options: declared once (``powertrip_env.harness.arguments``), checked the
same way everywhere, with one rule for which IDs ``--env`` takes.

Every command's parser is caught as it parses (``parse_args`` is patched to stop there), so
these tests read what each tool really declares, not a list kept beside it.
"""

from __future__ import annotations

import argparse
import importlib

import pytest
from gymnasium.envs.registration import register, registry

import powertrip_env
from powertrip_env import cli
from powertrip_env.harness import arguments
from powertrip_env.harness.arguments import (
    REGISTERED,
    SHIPPED,
    SUITE,
    allowed_env_ids,
    env_id_problem,
    non_negative_int,
    positive_int,
)

TOOLS = [name for name in [*cli.COMMANDS, *cli.MAINTAINER_COMMANDS] if name != "docs"]
"""Every command with the common options (``powertrip docs`` has none of them)."""
EXTRA = {  # required options
    "imitation": ["--out", "unused"],
    "scratch": ["--board", "unused"],
    "multijob": ["--out", "unused"],
}
# The tools without --env: pretrain trains and tables the suite's tasks, fixed; multijob's
# --task names a multi-job task (powertrip_env.multijob.TASKS), which is not a Gymnasium ID.
NO_ENV = ("pretrain", "multijob")
# The tools whose --env takes fewer than every registered PowerTrip ID, and the set they take
# (the module docstring of harness.arguments says why each).
NARROWER = {
    "benchmark": allowed_env_ids(SUITE),
    "scratch": allowed_env_ids(SUITE),
    "datasets": allowed_env_ids(SHIPPED, fixed_sites=True),
    "readme-tables": allowed_env_ids(SHIPPED, fixed_sites=True),
    "headroom": allowed_env_ids(fixed_sites=True),
    "fidelity": allowed_env_ids(fixed_sites=True),
    "sensitivity": allowed_env_ids(fixed_sites=True),
    "calibrate": allowed_env_ids(fixed_sites=True),
    "validate": allowed_env_ids(fixed_sites=True),
    "imitation": allowed_env_ids(fixed_sites=True),
}


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(name: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser command ``name`` builds, caught when it parses."""

    def caught(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(self)

    command = cli.COMMANDS.get(name) or cli.MAINTAINER_COMMANDS[name]
    module = importlib.import_module(command.module)
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", caught)
        with pytest.raises(_Parsed) as stop:
            module.main([])
    return stop.value.parser


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def _exit(name: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        cli.main([name, *argv, *EXTRA.get(name, [])])
    return int(stop.value.code), capsys.readouterr().err


@pytest.mark.parametrize("name", TOOLS)
def test_each_tool_declares_the_common_options_with_the_shared_checks(name, monkeypatch):
    parser = parser_of(name, monkeypatch)
    env = _option(parser, "--env")
    if name not in NO_ENV:
        assert env is not None and env.type.__qualname__.startswith("env_id_type.")
    assert _option(parser, "--episodes") is None or _option(parser, "--episodes").type is (
        positive_int
    )
    assert _option(parser, "--seed").type is non_negative_int
    progress = _option(parser, "--no-progress")
    assert progress is None or progress.help == _option(arguments_parser(), "--no-progress").help
    for flag in ("--env", "--episodes", "--seed", "--out", "--force", "--no-progress"):
        action = _option(parser, flag)
        assert action is None or action.help, f"{name} {flag} has no help"


def arguments_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    arguments.add_no_progress(parser)
    return parser


@pytest.mark.parametrize("name", [t for t in TOOLS if t not in NO_ENV])
def test_an_unknown_id_is_one_argparse_error_naming_what_each_tool_takes(name, capsys):
    code, err = _exit(name, ["--env", "Nope-v0"], capsys)
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert "argument --env: unknown environment 'Nope-v0'; allowed (" in line, err
    allowed = NARROWER.get(name, allowed_env_ids(REGISTERED))
    assert line.endswith(": " + ", ".join(allowed) + (" (see --help)" if name == "train" else ""))


@pytest.mark.parametrize("name", TOOLS)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--episodes", "0"], "argument --episodes: must be a positive integer, got 0"),
        (["--seed", "-1"], "argument --seed: must be 0 or a positive integer, got -1"),
        (["--seed", "one"], "argument --seed: must be an integer, got 'one'"),
    ],
)
def test_bad_counts_are_refused_alike_by_every_tool(name, argv, message, monkeypatch, capsys):
    if _option(parser_of(name, monkeypatch), argv[0]) is None:
        pytest.skip(f"{name} has no {argv[0]}")
    code, err = _exit(name, argv, capsys)
    assert code == 2 and message in err, err


def test_the_rule_every_registered_powertrip_id_including_a_user_s(capsys) -> None:
    """A user's own registration of the env is an ID like the shipped ones, except where a
    tool's output is defined on a fixed list (the suite, the shipped IDs)."""
    importlib.import_module("powertrip_env.env")  # whose docstring lists the IDs at import
    register(id="MyTrip-v0", entry_point=powertrip_env.ENTRY_POINT, kwargs={"scenario": "lora"})
    try:
        assert "MyTrip-v0" in allowed_env_ids(REGISTERED, fixed_sites=True)
        assert env_id_problem("MyTrip-v0") is None
        assert "is not a suite task" in env_id_problem("MyTrip-v0", SUITE)
        assert "is not a shipped PowerTrip ID" in env_id_problem("MyTrip-v0", SHIPPED)
        code, err = _exit("benchmark", ["--env", "MyTrip-v0"], capsys)
        assert code == 2 and "argument --env: 'MyTrip-v0' is not a suite task" in err
    finally:
        del registry["MyTrip-v0"]
    assert "MyTrip-v0" not in allowed_env_ids()


def test_the_id_sets_and_their_refusals() -> None:
    assert allowed_env_ids()[0] == "PowerTrip-v0"  # the package's order, the flagship first
    assert set(allowed_env_ids(SHIPPED)) == {
        *powertrip_env.ENV_IDS,
        *powertrip_env.SAMPLED_ENV_IDS,
    }
    assert allowed_env_ids(SUITE) == [
        *powertrip_env.SUITE_IDS,
        *powertrip_env.MEASURED_SUITE_IDS,
        *powertrip_env.MOVING_SUITE_IDS,
        *powertrip_env.CARBON_SUITE_IDS,
    ]
    assert set(allowed_env_ids(SHIPPED, fixed_sites=True)) == set(powertrip_env.ENV_IDS)
    why = "the clairvoyant references plan on one catalogue"
    sampled = env_id_problem("PowerTrip-Random-v0", fixed_sites=why)
    assert sampled.startswith("'PowerTrip-Random-v0' draws a site catalogue per episode; " + why)
    assert env_id_problem("CartPole-v1").startswith("'CartPole-v1' is not a PowerTrip env")
    hint = env_id_problem("default", scenario_hint=True)
    assert "looks like a scenario" in hint and "--scenario default" in hint
    assert "(now PowerTrip-Digits-v1:" in env_id_problem("PowerTrip-Digits-v0")
    assert "(now" not in env_id_problem("PowerTrip-v9")
