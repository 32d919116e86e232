"""An ID's results may change only with its version (``-v0`` to ``-v1``), as Gymnasium versions
its environments, so that numbers published against an ID stay reproducible. Two checks:

* **Every registered ID's inputs are fingerprinted** (``FINGERPRINTS``): a hash of what
  determines its results besides the code, its resolved scenario's parameters (after
  ``extends``, comments and names left out), the bytes of every data file it reads (catalogues,
  power traces, forecasts) and its registration's arguments. A refitted surrogate, a new trace
  or a changed catalogue changes the hash; if the ID's version did not change with it, the test
  fails and says which version to register and what to record. A retired ID keeps its last
  fingerprint in ``RETIRED``, so that it is never registered again with other results.
* **Each suite task's results are pinned** on a few seeds (``POWERTRIP``, ``FIRST_THREE``),
  which a change of the dynamics (code, not inputs) moves. Two players per task, both
  independent of anything tuned: the PowerTrip heuristic (the paper's rule) and the first three
  sites requested every round. The jitter is on (the IDs' default), so the pins cover the
  episode's random stream too.

If a test here fails after an intended change, bump the ID in ``powertrip_env/__init__.py`` (and
its mentions in the docs: ``powertrip docs`` rewrites the generated pages), then record the new
fingerprint and update the pins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import parse_env_id

import powertrip_env
from powertrip_env.baselines.registry import make_policy
from powertrip_env.harness.evaluation.evaluate import run_episode
from powertrip_env.scenario import data_dir, load_scenario, scenario_path
from powertrip_env.scenario.sampling import as_sampler

# ID -> the fingerprint of its inputs (``fingerprint``), for every ID the package registers.
FINGERPRINTS = {
    "PowerTrip-v0": "1624262415a7a804",
    "PowerTrip-LoRA-v0": "a06527d63afabeff",
    "PowerTrip-KWS-v0": "864e587de3732e13",
    "PowerTrip-EMNIST-v0": "90da4cef6c2703b6",
    "PowerTrip-LLMFull-v0": "89ac18aea2a76fdf",
    "PowerTrip-Large-v0": "5794fc75924b5b99",
    "PowerTrip-Digits-v1": "b432bc198c116658",
    "PowerTrip-NonBlocking-v0": "3234af44102dd2f1",
    "PowerTrip-Solar-v0": "97c52fbfe6cd38a7",
    "PowerTrip-Wide-v0": "87cef00b07d338bb",
    "PowerTrip-Measured-v0": "ea104b52b57c1836",
    "PowerTrip-Wide-Measured-v0": "5a51867927172a41",
    "PowerTrip-Moving-v0": "490556801ae96125",
    "PowerTrip-Wide-Moving-v0": "2d8af0c5039e16b5",
    "PowerTrip-Carbon-v2": "77f253d897ea92a0",
    "PowerTrip-Carbon-Measured-v2": "5660d75c27fc6de6",
    "PowerTrip-Random-v0": "7bbecafc9acc4e93",
}
# Retired ID -> its last fingerprint: never registered again (its published numbers stand).
RETIRED = {
    "PowerTrip-Digits-v0": "50ce19c3d28af5b7",  # before the surrogate's refit to FedAvg
    # before the carbon observation
    "PowerTrip-Carbon-v0": "64d96cd9e144c829",
    "PowerTrip-Carbon-Measured-v0": "17fc5236f00c3418",
    # before the deadline per episode
    "PowerTrip-Carbon-v1": "fedae1d33b76cc60",
    "PowerTrip-Carbon-Measured-v1": "a70c431b7bf863d7",
}
# digits.toml's surrogate before that refit (commit a864517), which PowerTrip-Digits-v0 ran.
DIGITS_V0 = {
    "eta_local": 0.6838,
    "noise_b0": 158.7,
    "noise_p_b": 2540.0,
    "noise_gamma": 0.4249,
    "a0": 0.003635,
    "a_max": 0.9959,
    "p0": 104.9,
    "alpha": 15.15,
    "non_iid": 0.9973,
    "coverage_tau_rounds": 29.01,
    "coverage_ceiling": 0.08757,
}

# (ID, seed) -> (tta_h, rounds, energy_kwh)
POWERTRIP = {
    ("PowerTrip-v0", 0): (27.440826897847373, 388, 1468.1819244003016),
    ("PowerTrip-v0", 1): (26.796659426415086, 393, 1313.6142300135114),
    ("PowerTrip-NonBlocking-v0", 0): (26.71992148190837, 391, 1436.4454076444467),
    ("PowerTrip-NonBlocking-v0", 1): (25.99935169944284, 406, 1286.9934907904315),
    ("PowerTrip-Solar-v0", 0): (31.11018419582446, 413, 1390.8903079561642),
    ("PowerTrip-Solar-v0", 1): (29.718369609983572, 439, 1246.3422702202795),
    ("PowerTrip-Wide-v0", 0): (23.513462945554114, 348, 1328.4042313502027),
    ("PowerTrip-Wide-v0", 1): (22.57097223986131, 351, 1236.1899218814044),
}
FIRST_THREE = {
    ("PowerTrip-v0", 0): (48.0, 164, 1497.6513318580387),
    ("PowerTrip-v0", 1): (48.0, 240, 1862.359006876564),
    ("PowerTrip-NonBlocking-v0", 0): (48.0, 172, 1521.41276566241),
    ("PowerTrip-NonBlocking-v0", 1): (48.0, 242, 1859.7096839270134),
    ("PowerTrip-Solar-v0", 0): (72.0, 258, 1795.1873338239286),
    ("PowerTrip-Solar-v0", 1): (72.0, 248, 1943.7237331665349),
    ("PowerTrip-Wide-v0", 0): (48.0, 154, 1589.6958603387657),
    ("PowerTrip-Wide-v0", 1): (48.0, 104, 1229.3925644461451),
}

# The carbon tasks: (ID, policy, seed) -> (tta_h, rounds, energy_kwh, carbon_kg), the carbon
# emitted pinned beside the time, for PowerTrip and the carbon rule that needs no tuning.
CARBON = {
    ("PowerTrip-Carbon-v2", "PowerTrip", 0): (
        28.98645544675976,
        446,
        1479.9529593399836,
        235.0550518423523,
    ),
    ("PowerTrip-Carbon-v2", "PowerTrip", 1): (
        27.800481077086037,
        502,
        1260.5440688528445,
        178.29806860452328,
    ),
    ("PowerTrip-Carbon-v2", "CarbonGreedy", 0): (
        28.955218332227336,
        423,
        1530.8932502096898,
        184.75682373341633,
    ),
    ("PowerTrip-Carbon-v2", "CarbonGreedy", 1): (
        28.9317570463589,
        522,
        1112.0024433505816,
        98.35363587786239,
    ),
    ("PowerTrip-Carbon-Measured-v2", "PowerTrip", 0): (
        22.276715709639547,
        316,
        1207.131788738494,
        208.91021400507233,
    ),
    ("PowerTrip-Carbon-Measured-v2", "PowerTrip", 1): (
        30.771319057168018,
        468,
        1360.2191850825934,
        175.1670047487479,
    ),
    ("PowerTrip-Carbon-Measured-v2", "CarbonGreedy", 0): (
        24.74218554754491,
        398,
        767.4317593517776,
        79.75403017413673,
    ),
    ("PowerTrip-Carbon-Measured-v2", "CarbonGreedy", 1): (
        32.0237331154796,
        462,
        1330.7020445631658,
        128.11353402540982,
    ),
}


def _bump_hint(env_id: str) -> str:
    return f"{env_id}'s results changed: give it a new version (tests/test_versions.py)"


def test_every_suite_task_is_pinned() -> None:
    pinned = {env_id for env_id, _ in POWERTRIP} | {env_id for env_id, _ in FIRST_THREE}
    assert pinned == set(powertrip_env.SUITE_IDS)


@pytest.mark.parametrize(("env_id", "seed"), sorted(POWERTRIP))
def test_powertrip_results_are_pinned(env_id: str, seed: int) -> None:
    env = gym.make(env_id)
    row, _ = run_episode(env, make_policy("PowerTrip", env.unwrapped.params.n_sites), seed)
    tta, rounds, energy = POWERTRIP[env_id, seed]
    got = (float(row["tta_h"]), int(row["rounds"]), float(row["energy_kwh"]))
    assert got == pytest.approx((tta, rounds, energy), rel=1e-9), _bump_hint(env_id)


def test_every_carbon_task_is_pinned() -> None:
    assert {env_id for env_id, _, _ in CARBON} == set(powertrip_env.CARBON_SUITE_IDS)


@pytest.mark.parametrize(("env_id", "policy", "seed"), sorted(CARBON))
def test_carbon_results_are_pinned(env_id: str, policy: str, seed: int) -> None:
    env = gym.make(env_id)
    row, _ = run_episode(env, make_policy(policy, env.unwrapped.params.n_sites), seed)
    got = (float(row["tta_h"]), int(row["rounds"]), float(row["energy_kwh"]))
    got += (float(row["carbon_kg"]),)
    assert got == pytest.approx(CARBON[env_id, policy, seed], rel=1e-9), _bump_hint(env_id)


@pytest.mark.parametrize(("env_id", "seed"), sorted(FIRST_THREE))
def test_fixed_set_results_are_pinned(env_id: str, seed: int) -> None:
    env = gym.make(env_id)
    env.reset(seed=seed)
    mask = np.zeros(env.action_space.shape, dtype=np.int8)
    mask[:3] = 1
    while True:
        *_, terminated, truncated, info = env.step(mask)
        if terminated or truncated:
            break
    got = (float(info["tta_h"]), int(info["rounds"]), float(info["energy_kwh"]))
    assert got == pytest.approx(FIRST_THREE[env_id, seed], rel=1e-9), _bump_hint(env_id)


# --------------------------------------------------------------------------- fingerprints


def _plain(value: Any) -> Any:
    if isinstance(value, Path):  # the file's bytes are hashed under "data"
        return value.name
    raise TypeError(f"cannot fingerprint {value!r}")


def fingerprint(env_id: str, scenario: str | Path | None = None) -> str:
    """A hash of what determines ``env_id``'s results besides the code: its resolved scenario's
    parameters (or ``scenario``'s, run under the ID's other arguments), the bytes of the data
    files it reads, and its registration's other arguments. The scenario's name, description
    and file locations are left out: they change no result."""
    spec = gym.spec(env_id)
    kwargs = dict(spec.kwargs)
    loaded = load_scenario(scenario if scenario is not None else kwargs["scenario"])
    kwargs.pop("scenario", None)
    values = dataclasses.asdict(loaded)
    for key in ("name", "description", "source", "inputs", "sites_source"):
        values.pop(key)
    if not loaded.unknowns.drawn:  # the known track: the section's defaults change no result
        values.pop("unknowns")
    if not loaded.moving.on:  # a static world: nor do [moving]'s
        values.pop("moving")
    if loaded.trace.carbon_file is None:  # no carbon intensity: nor do the carbon fields'
        for key in ("carbon_file", "carbon_kind"):
            values["trace"].pop(key)
        for site in values["sites"]:
            site.pop("carbon_zone")
        values["episode"].pop("carbon_ref_kg")
    if not loaded.episode.deadline_slack:  # one deadline for all: nor do the per-episode fields
        for key in ("deadline_slack", "deadline_ref_h"):
            values["episode"].pop(key)
    files = [path for path in loaded.inputs if path.suffix != ".toml"]
    sampler = as_sampler(kwargs.pop("sites", None))
    if sampler is not None:  # the catalogue is drawn: the draw's parameters and its cities
        values["sampler"] = dataclasses.asdict(sampler)
        files.append(data_dir() / sampler.cities)
    record = {
        "scenario": values,
        "kwargs": kwargs,
        "max_episode_steps": spec.max_episode_steps,
        "data": {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files},
    }
    text = json.dumps(record, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _next_version(env_id: str) -> str:
    namespace, name, version = parse_env_id(env_id)
    return f"{namespace + '/' if namespace else ''}{name}-v{(version or 0) + 1}"


def version_problems(
    current: Mapping[str, str], recorded: Mapping[str, str], retired: Mapping[str, str]
) -> list[str]:
    """What is wrong with the registered IDs' fingerprints (``current``) against the recorded
    ones, each in a sentence that says what to do; empty when every version is right."""
    problems = []
    for env_id, got in current.items():
        namespace, name, version = parse_env_id(env_id)
        later = [
            old
            for old in retired
            if parse_env_id(old)[:2] == (namespace, name)
            and (parse_env_id(old)[2] or 0) >= (version or 0)
        ]
        if later:
            problems.append(
                f"{env_id} is registered, but {', '.join(later)} was retired: an ID's version "
                "only goes up, so that a published number never meets other results"
            )
        elif env_id not in recorded:
            problems.append(
                f"{env_id} has no fingerprint: record it in tests/test_versions.py's "
                f'FINGERPRINTS: "{env_id}": "{got}"'
            )
        elif recorded[env_id] != got:
            bumped = _next_version(env_id)
            problems.append(
                f"{env_id}'s scenario or data changed (fingerprint {got}, recorded "
                f"{recorded[env_id]}), so its results change while its version did not: "
                f"register it as {bumped} (powertrip_env/__init__.py, then the docs and "
                f'`powertrip docs`), move "{env_id}": "{recorded[env_id]}" to RETIRED and record '
                f'"{bumped}": "{got}" in FINGERPRINTS'
            )
    for env_id in sorted(set(recorded) - set(current)):
        problems.append(
            f"{env_id} has a fingerprint but is not registered: if it was given a new version, "
            f'move "{env_id}": "{recorded[env_id]}" to RETIRED'
        )
    return problems


def test_no_registered_id_changed_its_inputs_without_a_new_version() -> None:
    shipped = [*powertrip_env.ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS]
    current = {env_id: fingerprint(env_id) for env_id in shipped}
    assert version_problems(current, FINGERPRINTS, RETIRED) == []


def test_the_check_catches_a_refit_that_keeps_the_version(tmp_path) -> None:
    """PowerTrip-Digits' surrogate was refitted (digits.toml's values changed) while its ID
    stayed -v0: the fingerprint of the refit differs from -v0's, so had the check been there,
    the refit could not have kept the ID."""
    text = scenario_path("digits").read_text(encoding="utf-8")
    for key, value in DIGITS_V0.items():
        text, n = re.subn(rf"^{key} = \S+", f"{key} = {value}", text, flags=re.MULTILINE)
        assert n == 1, key
    before = tmp_path / "digits.toml"
    before.write_text(text, encoding="utf-8")
    assert fingerprint("PowerTrip-Digits-v1", before) == RETIRED["PowerTrip-Digits-v0"]
    refit = fingerprint("PowerTrip-Digits-v1")
    kept = {"PowerTrip-Digits-v0": refit}
    (problem,) = version_problems(kept, {"PowerTrip-Digits-v0": RETIRED["PowerTrip-Digits-v0"]}, {})
    assert "PowerTrip-Digits-v0's scenario or data changed" in problem
    assert (
        "register it as PowerTrip-Digits-v1" in problem
        and f'"PowerTrip-Digits-v1": "{refit}"' in problem
    )
    assert version_problems(kept, {}, RETIRED)[0].startswith("PowerTrip-Digits-v0 is registered")


def test_a_comment_or_a_name_changes_no_fingerprint(tmp_path) -> None:
    """Only what moves results counts: the same scenario with other comments, another name
    and description, in another folder, has the ID's fingerprint."""
    text = scenario_path("digits").read_text(encoding="utf-8")
    text = re.sub(r"^#.*$", "# another comment", text, flags=re.MULTILINE)
    text = re.sub(r'^name = "digits"', 'name = "my-digits"', text, flags=re.MULTILINE)
    copy = tmp_path / "elsewhere" / "mine.toml"
    copy.parent.mkdir()
    copy.write_text(text, encoding="utf-8")
    assert fingerprint("PowerTrip-Digits-v1", copy) == FINGERPRINTS["PowerTrip-Digits-v1"]


