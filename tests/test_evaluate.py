"""Tests for powertrip_env.harness.evaluation.evaluate: paired runs, the files it writes, saved
agents, and the command line's refusals (exit code 2 with a message, before anything runs)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scenario_files import site
from scenario_files import write_scenario as write_toy_scenario

import powertrip_env
from powertrip_env.baselines.base import Policy
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.evaluation.evaluate import evaluate, main, summary_table
from powertrip_env.harness.evaluation.figures import mean_curve
from powertrip_env.harness.evaluation.results import EPISODE_COLUMNS, Evaluation
from powertrip_env.harness.evaluation.statistics import (
    BOOTSTRAP_RESAMPLES,
    ci95_half_width,
    day_bootstrap_ci95,
    start_days,
)
from powertrip_env.harness.tracks import KNOWN

OUTPUT_FILES = {
    "episodes.csv",
    "summary.md",
    "tta.png",
    "tta_paired.png",
    "accuracy_vs_time.png",
    "timeline.png",
}


# --------------------------------------------------------------------------- statistics


DAYS3 = ["2022-06-28"] * 3 + ["2022-06-29"] * 3 + ["2022-06-30"] * 3


def test_start_days_are_utc_calendar_days():
    times = ["2022-06-28T23:55:00Z", "2022-06-29T00:05:00Z", "2022-06-29T01:00:00+02:00"]
    assert list(start_days(times)) == ["2022-06-28", "2022-06-29", "2022-06-28"]
    with pytest.raises(ValueError, match="start time"):
        start_days(["2022-06-28T10:00:00Z", None])


def test_day_bootstrap_of_three_days_is_the_range_of_their_means():
    # Drawing one day three times has probability 1/27 > 2.5% for each day, so with three
    # days of equal size the percentile interval reaches the lowest and highest day means.
    tta = np.array([20.0, 21.0, 22.0, 25.0, 24.0, 26.0, 30.0, 29.0, 31.0])
    low, high = day_bootstrap_ci95(tta, DAYS3)
    assert (low, high) == pytest.approx((21.0, 30.0))
    assert ci95_half_width(tta, DAYS3) == (high - low) / 2


def test_day_bootstrap_is_deterministic_and_independent_of_episode_order():
    rng = np.random.default_rng(1)
    days = np.repeat([f"2022-06-{d:02d}" for d in range(21, 28)], [5, 4, 3, 5, 4, 5, 4])
    tta = 25.0 + rng.normal(0.0, 1.0, 7)[np.searchsorted(np.unique(days), days)]
    tta += rng.normal(0.0, 0.3, days.size)
    low, high = day_bootstrap_ci95(tta, days)
    day_means = pd.Series(tta).groupby(days).mean()
    assert day_means.min() < low < tta.mean() < high < day_means.max()
    assert day_bootstrap_ci95(tta, days) == (low, high)  # bit for bit on a rerun
    order = rng.permutation(days.size)  # the same episodes in another order
    assert day_bootstrap_ci95(tta[order], days[order]) == pytest.approx((low, high), abs=1e-12)
    assert day_bootstrap_ci95(tta, days, resamples=500) != (low, high)  # the resamples count


def test_day_bootstrap_with_two_days_spans_their_means():
    # Resamples are day A twice, A and B, or B twice: the 2.5th and 97.5th percentiles of 2,000
    # of them are the two day means.
    low, high = day_bootstrap_ci95([1.0, 3.0, 10.0], ["2022-07-01"] * 2 + ["2022-07-02"])
    assert (low, high) == pytest.approx((2.0, 10.0))


def test_day_bootstrap_is_undefined_with_one_day():
    assert all(np.isnan(day_bootstrap_ci95([1.0, 5.0, 9.0], ["2022-07-01"] * 3)))
    assert np.isnan(ci95_half_width([1.0, 5.0, 9.0], ["2022-07-01"] * 3))
    assert np.isnan(ci95_half_width([4.0], ["2022-07-01"]))


def test_day_bootstrap_is_zero_when_every_episode_has_the_same_tta():
    assert day_bootstrap_ci95([25.093] * 9, DAYS3) == (25.093, 25.093)
    assert ci95_half_width([25.093] * 9, DAYS3) == 0.0


def test_day_bootstrap_widens_when_days_disagree():
    """The same nine TTAs (so the same t-interval over episodes): spread within each day
    gives no day-to-day variation, spread across days a wide interval."""
    within = [1.0, 2.0, 3.0] * 3  # every day has mean 2
    across = [1.0] * 3 + [2.0] * 3 + [3.0] * 3
    assert ci95_half_width(within, DAYS3) == pytest.approx(0.0, abs=1e-12)
    assert ci95_half_width(across, DAYS3) == pytest.approx(1.0)  # days 1, 2, 3: range 1..3
    half_as_far = [1.5] * 3 + [2.0] * 3 + [2.5] * 3
    assert ci95_half_width(half_as_far, DAYS3) == pytest.approx(0.5)


def test_day_bootstrap_refuses_values_and_days_of_different_lengths():
    with pytest.raises(ValueError, match="3 values but 2 days"):
        day_bootstrap_ci95([1.0, 2.0, 3.0], ["2022-07-01", "2022-07-02"])


def _frame(tta_by_policy: dict[str, list[float]], times: list[str]) -> pd.DataFrame:
    rows = [
        {
            "policy": p,
            "episode": e,
            "seed": e,
            "start_time": t,
            "tta_h": x,
            "success": True,
            "rounds": 10,
            "energy_kwh": 1.0,
            "mean_sites": 2.0,
            "comm_share": 0.1,
        }
        for p, values in tta_by_policy.items()
        for e, (t, x) in enumerate(zip(times, values, strict=True))
    ]
    return pd.DataFrame(rows, columns=EPISODE_COLUMNS)


def test_summary_reports_the_day_bootstrap_and_says_so():
    times = [f"{day}T{h:02d}:00:00Z" for day, h in zip(DAYS3, [3, 9, 15] * 3, strict=True)]
    tta = {
        "PowerTrip": [20.0, 21.0, 22.0, 25.0, 24.0, 26.0, 30.0, 29.0, 31.0],
        "AllSites": [48.0] * 9,
    }
    frame = _frame(tta, times)
    summary = summary_table(frame, ["PowerTrip", "AllSites"])
    low, high = day_bootstrap_ci95(tta["PowerTrip"], DAYS3)
    row = summary.iloc[0]
    assert (row.ci95_lo_h, row.ci95_hi_h, row.ci95_tta_h) == (low, high, (high - low) / 2)
    assert summary.iloc[1].ci95_tta_h == 0.0
    text = Evaluation("PowerTrip-v0", "test", frame, summary).to_markdown()
    assert f"| PowerTrip | 9 | 25.333 | ±{(high - low) / 2:.3f} |" in text
    assert "| AllSites | 9 | 48.000 | ±0.000 |" in text
    method = f"block bootstrap over start days (3 distinct start days, UTC; {BOOTSTRAP_RESAMPLES:,}"
    assert method in text
    assert "Student" not in text


def test_a_carbon_task_s_summary_adds_the_carbon_cost():
    # catches: a miss not priced, the price counted for a success, or the column shown where
    # no carbon objective is posed
    times = ["2022-07-01T01:00:00Z", "2022-07-02T01:00:00Z", "2022-07-03T01:00:00Z"]
    frame = _frame({"PowerTrip": [20.0, 22.0, 30.0]}, times)
    frame["carbon_kg"] = [100.0, 150.0, 80.0]
    frame["success"] = [True, True, False]
    plain = summary_table(frame, ["PowerTrip"])
    assert np.isnan(plain.loc[0, "mean_carbon_cost_kg"])
    assert "carbon cost" not in Evaluation("PowerTrip-v0", "test", frame, plain).to_markdown()
    priced = summary_table(frame, ["PowerTrip"], carbon_ref_kg=1000.0)
    assert priced.loc[0, "mean_carbon_cost_kg"] == pytest.approx((100 + 150 + 80 + 1000) / 3)
    text = Evaluation("PowerTrip-Carbon-v2", "test", frame, priced).to_markdown()
    assert "| carbon (kg) | carbon cost (kg) |" in text and "| 443.3 |" in text


def test_evaluate_prices_a_carbon_task_s_misses_and_no_other_task_s():
    # catches: evaluate not passing the task's carbon_ref_kg to the summary (the column would
    # be NaN on a carbon task) or passing one where no carbon objective is posed
    from powertrip_env.harness.evaluation.evaluate import evaluate

    carbon = evaluate("PowerTrip-Carbon-v2", ["FedZeroExcess"], episodes=1, progress=False)
    row = carbon.summary.iloc[0]
    missed = 1.0 - row.success_rate
    assert row.mean_carbon_cost_kg == pytest.approx(row.mean_carbon_kg + 1000.0 * missed)
    assert "carbon cost (kg)" in carbon.to_markdown()
    plain = evaluate("PowerTrip-v0", ["AllSites"], episodes=1, progress=False)
    assert np.isnan(plain.summary.iloc[0].mean_carbon_cost_kg)


def test_summary_of_episodes_on_one_day_shows_no_interval():
    frame = _frame({"PowerTrip": [20.0, 22.0]}, ["2022-07-01T01:00:00Z", "2022-07-01T23:00:00Z"])
    summary = summary_table(frame, ["PowerTrip"])
    assert np.isnan(summary.loc[0, "ci95_tta_h"]) and np.isnan(summary.loc[0, "ci95_lo_h"])
    text = Evaluation("PowerTrip-v0", "test", frame, summary).to_markdown()
    assert "| PowerTrip | 2 | 21.000 | – |" in text
    assert "95% CI: undefined (–): the episodes start on 1 distinct start day" in text


def test_mean_curve_holds_each_episode_at_its_last_accuracy():
    a = (np.array([0.0, 1.0, 2.0]), np.array([0.1, 0.5, 0.9]))
    b = (np.array([0.0, 3.0]), np.array([0.1, 0.7]))
    grid = np.array([0.0, 0.5, 1.0, 2.5, 4.0])
    assert mean_curve([a, b], grid) == pytest.approx([0.1, 0.1, 0.3, 0.5, 0.8])


# --------------------------------------------------------------------------- the Python API


def test_evaluate_runs_paired_episodes_and_writes_every_output(small_scenario, tmp_path):
    out = tmp_path / "out"
    result = evaluate(
        "PowerTrip-v0",
        ["AllSites", "TopPower-1", "PowerTrip"],
        episodes=2,
        seed=11,
        env_kwargs={"scenario": str(small_scenario)},
        out_dir=out,
        progress=False,
    )
    assert isinstance(result, Evaluation)
    assert {p.name for p in out.iterdir()} == OUTPUT_FILES  # no temporary files left behind

    with (out / "episodes.csv").open() as fh:
        assert tuple(next(csv.reader(fh))) == EPISODE_COLUMNS
    frame = pd.read_csv(out / "episodes.csv")
    assert len(frame) == 6
    by_episode = frame.groupby("episode")
    assert (by_episode["start_time"].nunique() == 1).all()  # paired start times
    assert (by_episode["seed"].nunique() == 1).all()
    assert sorted(frame["seed"].unique()) == [11, 12]
    assert frame["start_time"].iloc[0].endswith("Z")
    assert frame["success"].dtype == bool
    assert (frame["mean_sites"] > 0).all()
    assert (frame.loc[frame["policy"] == "TopPower-1", "mean_sites"] == 1).all()

    assert list(result.summary["policy"]) == ["PowerTrip", "AllSites", "TopPower-1"]
    assert result.summary.loc[0, "vs_powertrip_pct"] == pytest.approx(0.0)
    summary = (out / "summary.md").read_text()
    for name in ("PowerTrip", "AllSites", "TopPower-1", "at the time budget", "95% CI"):
        assert name in summary
    days = start_days(frame["start_time"])
    assert f"{len(set(days))} distinct start day" in summary
    for row in result.summary.itertuples():  # the table's CI is the day bootstrap's
        tta = frame.loc[frame["policy"] == row.policy, "tta_h"].to_numpy()
        expected = day_bootstrap_ci95(tta, days[frame["policy"] == row.policy])
        np.testing.assert_array_equal((row.ci95_lo_h, row.ci95_hi_h), expected)
    assert (out / "tta.png").read_bytes()[:4] == b"\x89PNG"
    for label, curves in result.curves.items():
        assert len(curves) == 2, label
        hours, acc = curves[0]
        assert hours[0] == 0.0 and np.all(np.diff(hours) > 0) and hours.shape == acc.shape


def test_an_out_dir_holding_results_is_refused_unless_force(small_scenario, tmp_path):
    out = tmp_path / "out"
    kw = {"episodes": 1, "env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    evaluate("PowerTrip-v0", ["AllSites"], out_dir=out, **kw)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(EvaluationError, match=r"already holds results.*--force"):
        evaluate("PowerTrip-v0", ["TopPower-1"], out_dir=out, **kw)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    evaluate("PowerTrip-v0", ["TopPower-1"], out_dir=out, force=True, **kw)
    assert {p.name for p in out.iterdir()} == OUTPUT_FILES
    assert list(pd.read_csv(out / "episodes.csv")["policy"]) == ["TopPower-1"]


def test_episodes_are_identical_whichever_policies_run_beside(small_scenario):
    kw = {"episodes": 2, "env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    alone = evaluate("PowerTrip-v0", ["PowerTrip"], **kw).episodes
    mixed = evaluate("PowerTrip-v0", ["RandomK", "OortLike", "PowerTrip"], **kw).episodes
    pd.testing.assert_frame_equal(
        alone.reset_index(drop=True),
        mixed[mixed["policy"] == "PowerTrip"].reset_index(drop=True),
    )


def test_references_expand_to_the_clairvoyant_references_and_all_leaves_them_out(small_scenario):
    kw = {"episodes": 1, "env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    named = evaluate("PowerTrip-v0", ["references"], **kw).episodes
    assert list(named["policy"]) == ["BestFixedSet", "BeamPlanner", "Optimiser"]
    assert named.loc[2, "tta_h"] <= named.loc[1, "tta_h"] <= named.loc[0, "tta_h"]
    everything = evaluate("PowerTrip-v0", ["all"], **kw).episodes
    assert not {"BestFixedSet", "BeamPlanner", "Optimiser"} & set(everything["policy"])
    assert {"PowerTrip", "FedZeroLike", "MyopicOptimal", "HorizonRule", "ForecastMPC"} <= set(
        everything["policy"]
    )


def test_evaluate_accepts_policy_instances(small_scenario):
    class FirstSite(Policy):
        name = "FirstSite"

        def act(self, obs, info):
            return (np.arange(self.env.params.n_sites) == 0).astype(np.int8)

    result = evaluate(
        "PowerTrip-v0",
        [FirstSite(), "AllSites"],
        episodes=1,
        env_kwargs={"scenario": str(small_scenario)},
        progress=False,
    )
    assert list(result.summary["policy"]) == ["FirstSite", "AllSites"]
    assert np.isnan(result.summary["vs_powertrip_pct"]).all()  # no PowerTrip to compare with


def test_evaluate_refuses_bad_input_before_running(small_scenario, tmp_path):
    kw = {"env_kwargs": {"scenario": str(small_scenario)}, "progress": False}
    with pytest.raises(EvaluationError, match="episodes=0"):
        evaluate("PowerTrip-v0", ["PowerTrip"], episodes=0, **kw)
    with pytest.raises(EvaluationError, match="split='dev'"):
        evaluate("PowerTrip-v0", ["PowerTrip"], split="dev", **kw)
    with pytest.raises(EvaluationError, match=r"TopPower-5.*1 <= k <= 4"):
        evaluate("PowerTrip-v0", ["TopPower-5"], **kw)
    with pytest.raises(EvaluationError, match="appears twice"):
        evaluate("PowerTrip-v0", ["AllSites", "AllSites"], **kw)


# --------------------------------------------------------------------------- saved agents


@pytest.fixture(scope="module")
def ppo_zip(tmp_path_factory) -> Path:
    """A PPO agent for PowerTrip-v0, trained for 64 steps: enough to save and reload."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0")
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=64)
    path = tmp_path_factory.mktemp("agents") / "tiny_ppo.zip"
    model.save(path)
    return path


