"""One leaderboard over the suite of sequential tasks: every deployable baseline, the
references, the bracket on the optimum and any saved agent, on the same paired test episodes.

For each task of the suite (``powertrip_env.suite_ids()``, as registered, or ``--env``), on its
first ``--episodes`` test episodes without time jitter (deterministic given the trace, so a
clairvoyant plan replays exactly), the task's track (``powertrip_env.harness.tracks``, named
when the ID was registered) says what runs and how it is scored:

* its deployable baselines (``Track.rules``: PowerTrip, the simple rules, MyopicOptimal where it
  runs and the lookahead rules; the measured track adds the adaptive rules, the carbon track the
  carbon rules) and the rules it tells the episode's draw (``Track.told``: ``Informed``);
* its clairvoyant references (``Track.board_references``), whose planners start from the
  complete episode of every one of those (``Track.starts``), so no shipped policy beats them in
  any episode (the JSON says whether that held: ``reference_never_beaten``);
* its bound and the facts it draws from the run (``Track.score``): on the time tracks the
  bracket on the optimum, ``optimum_upper_h`` (the Optimiser's mean TTA, a feasible plan
  replayed in the env) and ``optimum_lower_h`` (the mean of ``lower_bound_h``, a relaxation no
  policy beats), ``gap`` their ratio and ``optimiser_headroom`` = BestFixedSet / Optimiser; on
  the measured track each task's room chain (PowerTrip → the best rule on the stated model → the
  best adaptive rule → the best rule told the draw → the Optimiser) and its ``learnable_room``;
  on the carbon track the same bracket on the carbon cost (``_kg``, ``CarbonOptimiser`` at 1,
  ``carbon_bound_kg`` below), the deadline and each task's carbon chain (PowerTrip → the best
  deployable rule → ``PerfectForecastPlanner`` → ``CarbonOptimiser``: ``best_rule``,
  ``perfect_forecast_kg``, ``learnable_room``, ``chain``);
* each ``--model`` (a saved agent, as ``powertrip_env.harness.evaluation.evaluate`` loads it).

Scores are normalised per task on the track's measure, 0 = PowerTrip and 1 = its reference's
feasible plan (``powertrip_env.harness.reports.leaderboard``), and aggregated over each track's
tasks as a mean and an interquartile mean with bootstrap intervals that resample start days
within each task; beside each score is the share of episodes that reached the target, since a
policy that never does counts at the time budget everywhere and shares its score with every
other such policy.
Each track has its own board: its scores mean different things. It writes ``episodes.csv`` (the
bound's rows included), ``leaderboard.md``, ``leaderboard.json``, ``profile.png`` (a
performance profile of the first track that ran) and each track's figures (the measured track's
``chain.png``, the carbon track's ``tradeoff.png``) to ``--out`` as one set, prints the
Markdown, and prints as its last line the JSON object of ``leaderboard.json`` (a carbon task's
bracket keys end in ``_kg``, its policies carry ``cost_kg``)::

    {"tasks": {"<ID>": {"track", "optimiser_headroom", "optimum_upper_h", "optimum_lower_h",
                        "gap", "reference_never_beaten", "bound_holds", "episodes", "n_sites",
                        "days", ["informed_h", "best_adaptive", "learnable_room", "chain"],
                        "policies": {"<name>": {"tta_h", "score", "success",
                                                "never_finished"}}}},
     "aggregate": {"<name>": {"mean", "iqm", "ci95", "iqm_ci95", "success", "never_finished"}},
     "aggregate_by_track": {"<track>": {"<name>": {...}}},
     "normaliser": {"zero", "top"}, "normaliser_by_track": {"<track>": {"zero", "top"}},
     "resamples"}

``aggregate`` and ``normaliser`` are the first track's that ran (the known track's, when it
ran); the carbon track's top is ``CarbonOptimiser``. A track of a user's, registered with
``powertrip_env.harness.tracks.register_track``, gets its own board the same way.
``read_run`` reads such a folder back (``powertrip readme-tables --leaderboard-from``).

Command line::

    powertrip benchmark --out results/benchmark            # the full leaderboard
    powertrip benchmark --quick --out /tmp/bench           # 2 episodes per task
    powertrip benchmark --model agents/pretrained/model.zip --out results/with-agent
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from powertrip_env.atomic import (
    OutputDirError,
    check_output_dir,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.baselines.registry import make_policy
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import (
    SUITE,
    add_env,
    add_episodes,
    add_force,
    add_no_progress,
    add_out,
    add_seed,
    make_env,
)
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.models.loading import ALGOS, load_model
from powertrip_env.harness.reports import leaderboard
from powertrip_env.harness.tracks import TRACKS, Facts, Section, Track, track_for, track_named
from powertrip_env.tasks import suite_ids

QUICK_EPISODES = 2
EPISODES, BOARD_MD, BOARD_JSON, PROFILE = (
    "episodes.csv",
    "leaderboard.md",
    "leaderboard.json",
    "profile.png",
)  # the files of one run, written as one set; each track adds its figures (chain, tradeoff)


def run_task(
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One task's episodes (columns ``task, policy, episode, start_time``, its track's measure
    and ``success``; the bound's rows included) and its facts, as its track scores them: its
    rules, those it tells the draw and its references, planned from the rules' episodes
    (``Track.starts``), on paired test episodes without jitter. One env serves the task:
    ``evaluate`` reads its sites from it and the bound is computed on it."""
    kwargs = {"jitter": False}
    probe = make_env(env_id, split="test", **kwargs)
    try:
        n_sites = probe.unwrapped.n_sites
        params = probe.unwrapped.params
        track = track_for(env_id, probe)
        measured = bool(params.measured)
        contenders = [*track.rules(n_sites, measured), *track.told(measured)]
        starts = track.starts(n_sites, measured)
        references = [
            make_policy(name, n_sites, seed, starts=starts) for name in track.board_references
        ]
        result = evaluate(
            env_id,
            [*contenders, *references],
            episodes=episodes,
            split="test",
            seed=seed,
            models=fitting(models, env_id, measured),
            env_kwargs=kwargs,
            progress=progress,
            probe=probe,
        )
        bounds = track.bound(probe, episodes, seed)
    finally:
        probe.close()
    return track.score(env_id, result.episodes, bounds, params, contenders)


