"""The data travels with the package: a non-editable install works outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Never copied into the build: setuptools packs whatever an earlier build left in build/lib, so a
# wheel built in the checkout can carry files the current layout no longer installs.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "runs", "results", ".*_cache"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "powertrip-env"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("powertrip_env-*.whl")
    return path


def test_wheel_carries_scenarios_catalogues_and_trace(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for scenario in ("default", "lora", "kws", "emnist", "llm-full", "large"):
        assert f"powertrip_env/scenarios/{scenario}.toml" in names
    for data in ("gpus.csv", "sites_default.csv", "sites_large.csv", "sites_solar.csv",
                 "power_synthetic_2019.csv"):  # fmt: skip
        assert f"powertrip_env/_data/{data}" in names
    for shipped in ("model.zip", "config.yaml", "RESULTS.md"):  # the pretrained agent
        assert f"agents/pretrained/{shipped}" in names


def test_wheel_data_holds_the_real_traces_and_no_tools(wheel: Path) -> None:
    """traces/tools/ converts raw downloads; it is for maintainers and is not installed."""
    data = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("powertrip_env/_data/")}
    assert "powertrip_env/_data/google_cella_2019.csv" in data
    assert "powertrip_env/_data/solcast_pv_2022.csv" in data
    assert "powertrip_env/_data/solcast_pv_forecast_2022.csv.gz" in data
    assert [n for n in data if n.endswith(".py")] == []
    assert [n for n in data if n.startswith("powertrip_env/_data/tools/")] == []


def test_installed_wheel_loads_default_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)  # what a non-editable install puts on the path
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import powertrip_env, gymnasium as gym; "
        "print(powertrip_env.__file__); print(powertrip_env.load_scenario('default')); "
        "env = gym.make('PowerTrip-v0'); print(env.reset(seed=0)[0].shape); "
        "env = gym.make('PowerTrip-LoRA-v0'); print(env.reset(seed=0)[0].shape); "
        "env = gym.make('PowerTrip-Random-v0'); print(env.reset(seed=0)[0].shape)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(str(target)), first  # not the checkout
    assert "Scenario 'default': 10 sites" in done.stdout
    # 10 and 8 sites of 15 + 6 features; drawn sites padded to 32, with 32 valid flags
    assert done.stdout.splitlines()[-3:] == ["(156,)", "(126,)", "(518,)"]


def test_the_environment_runs_without_importing_any_training_library() -> None:
    # `pip install powertrip-env` brings gymnasium, numba, numpy and pandas only; a worker that
    # runs the environment must never need torch, SB3, Ray or matplotlib.
    script = """
import sys
import gymnasium as gym
import numpy as np
import powertrip_env
import baselines.evaluate, baselines.headroom, baselines.policies, baselines.references
for env_id in powertrip_env.ENV_IDS:
    for obs_mode in ("flat", "dict"):
        env = gym.make(env_id, obs_mode=obs_mode)
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.ones(env.unwrapped.params.n_sites, dtype=np.int8))
heavy = {"torch", "stable_baselines3", "sb3_contrib", "ray", "matplotlib", "tensorboard"}
print(sorted({name.split(".")[0] for name in sys.modules} & heavy))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", out