def test_cli_evaluates_a_saved_agent_next_to_the_baselines(ppo_zip, tmp_path, capsys):
    out = tmp_path / "res"
    code = main(
        [
            "--env",
            "PowerTrip-v0",
            "--policies",
            "AllSites",
            "--model",
            str(ppo_zip),
            "--algo",
            "ppo",
            "--episodes",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    frame = pd.read_csv(out / "episodes.csv")
    assert list(frame["policy"]) == ["AllSites", "tiny_ppo"]  # labelled by the file stem
    assert frame["start_time"].nunique() == 1
    printed = capsys.readouterr().out
    assert "tiny_ppo" in printed and "| AllSites |" in printed


def test_a_dict_observation_agent_gets_a_dict_observation_env(small_scenario, tmp_path):
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario), obs_mode="dict")
    model = PPO("MultiInputPolicy", env, n_steps=32, batch_size=32, n_epochs=1, device="cpu")
    model.save(tmp_path / "dict_agent")
    result = evaluate(
        "PowerTrip-v0",
        [],
        episodes=1,
        models=[(str(tmp_path / "dict_agent.zip"), "ppo")],
        env_kwargs={"scenario": str(small_scenario)},
        progress=False,
    )
    assert list(result.summary["policy"]) == ["dict_agent"]


