"""The leaderboard command (harness/reports/benchmark.py): its JSON, its files, and the reference
that no shipped deployable policy beats on any suite task, with jitter on and off."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import powertrip_env
from powertrip_env.baselines.references import play_on_copy
from powertrip_env.baselines.registry import default_policy_names, make_policy
from powertrip_env.harness.reports import benchmark
from powertrip_env.harness.tracks import time


# About 20 s of CPU (the Optimiser and the bound on four flagship and Wide episodes): CI's slow
# stage. tests/test_output_dirs.py runs the command on the flagship in every run.
@pytest.mark.slow
def test_quick_leaderboard_writes_its_set_and_json(tmp_path, capsys) -> None:
    out = tmp_path / "bench"
    argv = ["--env", "PowerTrip-v0", "--env", "PowerTrip-Wide-v0", "--quick", "--out", str(out)]
    assert benchmark.main([*argv, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed.strip().splitlines()[-1])
    # MyopicOptimal cannot run on 24 sites: in the flagship's table, not in the aggregate
    assert "MyopicOptimal" in summary["tasks"]["PowerTrip-v0"]["policies"]
    assert "MyopicOptimal" not in summary["tasks"]["PowerTrip-Wide-v0"]["policies"]
    assert "MyopicOptimal" not in summary["aggregate"]
    assert "Not in the aggregate, as they did not run every task: MyopicOptimal." in printed
    assert summary["tasks"]["PowerTrip-Wide-v0"]["reference_never_beaten"] is True
    task = summary["tasks"]["PowerTrip-v0"]
    for key in ("optimiser_headroom", "optimum_upper_h", "optimum_lower_h", "gap"):
        assert isinstance(task[key], float) and np.isfinite(task[key])
    assert task["reference_never_beaten"] is True
    assert task["optimum_lower_h"] <= task["optimum_upper_h"]
    assert task["gap"] == pytest.approx(task["optimum_upper_h"] / task["optimum_lower_h"])
    policies = task["policies"]
    assert policies["PowerTrip"]["score"] == 0.0 and policies["Optimiser"]["score"] == 1.0
    assert policies["Optimiser"]["tta_h"] == pytest.approx(task["optimum_upper_h"])
    assert {"HorizonRule", "ForecastMPC", "MyopicOptimal"} <= set(policies)
    for name, agg in summary["aggregate"].items():
        assert agg["ci95"][0] <= agg["mean"] + 1e-9 <= agg["ci95"][1] + 2e-9, name
        assert 0.0 <= agg["success"] <= 1.0 and agg["never_finished"] == (agg["success"] == 0)
    assert summary["aggregate"]["Optimiser"]["success"] == 1.0
    assert policies["Optimiser"]["success"] == 1.0
    assert policies["Optimiser"]["never_finished"] is False
    files = {"episodes.csv", "leaderboard.md", "leaderboard.json", "profile.png"}
    assert {p.name for p in out.iterdir()} == files
    assert (out / "profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the folder reads back as the run it was: its episodes give its JSON and Markdown again
    episodes, facts, saved = benchmark.read_run(out)
    assert saved == summary and "success" in episodes.columns
    markdown, again = benchmark.report(episodes, facts)
    assert again == summary
    assert markdown + "\n" == (out / "leaderboard.md").read_text(encoding="utf-8")
    # a used folder is refused before anything runs
    assert benchmark.main(["--env", "PowerTrip-v0", "--quick", "--out", str(out)]) == 2


def test_unknown_task_is_named(capsys) -> None:
    with pytest.raises(SystemExit) as stop:  # argparse refuses it, before anything runs
        benchmark.main(["--env", "PowerTrip-LoRA-v0", "--quick"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "argument --env: 'PowerTrip-LoRA-v0' is not a suite task" in err
    assert all(task in err for task in powertrip_env.SUITE_IDS)


def _never_beaten(env_id: str, jitter: bool, episodes: int, reference_runs=None) -> list[str]:
    """Episodes in which a shipped deployable policy beats the registry's reference.

    With ``reference_runs`` (tests/conftest.py; one episode only, where the reference is a new
    one either way) the reference's episode is the one tests/test_optimum.py plays too, played
    once per test run."""
    assert reference_runs is None or episodes == 1
    env = gym.make(env_id, split="test", jitter=jitter)
    n = env.unwrapped.params.n_sites
    reference = make_policy("Optimiser", n)
    deployable = [make_policy(name, n) for name in default_policy_names(n)]
    beaten = []
    for e in range(episodes):
        env.reset(seed=e)
        if reference_runs is not None:
            ref = reference_runs(env_id, jitter, e, "Optimiser").run
        else:
            ref = play_on_copy(env, reference)
        for policy in deployable:  # each reset once per episode, as evaluate does
            env.reset(seed=e)
            run = play_on_copy(env, policy)
            if run.tta_h < ref.tta_h - 1e-9:
                beaten.append(f"{env_id} jitter={jitter} seed={e}: {run.name} {run.tta_h:.3f}")
    return beaten


@pytest.mark.parametrize("jitter", [False, True])
@pytest.mark.parametrize(
    "env_id",  # the flagship in every run, the other tasks in CI's slow stage
    [
        pytest.param(i, marks=[] if i == "PowerTrip-v0" else [pytest.mark.slow])
        for i in powertrip_env.SUITE_IDS
    ],
)
def test_no_deployable_policy_beats_the_reference(
    env_id: str, jitter: bool, reference_runs
) -> None:
    assert _never_beaten(env_id, jitter, episodes=1, reference_runs=reference_runs) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "jitter"),
    # every task as the board plays it (without jitter), and the flagship with jitter too; the
    # one-episode check above covers every task both ways (each of these takes 1.5-2 minutes
    # of CI's slow stage)
    [(i, False) for i in powertrip_env.SUITE_IDS] + [("PowerTrip-v0", True)],
)
def test_no_deployable_policy_beats_the_reference_in_30_episodes(env_id: str, jitter: bool) -> None:
    assert _never_beaten(env_id, jitter, episodes=30) == []


def test_every_suite_task_is_sequential_on_real_power() -> None:
    """Each task runs on the flagship's real data (Google PDUs and Solcast PV) and is not one
    of the one-shot settings."""
    for env_id in powertrip_env.SUITE_IDS:
        scenario = gym.make(env_id).unwrapped.scenario
        assert scenario.trace.file.name == "google_cella_2019.csv", env_id
        assert scenario.trace.pv_file.name == "solcast_pv_2022.csv", env_id
    assert len(powertrip_env.SUITE_IDS) >= 4
    assert "PowerTrip-LoRA-v0" not in powertrip_env.SUITE_IDS
    n_sites = {gym.make(i).unwrapped.params.n_sites for i in powertrip_env.SUITE_IDS}
    assert max(n_sites) > 16  # one task beyond exhaustive enumeration
    modes = {gym.make(i).unwrapped.params.nonblocking for i in powertrip_env.SUITE_IDS}
    assert modes == {False, True}


@pytest.mark.slow  # two flagship episodes of every policy and the Optimiser, about 10 s of CPU
def test_a_saved_agent_joins_the_leaderboard(tmp_path, capsys) -> None:
    """``--model`` puts a saved agent on every task it is given, scored like the baselines."""
    out = tmp_path / "bench"
    argv = ["--env", "PowerTrip-v0", "--quick", "--model", "pretrained", "--out", str(out)]
    assert benchmark.main([*argv, "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    agent = summary["tasks"]["PowerTrip-v0"]["policies"]["pretrained"]
    assert np.isfinite(agent["score"]) and 0.0 < agent["tta_h"] <= 48.0
    assert "pretrained" in summary["aggregate"]
    # the reference is never beaten by a shipped deployable baseline; an agent may beat it
    assert summary["tasks"]["PowerTrip-v0"]["reference_never_beaten"] is True


def test_one_episode_a_task_is_refused_before_the_run(capsys) -> None:
    """The intervals resample start days: a board of one episode a task could not be written,
    so the command says so at once instead of after the run."""
    with pytest.raises(SystemExit) as stop:
        benchmark.main(["--episodes", "1", "--out", "/nonexistent/never-written"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--episodes: 1" in err and "at least 2" in err


# --------------------------------------------------------------------------- the two tracks

_STARTS = ["2022-06-28T03:00:00Z", "2022-06-29T03:00:00Z"]
# mean TTA (h) per policy: a known task and a measured one, whose chain runs PowerTrip 30 →
# HorizonRule 26 → AdaptiveMPC 24 → InformedMPC 23 → Optimiser 22
_KNOWN = {"PowerTrip": 30.0, "HorizonRule": 25.0, "ForecastMPC": 26.0, "Optimiser": 22.0}
_MEASURED = {
    **_KNOWN,
    "HorizonRule": 26.0,
    "ForecastMPC": 27.0,
    "AdaptiveHorizon": 25.0,
    "AdaptiveMPC": 24.0,
    "ExploringHorizon": 24.5,
    "Informed": 23.5,
    "InformedMPC": 23.0,
}


def _two_tracks() -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    rows = []
    facts: dict[str, dict[str, Any]] = {}
    for task, means, track in (("K-v0", _KNOWN, "known"), ("M-v0", _MEASURED, "measured")):
        for policy, mean in {**means, time.BOUND: 21.0}.items():
            for e, start in enumerate(_STARTS):
                rows.append(
                    {
                        "task": task,
                        "policy": policy,
                        "episode": e,
                        "start_time": start,
                        "tta_h": mean + (e - 0.5),
                        "success": True,
                    }
                )
        facts[task] = {
            "track": track,
            "optimiser_headroom": 1.2,
            "optimum_upper_h": 22.0,
            "optimum_lower_h": 21.0,
            "gap": 22.0 / 21.0,
            "reference_never_beaten": True,
            "n_sites": 10,
        }
        if track == "measured":
            facts[task].update(time.room_chain(pd.Series(means)))
    return pd.DataFrame(rows), facts


def test_the_room_chain_splits_powertrip_to_the_optimiser() -> None:
    chain = time.room_chain(pd.Series(_MEASURED))
    assert [link["policy"] for link in chain["chain"]] == [
        "PowerTrip",
        "HorizonRule",
        "AdaptiveMPC",
        "InformedMPC",
        "Optimiser",
    ]
    assert chain["best_adaptive"] == "AdaptiveMPC" and chain["informed_h"] == 23.0
    assert chain["learnable_room"] == pytest.approx(24.0 / 23.0)
    shares = [link["share"] for link in chain["chain"][1:]]
    assert shares == pytest.approx([4 / 8, 2 / 8, 1 / 8, 1 / 8])
    assert sum(shares) == pytest.approx(1.0)


def test_each_track_has_its_own_board_and_aggregate(tmp_path) -> None:
    """The adaptive baselines run only on the measured track, so the known track's aggregate is
    what it was without it; the measured task's chain and learnable room are in the JSON and the
    Markdown, and the run draws the chains."""
    frame, facts = _two_tracks()
    markdown, summary = benchmark.report(frame, facts)
    known_only, alone = benchmark.report(frame[frame["task"] == "K-v0"], {"K-v0": facts["K-v0"]})
    assert summary["aggregate"] == alone["aggregate"] == summary["aggregate_by_track"]["known"]
    assert "AdaptiveMPC" not in summary["aggregate"]
    assert "AdaptiveMPC" in summary["aggregate_by_track"]["measured"]
    assert summary["tasks"]["M-v0"]["learnable_room"] == pytest.approx(24.0 / 23.0)
    assert summary["tasks"]["M-v0"]["track"] == "measured"
    assert "# Leaderboard: the measured track" in markdown
    assert "| M-v0 | PowerTrip 30.00 | HorizonRule 26.00 (50%) |" in markdown
    board = known_only[known_only.index("# Leaderboard") :]
    assert board in markdown  # the known board whole, as a run of the known task alone gives it
    benchmark.write_run(tmp_path, frame, markdown, summary)
    assert (tmp_path / time.CHAIN).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_merge_makes_one_board_of_runs_of_each_track(tmp_path, capsys) -> None:
    """``--merge`` reads finished runs and writes the board their episodes give together, as a
    run of both tracks would; a task two runs hold, and runs of different episode counts, are
    refused before anything is written."""
    frame, facts = _two_tracks()
    for task in facts:
        facts[task]["episodes"] = 2
    runs = []
    for task in ("M-v0", "K-v0"):  # the measured run first: the board's order is the suite's
        here = frame[frame["task"] == task]
        markdown, summary = benchmark.report(here, {task: facts[task]})
        runs.append(tmp_path / task)
        runs[-1].mkdir()
        benchmark.write_run(runs[-1], here, markdown, summary)
    out = tmp_path / "merged"
    argv = ["--merge", str(runs[0]), "--merge", str(runs[1]), "--out", str(out), "--no-progress"]
    assert benchmark.main(argv) == 0
    episodes, merged_facts, saved = benchmark.read_run(out)
    _, together = benchmark.report(frame, {"K-v0": facts["K-v0"], "M-v0": facts["M-v0"]})
    assert saved == together  # the known track's aggregate at the top, as a run of both gives
    assert list(merged_facts) == ["K-v0", "M-v0"] and len(episodes) == len(frame)
    capsys.readouterr()
    again = ["--merge", str(runs[1]), "--merge", str(out), "--out", str(tmp_path / "x")]
    with pytest.raises(SystemExit) as stop:
        benchmark.main(again)
    assert stop.value.code == 2
    assert "K-v0 is in" in capsys.readouterr().err and not (tmp_path / "x").exists()
    with pytest.raises(SystemExit):
        benchmark.main(["--merge", str(out), "--env", "PowerTrip-v0", "--out", str(tmp_path / "y")])
    assert "drop --env" in capsys.readouterr().err
    longer = tmp_path / "K-v0-3"
    longer.mkdir()
    here = frame[frame["task"] == "K-v0"]
    third = here[here["episode"] == 1].assign(episode=2, start_time="2022-06-30T03:00:00Z")
    here = pd.concat([here, third], ignore_index=True)
    markdown, summary = benchmark.report(here, {"K-v0": {**facts["K-v0"], "episodes": 3}})
    benchmark.write_run(longer, here, markdown, summary)
    with pytest.raises(SystemExit):
        benchmark.main(
            ["--merge", str(runs[0]), "--merge", str(longer), "--out", str(tmp_path / "z")]
        )
    assert "different numbers of episodes" in capsys.readouterr().err


def test_readme_tables_fills_the_measured_block_from_a_run_of_both_tracks(tmp_path) -> None:
    import maintainers.readme_tables as readme_tables

    frame, facts = _two_tracks()
    markdown, summary = benchmark.report(frame, facts)
    run = tmp_path / "run"
    run.mkdir()
    benchmark.write_run(run, frame, markdown, summary)
    names = (readme_tables.LEADERBOARD, readme_tables.SCORES, readme_tables.MEASURED)
    readme = tmp_path / "README.md"
    readme.write_text(
        "".join(f"<!-- results:{n} -->\nold\n<!-- /results:{n} -->\n" for n in names),
        encoding="utf-8",
    )
    argv = ["--readme", str(readme), "--tables", "leaderboard", "--leaderboard-from", str(run)]
    assert readme_tables.main(argv) == 0
    text = readme.read_text(encoding="utf-8")
    measured = text.split("<!-- results:leaderboard-measured -->")[1]
    assert "| M-v0 | PowerTrip 30.00 |" in measured and "AdaptiveMPC" in measured
    assert "K-v0" not in measured
    scores = text.split("<!-- results:leaderboard-scores -->")[1].split("<!-- /results")[0]
    assert "AdaptiveMPC" not in scores and "M-v0" not in scores
    assert (tmp_path / readme_tables.CHAIN_FIGURE).is_file()


# The carbon track, as users run it: two episodes of each policy and the three references on the
# carbon flagship (about 40 s of CPU): CI's slow stage.
@pytest.mark.slow
def test_the_carbon_track_is_scored_on_its_own_objective(tmp_path, capsys) -> None:
    from maintainers import readme_tables

    out = tmp_path / "bench"
    argv = ["--env", "PowerTrip-Carbon-v2", "--quick", "--out", str(out), "--no-progress"]
    assert benchmark.main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    task = summary["tasks"]["PowerTrip-Carbon-v2"]
    assert task["track"] == "carbon" and summary["normaliser"]["top"] == "CarbonOptimiser"
    assert task["reference_never_beaten"] is True and task["bound_holds"] is True
    assert task["optimum_lower_kg"] <= task["optimum_upper_kg"]
    # the deadline reported is the mean of the episodes' own (each set at its start), under the cap
    env = gym.make("PowerTrip-Carbon-v2", split="test", jitter=False)
    own = []
    for e in (0, 1):  # the quick run's two episodes
        env.reset(seed=e)
        own.append(env.unwrapped.decision_view().time_budget_s)
    assert task["deadline_h"] == pytest.approx(np.mean(own) / 3600.0)
    assert task["deadline_cap_h"] == 48.0 and task["carbon_ref_kg"] == 1000.0
    policies = task["policies"]
    assert {"CarbonGreedy", "DeadlineHorizon", "FedZeroExcess", "Optimiser"} <= set(policies)
    # the planner on the true future is a reference; the deployable planner is off the board
    assert "PerfectForecastPlanner" in policies and "CarbonPlanner" not in policies
    # the room, split: PowerTrip -> the best rule -> the perfect forecast -> the clairvoyant plan
    chain = task["chain"]
    assert [link["step"] for link in chain] == [
        "PowerTrip",
        "rule",
        "perfect-forecast",
        "optimiser",
    ]
    assert sum(link["share"] for link in chain[1:]) == pytest.approx(1.0)
    assert task["learnable_room"] == pytest.approx(chain[1]["cost_kg"] / chain[2]["cost_kg"])
    assert all("cost_kg" in row and "tta_h" not in row for row in policies.values())
    assert policies["CarbonOptimiser"]["cost_kg"] == pytest.approx(task["optimum_upper_kg"])
    # the cost is the episodes' grid carbon, a miss priced at carbon_ref_kg
    episodes, facts, saved = benchmark.read_run(out)
    rows = episodes[episodes["policy"] == "AllSites"]
    cost = rows["carbon_kg"] + 1000.0 * ~rows["success"].astype(bool)
    assert policies["AllSites"]["cost_kg"] == pytest.approx(cost.mean())
    assert benchmark.report(episodes, facts)[1] == saved
    assert (out / "tradeoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # readme-tables lays the carbon board out from the finished run, and draws its figure
    readme = tmp_path / "README.md"
    blocks = ("leaderboard", "leaderboard-scores", "leaderboard-carbon")
    text = "".join(f"<!-- results:{b} -->\nold\n<!-- /results:{b} -->\n" for b in blocks)
    readme.write_text(text)
    argv = ["--readme", str(readme), "--tables", "leaderboard", "--leaderboard-from", str(out)]
    assert readme_tables.main(argv) == 0
    text = readme.read_text()
    assert f"| PowerTrip-Carbon-v2 | 6 | {task['deadline_h']:.1f} |" in text
    assert "mean carbon cost" in text
    assert text.count("old") == 2  # the known track's blocks: it did not run
    assert (tmp_path / "docs" / "carbon-tradeoff.png").is_file()
