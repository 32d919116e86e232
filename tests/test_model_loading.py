"""Loading a saved agent must never run code stored in the file.

An SB3 zip keeps its policy class, spaces, schedules and buffers pickled in its ``data`` JSON,
and unpickling runs whatever the pickle names. These tests save real small models, rewrite one
pickled entry so that unpickling it would create a marker file, and check that
``powertrip_env.harness.evaluation.evaluate`` never creates it: not for a file it then evaluates,
not for one
it refuses. They also check that ``--model pretrained`` is the shipped file even when the current
folder has an ``agents`` package of its own.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from powertrip_env.errors import EvaluationError
from powertrip_env.harness.evaluation.evaluate import evaluate, main
from powertrip_env.harness.models.loading import pretrained_model_path

REPO = Path(__file__).resolve().parents[1]


class _TouchOnUnpickle:
    """Unpickles as ``Path(marker).touch()``: the file appears iff something unpickled it."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _payload(marker: Path) -> str:
    return base64.b64encode(pickle.dumps(_TouchOnUnpickle(marker), protocol=4)).decode()


def _rewrite(src: Path, dest: Path, marker: Path, keys: list[str]) -> Path:
    """A copy of the SB3 zip ``src`` whose entries ``keys`` hold the payload.

    An entry SB3 pickled keeps its readable fields (what a real file shows beside the pickle);
    only its ``:serialized:`` bytes change. A key the file does not have is added.
    """
    with zipfile.ZipFile(src) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"])
    for key in keys:
        item = data.get(key)
        item = dict(item) if isinstance(item, dict) else {":type:": "<class 'object'>"}
        item[":serialized:"] = _payload(marker)
        data[key] = item
    members["data"] = json.dumps(data, indent=4).encode()
    with zipfile.ZipFile(dest, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return dest


@contextlib.contextmanager
def _nothing_unpickled(marker: Path) -> Iterator[None]:
    """Fail on the marker first, whatever else the block raised: it is what these test."""
    try:
        yield
    finally:
        assert not marker.exists(), "a pickle stored in the model file was unpickled"


def _pickled_keys(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        data = json.loads(archive.read("data"))
    return [k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v]


@pytest.fixture(scope="module")
def tiny_ppo(tmp_path_factory, small_scenario) -> Path:
    """A PPO MlpPolicy agent for the four-site scenario, saved untrained."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario))
    path = tmp_path_factory.mktemp("agents") / "tiny.zip"
    PPO("MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu").save(path)
    return path


def _evaluate(model: Path, scenario: Path | None, algo: str = "ppo") -> object:
    return evaluate(
        "PowerTrip-v0",
        [],
        episodes=1,
        models=[(str(model), algo)],
        env_kwargs={"scenario": str(scenario)} if scenario else None,
        progress=False,
    )


@pytest.mark.parametrize(
    "keys",
    [["_last_obs"], ["lr_schedule", "clip_range"], ["observation_space", "action_space"]],
)
def test_a_payload_in_an_entry_evaluate_replaces_never_runs(
    tiny_ppo, small_scenario, tmp_path, keys
):
    marker = tmp_path / "ran"
    model = _rewrite(tiny_ppo, tmp_path / "evil.zip", marker, keys)
    with _nothing_unpickled(marker):
        result = _evaluate(model, small_scenario)
    assert list(result.summary["policy"]) == ["evil"]  # the model was accepted and played


@pytest.fixture(scope="module")
def trained_ppo(tmp_path_factory, small_scenario) -> Path:
    """A PPO agent saved after a short ``learn``: it holds the entries a rollout leaves (the last
    observation, the episode buffers), which a student saved without rollouts does not."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario), max_episode_steps=16)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    path = tmp_path_factory.mktemp("agents") / "trained.zip"
    model.learn(64).save(path)
    return path


@pytest.mark.parametrize(
    ("which", "entries"),
    [
        ("shipped", {"policy_kwargs", "observation_space", "lr_schedule", "clip_range"}),
        ("trained", {"observation_space", "_last_obs", "ep_info_buffer", "ep_success_buffer"}),
    ],
)
def test_every_entry_of_an_agent_but_its_class_is_rebuilt_without_unpickling(
    small_scenario, trained_ppo, tmp_path, which, entries
):
    """All the pickled entries (spaces, policy_kwargs, schedules, buffers, last observation) of
    the shipped agent and of one saved after rollouts hold the payload; each still loads and
    plays exactly as the original."""
    source = pretrained_model_path() if which == "shipped" else trained_ppo
    keys = [k for k in _pickled_keys(source) if k != "policy_class"]
    assert entries <= set(keys)
    marker = tmp_path / "ran"
    model = _rewrite(source, tmp_path / "rewritten.zip", marker, keys)
    with _nothing_unpickled(marker):
        rebuilt = _evaluate(model, small_scenario)
    original = _evaluate(source, small_scenario)
    assert rebuilt.episodes.drop(columns="policy").equals(original.episodes.drop(columns="policy"))


@pytest.mark.parametrize(
    ("keys", "algo", "scenario", "named"),
    [
        (["policy_class"], "ppo", True, "'policy_class'"),  # the class itself is a payload
        (["surprise"], "ppo", True, "'surprise'"),  # an entry evaluate knows nothing of
        (["policy_class"], "a2c", True, "'policy_class'"),  # refused whatever --algo says
        # accepted as a file, then refused: its spaces do not fit the ten-site PowerTrip-v0
        (["observation_space", "_last_obs"], "ppo", False, "incompatible"),
        # refused for its algorithm, before its spaces are looked at
        (["observation_space"], "a2c", True, "does not match --algo a2c"),
    ],
)
def test_a_refused_model_is_refused_without_unpickling_anything(
    tiny_ppo, small_scenario, tmp_path, keys, algo, scenario, named
):
    marker = tmp_path / "ran"
    model = _rewrite(tiny_ppo, tmp_path / "evil.zip", marker, keys)
    with _nothing_unpickled(marker), pytest.raises(EvaluationError, match=r"evil\.zip") as info:
        _evaluate(model, small_scenario if scenario else None, algo)
    assert named in str(info.value)


def test_the_command_line_refuses_a_payload_class_naming_the_file_and_entry(
    tiny_ppo, small_scenario, tmp_path, capsys
):
    marker = tmp_path / "ran"
    model = _rewrite(tiny_ppo, tmp_path / "evil.zip", marker, ["policy_class"])
    argv = [
        "--scenario",
        str(small_scenario),
        "--policies",
        "AllSites",
        "--model",
        str(model),
        "--episodes",
        "1",
        "--out",
        str(tmp_path / "res"),
        "--no-progress",
    ]
    with _nothing_unpickled(marker):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "evil.zip" in err and "'policy_class'" in err and "Traceback" not in err
    assert not (tmp_path / "res").exists()


def test_a_policy_class_evaluate_does_not_know_is_refused_by_name(small_scenario, tmp_path):
    """A subclass from elsewhere is pickled by reference; it is refused, not imported."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario))
    PPO(_OwnPolicy, env, n_steps=32, batch_size=32, device="cpu").save(tmp_path / "own")
    with pytest.raises(EvaluationError, match=r"'policy_class' names the class .*_OwnPolicy"):
        _evaluate(tmp_path / "own.zip", small_scenario)


def _own_policy() -> type:
    from stable_baselines3.common.policies import ActorCriticPolicy

    return type("_OwnPolicy", (ActorCriticPolicy,), {"__module__": __name__})


_OwnPolicy = _own_policy()


def test_pretrained_is_the_shipped_file_even_beside_another_agents_package(tmp_path):
    """``python -m`` puts the current folder first on sys.path; its agents/ must not supply
    the model that ``--model pretrained`` loads."""
    fake = tmp_path / "agents"
    (fake / "pretrained").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "pretrained" / "model.zip").write_bytes(b"not the shipped model")
    code = (
        "from powertrip_env.harness.models.loading import pretrained_model_path\n"
        "print(pretrained_model_path())"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    resolved = Path(done.stdout.strip())
    assert resolved == REPO / "agents" / "pretrained" / "model.zip"
    assert resolved.is_file() and tmp_path not in resolved.parents
