"""The multi-job board's arithmetic: Jain's index, each task's facts, the tables, the files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pettingzoo")

from powertrip_env.harness.multijob.board import (
    BOARD_KEY,
    facts,
    jain,
    markdown,
    read_board,
    summary_markdown,
    write,
)
from powertrip_env.harness.multijob.play import BOUND, HINDSIGHT, hindsight_family

TASK = "PowerTrip-MultiJob-v0"


def test_jain_is_one_for_equal_values_and_one_over_k_when_one_takes_all():
    assert jain(np.array([2.0, 2.0, 2.0])) == pytest.approx(1.0)
    assert jain(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert jain(np.array([1.0, 3.0])) == pytest.approx(16 / (2 * 10))


def frame(costs: dict[str, list[float]]) -> pd.DataFrame:
    """A task's episodes with the given mean TTAs per policy (one value per episode)."""
    rows = []
    for policy, values in costs.items():
        for e, v in enumerate(values):
            rows.append({
                "task": TASK, "policy": policy, "episode": e, "mean_tta_h": v,
                "makespan_h": 2 * v, "jain": 0.9, "energy_kwh": 100.0, "carbon_kg": 0.0,
                "jobs_succeeded": 3, "job_tta_h": "", "played": policy,
            })  # fmt: skip
    return pd.DataFrame(rows)


COSTS = {
    "Independent-PowerTrip": [15.0, 16.0],
    "Independent-HorizonRule": [13.0, 14.0],
    "Coordinated": [12.0, 12.0],
    HINDSIGHT: [11.5, 12.0],
    BOUND: [10.0, 10.5],
}


def test_a_task_s_facts_give_the_bracket_the_room_and_the_checks():
    f = facts(frame(COSTS))
    assert f["bracket_h"] == [10.25, 11.75]
    assert f["gap"] == pytest.approx(11.75 / 10.25)
    assert f["coordination_room"] == pytest.approx(13.5 / 12.0)
    assert f["reference_never_beaten"] and f["bound_holds"]
    assert f["policies"][BOUND]["jain"] is None and f["policies"][BOUND]["energy_kwh"] is None
    assert f["policies"]["Coordinated"]["carbon_kg"] is None  # the flagship's sites: no grid data
    assert f["jobs"] == ["diloco", "lora", "opt"] and f["episodes"] == 2


def test_a_contender_that_beats_the_reference_once_is_reported():
    beaten = {**COSTS, "PPO-shared": [11.6, 11.9]}  # 11.9 < 12.0 in episode 1
    assert not facts(frame(beaten))["reference_never_beaten"]
    below = {**COSTS, "PPO-shared": [9.0, 20.0]}  # below the bound in episode 0
    assert not facts(frame(below))["bound_holds"]


def test_the_tables_rank_the_policies_and_name_the_best_agent():
    board = {TASK: facts(frame({**COSTS, "PPO-shared": [14.0, 14.0]}))}
    text = markdown(board)
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert rows[1:] == [BOUND, HINDSIGHT, "Coordinated", "Independent-HorizonRule", "PPO-shared",
                        "Independent-PowerTrip"]  # fmt: skip
    summary = summary_markdown(board)
    assert "| PowerTrip-MultiJob-v0 | 3 | 15.50 | 13.50 | 12.00 | PPO-shared 14.00 | 11.75 |" in (
        summary
    )


def test_the_board_is_written_and_joins_a_benchmark_s_leaderboard(tmp_path):
    (tmp_path / "leaderboard.json").write_text(json.dumps({"tasks": {}}) + "\n")
    written = write(tmp_path, [frame(COSTS)])
    assert read_board(tmp_path) == json.loads(json.dumps(written))
    assert json.loads((tmp_path / "leaderboard.json").read_text())[BOARD_KEY] == read_board(
        tmp_path
    )
    with pytest.raises(ValueError, match=r"multijob\.json not found"):
        read_board(tmp_path / "nowhere")


def test_the_hindsight_family_holds_every_ranking_of_a_few_jobs_and_the_rules():
    names = [p.name for p in hindsight_family(3)]
    assert {"Independent-HorizonRule", "Independent-PowerTrip", "Coordinated"} <= set(names)
    assert sum(name.startswith("Coordinated[") for name in names) == 6  # 3! fixed rankings
    assert (
        sum(name.startswith("Coordinated[") for name in [p.name for p in hindsight_family(6)]) == 2
    )


