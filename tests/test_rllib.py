"""The Ray RLlib entry point (powertrip_env/integrations/rllib.py) and the example that trains
with it.

Marked ``rllib``: they need ``pip install '.[rllib]'`` and run in CI's second stage
(``python -m pytest -m rllib``). They start a local Ray instance with one remote env runner.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import site, write_scenario

pytestmark = pytest.mark.rllib
ray = pytest.importorskip("ray")
# ray alone (the flower extra brings it, for Flower's simulation) is not RLlib, whose own
# dependencies come with ray[rllib]
pytest.importorskip("ray.rllib")
torch = pytest.importorskip("torch")

from ray.rllib.core.columns import Columns  # noqa: E402

from powertrip_env.integrations import rllib  # noqa: E402
from powertrip_env.scenario.portable import is_portable  # noqa: E402
from powertrip_env.vector_env import PowerTripVectorEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def user_scenario(tmp_path_factory) -> Path:
    """A user's three-site scenario with one-day splits (a file only this machine has)."""
    sites = [site("a", "ca"), site("b", "cb", gpu="G200", gpu_count=4), site("c", "cc")]
    util = {"ca": 0.5, "cb": 0.3, "cc": 0.6}
    return write_scenario(
        tmp_path_factory.mktemp("user"), sites, util, episode={"time_budget_h": 2.0}
    )


def test_the_creator_defaults_to_multidiscrete_and_returns_the_native_vector_env() -> None:
    env = rllib.env_creator({"env": "PowerTrip-LoRA-v0"})
    assert isinstance(env.action_space, gym.spaces.MultiDiscrete)
    vec = rllib.env_creator({"env": "PowerTrip-LoRA-v0", "num_envs": 3, "obs_mode": "dict"})
    assert isinstance(vec, PowerTripVectorEnv) and vec.num_envs == 3
    assert vec.single_observation_space["sites"].shape == (8, 15)
    vec.reset(seed=0)
    vec.step(vec.action_space.sample())


def test_the_creator_refuses_an_unknown_id_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="PowerTrip-LoRA-v0"):
        rllib.env_creator({"env": "CartPole-v1"})


def test_env_config_passes_the_scenario_by_value_and_the_dict_observation(user_scenario) -> None:
    config = rllib.env_config("PowerTrip-v0", user_scenario)
    assert is_portable(config["scenario"]) and config["obs_mode"] == "dict"
    env = rllib.env_creator(config)
    assert env.unwrapped.params.n_sites == 3
    by_name = rllib.env_config("PowerTrip-LoRA-v0", by_value=False)
    assert by_name["scenario"] == "lora"


def _module(n: int = 4, f: int = 15, g: int = 6) -> rllib.SiteRLModule:
    obs = gym.spaces.Dict(
        {"sites": gym.spaces.Box(-1, 1, (n, f), np.float32), "global": gym.spaces.Box(-1, 1, (g,))}
    )
    return rllib.SiteRLModule(observation_space=obs, action_space=gym.spaces.MultiDiscrete([2] * n))


def test_the_site_module_permutes_its_logits_with_the_sites_and_keeps_its_value() -> None:
    torch.manual_seed(0)
    module = _module()
    sites = torch.rand(5, 4, 15)
    glob = torch.rand(5, 6)
    perm = torch.tensor([2, 0, 3, 1])
    batch = {Columns.OBS: {"sites": sites, "global": glob}}
    moved = {Columns.OBS: {"sites": sites[:, perm], "global": glob}}
    logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS].reshape(5, 4, 2)
    again = module.forward_inference(moved)[Columns.ACTION_DIST_INPUTS].reshape(5, 4, 2)
    torch.testing.assert_close(again, logits[:, perm])
    torch.testing.assert_close(module.compute_values(moved), module.compute_values(batch))