# --------------------------------------------------------------------------- a user's scenario


def test_cli_runs_a_users_scenario_file_on_the_registered_env(small_scenario, tmp_path, capsys):
    out = tmp_path / "res"
    argv = ["--scenario", str(small_scenario), "--policies", "AllSites,TopPower-1"]
    code = main([*argv, "--episodes", "2", "--out", str(out), "--no-progress"])
    assert code == 0
    expected = evaluate(
        "PowerTrip-v0",
        ["AllSites", "TopPower-1"],
        episodes=2,
        env_kwargs={"scenario": str(small_scenario)},
        progress=False,
    )
    pd.testing.assert_frame_equal(pd.read_csv(out / "episodes.csv"), expected.episodes)
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# PowerTrip-v0 on scenario.toml: 2 paired episodes")
    assert "PowerTrip-v0 on scenario.toml" in capsys.readouterr().out


def test_default_output_folder_names_the_env_the_scenario_stem_and_the_split(
    small_scenario, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    argv = ["--scenario", str(small_scenario), "--policies", "AllSites", "--episodes", "1"]
    assert main([*argv, "--split", "train", "--no-progress"]) == 0
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["PowerTrip-v0-scenario-train"]
    assert {p.name for p in (tmp_path / "results" / "PowerTrip-v0-scenario-train").iterdir()} == (
        OUTPUT_FILES
    )


def test_without_scenario_the_summary_is_titled_by_the_env_alone():
    result = evaluate("PowerTrip-v0", ["AllSites"], episodes=1, progress=False)
    assert result.scenario == ""
    assert result.to_markdown().startswith("# PowerTrip-v0: 1 paired episodes, test split")


# --------------------------------------------------------------------------- refusals


def _refused(argv: list[str], capsys) -> str:
    """Exit code 2 (argparse's own refusals exit, the later ones are returned), no traceback."""
    try:
        code = main([*argv, "--no-progress"])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.err


def test_unknown_policy_is_refused_with_the_valid_names(tmp_path, capsys):
    err = _refused(["--policies", "PowerTrip,Greedy", "--out", str(tmp_path)], capsys)
    assert "unknown policy 'Greedy'" in err and "MyopicOptimal" in err and "TopPower-k" in err
    assert not list(tmp_path.iterdir())


def test_unknown_env_is_refused_with_the_registered_ids(tmp_path, capsys):
    err = _refused(["--env", "PowerTrip-v9", "--out", str(tmp_path)], capsys)
    assert "PowerTrip-v9" in err and "PowerTrip-v0" in err and "PowerTrip-KWS-v0" in err


def test_missing_model_is_refused(tmp_path, capsys):
    err = _refused(["--model", str(tmp_path / "nope.zip"), "--out", str(tmp_path)], capsys)
    assert "nope.zip" in err and "not found" in err


def test_model_saved_by_another_algorithm_is_refused(ppo_zip, tmp_path, capsys):
    err = _refused(
        [
            "--policies",
            "AllSites",
            "--model",
            str(ppo_zip),
            "--algo",
            "a2c",
            "--out",
            str(tmp_path),
        ],
        capsys,
    )
    assert "does not match --algo a2c" in err and "ppo" in err


def test_model_for_another_scenario_is_refused(small_scenario, tmp_path, capsys):
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario))  # 4 sites, not 8
    PPO("MlpPolicy", env, n_steps=32, batch_size=32, device="cpu").save(tmp_path / "four")
    err = _refused(
        ["--policies", "AllSites", "--model", str(tmp_path / "four.zip"), "--out", str(tmp_path)],
        capsys,
    )
    assert "incompatible" in err and "observation space" in err


