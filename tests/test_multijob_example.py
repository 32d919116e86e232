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
def test_the_example_trains_the_shared_agent_and_boards_it_with_the_rules(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "multijob_ppo.py"), "--steps", "512",
         "--episodes", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "ppo-shared.zip").is_file()
    board = json.loads((out / "multijob.json").read_text())["PowerTrip-MultiJob-v0"]
    assert {"PPO-shared", "Coordinated", "Independent-HorizonRule", "Alone-Optimiser"} <= set(
        board["policies"]
    )
    assert board["bound_holds"] and board["episodes"] == 1
    assert board["coordination_room"] == pytest.approx(
        board["policies"]["Independent-HorizonRule"]["mean_tta_h"]
        / board["policies"]["Coordinated"]["mean_tta_h"]
    )
    assert "| PPO-shared |" in done.stdout
