"""train_agent.py end to end: a tiny run, resume, Ctrl-C, evaluation of the model, bad arguments.

One short training run (quarter-hour episodes, 256 steps in two forkserver workers, a two-episode
final table against two cheap baselines) is shared by the tests that read its outputs.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, PPO
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import train_agent
from powertrip_env.agents import callbacks, training
from powertrip_env.agents.arguments import (
    DEFAULT_FINAL_POLICIES,
    DEFAULT_MEASURED_FINAL_POLICIES,
    DEFAULT_MOVING_FINAL_POLICIES,
    parse_args,
)
from powertrip_env.agents.candidates import N_FEATURES, N_SLOTS
from powertrip_env.harness.tracks import CARBON

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
    argv = [
        "--scenario",
        str(short_scenario),
        "--n-envs",
        "2",
        "--vec-env",
        "subproc",
        "--out",
        str(out),
        *QUICK,
    ]
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
    # the default --extractor candidates: a choice among candidate sets, on their features
    assert model.action_space == spaces.Discrete(N_SLOTS)
    assert model.observation_space.shape == (N_FEATURES,)
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


def test_resume_extends_a_finished_run_into_another_folder(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (trained / "config.yaml").read_text(encoding="utf-8")
    branch = tmp_path / "longer"
    argv = [
        "--resume",
        str(trained / "final_model.zip"),
        "--out",
        str(branch),
        "--timesteps",
        "384",
        "--vec-env",
        "dummy",
        "--final-episodes",
        "0",
    ]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    model = PPO.load(branch / "final_model.zip", device="cpu")
    assert model.num_timesteps == 384  # the run's new total, not 384 more
    assert model.n_envs == 2 and model.n_steps == 64  # the run's settings, not the defaults
    assert (trained / "config.yaml").read_text(encoding="utf-8") == before
    copied = (branch / "config.yaml").read_text(encoding="utf-8")
    assert copied.startswith(before)  # the run's record, then this resume's entry
    (entry,) = yaml.safe_load(copied)["resumes"]
    assert entry["at_timesteps"] == 256
    assert entry["changed"] == {"timesteps": 384, "vec_env": "dummy", "final_episodes": 0}


def test_saved_model_evaluates_through_the_harness_cli(
    trained: Path, short_scenario: Path, tmp_path: Path
) -> None:
    # The run above used the short scenario, which extends "lora" and so has the spaces of
    # PowerTrip-LoRA-v0: its model evaluates on that registered ID.
    cmd = [
        sys.executable,
        "-m",
        "powertrip_env.harness.evaluation.evaluate",
        "--env",
        "PowerTrip-LoRA-v0",
        "--policies",
        "PowerTrip",
        "--episodes",
        "1",
        "--model",
        str(trained / "final_model.zip"),
        "--algo",
        "ppo",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
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
    argv = [
        "--scenario",
        str(short_scenario),
        "--n-envs",
        "1",
        "--out",
        str(tmp_path),
        "--algo",
        "maskable_ppo",
        "--extractor",
        "sites",
        *QUICK,
    ]
    code, out, _ = run(argv, capsys)
    assert code == 130
    assert f"model saved to {tmp_path / 'interrupted.zip'}" in out
    assert MaskablePPO.load(tmp_path / "interrupted.zip", device="cpu").num_timesteps == 64
    assert not (tmp_path / "final_model.zip").exists()


def test_a2c_with_the_flat_mlp_policy_trains(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "--scenario",
        str(short_scenario),
        "--algo",
        "a2c",
        "--extractor",
        "mlp",
        "--n-envs",
        "2",
        "--timesteps",
        "64",
        "--eval-freq",
        "32",
        "--eval-episodes",
        "1",
        "--final-episodes",
        "0",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
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


# --------------------------------------------------------------------------- the final table

KNOWN = DEFAULT_FINAL_POLICIES.split(",")
MEASURED = DEFAULT_MEASURED_FINAL_POLICIES.split(",")
MOVING = DEFAULT_MOVING_FINAL_POLICIES.split(",")


@pytest.mark.usefixtures("no_training")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], MOVING),  # the default --env, PowerTrip-Moving-v0
        (["--env", "PowerTrip-Measured-v0"], MEASURED),
        (["--env", "PowerTrip-v0"], KNOWN),
        (["--env", "PowerTrip-Wide-Measured-v0"], MEASURED),
        # the final environment's track decides, not the training one's
        (["--env", "PowerTrip-v0", "--final-env", "PowerTrip-Measured-v0"], MEASURED),
        (["--env", "PowerTrip-Measured-v0", "--final-env", "PowerTrip-v0"], KNOWN),
        (["--final-policies", "PowerTrip"], ["PowerTrip"]),
        (["--env", "PowerTrip-v0", "--final-policies", "PowerTrip"], ["PowerTrip"]),
    ],
)
def test_the_final_policies_default_to_the_final_envs_track(
    argv: list[str], expected: list[str], tmp_path: Path
) -> None:
    args = parse_args([*argv, "--out", str(tmp_path / "run")])
    run = training.setup(args)
    assert run["final_policies"] == expected
    # resolved in the arguments too: config.yaml and the printed command to go on name them
    assert args.final_policies == ",".join(expected)


@pytest.mark.usefixtures("no_training")
@pytest.mark.parametrize(
    ("argv", "reward_mode", "final"),
    [
        ([], "excess_gain", MOVING),  # the main job: unchanged
        (["--env", "PowerTrip-Carbon-v2"], "carbon", CARBON.final_policies.split(",")),
        # a different reward is the user's choice, and config.yaml records it
        (["--env", "PowerTrip-Carbon-v2", "--reward-mode", "excess_gain"], "excess_gain", None),
    ],
)
def test_the_agent_trains_on_its_tasks_own_objective_by_default(
    argv: list[str], reward_mode: str, final: list[str] | None, tmp_path: Path, capsys
) -> None:
    """A carbon task trains on its carbon reward unless ``--reward-mode`` says otherwise, and
    its final table is the carbon track's (it trained on the time reward before)."""
    args = parse_args([*argv, "--out", str(tmp_path / "run")])
    run = training.setup(args)
    assert run["env_kwargs"]["reward_mode"] == args.reward_mode == reward_mode
    if final is not None:
        assert run["final_policies"] == final
    said = capsys.readouterr().out
    assert ("own objective is carbon" in said) == ("--reward-mode" in argv)


