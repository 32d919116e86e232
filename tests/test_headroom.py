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
SUMMARY_KEYS = {"env", "episodes", "mean_tta_h", "headroom", "one_shot", "mean_episode_h",
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
    argv = ["--env", "PowerTrip-v0", "--scenario", str(small), "--episodes", "2",
            "--out", str(out), "--no-progress"]  # fmt: skip
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
    assert last["headroom"] == pytest.approx(tta["BestFixedSet"] / tta["BeamPlanner"], abs=2e-3)
    assert last["one_shot"] == (last["headroom"] < headroom.ONE_SHOT_BELOW)

    assert {p.name for p in out.iterdir()} == {"headroom.csv", "headroom.md"}
    frame = pd.read_csv(out / "headroom.csv")
    assert list(frame.columns) == ["env", "policy", "episode", "seed", "tta_h", "success",
                                   "rounds"]  # fmt: skip
    assert len(frame) == 2 * len(policies)
    assert set(frame["policy"]) == policies
    assert (frame["env"] == f"PowerTrip-v0:{small}").all()
    table = (out / "headroom.md").read_text(encoding="utf-8")
    assert "BestFixedSet / BeamPlanner" in table
    assert table in stdout  # the table is printed too


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "CartPole-v1"], "unknown environment"),
        (["--env", "PowerTrip-v9"], "registered PowerTrip IDs"),
        (["--episodes", "0"], "--episodes 0"),
        (["--scenario", "/nonexistent/scenario.toml"], "nonexistent"),
    ],
)
def test_bad_arguments_exit_2_before_anything_is_written(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert headroom.main([*argv, "--out", str(out), "--no-progress"]) == 2
    _, stderr = capsys.readouterr()
    assert stderr.startswith("error:") and message in stderr, stderr
    assert not out.exists()


def test_bad_env_exits_2_from_the_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "powertrip_env.harness.reports.headroom", "--env", "NoSuchEnv-v0",
         "--out", str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "NoSuchEnv-v0" in done.stderr and "PowerTrip-v0" in done.stderr
    assert done.stdout == ""