def test_the_padded_site_module_ignores_padding_and_never_takes_a_padded_site() -> None:
    torch.manual_seed(0)
    space = rllib.env_creator({"env": "PowerTrip-v0", "obs_mode": "dict", "max_sites": 13})
    module = rllib.SiteRLModule(
        observation_space=space.observation_space, action_space=space.action_space
    )
    obs, _ = space.reset(seed=0)
    batch = {k: torch.as_tensor(v)[None] for k, v in obs.items()}
    garbage = {**batch, "sites": batch["sites"].clone()}
    garbage["sites"][:, 10:] = torch.rand(1, 3, 15)
    out = module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS].reshape(13, 2)
    again = module.forward_inference({Columns.OBS: garbage})[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(again.reshape(13, 2), out)
    assert (out[10:, 1] < -20).all() and (rllib.greedy_action(module, obs)[10:] == 0).all()
    torch.testing.assert_close(
        module.compute_values({Columns.OBS: garbage}), module.compute_values({Columns.OBS: batch})
    )


def test_drawn_catalogues_go_by_name_and_vectorise_one_env_each() -> None:
    config = rllib.env_config("PowerTrip-Random-v0")
    assert config["scenario"] == "default"
    vec = rllib.env_creator({**config, "num_envs": 2})
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    assert vec.single_observation_space["valid"].shape == (32,)
    vec.reset(seed=0)
    vec.step(vec.action_space.sample())
    with pytest.raises(ValueError, match="draws its sites from the raw traces"):
        rllib.env_config("PowerTrip-Random-v0", rllib.to_portable("default"))


def test_the_site_module_refuses_flat_observations_with_a_hint() -> None:
    with pytest.raises(ValueError, match="obs_mode='dict'"):
        rllib.SiteRLModule(
            observation_space=gym.spaces.Box(0, 1, (66,)),
            action_space=gym.spaces.MultiDiscrete([2] * 4),
        )


def _train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The example, as a user runs it: a fresh interpreter, its own local Ray instance."""
    example = str(ROOT / "examples" / "rllib_ppo.py")
    command = [
        sys.executable,
        example,
        "--iterations",
        "2",
        "--num-env-runners",
        "1",
        "--episodes",
        "2",
        "--out",
        str(tmp_path / "run"),
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_the_example_trains_with_a_remote_runner_and_compares_the_checkpoint(tmp_path) -> None:
    done = _train(tmp_path, "--env", "PowerTrip-v0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "iteration  env steps" in done.stdout and "rllib_ppo" in done.stdout
    run = tmp_path / "run"
    assert (run / "rllib_ppo" / "rllib_checkpoint.json").is_file()
    progress = (run / "progress.csv").read_text().splitlines()
    assert len(progress) == 3 and int(progress[-1].split(",")[1]) > 0
    summary = (run / "comparison" / "summary.md").read_text()
    assert "| rllib_ppo |" in summary and "| PowerTrip |" in summary

    # powertrip_env.harness.evaluation.evaluate loads the checkpoint beside the policies, from the
    # command line
    out = tmp_path / "again"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "powertrip_env.harness.evaluation.evaluate",
            "--env",
            "PowerTrip-v0",
            "--policies",
            "PowerTrip",
            "--model",
            str(run / "rllib_ppo"),
            "--algo",
            "rllib",
            "--episodes",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert "| rllib_ppo |" in (out / "summary.md").read_text()


def test_the_example_trains_on_a_user_scenario_passed_by_value(tmp_path, user_scenario) -> None:
    done = _train(tmp_path, "--scenario", str(user_scenario), "--policies", "PowerTrip,AllSites")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| rllib_ppo |" in (tmp_path / "run" / "comparison" / "summary.md").read_text()
    checkpoint = tmp_path / "run" / "rllib_ppo"
    module = rllib.load_module(checkpoint)
    assert module.observation_space["sites"].shape == (3, 15)
    meta = json.loads((checkpoint / "rllib_checkpoint.json").read_text())
    assert meta  # a real Algorithm checkpoint


def test_the_example_exits_2_naming_a_bad_scenario(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "defualt"\n', encoding="utf-8")
    done = _train(tmp_path, "--scenario", str(bad))
    assert done.returncode == 2
    assert "defualt" in done.stderr and "Traceback" not in done.stderr


def test_evaluate_refuses_an_rllib_folder_given_as_an_sb3_model(tmp_path) -> None:
    from powertrip_env.errors import EvaluationError
    from powertrip_env.harness.models.loading import load_model

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "rllib_checkpoint.json").write_text("{}")
    with pytest.raises(EvaluationError, match="--algo rllib"):
        load_model(str(folder), "ppo")
    with pytest.raises(EvaluationError, match="no RLlib module checkpoint"):
        load_model(str(folder), "rllib")
