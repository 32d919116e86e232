"""The ``powertrip`` command line: every tool is one of its commands, run by the tool's ``main``."""

from __future__ import annotations

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
              "validate"}  # fmt: skip
    assert wanted <= set(cli.COMMANDS)
    assert set(cli.MAINTAINER_COMMANDS) == {"docs", "readme-tables", "pretrain"}
    assert not set(cli.COMMANDS) & set(cli.MAINTAINER_COMMANDS)
    assert all(c.module.startswith("maintainers.") for c in cli.MAINTAINER_COMMANDS.values())
    assert not any(c.module.startswith("maintainers") for c in cli.COMMANDS.values())


@pytest.mark.parametrize("name", [*cli.COMMANDS, *cli.MAINTAINER_COMMANDS])
def test_each_command_is_a_tool_whose_help_runs(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command's module has a ``main(argv)`` whose ``--help`` exits 0 under its own name
    (the maintainers' ones too: the tests run in a checkout)."""
    assert cli.checkout() == Path(__file__).resolve().parents[1]
    tool = cli._module(name)
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
    with pytest.raises(SystemExit) as stop:  # argparse's refusal, as the tool run alone
        cli.main(["headroom", "--episodes", "0"])
    assert stop.value.code == 2
    assert "argument --episodes: must be a positive integer, got 0" in capsys.readouterr().err


def test_the_installed_script_runs() -> None:
    """``pip install`` put ``powertrip`` beside this interpreter (the console script)."""
    script = shutil.which("powertrip", path=str(Path(sys.executable).parent))
    assert script is not None, "pip install -e . installs the powertrip script"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "headroom" in done.stdout


def test_outside_a_checkout_help_lists_the_users_commands_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "checkout", lambda: None)
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in cli.COMMANDS)
    assert not any(f"  {name} " in out for name in cli.MAINTAINER_COMMANDS)
    assert "maintainers" not in out


@pytest.mark.parametrize("name", list(cli.MAINTAINER_COMMANDS))
def test_a_maintainers_command_refuses_in_one_line_outside_a_checkout(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As from a wheel: nothing is imported or written, one line says where it runs."""
    monkeypatch.setattr(cli, "checkout", lambda: None)
    assert cli.main([name, "--help"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert f"powertrip {name}: a maintainers' command" in captured.err
    assert "pip install -e ." in captured.err


def test_a_checkout_is_the_folder_above_the_package_with_the_maintainers_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel has site-packages above ``powertrip_env``: no maintainers' folder."""
    import powertrip_env

    package = tmp_path / "site-packages" / "powertrip_env"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(powertrip_env, "__file__", str(package / "__init__.py"))
    assert cli.checkout() is None
    (tmp_path / "site-packages" / "maintainers").mkdir()
    (tmp_path / "site-packages" / "maintainers" / "__init__.py").write_text("")
    assert cli.checkout() is None  # a folder of that name alone is not a checkout
    (tmp_path / "site-packages" / "pyproject.toml").write_text("")
    assert cli.checkout() == tmp_path / "site-packages"
