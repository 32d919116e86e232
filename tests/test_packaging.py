"""The data travels with the package: a non-editable install works outside the repository."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("powertrip_env-*.whl")
    return path


def test_wheel_carries_scenarios_catalogues_and_trace(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for scenario in ("default", "kws", "emnist", "llm-full", "large"):
        assert f"powertrip_env/scenarios/{scenario}.toml" in names
    for data in ("gpus.csv", "sites_default.csv", "sites_large.csv", "power_synthetic_2019.csv"):
        assert f"powertrip_env/_data/{data}" in names


def test_installed_wheel_loads_default_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)  # what a non-editable install puts on the path
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import powertrip_env, gymnasium as gym; "
        "print(powertrip_env.__file__); print(powertrip_env.load_scenario('default')); "
        "env = gym.make('PowerTrip-v0'); print(env.reset(seed=0)[0].shape)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(str(target)), first  # not the checkout
    assert "Scenario 'default': 8 sites" in done.stdout