def test_the_docs_page_s_example_runs_as_written():
    """docs/multijob.md's first Python block, as a user pastes it."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "multijob.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(code, "docs/multijob.md", "exec"), scope)  # the page's own code
    metrics = scope["env"].unwrapped.team_metrics()
    assert metrics["jobs_done"] == 3 and metrics["mean_tta_h"] > 0


def test_one_job_alone_plays_the_single_job_episode_to_the_bit():
    """A task of one job is the single-job env: the same seed and start give the same episode,
    so the board's yardstick (each job alone) is the episode the job would have had alone."""
    from powertrip_env import multijob
    from powertrip_env.baselines.multijob import joint_policy
    from powertrip_env.harness.multijob.play import alone, play

    env = multijob.env(jobs=["lora"], split="test")
    shared = play(env, joint_policy("Independent-HorizonRule"), 3)["tta_h"]
    lone, bound = alone(env)
    assert shared[0] == lone[0] and bound[0] <= lone[0]


def test_finished_runs_merge_into_one_board_and_a_task_twice_is_refused(tmp_path):
    from powertrip_env.harness.multijob.board import main

    wide = frame(COSTS).assign(task="PowerTrip-Wide-MultiJob-v0")
    write(tmp_path / "a", [frame(COSTS)])
    write(tmp_path / "b", [wide])
    assert (
        main(["--merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")])
        == 0
    )
    merged = read_board(tmp_path / "m")
    assert list(merged) == [TASK, "PowerTrip-Wide-MultiJob-v0"]
    assert merged[TASK] == read_board(tmp_path / "a")[TASK]
    with pytest.raises(SystemExit, match="is in an earlier run too"):
        main(["--merge", str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(tmp_path / "x")])


def test_each_job_s_start_leaves_it_its_whole_budget_in_the_split():
    """The first job's start is drawn so that every job's, its arrival later, fits its split;
    a start given in the options is taken as the single-job env takes it."""
    from powertrip_env import multijob

    env = multijob.raw_env(jobs=["lora", "diloco"], split="train")
    for seed in range(40):
        env.reset(seed=seed)
        for job, (_, start) in zip(env.jobs, env.job_starts, strict=True):
            first, end = job.starts.rows
            assert first * job.params.interval_s <= start <= (end - 1) * job.params.interval_s
    env.reset(seed=0, options={"start_time": 3 * 86_400.0})
    assert [start for _, start in env.job_starts] == list(3 * 86_400.0 + env.arrival_s)


def test_an_agent_for_another_number_of_sites_is_refused_before_anything_runs(tmp_path):
    from powertrip_env.baselines.multijob import LearnedCandidates
    from powertrip_env.harness.multijob.play import fits

    class Model:  # what LearnedCandidates reads of an SB3 model
        def __init__(self, width: int) -> None:
            import gymnasium as gym

            self.observation_space = gym.spaces.Box(0.0, 1.0, (width,))

    ten = 10 * 15 + 6 + 2 * 10 + 5 * 10  # the flagship's observation and its candidate sets
    agent = LearnedCandidates(Model(ten))
    assert fits(agent, TASK) and not fits(agent, "PowerTrip-Wide-MultiJob-v0")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"base": "carbon"}, r"base='carbon' is not a base; allowed: \['default', 'wide'\]"),
        ({"jobs": ()}, r"jobs=\[\]: a task needs at least one job"),
        ({"jobs": ("lora", "gpt")}, r"'gpt' is not a job; allowed: \['diloco', 'lora', 'opt'\]"),
        ({"allocation": "lottery"}, r"allocation='lottery' is not a rule"),
        ({"name": TASK}, r"registered already"),
    ],
)
def test_a_user_s_task_is_checked_when_registered(fields, message):
    from powertrip_env import multijob

    task = multijob.MultiJobTask(
        **{"name": "Mine-v0", "base": "default", "jobs": ("lora",)} | fields
    )
    with pytest.raises(ValueError, match=message):
        multijob.register_multijob(task)
    assert "Mine-v0" not in multijob.TASKS
