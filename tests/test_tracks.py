"""A track is one declaration: a kind of task defined outside the package joins the benchmark
with no project file changed, and every tool asks a task's track rather than lists or flags.

The toy track here is what a user would write: its own objective (the energy drawn to reach the
target accuracy), one rule besides PowerTrip, one reference (a rule that trains on two nearby
sites, frugal rather than fast, at score 1); an ID registered on it; then
``powertrip benchmark --quick --env <that ID>`` prints its own board and writes its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.envs.registration import registry

import powertrip_env
from powertrip_env.baselines.registry import make_policy
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.reports import benchmark, measures
from powertrip_env.harness.tracks import (
    CARBON,
    KNOWN,
    MEASURED,
    TRACKS,
    Track,
    register_track,
    track_for,
    track_named,
    track_of,
)
from powertrip_env.tasks import TASKS

TOY_ID = "ToyEnergy-v0"
ENERGY = measures.Measure(
    "energy to accuracy",
    "kWh",
    "energy_kwh",
    "a failed episode counts the energy it drew up to the time budget",
    bracketed=False,
)


@pytest.fixture
def toy_track() -> Iterator[Track]:
    """The energy track and an ID on it, registered as a user would, then taken back out."""
    track = register_track(
        Track(
            "energy",
            title="Leaderboard: energy to accuracy",
            rules=lambda n_sites, measured: ["PowerTrip", "MyopicOptimal"],
            references=("Nearest-2",),  # the frugal end: two sites near the others
            top="Nearest-2",
            measure=ENERGY,
        )
    )
    powertrip_env.register_task(TOY_ID, "default", track="energy", suite=True)
    try:
        yield track
    finally:
        TASKS.pop(TOY_ID, None)
        registry.pop(TOY_ID, None)
        TRACKS.pop("energy", None)


@pytest.mark.usefixtures("toy_track")
def test_a_track_defined_outside_the_package_gets_its_own_board(tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench"
    code = benchmark.main(["--quick", "--env", TOY_ID, "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "# Leaderboard: energy to accuracy" in printed
    assert "scored on energy to accuracy (kWh)" in printed  # the track's own table of facts
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary == json.loads((out / benchmark.BOARD_JSON).read_text(encoding="utf-8"))
    task = summary["tasks"][TOY_ID]
    assert task["track"] == "energy"
    assert set(task["policies"]) == {"PowerTrip", "MyopicOptimal", "Nearest-2"}
    assert all("energy_kwh" in entry for entry in task["policies"].values())
    assert summary["normaliser"] == {"zero": "PowerTrip", "top": "Nearest-2"}
    assert list(summary["aggregate_by_track"]) == ["energy"]
    # the board is scored on energy, not time: its means are the episodes' energy
    frame = benchmark.read_run(out)[0]
    energy = frame[frame["policy"] == "MyopicOptimal"]["energy_kwh"].mean()
    assert task["policies"]["MyopicOptimal"]["energy_kwh"] == pytest.approx(energy)
    assert task["policies"]["Nearest-2"]["score"] == 1.0
    assert (out / benchmark.PROFILE).is_file()


def test_the_toy_id_joins_the_suite_and_evaluate_plays_its_rules(toy_track: Track) -> None:
    assert TOY_ID in powertrip_env.suite_ids() and TOY_ID in powertrip_env.suite_ids("energy")
    assert track_of(TOY_ID) is toy_track
    result = evaluate(TOY_ID, ["all"], episodes=1, seed=0, progress=False)
    assert list(result.summary["policy"]) == ["PowerTrip", "MyopicOptimal"]


def test_every_shipped_id_names_its_track_at_registration() -> None:
    names = {task.env_id: task.track for task in TASKS.values()}
    assert {eid for eid, name in names.items() if name == "measured"} == set(
        powertrip_env.MEASURED_SUITE_IDS
    )
    assert names["PowerTrip-Carbon-Measured-v2"] == "carbon"  # a carbon task that is measured
    assert set(powertrip_env.ENV_IDS) | set(powertrip_env.SAMPLED_ENV_IDS) == set(names)
    for env_id, name in names.items():  # registered with the objective its track declares
        assert gym.spec(env_id).kwargs.get("reward_mode") == track_named(name).objective


def test_track_for_falls_back_on_what_the_scenario_draws() -> None:
    env = gym.make("PowerTrip-v0", scenario="measured")
    try:
        assert track_for("PowerTrip-v0", env) is KNOWN  # the ID's own
        assert track_for("PowerTrip-v0", env, scenario_given=True) is MEASURED
    finally:
        env.close()
    assert track_of("NoSuchID-v0") is None


def test_registering_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        powertrip_env.register_task("PowerTrip-v0", "default")
    with pytest.raises(ValueError, match="already registered"):
        register_track(Track("known", title="x", rules=lambda n, m: [], references=("A",), top="A"))
    with pytest.raises(ValueError, match="no track named 'nope'; registered: known, measured"):
        track_named("nope")
    with pytest.raises(ValueError, match="top='B' is not among references"):
        Track("x", title="x", rules=lambda n, m: [], references=("A",), top="B")


def test_the_tracks_rules_are_what_their_tasks_can_run() -> None:
    assert "AdaptiveHorizon" not in KNOWN.rules(10, False)
    assert MEASURED.rules(10, True)[-3:] == ["AdaptiveHorizon", "AdaptiveMPC", "ExploringHorizon"]
    assert MEASURED.told(True) == ["Informed", "InformedMPC"]
    carbon_measured = CARBON.rules(6, True)
    assert carbon_measured[-2:] == ["AdaptiveCarbonGreedy", "AdaptiveDeadlineHorizon"]
    assert "AdaptiveCarbonGreedy" not in CARBON.rules(6, False)
    assert CARBON.told(False) == [] and CARBON.told(True) == ["Informed", "InformedMPC"]


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-Measured-v0", "PowerTrip-Carbon-v2"])
def test_a_tracks_starts_are_what_the_planner_would_pick_unasked(env_id: str) -> None:
    """Without a track a planner starts from every rule the scenario can run; a track's declared
    starts are that same list on its tasks, so naming them moved no published number."""
    env = gym.make(env_id, jitter=False)
    try:
        env.reset(seed=0)
        track = track_for(env_id, env)
        n_sites, measured = env.unwrapped.n_sites, bool(env.unwrapped.params.measured)
        declared = make_policy("Optimiser", n_sites, 0, starts=track.starts(n_sites, measured))
        unasked = make_policy("Optimiser", n_sites, 0)
        names = []
        for planner in (declared, unasked):
            extra = planner.extra_starts
            picked = extra(env.unwrapped.decision_view()) if callable(extra) else extra
            names.append([p.name for p in picked])
        assert names[0] == names[1]
    finally:
        env.close()


class _Played(Exception):
    """Stops ``evaluate`` once it has resolved what it would play."""


@pytest.mark.parametrize(
    ("env_id", "present", "absent"),
    [
        ("PowerTrip-v0", ["HorizonRule"], ["AdaptiveHorizon", "CarbonGreedy"]),
        ("PowerTrip-Measured-v0", ["AdaptiveHorizon", "ExploringHorizon"], ["CarbonGreedy"]),
        ("PowerTrip-Carbon-v2", ["CarbonGreedy", "FedZeroExcess"], ["AdaptiveCarbonGreedy"]),
        ("PowerTrip-Carbon-Measured-v2", ["AdaptiveCarbonGreedy", "AdaptiveMPC"], []),
    ],
)
def test_evaluate_all_plays_the_tasks_track_rules(monkeypatch, env_id, present, absent) -> None:
    """``--policies all`` is the task's track's rules: the adaptive rules on a measured task, the
    carbon rules on a carbon task (it once gave the known track's everywhere)."""
    from powertrip_env.harness.evaluation import evaluate as module

    def stop(env_id, entries, *args):
        raise _Played([entry.label for entry in entries])

    monkeypatch.setattr(module, "_play_entries", stop)
    with pytest.raises(_Played) as played:
        evaluate(env_id, ["all", "references"], episodes=1, progress=False)
    names = played.value.args[0]
    env = gym.make(env_id)
    try:
        track = track_for(env_id, env)
        measured = bool(env.unwrapped.params.measured)
        assert names == [*track.rules(env.unwrapped.n_sites, measured), *track.references]
    finally:
        env.close()
    assert set(present) <= set(names) and not set(absent) & set(names)
