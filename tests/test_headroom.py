"""``powertrip headroom``: the best fixed set against the planner, and the bound.

Run on a small hand-made scenario (``--scenario``) so that the references take a second.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_references import write_scenario

from powertrip_env.harness.reports import headroom

REPO = Path(__file__).resolve().parents[1]
SUMMARY_KEYS = {"env", "episodes", "mean_tta_h", "beam_headroom", "one_shot", "mean_episode_h",
                "mean_rounds", "bound_holds"}  # fmt: skip


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    import numpy as np

    rng = np.random.default_rng(3)
    return write_scenario(
        tmp_path_factory.mktemp("small"),
        rng.integers(0, 13, size=(288 * 3, 4)),
        gpus=["G100", "G200", "G100", "G100"],
        rtt_ms=[1, 30, 60, 120],
        network={"join_fixed_s": 2.0, "rtt_factor": 10.0},
    )


def test_headroom_writes_its_files_and_ends_with_the_documented_json(small, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "--env",
        "PowerTrip-v0",
        "--scenario",
        str(small),
        "--episodes",
        "2",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert headroom.main(argv) == 0
    stdout, stderr = capsys.readouterr()
    assert "the bound is wrong" not in stderr
    last = json.loads(stdout.strip().splitlines()[-1])
    assert set(last) >= SUMMARY_KEYS
    assert last["env"] == "PowerTrip-v0" and last["episodes"] == 2
    assert last["bound_holds"] is True
    policies = {"LowerBound", "BeamPlanner", "BestFixedSet", "MyopicOptimal", "PowerTrip",
                "AllSites"}  # fmt: skip
    assert set(last["mean_tta_h"]) == policies
    tta = last["mean_tta_h"]
    assert tta["LowerBound"] <= tta["BeamPlanner"] <= tta["BestFixedSet"]
    ratio = tta["BestFixedSet"] / tta["BeamPlanner"]
    assert last["beam_headroom"] == pytest.approx(ratio, abs=2e-3)
    assert last["one_shot"] == (last["beam_headroom"] < headroom.ONE_SHOT_BELOW)

    assert {p.name for p in out.iterdir()} == {"headroom.csv", "headroom.md"}
    frame = pd.read_csv(out / "headroom.csv")
    assert list(frame.columns) == ["env", "policy", "episode", "seed", "tta_h", "success", "rounds"]
    assert len(frame) == 2 * len(policies)
    assert set(frame["policy"]) == policies
    assert (frame["env"] == f"PowerTrip-v0:{small}").all()
    table = (out / "headroom.md").read_text(encoding="utf-8")
    assert "beam headroom = BestFixedSet / BeamPlanner" in table
    assert f"below {headroom.ONE_SHOT_BELOW} " in table and f"{headroom.TASK_AT_LEAST}." in table
    assert table in stdout  # the table is printed too


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "CartPole-v1"], "argument --env: 'CartPole-v1' is not a PowerTrip env"),
        (["--env", "PowerTrip-v9"], "registered PowerTrip IDs with one site catalogue"),
        (["--env", "PowerTrip-Random-v0"], "draws a site catalogue per episode"),
        (["--episodes", "0"], "argument --episodes: must be a positive integer, got 0"),
        (["--scenario", "/nonexistent/scenario.toml"], "nonexistent"),
    ],
)
def test_bad_arguments_exit_2_before_anything_is_written(argv, message, tmp_path, capsys):
    """argparse refuses what it checks (exit 2); the rest is one ``error:`` line, code 2."""
    out = tmp_path / "out"
    try:
        code = headroom.main([*argv, "--out", str(out), "--no-progress"])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    _, stderr = capsys.readouterr()
    assert message in stderr and "Traceback" not in stderr, stderr
    assert not out.exists()


def test_bad_env_exits_2_from_the_command_line(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "powertrip_env.harness.reports.headroom",
            "--env",
            "NoSuchEnv-v0",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "NoSuchEnv-v0" in done.stderr and "PowerTrip-v0" in done.stderr
    assert done.stdout == ""


def test_the_bound_s_rows_and_check_are_the_ones_benchmark_uses() -> None:
    """One bound loop and one check serve ``powertrip headroom`` and ``powertrip benchmark``."""
    from powertrip_env.harness.arguments import make_env
    from powertrip_env.harness.tracks import time

    assert time.BOUND is headroom.BOUND and time.bound_rows is headroom.bound_rows
    env = make_env("PowerTrip-v0", split="test", jitter=False)
    try:
        rows = headroom.bound_rows(env, 2, seed=5)
    finally:
        env.close()
    assert list(rows.columns) == ["policy", "episode", "seed", "tta_h", "success", "rounds"]
    assert list(rows["seed"]) == [5, 6] and set(rows["policy"]) == {headroom.BOUND}
    assert (rows["tta_h"] > 0).all() and rows["success"].all()
    per_episode = pd.DataFrame({headroom.BOUND: [1.0, 2.0], "A": [1.0, 3.0], "B": [2.0, 2.0]})
    assert headroom.bound_holds(per_episode, headroom.BOUND)
    assert not headroom.bound_holds(per_episode.assign(B=[2.0, 1.9]), headroom.BOUND)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_the_two_thresholds_are_what_the_published_table_and_pages_say() -> None:
    """Below ONE_SHOT_BELOW a scenario is a one-shot choice; every benchmark task has a beam
    headroom of at least TASK_AT_LEAST (a different thing: the bar to be a task). The published
    headroom table bears both out, and every page that states a bar states these."""
    import re

    import powertrip_env
    from maintainers import doc_blocks

    block = doc_blocks.read_block("headroom", REPO / "README.md").splitlines()
    table = [_cells(line) for line in block if line.startswith("|")]
    column = next(i for i, name in enumerate(table[0]) if name.endswith("headroom"))
    rows = {row[0]: (float(row[column]), row[-1]) for row in table[2:]}
    assert set(powertrip_env.SUITE_IDS) <= set(rows)
    for env_id, (ratio, poses) in rows.items():
        assert (poses == "a one-shot choice") == (ratio < headroom.ONE_SHOT_BELOW), env_id
        if env_id in powertrip_env.SUITE_IDS:
            assert ratio >= headroom.TASK_AT_LEAST, env_id
    stated = {
        "one-shot": r"[Bb]elow (\d\.\d+)",
        "task": r"headroom (?:of )?(?:at least|>=) (\d\.\d+)",
    }
    pages = [
        REPO / "README.md",
        REPO / "powertrip_env" / "__init__.py",
        *sorted((REPO / "docs").rglob("*.md")),
    ]
    found = {"one-shot": set(), "task": set()}
    for page in pages:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for kind, pattern in stated.items():
            for match in re.finditer(pattern, text):
                if kind == "task" or "one-shot" in text[match.end() : match.end() + 60]:
                    found[kind].add(float(match.group(1)))
    assert found == {"one-shot": {headroom.ONE_SHOT_BELOW}, "task": {headroom.TASK_AT_LEAST}}
