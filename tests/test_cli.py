"""The ``powertrip`` command line: every tool is one of its commands, run by the tool's ``main``."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from powertrip_env import cli


def test_help_names_every_command_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, command in cli.COMMANDS.items():
        assert f"  {name}" in out and command.summary in out


def test_no_command_prints_the_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: powertrip <command>" in capsys.readouterr().err


def test_an_unknown_command_is_named_with_the_ones_there_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["evalute", "--env", "PowerTrip-v0"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'evalute'" in err and "evaluate" in err and "headroom" in err


def test_the_issue_s_commands_are_all_there() -> None:
    wanted = {"train", "evaluate", "headroom", "fidelity", "sensitivity", "benchmark", "calibrate",
              "validate", "pretrain"}  # fmt: skip
    assert wanted <= set(cli.COMMANDS)


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_command_is_a_tool_whose_help_runs(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command's module has a ``main(argv)`` whose ``--help`` exits 0 under its own name."""
    tool = importlib.import_module(cli.COMMANDS[name].module)
    assert callable(tool.main)
    with pytest.raises(SystemExit) as stop:
        cli.main([name, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ")
    assert f"powertrip {name}" in out.splitlines()[0] or name == "train"


def test_a_command_s_exit_code_and_errors_are_the_tool_s(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["headroom", "--episodes", "0"]) == 2
    assert "--episodes 0: must be >= 1" in capsys.readouterr().err


def test_the_installed_script_runs() -> None:
    """``pip install`` put ``powertrip`` beside this interpreter (the console script)."""
    script = shutil.which("powertrip", path=str(Path(sys.executable).parent))
    assert script is not None, "pip install -e . installs the powertrip script"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "headroom" in done.stdout