# ID -> the policies its track's planners start from (``Track.starts``): the Optimiser (and the
# carbon track's CarbonOptimiser) must not lose to any of them, so it plays each one's episode
# first. A policy added to or dropped from a track's rules changes these plans and so every
# score on the task's board; if this fails, bump the task's version as for a change of its
# inputs, then record the new list.
_COMMON = [
    "PowerTrip",
    "AllSites",
    "RandomK",
    "TopPower-1",
    "TopPower-2",
    "TopPower-4",
    "Nearest-2",
    "Nearest-4",
    "FastestK-4",
    "OortLike",
    "FedZeroLike",
]
_LOOKAHEAD = ["HorizonRule", "ForecastMPC"]
_ADAPTIVE = ["AdaptiveHorizon", "AdaptiveMPC", "ExploringHorizon"]
_CARBON = ["CarbonGreedy", "DeadlineHorizon", "FedZeroExcess"]
_INFORMED = ["Informed", "InformedMPC"]
_TRACKING = ["TrackingHorizon", "TrackingMPC"]
STARTS = {
    "PowerTrip-v0": [*_COMMON, "MyopicOptimal", *_LOOKAHEAD],
    "PowerTrip-NonBlocking-v0": [*_COMMON, "MyopicOptimal", *_LOOKAHEAD],
    "PowerTrip-Solar-v0": [*_COMMON, "MyopicOptimal", *_LOOKAHEAD],
    "PowerTrip-Wide-v0": [*_COMMON, *_LOOKAHEAD],
    "PowerTrip-Measured-v0": [*_COMMON, "MyopicOptimal", *_LOOKAHEAD, *_ADAPTIVE, *_INFORMED],
    "PowerTrip-Wide-Measured-v0": [*_COMMON, *_LOOKAHEAD, *_ADAPTIVE, *_INFORMED],
    "PowerTrip-Moving-v0": [
        *_COMMON,
        "MyopicOptimal",
        *_LOOKAHEAD,
        *_ADAPTIVE,
        *_TRACKING,
        "InformedDraw",
        *_INFORMED,
    ],
    "PowerTrip-Wide-Moving-v0": [
        *_COMMON,
        *_LOOKAHEAD,
        *_ADAPTIVE,
        *_TRACKING,
        "InformedDraw",
        *_INFORMED,
    ],
    "PowerTrip-Carbon-v2": [*_COMMON, "MyopicOptimal", *_LOOKAHEAD, *_CARBON],
    "PowerTrip-Carbon-Measured-v2": [
        *_COMMON,
        "MyopicOptimal",
        *_LOOKAHEAD,
        *_ADAPTIVE,
        *_CARBON,
        "AdaptiveCarbonGreedy",
        "AdaptiveDeadlineHorizon",
        *_INFORMED,
    ],
}


@pytest.mark.parametrize("env_id", powertrip_env.suite_ids())
def test_the_planners_starts_change_only_with_the_version(env_id: str) -> None:
    from powertrip_env.harness.tracks import track_for

    env = gym.make(env_id)
    try:
        track = track_for(env_id, env)
        starts = track.starts(env.unwrapped.n_sites, bool(env.unwrapped.params.measured))
    finally:
        env.close()
    assert env_id in STARTS, f"{env_id} is a suite task: record STARTS[{env_id!r}] = {starts}"
    assert starts == STARTS[env_id], (
        f"{env_id}'s planners would start from {starts}, not {STARTS[env_id]}: the Optimiser's "
        "plans and so every score on its board may move. Bump the task's version "
        "(powertrip_env/__init__.py) and record the new list here."
    )
