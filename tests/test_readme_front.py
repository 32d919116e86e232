"""README.md as a front door: short enough to read to the end, and its lines on each track the
numbers of that track's board on docs/benchmark.md.

README shows each benchmark track in a few lines (``summary-<track>`` blocks: the tasks, the
reference, the best deployable rule and the agents), which ``powertrip readme-tables`` lays out
from the same board it writes to docs/benchmark.md (``maintainers.readme_tables.track_summary``).
These tests hold the shipped README to that (every number in a summary is its board's, and the
rows are the right policies), check the writer itself on a made-up run, and run README's quick
start as written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from maintainers import doc_blocks, readme_tables
from powertrip_env.harness.reports import benchmark, leaderboard
from powertrip_env.harness.tracks import CARBON, KNOWN, MEASURED, TRACKS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 300  # issue 50: a README a newcomer reads to the end


def test_readme_is_short_enough_to_read_to_the_end() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail to docs/ (≤ {MAX_LINES})"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _board(text: str) -> tuple[list[str], dict[str, list[str]], dict[str, int], str]:
    """A board block's tasks (its score columns), its aggregate rows in order (policy -> cells),
    each task's sites (from the bracket table) and the policy its caption scores 1."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| policy | mean score"))
    rows: dict[str, list[str]] = {}
    for line in lines[head + 2 :]:
        if not line.startswith("| "):
            break
        cells = _cells(line)
        rows[cells[0]] = cells[1:]
    sites = {}
    for line in lines:
        cells = _cells(line) if line.startswith("| ") else []
        if len(cells) > 1 and cells[1].isdigit():
            sites[cells[0]] = int(cells[1])
    top = re.search(r"1 = (\S+) \(", text)
    assert top, "the board's caption names no policy scored 1"
    return _cells(lines[head])[4:], rows, sites, top.group(1)


def summary_mismatches(readme: Path, tracks: tuple[str, ...] = ("known", "measured", "carbon")):
    """Where README's summary of each of ``tracks`` differs from the track's board: its tasks, a
    row's numbers, the reference, the best rule or the agents. Empty when they agree."""
    found = []
    for track in tracks:
        name = readme_tables.SUMMARIES[track]
        summary = doc_blocks.read_block(name, readme)
        tasks, board, sites, top = _board(
            doc_blocks.read_block(readme_tables.TRACK_BLOCKS[track], readme)
        )
        named = re.findall(r"`([^`]+)`", summary.splitlines()[0])
        if named != tasks:
            found.append(f"{track}: tasks {named} against the board's {tasks}")
        rows = [_cells(line) for line in summary.splitlines()
                if line.startswith("| ") and not line.startswith("| role ")]  # fmt: skip
        for role, policy, mean, success in rows:
            if policy not in board:
                found.append(f"{track}: {role} {policy} is not on the board")
            elif [mean, success] != [board[policy][0], board[policy][2]]:
                found.append(f"{track}: {policy} {mean}, {success} against the board's "
                             f"{board[policy][0]}, {board[policy][2]}")  # fmt: skip
        roles = {
            p: readme_tables.policy_role(p, list(sites.values()), TRACKS[track]) for p in board
        }
        ranked = [p for p, cells in board.items() if cells[0] != "–"]
        expected = [("reference", top), *[("best rule", p) for p in ranked
                                          if roles[p] == "rule"][:1]]  # fmt: skip
        expected += [("agent", p) for p in board if roles[p] == "agent"]
        if [(role, policy) for role, policy, *_ in rows] != expected:
            found.append(f"{track}: rows {[r[:2] for r in rows]}, the board gives {expected}")
    return found


def test_readme_summaries_are_their_boards_numbers() -> None:
    """Each track's lines in README hold its board's numbers (docs/benchmark.md), for the
    reference, the best deployable rule and every agent: the board moved, its numbers did not."""
    for track, name in readme_tables.SUMMARIES.items():
        assert doc_blocks.holder(name, README) == README, track
        board = doc_blocks.holder(readme_tables.TRACK_BLOCKS[track], README)
        assert board == ROOT / "docs" / "benchmark.md", track
    assert summary_mismatches(README) == []


# A made-up known track of two 4-site tasks, two start days of two episodes each: the agent beats
# every rule, BestFixedSet (a reference) beats HorizonRule, and one agent runs one task only.
TTA = {
    "PowerTrip": [30, 32, 34, 36], "Optimiser": [20, 21, 22, 23],
    "BestFixedSet": [21, 22, 23, 24], "my_agent": [21, 22, 24, 24],
    "HorizonRule": [24, 25, 26, 27], "TopPower-2": [33, 35, 37, 39],
}  # fmt: skip
STARTS = ["2022-06-28T03:00:00Z", "2022-06-28T15:00:00Z",
          "2022-06-29T03:00:00Z", "2022-06-29T15:00:00Z"]  # fmt: skip


def _run() -> tuple[pd.DataFrame, dict[str, dict[str, object]]]:
    rows = [{"task": task, "policy": policy, "episode": e, "start_time": start,
             "tta_h": tta + (task == "B-v0"), "success": True}
            for task in ("A-v0", "B-v0") for policy, times in TTA.items()
            for e, (start, tta) in enumerate(zip(STARTS, times, strict=True))]  # fmt: skip
    rows += [{**row, "policy": "half_agent"} for row in rows[:4]]  # PowerTrip's times, A-v0 only
    facts = {task: {"track": "known", "optimiser_headroom": 1.1, "optimum_upper_h": 21.5,
                    "optimum_lower_h": 21.0, "gap": 1.02, "reference_never_beaten": True,
                    "n_sites": 4} for task in ("A-v0", "B-v0")}  # fmt: skip
    return pd.DataFrame(rows), facts