def test_unwritable_output_directory_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    err = _refused(["--policies", "AllSites", "--out", str(blocker / "results")], capsys)
    assert "cannot be written" in err and "--out" in err


def test_zero_episodes_is_refused(tmp_path, capsys):
    err = _refused(["--episodes", "0", "--out", str(tmp_path)], capsys)
    assert "argument --episodes: must be a positive integer, got 0" in err


def test_readme_tables_splice_replaces_only_the_named_block() -> None:
    from maintainers.doc_blocks import splice

    text = (
        "intro\n<!-- results:PowerTrip-v0 -->\nold table\n<!-- /results:PowerTrip-v0 -->\n"
        "<!-- results:PowerTrip-KWS-v0 -->\nkws table\n<!-- /results:PowerTrip-KWS-v0 -->\n"
    )
    out = splice(text, "PowerTrip-v0", "| new | table |\n")
    assert "| new | table |\n<!-- /results:PowerTrip-v0 -->" in out
    assert "old table" not in out and "kws table" in out and out.startswith("intro\n")
    with pytest.raises(ValueError, match="PowerTrip-Large-v0"):
        splice(text, "PowerTrip-Large-v0", "x")


def test_the_docs_hold_one_results_block_for_every_registered_id() -> None:
    """Each block lives in exactly one file: README.md or a page under docs/ (``holder`` raises
    when none or several hold it)."""
    from maintainers.doc_blocks import holder
    from maintainers.readme_tables import RESULT_IDS

    readme = Path(__file__).resolve().parents[1] / "README.md"
    names = (
        *RESULT_IDS,
        "headroom",
        "fidelity",
        "sensitivity",
        "sensitivity-moving",
        "leaderboard",
    )
    boards = (
        "leaderboard-scores",
        "leaderboard-measured",
        "leaderboard-moving",
        "leaderboard-carbon",
    )
    summaries = ("summary-known", "summary-measured", "summary-moving", "summary-carbon")
    for env_id in (*names, *boards, *summaries):
        assert holder(env_id, readme).suffix == ".md"
    # the front door keeps a few lines a track; the benchmark's page every board, hours included
    assert all(holder(name, readme) == readme for name in summaries)
    for name in ("leaderboard", *boards):
        assert holder(name, readme) == readme.parent / "docs" / "benchmark.md"
    tasks = {
        *powertrip_env.SUITE_IDS,
        *powertrip_env.MEASURED_SUITE_IDS,
        *powertrip_env.MOVING_SUITE_IDS,
        *powertrip_env.CARBON_SUITE_IDS,
    }
    assert set(powertrip_env.ENV_IDS) - set(RESULT_IDS) <= tasks


