"""Result folders of the four result-writing commands: never mixed, never half-replaced.

``powertrip evaluate``, ``powertrip_env.harness.reports.headroom``,
``powertrip_env.harness.calibration.validate``
and ``powertrip_env.harness.calibration.calibrate`` write a set of files to ``--out``. A second run
into the
same folder is refused (exit 2, before the long run) unless ``--force``, which replaces the whole
set; a stop half-way through writing leaves the earlier set exactly as it was, and no temporary
folder behind. A write that fails (a full disk) leaves it so too, and ends in one line naming
the folder and the error, with exit code 2, after the run's tables are printed, so that its work
is not lost. Every run here is one or two tiny episodes.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from powertrip_env.harness.calibration import calibrate, validate
from powertrip_env.harness.evaluation import evaluate
from powertrip_env.harness.reports import headroom


@dataclass
class Tool:
    """One command: its module, a tiny run's arguments, the files it writes, and the function
    doing its long run (which a refused second run must never reach)."""

    module: ModuleType
    argv: Callable[[Path], list[str]]
    files: set[str]
    long_run: str


TOOLS = {
    "evaluate": Tool(
        evaluate,
        lambda sc: ["--scenario", str(sc), "--policies", "AllSites,TopPower-2", "--episodes", "1"],
        {
            "episodes.csv",
            "summary.md",
            "tta.png",
            "tta_paired.png",
            "accuracy_vs_time.png",
            "timeline.png",
        },
        "run_episode",
    ),
    "headroom": Tool(
        headroom,
        lambda sc: ["--scenario", str(sc), "--episodes", "1"],
        {"headroom.csv", "headroom.md"},
        "evaluate",
    ),
    "validate": Tool(
        validate,
        lambda sc: ["--policies", "AllSites,TopPower-4", "--episodes", "1"],
        {"validation.csv", "validation.md", "validation.png"},
        "validate",
    ),
    "calibrate": Tool(
        calibrate,
        lambda sc: ["--episodes", "1", "--iterations", "2", "--max-rounds", "3"],
        {"calibrated.toml", "rounds.csv", "fit.json", "real_vs_surrogate.png"},
        "record",
    ),
}


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _run(tool: Tool, scenario: Path, out: Path, *extra: str) -> int:
    argv = [*tool.argv(scenario), "--out", str(out), *extra]
    if tool.module is not calibrate:  # calibrate draws no progress bar
        argv.append("--no-progress")
    return tool.module.main(argv)


@pytest.fixture(params=sorted(TOOLS))
def tool(request) -> Tool:
    return TOOLS[request.param]


@pytest.fixture
def first_run(tool, small_scenario, tmp_path, capsys) -> Path:
    """``--out`` after one successful run of ``tool``."""
    out = tmp_path / "results"
    assert _run(tool, small_scenario, out) == 0
    assert set(_contents(out)) == tool.files
    capsys.readouterr()
    return out


def _must_not_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("the long run started although --out was going to be refused")


def test_a_second_run_into_the_same_out_is_refused_and_leaves_it_alone(
    tool, first_run, small_scenario, monkeypatch, capsys
):
    before = _contents(first_run)
    monkeypatch.setattr(tool.module, tool.long_run, _must_not_run)
    assert _run(tool, small_scenario, first_run, "--seed", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one line
    assert str(first_run) in err and "--force" in err and "--out" in err
    assert _contents(first_run) == before


def test_force_replaces_the_results_with_a_complete_new_set(
    tool, first_run, small_scenario, capsys
):
    before = _contents(first_run)
    (first_run / "notes-from-the-old-run.txt").write_text("stale")
    assert _run(tool, small_scenario, first_run, "--seed", "1", "--force") == 0
    after = _contents(first_run)
    assert set(after) == tool.files  # the whole new set, nothing of the old folder left over
    assert after != before  # another seed: other episodes
    assert [p.name for p in first_run.parent.iterdir()] == [first_run.name]


@pytest.mark.parametrize("earlier", [True, False], ids=["over-old-results", "fresh-out"])
def test_a_stop_half_way_through_writing_leaves_the_folder_as_it_was(
    tool, small_scenario, tmp_path, monkeypatch, capsys, earlier
):
    out = tmp_path / "results"
    if earlier:
        assert _run(tool, small_scenario, out) == 0
    before = _contents(out) if earlier else None
    real_write = tool.module.write_text
    written: list[Path] = []

    def write_then_stop(path: Path, text: str) -> Path:
        if written:  # the first file went through; Ctrl-C before the second
            raise KeyboardInterrupt
        written.append(Path(path))
        return real_write(path, text)

    monkeypatch.setattr(tool.module, "write_text", write_then_stop)
    force = ["--force"] if earlier else []
    try:
        code = _run(tool, small_scenario, out, "--seed", "1", *force)
    except KeyboardInterrupt:
        pytest.fail("the stop escaped the command as a traceback instead of exit code 130")
    assert code == 130
    assert written, "the stop came before any file was written"
    assert "interrupted; no results written" in capsys.readouterr().err
    if earlier:
        assert _contents(out) == before
    else:
        assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["results"] if earlier else [])


# --------------------------------------------------------------------------- a full disk

NO_SPACE = "[Errno 28] No space left on device"
TABLE_FILES = {  # the file of each tool's set that holds what it prints
    "evaluate": "summary.md",
    "headroom": "headroom.md",
    "validate": "validation.md",
    "calibrate": "calibrated.toml",
}


def _earlier_set(out: Path, names: set[str]) -> dict[str, bytes]:
    """An earlier run's files in ``out`` (one of which says so): what a failed write must keep."""
    out.mkdir()
    for name in names:
        (out / name).write_text(f"the earlier run's {name}\n")
    return _contents(out)