def test_a_track_summary_names_the_reference_the_best_rule_and_the_agents() -> None:
    frame, facts = _run()
    board = leaderboard.board(benchmark.scored(frame), resamples=200)
    text = readme_tables.track_summary(board, facts, KNOWN)
    lines = text.splitlines()
    assert lines[0] == "Tasks: `A-v0`, `B-v0`, scored on the TTA: 0 = PowerTrip, 1 = Optimiser."
    rows = [_cells(line) for line in lines[4:]]
    assert [row[:2] for row in rows] == [
        ["reference", "Optimiser"],
        ["best rule", "HorizonRule"],  # not BestFixedSet (a reference), nor the agent
        ["agent", "my_agent"],
        ["agent", "half_agent"],
    ]
    cells = leaderboard.aggregate_cells(board.aggregate["HorizonRule"])
    assert rows[1][2:] == [cells[0], cells[2]] and cells[2] == "100%"
    assert rows[3][2:] == ["–", "–"]  # left out of the aggregate: it ran one task
    assert readme_tables.policy_role("InformedMPC", [10], MEASURED) == "reference"  # told the draw
    assert readme_tables.policy_role("BestFixedCarbon", [6], CARBON) == "reference"
    assert readme_tables.policy_role("TopPower-12", [10], KNOWN) == "agent"  # no such rule at 10
    assert readme_tables.policy_role("TopPower-12", [10, 24], KNOWN) == "rule"


def test_a_track_without_agents_says_so() -> None:
    frame, facts = _run()
    frame = frame[~frame["policy"].str.endswith("agent")]
    text = readme_tables.track_summary(leaderboard.board(frame, resamples=200), facts, KNOWN)
    assert text.splitlines()[0].endswith("1 = Optimiser; no agent ran on this track.")
    assert "| agent |" not in text


def _checkout(tmp_path: Path, summaries: str) -> Path:
    """README.md holding ``summaries``, and docs/benchmark.md every board's block."""
    block = "<!-- results:{0} -->\nold\n<!-- /results:{0} -->\n".format
    (tmp_path / "docs").mkdir()
    names = (readme_tables.LEADERBOARD, *readme_tables.TRACK_BLOCKS.values())
    (tmp_path / "docs" / "benchmark.md").write_text("".join(map(block, names)), encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text("# mine\n" + summaries, encoding="utf-8")
    return readme


def test_readme_tables_writes_the_summaries_from_the_board_it_writes(tmp_path, monkeypatch):
    """A run of the known track fills README's summary of it from the board it puts on the
    benchmark's page, and leaves the summary of a track that did not run as it was; a number
    changed by hand is then a mismatch."""
    frame, facts = _run()
    monkeypatch.setattr(benchmark, "benchmark", lambda **kw: (frame, facts))

    def profile(scored: pd.DataFrame, zero: str, top: str, path: Path) -> Path:
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr(leaderboard, "performance_profile", profile)
    blocks = "".join(f"<!-- results:{n} -->\nold\n<!-- /results:{n} -->\n"
                     for n in ("summary-known", "summary-measured"))  # fmt: skip
    readme = _checkout(tmp_path, blocks)
    argv = ["--readme", str(readme), "--tables", "leaderboard", "--no-progress"]
    assert readme_tables.main(argv) == 0
    board = leaderboard.board(benchmark.scored(frame))
    expected = readme_tables.track_summary(board, facts, KNOWN)
    assert doc_blocks.read_block("summary-known", readme) == expected
    assert doc_blocks.read_block("summary-measured", readme) == "old\n"  # its track did not run
    assert doc_blocks.holder("summary-known", readme) == readme
    assert summary_mismatches(readme, ("known",)) == []
    text = readme.read_text(encoding="utf-8")
    readme.write_text(
        text.replace("| best rule | HorizonRule | 0.", "| best rule | HorizonRule | 9.")
    )
    assert any("HorizonRule 9." in line for line in summary_mismatches(readme, ("known",)))


def test_readme_tables_refuses_a_summary_held_twice(tmp_path, monkeypatch, capsys) -> None:
    block = "<!-- results:summary-known -->\nold\n<!-- /results:summary-known -->\n"
    readme = _checkout(tmp_path, block)
    (tmp_path / "docs" / "copy.md").write_text(block, encoding="utf-8")
    monkeypatch.setattr(benchmark, "benchmark", lambda **kw: pytest.fail("ran"))
    with pytest.raises(SystemExit) as info:
        readme_tables.main(["--readme", str(readme), "--tables", "leaderboard"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "2 files" in err and "copy.md" in err and "Traceback" not in err


# Gymnasium's loop and a PPO rollout on the flagship: about 15 s, CI's slow stage.
@pytest.mark.slow
def test_readme_quick_start_runs_as_written(tmp_path, monkeypatch) -> None:
    """README's quick start, its ``python`` blocks in order as one script, runs as written."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") : text.index("\n## ", text.index("## Quick start"))]
    code = "\n".join(re.findall(r"^```python\n(.*?)^```", section, flags=re.M | re.S))
    assert "gym.make(" in code and "PPO(" in code
    monkeypatch.chdir(tmp_path)  # SB3 writes nothing, but a stray file would land here
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md (quick start)", "exec"), namespace)
    assert namespace["info"]["success"] in (True, False)
    assert namespace["action"].shape == (10,)
