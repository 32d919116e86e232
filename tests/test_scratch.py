"""``powertrip scratch`` (``agents/scratch.py``): standard algorithms from scratch, scored on the
board's scale with intervals over runs.

Every test says in a comment which mistake it catches. The end-to-end run (a quick benchmark,
then the quick from-scratch run on it) is slow: CI's slow stage runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import scratch, scratch_report
from powertrip_env.harness.reports import benchmark
from powertrip_env.harness.tracks import TRACKS


def test_the_interval_resamples_runs_within_each_task() -> None:
    # catches: a bootstrap that pools runs across tasks (a resample could then take task 2's
    # runs for task 1) or that resamples tasks instead of runs: every resampled mean of these
    # two tasks lies between (0 + 5) / 2 and (1 + 5) / 2
    scores = np.array([[0.0, 1.0, 0.0, 1.0], [5.0, 5.0, 5.0, 5.0]])
    out = scratch_report.over_runs(scores, resamples=500)
    assert out["mean"] == pytest.approx(2.75)
    assert 2.5 <= out["ci95"][0] < out["ci95"][1] <= 3.0
    assert out["iqm"] == pytest.approx(np.mean([1.0, 1.0, 5.0, 5.0]))
    same = scratch_report.over_runs(np.full((3, 3), 0.4), resamples=100)
    assert same["ci95"] == pytest.approx([0.4, 0.4]) and same["iqm_ci95"] == pytest.approx(
        [0.4, 0.4]
    )
    np.testing.assert_array_equal(scores[0], [0.0, 1.0, 0.0, 1.0])  # the input is not sorted


def _board() -> tuple[pd.DataFrame, dict]:
    """A two-episode board of one known task: PowerTrip 30 h, the Optimiser 20 h, a rule 25 h."""
    rows = []
    for policy, hours in (("PowerTrip", 30.0), ("Optimiser", 20.0), ("HorizonRule", 25.0)):
        for e in (0, 1):
            rows.append(
                {
                    "task": "PowerTrip-v0",
                    "policy": policy,
                    "episode": e,
                    "start_time": f"2019-05-0{e + 2}T00:00:00+00:00",
                    "value": hours + e,
                    "success": True,
                }
            )
    facts = {"PowerTrip-v0": {"track": "known", "n_sites": 10}}
    return pd.DataFrame(rows), facts


def _played(hours: tuple[float, float], seed: int = 0, steps: int = 100) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": "PowerTrip-v0",
            "algo": "ppo",
            "seed": seed,
            "steps": steps,
            "episode": [0, 1],
            "start_time": ["2019-05-02T00:00:00+00:00", "2019-05-03T00:00:00+00:00"],
            "value": list(hours),
            "success": [True, False],
        }
    )


def test_a_score_is_the_boards_share_of_the_gap() -> None:
    # catches: a score on another scale than the board's (0 = PowerTrip, 1 = the reference),
    # or one that pairs the agent with the wrong episodes
    board, facts = _board()
    scores = scratch_report.task_scores(_played((25.0, 26.0)), board, facts)
    assert scores["score"].tolist() == pytest.approx([0.5])
    assert scores["success"].tolist() == [0.5]
    rules = scratch_report.rule_scores(board, facts).set_index("policy")["score"]
    assert rules.to_dict() == pytest.approx(
        {"PowerTrip": 0.0, "Optimiser": 1.0, "HorizonRule": 0.5}
    )


def test_episodes_the_board_did_not_play_are_refused() -> None:
    # catches: a score against a board of other days (unpaired), or of fewer episodes
    board, facts = _board()
    moved = _played((25.0, 26.0)).assign(start_time="2019-06-01T00:00:00+00:00")
    with pytest.raises(ValueError, match="PowerTrip-v0: the agent's episodes start elsewhere"):
        scratch_report.task_scores(moved, board, facts)
    more = pd.concat([_played((25.0, 26.0)), _played((25.0, 26.0)).assign(episode=[2, 3])])
    with pytest.raises(ValueError, match=r"episodes \[2, 3\] are not on the board"):
        scratch_report.task_scores(more, board, facts)


def test_the_summary_gives_curves_aggregates_and_the_best_rule() -> None:
    # catches: a curve that mixes seeds' checkpoints, an aggregate over the wrong steps, or a
    # best rule that is a reference (the Optimiser is not deployable)
    board, facts = _board()
    played = pd.concat(
        [
            _played((h, h + 1.0), seed=s, steps=k)
            for s, h0 in ((0, 29.0), (1, 27.0))
            for k, h in ((100, h0), (200, h0 - 4.0))
        ]
    )
    scores = scratch_report.task_scores(played, board, facts)
    summary = scratch_report.summarise(
        scores, scratch_report.rule_scores(board, facts), facts, ["PowerTrip-v0"]
    )
    entry = summary["tasks"]["PowerTrip-v0"]
    assert entry["best_rule"] == {"policy": "HorizonRule", "score": pytest.approx(0.5)}
    run = entry["algos"]["ppo"]
    assert run["curve"]["steps"] == [100, 200]
    assert run["curve"]["mean"] == pytest.approx([0.2, 0.6])
    assert run["score_by_seed"] == pytest.approx([0.5, 0.7])
    assert summary["aggregate_by_track"]["known"]["ppo"]["mean"] == pytest.approx(0.6)
    text = scratch_report.to_markdown(summary, 200, [0, 1])
    assert "| PPO | 0.600 [" in text and "0.500 (HorizonRule)" in text


def test_checkpoints_end_at_the_budget_and_a_job_file_names_it() -> None:
    # catches: a last evaluation before the budget is spent, or a stopped run resumed with
    # another budget reusing the old one's files
    assert scratch.checkpoints(50_000, 5) == [10_000, 20_000, 30_000, 40_000, 50_000]
    assert scratch.checkpoints(3, 5) == [1, 2, 3]
    with pytest.raises(ValueError, match="at least 1"):
        scratch.checkpoints(0, 5)
    a = scratch.Job("PowerTrip-v0", "ppo", 0, 50_000, 5, 5, 30)
    b = scratch.Job("PowerTrip-v0", "ppo", 0, 20_000, 5, 5, 30)
    assert a.file != b.file and "seed0" in a.file


def test_the_carbon_track_measures_the_carbon_cost() -> None:
    # catches: a carbon task's from-scratch rows scored on grid carbon alone (a run that idles
    # to the deadline would then look clean) instead of the cost with the miss priced
    env = gym.make("PowerTrip-Carbon-v2")
    played = pd.DataFrame({"carbon_kg": [100.0, 50.0], "success": [True, False]})
    values = TRACKS["carbon"].values(played, env.unwrapped.params)
    assert values.tolist() == pytest.approx([100.0, 1050.0])
    assert TRACKS["known"].values(
        pd.DataFrame({"tta_h": [3.0]}), env.unwrapped.params
    ).tolist() == [3.0]


def test_recurrent_ppo_trains_on_the_multibinary_action() -> None:
    # catches: sb3-contrib's recurrent buffer handing int8 actions to the Bernoulli's log_prob
    # again ("result type Float can't be cast to the desired output type Char")
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("PowerTrip-v0", n_envs=1, seed=0)
    model = scratch.algorithm("recurrent_ppo")(
        "MlpLstmPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu"
    )
    model.learn(32)
    assert model.num_timesteps >= 32
    assert model.rollout_buffer.actions.dtype == np.float32


def test_an_unknown_algorithm_is_named() -> None:
    # catches: a typo trained as some default algorithm
    with pytest.raises(ValueError, match=r"algo='ppo2': allowed: ppo, maskable_ppo, a2c"):
        scratch.algorithm("ppo2")


@pytest.mark.slow
def test_the_quick_run_writes_its_rows_and_curves(tmp_path: Path, capsys) -> None:
    # catches: the command as CI's slow stage runs it failing, a run that trains again what it
    # has, or files that disagree with each other
    board = tmp_path / "board"
    assert (
        benchmark.main(["--quick", "--env", "PowerTrip-v0", "--out", str(board), "--no-progress"])
        == 0
    )
    out = tmp_path / "scratch"
    argv = ["--quick", "--board", str(board), "--out", str(out), "--no-progress", "--jobs", "2"]
    assert scratch.main(argv) == 0
    printed = capsys.readouterr().out
    summary, markdown, compact = scratch_report.read_scratch(out)
    assert markdown.strip() in printed and "| known | PPO |" in compact
    assert set(summary["aggregate_by_track"]["known"]) == {"ppo", "maskable_ppo", "a2c"}
    assert summary["budget"]["steps"] == 2048 and summary["budget"]["seeds"] == [0, 1]
    played = pd.read_csv(out / scratch_report.CSV)
    assert (
        sorted(played["seed"].unique()) == [0, 1] and (out / scratch_report.CURVES).stat().st_size
    )
    first = {p.name: p.stat().st_mtime_ns for p in (out / scratch_report.RUNS).iterdir()}
    assert len(first) == 6
    assert scratch.main(argv) == 0  # again: nothing trained anew
    assert {p.name: p.stat().st_mtime_ns for p in (out / scratch_report.RUNS).iterdir()} == first
    assert json.loads((out / scratch_report.JSON).read_text(encoding="utf-8")) == summary


def test_readme_tables_puts_a_finished_run_where_the_docs_show_it(tmp_path: Path) -> None:
    # catches: the rows typed by hand (or from another run) instead of the run's own files, the
    # curves left stale, or --tables scratch run without the folder it needs
    import maintainers.readme_tables as readme_tables

    run = tmp_path / "run"
    run.mkdir()
    for name, text in ((scratch_report.JSON, "{}"), (scratch_report.MARKDOWN, "per task\n"),
                       (scratch_report.COMPACT, "per track\n")):  # fmt: skip
        (run / name).write_text(text, encoding="utf-8")
    (run / scratch_report.CURVES).write_bytes(b"png")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:scratch -->\nold\n<!-- /results:scratch -->\n", "utf-8")
    (tmp_path / "docs").mkdir()
    agents = tmp_path / "docs" / "agents.md"
    agents.write_text("<!-- results:scratch-tasks -->\nold\n<!-- /results:scratch-tasks -->\n")
    argv = ["--readme", str(readme), "--tables", "scratch", "--scratch-from", str(run)]
    assert readme_tables.main(argv) == 0
    assert "per track" in readme.read_text(encoding="utf-8")
    assert "per task" in agents.read_text(encoding="utf-8")
    assert (tmp_path / readme_tables.SCRATCH_CURVES).read_bytes() == b"png"
    with pytest.raises(SystemExit):
        readme_tables.main(["--readme", str(readme), "--tables", "scratch"])
    (run / scratch_report.CURVES).unlink()
    with pytest.raises(SystemExit):
        readme_tables.main(argv)
