"""train_agent.py end to end: a tiny run, resume, Ctrl-C, evaluation of the model, bad arguments.

One short training run (quarter-hour episodes, 256 steps in two forkserver workers, a two-episode
final table against two cheap baselines) is shared by the tests that read its outputs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, PPO
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import train_agent
from agents import callbacks
from agents.site_policy import SitePolicy

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_torch_thread")
QUICK = [
    "--timesteps", "256",
    "--hp", "n_steps=64",
    "--hp", "batch_size=64",
    "--eval-freq", "128",
    "--eval-episodes", "1",
    "--checkpoint-freq", "128",
    "--final-episodes", "2",
    "--final-policies", "PowerTrip,AllSites",
    "--no-progress",
]  # fmt: skip


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``train_agent.main`` in-process; argparse's own errors exit through SystemExit."""
    try:
        code = train_agent.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trained(short_scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "ppo"
    argv = ["--scenario", str(short_scenario), "--n-envs", "2", "--vec-env", "subproc",
            "--out", str(out), *QUICK]  # fmt: skip
    torch.set_num_threads(1)
    assert train_agent.main(argv) == 0
    return out


# --------------------------------------------------------------------------- a whole run


def test_run_writes_models_checkpoints_config_and_final_table(trained: Path) -> None:
    for name in ("final_model.zip", "best_model.zip", "best_model.json", "config.yaml"):
        assert (trained / name).is_file(), name
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == [
        "model_128_steps.zip",
        "model_256_steps.zip",
    ]
    model = PPO.load(trained / "final_model.zip", device="cpu")
    assert model.num_timesteps == 256
    assert isinstance(model.policy, SitePolicy)  # the default --extractor sites
    summary = (trained / "summary.md").read_text(encoding="utf-8")
    for label in ("PowerTrip", "AllSites", "ppo (best_model)"):
        assert f"| {label} |" in summary
    assert (trained / "episodes.csv").is_file()
    assert not list(trained.glob(".*"))  # no temporary files left behind


def test_tensorboard_has_the_powertrip_scalars(trained: Path) -> None:
    (run_dir,) = (trained / "tb").iterdir()
    events = EventAccumulator(str(run_dir))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert set(callbacks.METRIC_KEYS) <= tags
    assert {"rollout/ep_rew_mean", "train/value_loss", "eval/mean_reward", "eval/tta_h"} <= tags


def test_resume_continues_the_step_count(
    trained: Path, short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = PPO.load(trained / "final_model.zip", device="cpu").num_timesteps
    argv = ["--scenario", str(short_scenario), "--n-envs", "1", "--out", str(tmp_path),
            "--resume", str(trained / "final_model.zip"), *QUICK[:4], "--final-episodes", "0",
            "--eval-freq", "0", "--no-progress"]  # fmt: skip
    code, out, _ = run(argv, capsys)
    assert code == 0, out
    after = PPO.load(tmp_path / "final_model.zip", device="cpu").num_timesteps
    assert after > before
    assert after == before + 256


def test_saved_model_evaluates_through_the_harness_cli(
    trained: Path, short_scenario: Path, tmp_path: Path
) -> None:
    # The run above used the short scenario, which extends "lora" and so has the spaces of
    # PowerTrip-LoRA-v0: its model evaluates on that registered ID.
    cmd = [sys.executable, "-m", "baselines.evaluate", "--env", "PowerTrip-LoRA-v0",
           "--policies", "PowerTrip", "--episodes", "1", "--model",
           str(trained / "final_model.zip"), "--algo", "ppo", "--out", str(tmp_path),
           "--no-progress"]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| final_model |" in done.stdout
    assert (tmp_path / "summary.md").is_file()


def test_ctrl_c_saves_interrupted_model_and_exits_130(
    short_scenario: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def press_ctrl_c(self: callbacks.PowerTripMetrics) -> bool:
        if self.num_timesteps >= 64:
            raise KeyboardInterrupt
        return True

    monkeypatch.setattr(callbacks.PowerTripMetrics, "_on_step", press_ctrl_c)
    argv = ["--scenario", str(short_scenario), "--n-envs", "1", "--out", str(tmp_path),
            "--algo", "maskable_ppo", "--extractor", "sites", *QUICK]  # fmt: skip
    code, out, _ = run(argv, capsys)
    assert code == 130
    assert f"model saved to {tmp_path / 'interrupted.zip'}" in out
    assert MaskablePPO.load(tmp_path / "interrupted.zip", device="cpu").num_timesteps == 64
    assert not (tmp_path / "final_model.zip").exists()


def test_a2c_with_the_flat_mlp_policy_trains(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--scenario", str(short_scenario), "--algo", "a2c", "--extractor", "mlp",
            "--n-envs", "2", "--timesteps", "64", "--eval-freq", "32", "--eval-episodes", "1",
            "--final-episodes", "0", "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    model = A2C.load(tmp_path / "final_model.zip", device="cpu")
    assert model.num_timesteps == 64
    assert type(model.policy).__name__ == "ActorCriticPolicy"


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--algo", "dqn"], "argument --algo: invalid choice: 'dqn'"),
        (["--env", "CartPole-v9"], "argument --env: unknown environment 'CartPole-v9'; allowed"),
        (["--env", "CartPole-v1"], "is not a PowerTrip environment"),
        (["--timesteps", "-5"], "argument --timesteps: must be a positive integer, got -5"),
        (["--timesteps", "0"], "argument --timesteps: must be a positive integer, got 0"),
        (["--n-envs", "0"], "argument --n-envs: must be a positive integer, got 0"),
        (["--config", "/nonexistent/ppo.yaml"], "argument --config: cannot read"),
        (["--hp", "n_epoch=3"], "unknown hyperparameter 'n_epoch' for ppo"),
        (["--algo", "a2c", "--hp", "clip_range=0.1"], "unknown hyperparameter 'clip_range'"),
        (["--resume", "/nonexistent/model.zip"], "argument --resume: file"),
        (["--reward-mode", "speed"], "argument --reward-mode: 'speed'"),
        (["--scenario", "/nonexistent.toml"], "argument --scenario"),
        (["--final-policies", "PowerTrip,Oracle"], "unknown policy 'Oracle'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_the_argument(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([*argv, "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "run" / "config.yaml").exists()  # nothing started


def test_malformed_config_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("gamma: [0.99\n", encoding="utf-8")
    code, _, err = run(["--config", str(bad), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert f"argument --config: '{bad}' is malformed at line" in err


def test_resume_file_that_is_not_a_model_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "model.zip"
    fake.write_text("not a zip", encoding="utf-8")
    code, _, err = run(["--resume", str(fake), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "argument --resume" in err and len(err.strip().splitlines()) == 1
