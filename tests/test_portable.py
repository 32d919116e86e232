"""Scenarios by value (powertrip_env/scenario/portable.py): what a cluster worker gets instead
of files."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import site, write_scenario

import powertrip_env
from powertrip_env import ScenarioError, load_scenario, scenario_names
from powertrip_env.scenario.portable import FORMAT, from_portable, is_portable, to_portable
from powertrip_env.scenario.power import site_power


@pytest.mark.parametrize("name", scenario_names())
def test_every_shipped_scenario_survives_the_round_trip_through_pickle(name: str) -> None:
    scenario = load_scenario(name)
    data = pickle.loads(pickle.dumps(to_portable(scenario)))
    assert is_portable(data) and data["format"] == FORMAT
    again, power = from_portable(data)
    for field in ("name", "sites", "gpus", "workload", "network", "episode", "hub_index"):
        assert getattr(again, field) == getattr(scenario, field), field
    original = site_power(scenario)
    np.testing.assert_array_equal(power.available_w, original.available_w)
    np.testing.assert_array_equal(power.forecast_w, original.forecast_w)
    assert (power.t0_s, power.interval_s) == (original.t0_s, original.interval_s)


def test_the_list_form_survives_json() -> None:
    data = json.loads(json.dumps(to_portable("lora", arrays=False)))
    scenario, power = from_portable(data)
    assert scenario.name == "lora" and power.available_w.shape == (8928, 8)


def test_an_env_on_a_portable_scenario_plays_exactly_like_the_file_based_one() -> None:
    by_file = gym.make("PowerTrip-v0")
    by_value = gym.make("PowerTrip-v0", scenario=to_portable("default"))
    a, _ = by_file.reset(seed=7)
    b, _ = by_value.reset(seed=7)
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(0)
    for _ in range(40):
        action = (rng.random(10) < 0.4).astype(np.int8)
        ra, rb = by_file.step(action), by_value.step(action)
        np.testing.assert_array_equal(ra[0], rb[0])
        assert ra[1:4] == rb[1:4]


def test_a_portable_scenario_needs_none_of_its_files(tmp_path: Path) -> None:
    # What a cluster node without the data sees: the files are gone once the dict is made.
    folder = write_scenario(tmp_path, [site("a", "ca"), site("b", "cb")], {"ca": 0.5, "cb": 0.3})
    data = to_portable(folder)
    shutil.rmtree(folder.parent)
    env = gym.make("PowerTrip-v0", scenario=data)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2 * 15 + 6,) and np.isfinite(obs).all()
    env.step(np.ones(2, dtype=np.int8))
    vec = gym.make_vec("PowerTrip-v0", num_envs=3, scenario=data)
    vec.reset(seed=0)
    assert vec.step(np.ones((3, 2), dtype=np.int8))[1].shape == (3,)


def _broken(edit) -> dict:
    data = to_portable("lora")
    data = copy.deepcopy(data)
    edit(data)
    return data


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="powertrip-env/portable-scenario@0"), "'format'"),
        (lambda d: d.pop("power"), "missing key(s) ['power']"),
        (lambda d: d["scenario"].pop("workload"), "missing key(s) ['workload']"),
        (lambda d: d["scenario"].update(colour="blue"), "unknown key(s) ['colour']"),
        (lambda d: d["scenario"]["sites"][2].update(pue=0.5), "field 'pue'"),
        (lambda d: d["scenario"]["sites"][0].update(gpu_count="many"), "'many'"),
        (lambda d: d["scenario"]["workload"].update(mfu=1.5), "field 'mfu'"),
        (lambda d: d["scenario"]["network"].update(join_fixed_s=-1.0), "field 'join_fixed_s'"),
        (lambda d: d["scenario"]["episode"].update(train_days=[5, 2]), "train_days"),
        (lambda d: d["scenario"]["gpus"].pop("H100"), "unknown GPU type"),
        (lambda d: d["scenario"].update(hub_index=99), "['hub_index'] = 99"),
        (lambda d: d["power"].update(available_w=d["power"]["available_w"][:, :3]), "shape"),
        (lambda d: d["power"].update(forecast_w=-d["power"]["forecast_w"]), "'forecast_w'"),
        (lambda d: d["power"].update(interval_s=0), "'interval_s' = 0"),
        (lambda d: d["power"].update(peak_w=np.zeros(8)), "peak power"),
    ],
)
def test_a_broken_portable_scenario_is_refused_naming_the_key(edit, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        from_portable(_broken(edit))
    assert message in str(info.value), str(info.value)
    assert "portable scenario" in str(info.value)


def test_gym_make_refuses_a_broken_portable_scenario() -> None:
    data = _broken(lambda d: d["scenario"]["sites"][0].update(wan_gbps=0.0))
    with pytest.raises(ScenarioError, match="wan_gbps"):
        gym.make("PowerTrip-LoRA-v0", scenario=data)


def test_the_package_registers_every_id_it_can_make_by_value() -> None:
    for env_id, scenario in powertrip_env.ENV_IDS.items():
        assert gym.spec(env_id).kwargs["scenario"] == scenario


def test_a_portable_made_before_the_calibration_still_loads() -> None:
    """Portables of format @1 made before ``allreduce``, ``grace``, ``state_bytes`` and
    ``parameters`` existed (e.g. inside a saved RLlib ``env_config``) load as the hub exchange
    with joins that fetch the model, as they meant then."""
    data = to_portable("lora")
    del data["scenario"]["network"]["allreduce"]
    for key in ("grace", "state_bytes", "parameters"):
        del data["scenario"]["workload"][key]
    scenario, _ = from_portable(data)
    assert scenario.network.allreduce == "hub"
    assert scenario.workload.state_bytes is None and scenario.workload.grace is None