def test_help_names_both_default_final_tables(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    flat = "".join(out.split())  # argparse breaks the long lists anywhere
    assert "(default:PowerTrip-Moving-v0)" in flat  # --env
    entry = flat.split("--final-policiesFINAL_POLICIES")[-1].split("--eval-seed")[0]
    assert entry.endswith(
        f"(default:thetrack'sown:{DEFAULT_FINAL_POLICIES}ontheknowntrack,"
        f"{DEFAULT_MEASURED_FINAL_POLICIES}onthemeasuredtrack,"
        f"{DEFAULT_MOVING_FINAL_POLICIES}onthemovingtrack,"
        f"{CARBON.final_policies}onthecarbontrack)"
    )  # and not argparse's "(default: None)" after them


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


# --------------------------------------------------------------------------- resume a run

# A run whose settings are all not the defaults: 2 envs x 32 steps per rollout, 192 steps.
SETTINGS = ["--hp", "gamma=0.95", "--hp", "n_steps=32", "--hp", "batch_size=32", "--seed", "3",
            "--timesteps", "192", "--n-envs", "2", "--eval-freq", "64", "--eval-episodes", "1",
            "--checkpoint-freq", "64", "--final-episodes", "1", "--final-policies", "PowerTrip",
            "--no-progress"]  # fmt: skip
STOP_AT = 64  # the end of the first rollout, so the resumed run ends exactly at 192


@contextlib.contextmanager
def ctrl_c_at(steps: int) -> Iterator[None]:
    """Press Ctrl-C (raise KeyboardInterrupt) in the training loop at ``steps`` steps."""
    with pytest.MonkeyPatch.context() as mp:

        def press_ctrl_c(self: callbacks.PowerTripMetrics) -> bool:
            if self.num_timesteps >= steps:
                raise KeyboardInterrupt
            return True

        mp.setattr(callbacks.PowerTripMetrics, "_on_step", press_ctrl_c)
        yield


@pytest.fixture
def no_training_past(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail at once (instead of training for minutes) if a run goes past the 192 steps."""
    step = callbacks.PowerTripMetrics._on_step

    def checked(self: callbacks.PowerTripMetrics) -> bool:
        assert self.num_timesteps <= 192, f"trained past the run's total: {self.num_timesteps}"
        return step(self)

    monkeypatch.setattr(callbacks.PowerTripMetrics, "_on_step", checked)
    yield


@pytest.fixture(scope="module")
def interrupted(short_scenario: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run with SETTINGS stopped by Ctrl-C at STOP_AT steps: its folder and its stdout."""
    out = tmp_path_factory.mktemp("interrupted") / "run"
    printed = io.StringIO()
    with ctrl_c_at(STOP_AT), contextlib.redirect_stdout(printed):
        code = train_agent.main(["--scenario", str(short_scenario), *SETTINGS, "--out", str(out)])
    assert code == 130, printed.getvalue()
    return out, printed.getvalue()


def copy_of(run_dir: Path, where: Path) -> Path:
    """A copy of a run folder (tests that resume it change it; the fixture is shared)."""
    return Path(shutil.copytree(run_dir, where / run_dir.name))


@pytest.mark.usefixtures("no_training_past")
def test_resume_finishes_the_run_with_its_own_settings(
    interrupted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(interrupted[0], tmp_path)
    original = (folder / "config.yaml").read_text(encoding="utf-8")
    argv = ["--resume", str(folder / "interrupted.zip"), "--out", str(folder)]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    model = PPO.load(folder / "final_model.zip", device="cpu")
    assert model.num_timesteps == 192  # the run's total: 128 more steps, not 700k
    assert model.gamma == 0.95 and model.n_envs == 2 and model.n_steps == 32
    text = (folder / "config.yaml").read_text(encoding="utf-8")
    assert text.startswith(original)  # never rewritten, only added to
    config = yaml.safe_load(text)
    assert config["hyperparameters"]["gamma"] == 0.95
    assert config["args"]["seed"] == 3 and config["args"]["timesteps"] == 192
    assert config["args"]["n_envs"] == 2 and config["args"]["eval_freq"] == 64
    assert "gamma=0.95" in config["args"]["hp"]
    (entry,) = config["resumes"]
    assert entry["at_timesteps"] == STOP_AT and entry["changed"] == {}
    assert entry["command"].endswith(shlex.join(argv))
    assert "| ppo (best_model) |" in (folder / "summary.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == [
        "model_128_steps.zip",
        "model_192_steps.zip",
    ]
    assert len(list((folder / "tb").iterdir())) == 1  # TensorBoard's curves continue
    assert not list(folder.glob(".*"))


def test_the_printed_command_names_the_run_and_finishes_it(
    interrupted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, printed = interrupted
    (line,) = [ln for ln in printed.splitlines() if ln.startswith("continue with: ")]
    command = shlex.split(line.removeprefix("continue with: "))
    assert command[:2] == ["python", "train_agent.py"]
    shown = " ".join(command)
    for setting in (
        "--timesteps 192",
        "--n-envs 2",
        "--seed 3",
        "--eval-freq 64",
        "--final-episodes 1",
        "--hp gamma=0.95",
        "--eval-episodes 1",
        "--checkpoint-freq 64",
        "--final-policies PowerTrip",
        "--algo ppo",
        "--extractor candidates",
        f"--resume {first / 'interrupted.zip'}",
        f"--out {first}",
    ):
        assert setting in shown, setting
    folder = copy_of(first, tmp_path)
    argv = [arg.replace(str(first), str(folder)) for arg in command[2:]]
    code, _, err = run([*argv, "--final-episodes", "0"], capsys)
    assert code == 0, err
    assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 192


@pytest.mark.usefixtures("no_training_past")
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--algo", "a2c"], "argument --algo: 'a2c' differs from the run being resumed ('ppo'"),
        (["--env", "PowerTrip-Large-v0"], "argument --env: 'PowerTrip-Large-v0' differs"),
        (["--hp", "gamma=0.99"], "argument --hp: gamma=0.99 differs from the run"),
        (["--seed", "0"], "argument --seed: 0 differs from the run being resumed (3"),
        (["--n-envs", "16"], "argument --n-envs: 16 differs from the run being resumed (2"),
        (["--extractor", "mlp"], "argument --extractor: 'mlp' differs"),
        (["--force"], "argument --force: --resume continues the run in"),
        (["--timesteps", "64"], "argument --timesteps: the run's total, 64, must be above"),
    ],
)
def test_resume_refuses_options_that_would_change_the_run(
    interrupted: tuple[Path, str],
    extra: list[str],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = copy_of(interrupted[0], tmp_path)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, _, err = run(["--resume", str(folder / "interrupted.zip"), *extra], capsys)
    assert code == 2, err
    assert expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_a_resume_may_extend_the_run_and_change_its_final_table(
    interrupted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(interrupted[0], tmp_path)
    argv = [
        "--resume",
        str(folder / "interrupted.zip"),
        "--timesteps",
        "256",
        "--final-episodes",
        "0",
        "--checkpoint-freq",
        "0",
    ]
    code, _, err = run(argv, capsys)  # --out: the run's own folder
    assert code == 0, err
    assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 256
    assert not (folder / "summary.md").exists()
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert config["args"]["timesteps"] == 192  # the original record is kept
    assert config["resumes"][0]["changed"] == {
        "timesteps": 256,
        "checkpoint_freq": 0,
        "final_episodes": 0,
    }
    # The finished run is complete; resuming it again needs a larger total.
    code, _, err = run(["--resume", str(folder / "final_model.zip")], capsys)
    assert code == 2
    assert "has trained all 256 steps of its run; give --timesteps above 256" in err


@pytest.mark.usefixtures("no_training_past")
def test_resume_from_a_checkpoint_finds_its_run(
    interrupted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(interrupted[0], tmp_path)
    checkpoint = folder / "checkpoints" / "model_64_steps.zip"  # as the callback would save it
    checkpoint.parent.mkdir(exist_ok=True)
    shutil.copyfile(folder / "interrupted.zip", checkpoint)
    code, _, err = run(["--resume", str(checkpoint), "--final-episodes", "0"], capsys)
    assert code == 0, err  # --out: the run folder, checkpoints/'s parent
    assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 192
    (entry,) = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))["resumes"]
    assert entry["model"] == str(checkpoint) and entry["out"] == str(folder)


def test_resume_without_the_runs_config_is_a_clear_error(
    interrupted: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alone = tmp_path / "alone.zip"
    shutil.copyfile(interrupted[0] / "interrupted.zip", alone)
    code, _, err = run(["--resume", str(alone), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "argument --resume: no config.yaml beside" in err
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- used folders


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused command must not get as far as training (on failure: fail, don't train)."""

    def refuse(*_: object) -> int:
        raise AssertionError("the run started training")

    monkeypatch.setattr(training, "train", refuse)


@pytest.mark.usefixtures("no_training")
def test_a_second_run_into_a_used_out_is_refused_and_changes_nothing(
    trained: Path, short_scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files_in(trained)
    argv = ["--scenario", str(short_scenario), "--n-envs", "2", "--out", str(trained), *QUICK]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert f"argument --out: output folder {str(trained)!r} already holds results" in err
    assert "--force" in err and len(err.strip().splitlines()) == 1
    assert files_in(trained) == before


@pytest.mark.usefixtures("no_training")
def test_the_readme_command_run_twice_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "runs" / "PowerTrip-Moving-v0-ppo-0"
    first.mkdir(parents=True)
    (first / "interrupted.zip").write_bytes(b"the first run's model")
    code, _, err = run([], capsys)  # python train_agent.py
    assert code == 2
    assert err.startswith(
        "train_agent.py: error: argument --out: output folder 'runs/PowerTrip-Moving-v0-ppo-0' "
        "already holds results; choose another with --out, or pass --force to replace them, "
        "or continue its run with --resume runs/PowerTrip-Moving-v0-ppo-0/interrupted.zip"
    )
    assert files_in(first) == {"interrupted.zip": b"the first run's model"}


def old_run(folder: Path) -> Path:
    """A folder that holds an earlier run's results."""
    for name in ("final_model.zip", "interrupted.zip", "summary.md", "episodes.csv",
                 "config.yaml", "checkpoints/model_999_steps.zip", "tb/ppo_1/events"):  # fmt: skip
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("old\n", encoding="utf-8")
    return folder


def test_force_replaces_the_earlier_run_with_only_the_new_one(
    short_scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = old_run(tmp_path / "run")
    argv = [
        "--scenario",
        str(short_scenario),
        "--n-envs",
        "1",
        "--timesteps",
        "64",
        "--hp",
        "n_steps=64",
        "--hp",
        "batch_size=64",
        "--eval-freq",
        "0",
        "--checkpoint-freq",
        "64",
        "--final-episodes",
        "1",
        "--final-policies",
        "PowerTrip",
        "--no-progress",
        "--out",
        str(folder),
        "--force",
    ]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    names = {name for name in files_in(folder) if not name.startswith("tb/")}
    assert names == {
        "config.yaml",
        "final_model.zip",
        "checkpoints/model_64_steps.zip",
        "summary.md",
        "episodes.csv",
        "tta.png",
        "tta_paired.png",
        "accuracy_vs_time.png",
        "timeline.png",
    }
    assert [p.name for p in (folder / "tb").iterdir()] == ["ppo_1"]
    assert (folder / "tb" / "ppo_1" / "events").exists() is False
    assert "| ppo (final_model) |" in (folder / "summary.md").read_text(encoding="utf-8")
    assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 64


@pytest.mark.usefixtures("no_training")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--hp", "n_epoch=3"], "unknown hyperparameter 'n_epoch'"),
        (["--final-policies", "Oracle"], "unknown policy 'Oracle'"),
        (["--scenario", "{folder}/config.yaml"], "argument --scenario"),
        (["--scenario", "{folder}/short.toml"], "short.toml', which this run reads and --force"),
    ],
)
def test_force_deletes_nothing_when_an_argument_is_wrong(
    argv: list[str],
    expected: str,
    short_scenario: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = old_run(tmp_path / "run")
    shutil.copyfile(short_scenario, folder / "short.toml")
    before = files_in(folder)
    argv = [a.format(folder=folder) for a in argv]
    code, _, err = run([*argv, "--out", str(folder), "--force"], capsys)
    assert code == 2 and expected in err
    assert files_in(folder) == before


def test_force_refuses_to_empty_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(old_run(tmp_path / "work"))
    code, _, err = run(["--out", ".", "--force", "--final-episodes", "0"], capsys)
    assert code == 2
    assert "argument --force: '.' is the working directory" in err
    assert (tmp_path / "work" / "summary.md").exists()


def test_a_stopped_final_comparison_leaves_the_earlier_results_whole(
    trained: Path, short_scenario: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import powertrip_env.harness.evaluation.evaluate

    folder = copy_of(trained, tmp_path)
    summary = (folder / "summary.md").read_bytes()
    episodes = (folder / "episodes.csv").read_bytes()
    write = powertrip_env.harness.evaluation.evaluate.write_files

    def stopped_after_the_csv(
        result: powertrip_env.harness.evaluation.evaluate.Evaluation, folder: Path
    ) -> None:
        write(result, folder)
        (folder / "summary.md").unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(
        powertrip_env.harness.evaluation.evaluate, "write_files", stopped_after_the_csv
    )
    argv = [
        "--resume",
        str(folder / "final_model.zip"),
        "--timesteps",
        "384",
        "--vec-env",
        "dummy",
        "--scenario",
        str(short_scenario),
        "--n-envs",
        "2",
        "--out",
        str(folder),
    ]
    assert train_agent.main(argv) == 130
    assert (folder / "summary.md").read_bytes() == summary
    assert (folder / "episodes.csv").read_bytes() == episodes  # not a new one beside it
    assert PPO.load(folder / "final_model.zip", device="cpu").num_timesteps == 384
    assert not list(folder.glob(".*"))


def test_a_full_disk_while_the_final_table_is_written_keeps_the_table(
    trained: Path,
    short_scenario: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The final table is printed before its files are written: a full disk then ends the run in
    one line naming the run folder and the error (exit 1, a failed final comparison), and the
    earlier table's files stay as they were."""
    import powertrip_env.harness.evaluation.evaluate

    folder = copy_of(trained, tmp_path)
    before = {name: (folder / name).read_bytes() for name in ("summary.md", "episodes.csv")}

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(powertrip_env.harness.evaluation.evaluate, "write_files", disk_full)
    argv = [
        "--resume",
        str(folder / "final_model.zip"),
        "--timesteps",
        "384",
        "--vec-env",
        "dummy",
        "--scenario",
        str(short_scenario),
        "--n-envs",
        "2",
        "--out",
        str(folder),
        "--no-progress",
    ]
    code, out, err = run(argv, capsys)
    assert code == 1
    assert (
        f"train_agent.py: error: results not written to {str(folder)!r}: [Errno 28] No space "
        "left on device" in err
    ), err
    assert "Traceback" not in err
    assert "| PowerTrip |" in out and "results written" not in out
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert not list(folder.glob(".*"))