def benchmark(
    env_ids: Sequence[str] | None = None,
    *,
    episodes: int = 30,
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Every task's episodes in one frame, and each task's facts; every task of the suite
    (``powertrip_env.suite_ids()``, as registered) when ``env_ids`` is empty."""
    frames, facts = [], {}
    for env_id in env_ids or suite_ids():
        frame, facts[env_id] = run_task(
            env_id, episodes=episodes, seed=seed, models=models, progress=progress
        )
        frames.append(frame)
    return pd.concat(frames, ignore_index=True), facts


def fitting(
    models: Sequence[tuple[str, str]], env_id: str, measured: bool
) -> list[tuple[str, str]]:
    """The ``--model``s whose spaces fit ``env_id``: an agent trained where the world is stated
    does not read the telemetry columns of a task whose scenario draws unknowns (``measured``),
    so it sits out those tasks, said on stderr (the board lists it only where it ran) instead
    of stopping the run."""
    if not measured:
        return list(models)  # evaluate loads and checks them, as it always has
    out = []
    for path, algo in models:
        try:
            load_model(path, algo, env_id, {"split": "test", "jitter": False})
        except EvaluationError as exc:
            print(f"{path}: not run on {env_id}: {exc}", file=sys.stderr)
            continue
        out.append((path, algo))
    return out


def scored(episodes: pd.DataFrame) -> pd.DataFrame:
    """The episodes the leaderboard scores: the policies', not the bounds' (each track names
    its bound's rows: ``Track.bound_label``)."""
    bounds = {track.bound_label for track in TRACKS.values()} - {None}
    return episodes[~episodes["policy"].isin(bounds)]


def tracks(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """The tasks of each track that ran, in the order of ``TRACKS`` (the known track first):
    each has its own board, since their scores mean different things."""
    named = {task: f.get("track", next(iter(TRACKS))) for task, f in facts.items()}
    unknown = sorted({name for name in named.values() if name not in TRACKS})
    if unknown:
        track_named(unknown[0])  # names the registered tracks
    return {
        name: tasks
        for name in TRACKS
        if (tasks := [task for task, track in named.items() if track == name])
    }


def facts_lines(facts: Facts) -> list[str]:
    """The tables of every task's facts, each shown once over the tasks of the tracks that show
    it, in the order the tracks are declared."""
    shown: dict[Section, list[str]] = {}
    for name, tasks in tracks(facts).items():
        for section in TRACKS[name].sections():
            shown.setdefault(section, []).extend(tasks)
    lines: list[str] = []
    for section, tasks in shown.items():
        lines += section({task: facts[task] for task in facts if task in tasks})
    return lines


def report(
    episodes: pd.DataFrame,
    facts: Facts,
    *,
    boards: Mapping[str, leaderboard.Board] | None = None,
) -> tuple[str, dict]:
    """The Markdown leaderboard (the tables of facts first, then each track's board) and the
    JSON object, both laid out from one ``leaderboard.Board`` per track of the scored episodes
    (``boards``' by track name, or made here), so its bootstraps run once."""
    lines = facts_lines(facts)
    summary: dict[str, Any] = {}
    for name, tasks in tracks(facts).items():
        track = TRACKS[name]
        here = (boards or {}).get(name) or track.board(
            scored(episodes[episodes["task"].isin(tasks)])
        )
        lines += [leaderboard.to_markdown(here, title=track.title), ""]
        out = leaderboard.to_json(here, task_facts=facts)
        if not summary:  # the first track's aggregate and normaliser stay the top level's
            summary = {**out, "aggregate_by_track": {}, "normaliser_by_track": {}}
        else:
            summary["tasks"].update(out["tasks"])
        summary["aggregate_by_track"][name] = out["aggregate"]
        summary["normaliser_by_track"][name] = out["normaliser"]
    return "\n".join(lines).rstrip("\n"), summary


def write_run(folder: Path, episodes: pd.DataFrame, markdown: str, summary: dict) -> None:
    """The files of one run into ``folder``: the episodes (the bound's rows included), the
    board as Markdown and as JSON, the performance profile of the first track's policies that
    ran every one of its tasks, and each track's figures."""
    episodes.to_csv(folder / EPISODES, index=False)
    write_text(folder / BOARD_MD, markdown + "\n")
    write_text(folder / BOARD_JSON, json.dumps(summary) + "\n")
    first, profile = profiled(episodes, summary["tasks"])
    leaderboard.performance_profile(profile, first.zero, first.top, folder / PROFILE)
    for name, tasks in tracks(summary["tasks"]).items():
        TRACKS[name].figures(episodes, {t: summary["tasks"][t] for t in tasks}, folder)


def profiled(episodes: pd.DataFrame, facts: Facts) -> tuple[Track, pd.DataFrame]:
    """The track whose episodes the performance profile draws (the first that ran: the known
    track's when it ran) and those episodes, on its measure, of the policies that ran every one
    of its tasks. ``facts`` maps each task to its facts (the JSON's ``tasks`` will do)."""
    name, tasks = next(iter(tracks(facts).items()), (next(iter(TRACKS)), []))
    track = TRACKS[name]
    part = scored(episodes[episodes["task"].isin(tasks)])
    return track, track.on_measure(leaderboard.on_every_task(part))


def read_run(folder: Path) -> tuple[pd.DataFrame, dict[str, dict[str, Any]], dict[str, Any]]:
    """A finished run's episodes, task facts and JSON object, from its ``EPISODES`` and
    ``BOARD_JSON`` (not its Markdown, which is their rendering). ``report(episodes, facts)``
    gives that JSON object again, number for number: the CSV holds every TTA to the last bit.
    ``ValueError`` when the folder lacks a file of the set."""
    missing = [name for name in (EPISODES, BOARD_JSON, PROFILE) if not (folder / name).is_file()]
    if missing:
        raise ValueError(
            f"no {', '.join(missing)} in it: not the folder of a finished `powertrip benchmark "
            f"--out` (one from before {BOARD_JSON} was written has none; run it again)"
        )
    episodes = pd.read_csv(folder / EPISODES)
    summary = json.loads((folder / BOARD_JSON).read_text(encoding="utf-8"))
    try:
        facts = {
            task: {k: v for k, v in entry.items() if k != "policies"}
            for task, entry in summary["tasks"].items()
        }
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"its {BOARD_JSON} has no tasks' facts: not a benchmark's") from None
    return episodes, facts, summary


def merge_runs(folders: Sequence[Path]) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """The episodes and task facts of several finished runs as one board's, tasks in the
    suite's order: a maintainer runs one track again (a new rule, an agent) and keeps the
    others' runs. ``ValueError`` names a task two runs both hold (a task's board comes from one
    run) or runs of different episode counts (the boards' intervals would not be alike)."""
    frames, facts, where = [], {}, {}
    for folder in folders:
        episodes, these, _ = read_run(folder)
        for task in these:
            if task in facts:
                raise ValueError(
                    f"{folder}: {task} is in {where[task]} too; a task's board comes from one run"
                )
            where[task] = folder
        frames.append(episodes)
        facts.update(these)
    counts = {task: entry.get("episodes") for task, entry in facts.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(
            "the runs played different numbers of episodes a task ("
            + ", ".join(f"{task} {n}" for task, n in counts.items())
            + "); run them with the same --episodes"
        )
    order = {task: i for i, task in enumerate(suite_ids())}
    facts = dict(sorted(facts.items(), key=lambda item: order.get(item[0], len(order))))
    return pd.concat(frames, ignore_index=True), facts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip benchmark",
        description="The leaderboard over the suite of sequential tasks (see the module docs).",
    )
    add_env(parser, [], ids=SUITE, repeat=True, default_text="every suite task")
    add_episodes(parser, 30)
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_EPISODES} episodes per task (for CI)"
    )
    add_seed(parser)
    parser.add_argument("--model", action="append", default=[], help="saved agent; may repeat")
    parser.add_argument("--algo", default="ppo", choices=sorted(ALGOS), help="of every --model")
    parser.add_argument(
        "--merge",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="instead of running, make one board of finished runs' folders, each task from "
        "the one run that holds it; may repeat",
    )
    add_out(parser, "results/benchmark")
    add_force(parser)
    add_no_progress(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code: 2 for bad input and for a board that
    could not be written, which is printed all the same (its JSON the last line either way)."""
    parser = _parser()
    args = parser.parse_args(argv)
    episodes = QUICK_EPISODES if args.quick else args.episodes
    if episodes < 2:  # one episode a task starts on one day: nothing for the bootstrap to draw
        parser.error(
            f"argument --episodes: {episodes}: the leaderboard's 95% intervals resample start "
            "days, so it needs at least 2 episodes a task"
        )
    if args.merge and (args.env or args.model or args.quick):
        parser.error("argument --merge: a merge runs nothing; drop --env, --model and --quick")
    merged = None
    if args.merge:
        try:
            merged = merge_runs(args.merge)
        except ValueError as exc:
            parser.error(f"argument --merge: {exc}")
    out = Path(args.out)
    summary = None
    with stop_codes(EvaluationError, OutputDirError, OSError) as stop:
        check_output_dir(out, force=args.force)
        frame, facts = merged or benchmark(
            args.env or None,
            episodes=episodes,
            seed=args.seed,
            models=[(m, args.algo) for m in args.model],
            progress=not args.no_progress,
        )
        markdown, summary = report(frame, facts)
        print(markdown)  # before the write: a failed one must not lose the board
        with result_dir(out, force=args.force) as folder:
            write_run(folder, frame, markdown, summary)
        print(f"results written to {out}")
    if summary is not None:
        print(json.dumps(summary))
    return stop.code


if __name__ == "__main__":
    sys.exit(main())