def test_readme_tables_updates_a_block_where_it_lives_now(tmp_path, monkeypatch) -> None:
    """A block moved to a page under docs/ is found and updated there; the README's own blocks
    in the README; nothing else in either file changes."""
    import maintainers.readme_tables as readme_tables

    (tmp_path / "docs" / "deep").mkdir(parents=True)
    readme = tmp_path / "README.md"
    readme.write_text(
        "# mine\n<!-- results:PowerTrip-v0 -->\nold\n<!-- /results:PowerTrip-v0 -->\n"
    )
    page = tmp_path / "docs" / "deep" / "page.md"
    page.write_text(
        "# page\n<!-- results:PowerTrip-KWS-v0 -->\nold\n<!-- /results:PowerTrip-KWS-v0 -->\n"
    )
    monkeypatch.setattr(readme_tables, "table_for", lambda env_id, *a: f"| {env_id} |\n")
    argv = ["--readme", str(readme), "--env", "PowerTrip-v0", "--env", "PowerTrip-KWS-v0"]
    assert readme_tables.main([*argv, "--tables", "results", "--no-progress"]) == 0
    assert readme.read_text() == (
        "# mine\n<!-- results:PowerTrip-v0 -->\n| PowerTrip-v0 |\n<!-- /results:PowerTrip-v0 -->\n"
    )
    assert page.read_text() == (
        "# page\n<!-- results:PowerTrip-KWS-v0 -->\n| PowerTrip-KWS-v0 |\n"
        "<!-- /results:PowerTrip-KWS-v0 -->\n"
    )


