"""The multi-job example trains a shared PPO policy and prints its board (CI's slow stage)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("pettingzoo")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "name"), [((), "PPO-shared"), (("--candidates",), "PPO-candidates")]
)
def test_the_example_trains_the_shared_agent_and_boards_it_with_the_rules(tmp_path, flag, name):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "multijob_ppo.py"), "--steps", "512",
         "--episodes", "1", "--out", str(out), *flag],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    saved = out / f"{name.lower()}.zip"
    assert saved.is_file()
    board = json.loads((out / "multijob.json").read_text())["PowerTrip-MultiJob-v0"]
    rows = {name, "Coordinated", "Independent-HorizonRule", "JointHindsight", "Alone-Bound"}
    assert rows <= set(board["policies"])
    assert board["bound_holds"] and board["episodes"] == 1
    assert board["coordination_room"] == pytest.approx(
        board["policies"]["Independent-HorizonRule"]["mean_tta_h"]
        / board["policies"]["Coordinated"]["mean_tta_h"]
    )
    assert f"| {name} |" in done.stdout
    # the board's command plays the saved agent as the example did
    from powertrip_env.harness.multijob.board import main

    again = tmp_path / "again"
    assert main(["--task", "PowerTrip-MultiJob-v0", "--episodes", "1", "--out", str(again),
                 "--agent", f"{name}={saved}"]) == 0  # fmt: skip
    replayed = json.loads((again / "multijob.json").read_text())["PowerTrip-MultiJob-v0"]
    assert replayed["policies"][name] == board["policies"][name]