def _disk_full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _one_line_naming(err: str, out: Path) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: results not written to ") and str(out) in err, err
    assert NO_SPACE in err, err


@pytest.mark.parametrize("earlier", [True, False], ids=["over-old-results", "fresh-out"])
def test_a_full_disk_while_writing_ends_in_one_line_and_the_tables_are_printed(
    tool, small_scenario, tmp_path, monkeypatch, capsys, earlier
):
    """The disk fills after the set's first file: exit 2 (as a used --out), one line on
    stderr naming the folder and the error, the run's table on stdout (so its work is not
    lost), the folder as it was and no temporary folder beside it."""
    out = tmp_path / "results"
    before = _earlier_set(out, tool.files) if earlier else None
    real_write = tool.module.write_text
    attempted: dict[str, str] = {}

    def write_until_full(path: Path, text: str) -> Path:
        attempted[Path(path).name] = text
        if len(attempted) > 1:
            _disk_full()
        return real_write(path, text)

    monkeypatch.setattr(tool.module, "write_text", write_until_full)
    assert _run(tool, small_scenario, out, *(["--force"] if earlier else [])) == 2
    captured = capsys.readouterr()
    _one_line_naming(captured.err, out)
    name = next(key for key, spec in TOOLS.items() if spec is tool)
    assert attempted[TABLE_FILES[name]].strip() in captured.out
    if earlier:
        assert _contents(out) == before
    else:
        assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["results"] if earlier else [])


def test_a_full_disk_in_matplotlib_s_savefig_keeps_evaluate_s_summary(
    small_scenario, tmp_path, monkeypatch, capsys
):
    """The case reported: ``powertrip evaluate``'s write phase on a full disk, where matplotlib
    raises ``OSError: [Errno 28]`` from ``savefig``, ended in a 30-line traceback and lost the
    summary."""
    from matplotlib.figure import Figure

    out = tmp_path / "results"
    before = _earlier_set(out, TOOLS["evaluate"].files)
    monkeypatch.setattr(Figure, "savefig", _disk_full)
    assert _run(TOOLS["evaluate"], small_scenario, out, "--force") == 2
    captured = capsys.readouterr()
    _one_line_naming(captured.err, out)
    assert "| AllSites |" in captured.out and "results written" not in captured.out
    assert _contents(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_a_full_disk_while_the_benchmark_writes_keeps_its_board(tmp_path, monkeypatch, capsys):
    """``powertrip benchmark`` (two episodes of one task): the same line and exit code, the
    board and its JSON (the last line, as after a good run) on stdout."""
    from powertrip_env.harness.reports import benchmark

    out = tmp_path / "results"
    before = _earlier_set(out, {"leaderboard.md", "episodes.csv"})
    monkeypatch.setattr(benchmark, "write_text", _disk_full)
    argv = ["--env", "PowerTrip-v0", "--quick", "--out", str(out), "--force", "--no-progress"]
    assert benchmark.main(argv) == 2
    captured = capsys.readouterr()
    _one_line_naming(captured.err, out)
    assert "Leaderboard" in captured.out
    assert json.loads(captured.out.strip().splitlines()[-1])["tasks"]
    assert _contents(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


def test_pretrain_passes_force_on_to_the_training_run(tmp_path, monkeypatch):
    """``maintainers.pretrain`` trains with ``powertrip imitation``
    (``powertrip_env.agents.imitation``), which refuses a used run folder; its ``--force`` is
    what lets a second pretraining replace the first run."""
    from maintainers import pretrain

    calls: list[list[str]] = []
    monkeypatch.setattr(pretrain.imitation, "main", lambda argv: calls.append(argv) or 2)
    run_dir = str(tmp_path / "run")
    assert pretrain.main(["--run-dir", run_dir]) == 2
    assert pretrain.main(["--run-dir", run_dir, "--force"]) == 2
    assert "--force" not in calls[0] and calls[1][-1] == "--force"
    assert calls[0][calls[0].index("--out") + 1] == run_dir