def test_readme_tables_refuses_a_block_held_twice(tmp_path, monkeypatch, capsys) -> None:
    import maintainers.readme_tables as readme_tables

    block = "<!-- results:PowerTrip-v0 -->\nold\n<!-- /results:PowerTrip-v0 -->\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(block)
    (tmp_path / "docs" / "copy.md").write_text(block)
    monkeypatch.setattr(readme_tables, "table_for", lambda *a: pytest.fail("ran"))
    with pytest.raises(SystemExit) as info:
        readme_tables.main(["--readme", str(tmp_path / "README.md"), "--env", "PowerTrip-v0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "2 files" in err and "copy.md" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "tables", ["all", "results", "headroom", "calibration", "moving", "leaderboard"]
)
def test_readme_tables_updates_the_readme_in_the_current_folder(tmp_path, monkeypatch, tables):
    import maintainers.readme_tables as readme_tables
    from powertrip_env.harness.calibration import fidelity, sensitivity
    from powertrip_env.harness.reports import benchmark, headroom, leaderboard

    monkeypatch.chdir(tmp_path)
    names = ("PowerTrip-v0", "headroom", "fidelity", "sensitivity", "sensitivity-moving",
             "leaderboard", "leaderboard-scores", "leaderboard-measured", "leaderboard-moving",
             "leaderboard-carbon")  # fmt: skip
    blocks = {name: f"<!-- results:{name} -->\nold\n<!-- /results:{name} -->\n" for name in names}
    starts = ["2022-06-28T03:00:00Z", "2022-06-29T03:00:00Z"]
    frame = pd.DataFrame(
        [
            {
                "task": "PowerTrip-v0",
                "policy": policy,
                "episode": e,
                "start_time": start,
                "tta_h": tta + e,
                "success": True,
            }
            for policy, tta in (("PowerTrip", 30.0), ("Optimiser", 20.0), ("LowerBound", 19.0))
            for e, start in enumerate(starts)
        ]
    )
    facts = {
        "PowerTrip-v0": {
            "optimiser_headroom": 1.2,
            "optimum_upper_h": 20.5,
            "optimum_lower_h": 19.5,
            "gap": 1.05,
            "reference_never_beaten": True,
            "n_sites": 10,
        }
    }
    monkeypatch.setattr(benchmark, "benchmark", lambda **kw: (frame, facts))

    def profile(scored, zero, top, path):
        path.write_bytes(b"png")
        return path

    monkeypatch.setattr(leaderboard, "performance_profile", profile)
    (tmp_path / "README.md").write_text("# mine\n" + "".join(blocks.values()), encoding="utf-8")
    monkeypatch.setattr(readme_tables, "table_for", lambda env_id, *a: f"| {env_id} |\n")
    monkeypatch.setattr(headroom, "headroom", lambda env_id, **kw: ({"env": env_id}, None))
    monkeypatch.setattr(headroom, "to_markdown", lambda s: f"| room {s[0]['env']} |\n")
    monkeypatch.setattr(fidelity, "fidelity", lambda env_id, **kw: {"env": env_id})
    monkeypatch.setattr(fidelity, "to_markdown", lambda r: f"| fidelity {r['env']} |\n")
    monkeypatch.setattr(sensitivity, "sensitivity", lambda env_id, **kw: {"env": env_id})
    monkeypatch.setattr(sensitivity, "to_markdown", lambda r: f"| swept {r['env']} |\n")
    monkeypatch.setattr(sensitivity, "room_sweep", lambda env_id, **kw: {"env": env_id})
    monkeypatch.setattr(sensitivity, "room_markdown", lambda r: f"| room swept {r['env']} |\n")
    argv = ["--env", "PowerTrip-v0", "--tables", tables, "--no-progress"]
    assert readme_tables.main(argv) == 0
    new = {
        "PowerTrip-v0": "| PowerTrip-v0 |",
        "headroom": "| room PowerTrip-v0 |",
        "fidelity": "| fidelity PowerTrip-v0 |",
        "sensitivity": "| swept PowerTrip-v0 |",
        "sensitivity-moving": "| room swept PowerTrip-Moving-v0 |\n\n"
        "| room swept PowerTrip-Wide-Moving-v0 |",
        "leaderboard": readme_tables.board_block(benchmark.report(frame, facts)[0]).rstrip("\n"),
        "leaderboard-scores": readme_tables.board_scores(
            leaderboard.board(benchmark.scored(frame)), facts, KNOWN
        ).rstrip("\n"),
    }
    chosen = {
        "all": set(new),
        "results": {"PowerTrip-v0"},
        "headroom": {"headroom"},
        "calibration": {"fidelity", "sensitivity", "sensitivity-moving"},
        "moving": {"sensitivity-moving"},
        "leaderboard": {"leaderboard", "leaderboard-scores"},
    }[tables]
    expected = "# mine\n" + "".join(
        text.replace("old", new[name]) if name in chosen else text for name, text in blocks.items()
    )
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == expected
    profile = tmp_path / "docs" / "leaderboard-profile.png"
    assert profile.is_file() == ("leaderboard" in chosen)


def test_readme_tables_without_a_readme_exits_2_before_running(tmp_path, monkeypatch, capsys):
    import maintainers.readme_tables as readme_tables

    def must_not_run(*args):
        raise AssertionError("an evaluation ran although the README is missing")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(readme_tables, "table_for", must_not_run)
    with pytest.raises(SystemExit) as info:
        readme_tables.main(["--env", "PowerTrip-v0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "'README.md'" in err and "not found" in err and str(tmp_path) in err
    assert "--readme PATH" in err and "Traceback" not in err


def test_readme_tables_with_a_missing_block_exits_2_naming_it(tmp_path, monkeypatch, capsys):
    import maintainers.readme_tables as readme_tables

    def must_not_run(*args):
        raise AssertionError("an evaluation ran although a results block is missing")

    readme = tmp_path / "OTHER.md"
    readme.write_text("<!-- results:PowerTrip-v0 -->\n<!-- /results:PowerTrip-v0 -->\n")
    monkeypatch.setattr(readme_tables, "table_for", must_not_run)
    with pytest.raises(SystemExit) as info:
        readme_tables.main(
            ["--readme", str(readme), "--env", "PowerTrip-v0", "--env", "PowerTrip-KWS-v0"]
        )
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "OTHER.md" in err and "<!-- results:PowerTrip-KWS-v0 -->" in err
    assert "Traceback" not in err


def test_readme_tables_refuses_a_leaderboard_from_that_is_not_a_board(tmp_path, capsys):
    """``--leaderboard-from DIR`` that holds a board's Markdown but not its episodes and JSON
    (the data the blocks are laid out from) exits 2 naming the folder and the missing file, and
    writes neither page."""
    import maintainers.readme_tables as readme_tables

    blocks = "".join(
        f"<!-- results:{n} -->\nold\n<!-- /results:{n} -->\n"
        for n in ("leaderboard", "leaderboard-scores")
    )
    readme = tmp_path / "README.md"
    readme.write_text(blocks, encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    (run / "leaderboard.md").write_text("# Leaderboard\n## PowerTrip-v0\n| a |\n")
    (run / "profile.png").write_bytes(b"png")
    argv = ["--readme", str(readme), "--tables", "leaderboard", "--leaderboard-from", str(run)]
    with pytest.raises(SystemExit) as info:
        readme_tables.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--leaderboard-from '{run}'" in err and "leaderboard.json" in err
    assert "Traceback" not in err
    assert readme.read_text(encoding="utf-8") == blocks
    assert not (tmp_path / "docs" / "leaderboard-profile.png").exists()


def test_maskable_agent_with_a_custom_policy_class_is_recognised(small_scenario, tmp_path):
    """A MaskablePPO model whose policy subclasses MaskableActorCriticPolicy (the project's own
    MaskableSitePolicy) is a maskable_ppo model, not 'saved by ppo'."""
    import gymnasium as gym
    from sb3_contrib import MaskablePPO

    from powertrip_env.agents.site_policy import MaskableSitePolicy
    from powertrip_env.harness.models.sb3_zip import _saved_algo

    env = gym.make("PowerTrip-v0", scenario=str(small_scenario), obs_mode="dict")
    model = MaskablePPO(MaskableSitePolicy, env, n_steps=32, batch_size=32, n_epochs=1)
    model.save(tmp_path / "masked")
    assert _saved_algo(tmp_path / "masked.zip") == "maskable_ppo"
    result = evaluate(
        "PowerTrip-v0",
        [],
        episodes=1,
        models=[(str(tmp_path / "masked.zip"), "maskable_ppo")],
        env_kwargs={"scenario": str(small_scenario)},
        progress=False,
    )
    assert list(result.summary["policy"]) == ["masked"]


def test_scenario_with_a_bad_value_is_refused_with_the_scenario_error(tmp_path, capsys):
    bad = write_toy_scenario(tmp_path, [site("a", "ca")], {"ca": 0.5}, workload={"mfu": 1.7})
    err = _refused(["--scenario", str(bad), "--out", str(tmp_path / "res")], capsys)
    assert str(bad) in err and "[workload]" in err and "'mfu'" in err and "1.7" in err
    assert "<= 1" in err
    assert not (tmp_path / "res").exists()


def test_scenario_whose_trace_lacks_a_column_is_refused_with_the_trace_error(tmp_path, capsys):
    bad = write_toy_scenario(tmp_path, [site("a", "no_such_column")], {"ca": 0.5})
    err = _refused(["--scenario", str(bad), "--out", str(tmp_path / "res")], capsys)
    assert "'no_such_column'" in err and "trace.csv" in err


def test_missing_scenario_file_is_refused(tmp_path, capsys):
    err = _refused(["--scenario", str(tmp_path / "nope.toml"), "--out", str(tmp_path)], capsys)
    assert "nope.toml" in err and "not found" in err


def test_misspelt_scenario_name_is_refused_with_the_shipped_names(tmp_path, capsys):
    err = _refused(["--scenario", "defualt", "--out", str(tmp_path)], capsys)
    assert "'defualt'" in err and "'default'" in err and "'kws'" in err


@pytest.mark.parametrize("given", ["my.toml", "default"])
def test_scenario_given_as_env_is_refused_with_a_pointer_to_scenario(given, tmp_path, capsys):
    err = _refused(["--env", given, "--out", str(tmp_path / "res")], capsys)
    assert f"argument --env: {given!r}" in err and f"--scenario {given}" in err
    assert "PowerTrip-v0" in err
    assert not (tmp_path / "res").exists()


def test_existing_scenario_file_given_as_env_is_refused_with_a_pointer_to_scenario(
    small_scenario, tmp_path, capsys
):
    odd_name = tmp_path / "scenario_file"  # a scenario file need not end in .toml
    odd_name.write_text(small_scenario.read_text())
    err = _refused(["--env", str(odd_name), "--out", str(tmp_path / "res")], capsys)
    assert f"--scenario {odd_name}" in err
