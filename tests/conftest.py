"""Fixtures shared by the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

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
