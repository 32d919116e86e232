"""Fixtures shared by several test files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scenario_files import write_powered_scenario

# The LoRA scenario (8 sites, synthetic trace) with quarter-hour episodes, so short training
# runs finish many.
SHORT_SCENARIO = 'extends = "lora"\n\n[episode]\ntime_budget_h = 0.25\n'


@pytest.fixture
def one_torch_thread() -> None:
    """Small networks; extra intra-op threads only contend with other tests for two cores."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def short_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "short.toml"
    path.write_text(SHORT_SCENARIO, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four sites with power that changes every interval; episodes of a few dozen rounds."""
    rng = np.random.default_rng(3)
    powered = rng.integers(0, 13, size=(288 * 3, 4))
    return write_powered_scenario(
        tmp_path_factory.mktemp("small"),
        powered,
        gpus=["G100", "G200", "G100", "G100"],
        rtt_ms=[1, 30, 60, 120],
        network={"join_fixed_s": 2.0, "rtt_factor": 10.0},
        episode={"jitter_sigma": 0.05},
    )
