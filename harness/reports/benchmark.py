"""One leaderboard over the suite of sequential tasks: every deployable baseline, the
references, the bracket on the optimum and any saved agent, on the same paired test episodes.

For each task of ``powertrip_env.SUITE_IDS`` and the measured track's ``MEASURED_SUITE_IDS`` (or
``--env``), on its first ``--episodes`` test episodes without time jitter (deterministic given
the trace, so a clairvoyant plan replays exactly):

* every deployable baseline (``powertrip_env.baselines.registry.default_policy_names``: PowerTrip,
  the simple rules, MyopicOptimal where it runs, and the lookahead rules HorizonRule and
  ForecastMPC; on the measured track also the adaptive rules, ``registry.ADAPTIVE``);
* the clairvoyant references: ``BestFixedSet`` and ``Optimiser`` (``BeamPlanner``'s plan
  improved by local search), which starts from the complete episode of every one of those
  baselines (and on the measured track of ``Informed`` and ``InformedMPC``, which are told the
  episode's drawn unknowns), so no shipped policy beats it in any episode (the JSON says whether
  that held: ``reference_never_beaten``);
* the bracket on the optimum: ``optimum_upper_h``, the optimiser's mean TTA (a feasible plan,
  replayed in the env), and ``optimum_lower_h``, the mean of ``lower_bound_h`` (a relaxation no
  policy beats, which charges joins where it can); ``gap`` is their ratio;
* ``optimiser_headroom``: BestFixedSet / Optimiser (mean TTA over mean TTA), named for its
  denominator apart from ``powertrip headroom``'s ``beam_headroom`` (BestFixedSet /
  BeamPlanner): the optimiser improves on BeamPlanner's plan, so this is the larger of the two
  on every published task;
* on the measured track, the room chain (``room_chain``: PowerTrip → the best rule on the stated
  model → the best adaptive rule → the best rule told the draw → the Optimiser) and its
  ``learnable_room``, best adaptive / informed;
* each ``--model`` (a saved agent, as ``powertrip_env.harness.evaluation.evaluate`` loads it).

The carbon track's tasks (``powertrip_env.CARBON_SUITE_IDS``, run last) are scored on the carbon
cost instead of the TTA (``harness/reports/carbon_track.py``): their deployable baselines gain the
carbon rules, their references are ``BestFixedCarbon``, ``CarbonOptimiser`` (score 1) and the
time ``Optimiser``, their bound ``carbon_bound_kg``, and the run draws ``tradeoff.png``.

Scores are normalised per task, 0 = PowerTrip and 1 = the optimiser's feasible plan
(``powertrip_env.harness.reports.leaderboard``), and aggregated over each track's tasks as a mean
and an interquartile mean with bootstrap intervals that resample start days within each task;
beside each score is the share of episodes that reached the target, since a policy that never
does counts at the time budget everywhere and shares its score with every other such policy.
Each track has its own board: the adaptive baselines run only on the measured one. It writes
``episodes.csv`` (the bound's rows included), ``leaderboard.md``, ``leaderboard.json``,
``profile.png`` (a performance profile), when measured tasks ran ``chain.png`` (their room
chains) and when carbon tasks ran ``tradeoff.png`` to ``--out`` as one set, prints the
Markdown, and prints as its last line the JSON object of ``leaderboard.json`` (a carbon task's
bracket keys end in ``_kg``, its policies carry ``cost_kg``)::

    {"tasks": {"<ID>": {"track", "optimiser_headroom", "optimum_upper_h", "optimum_lower_h",
                        "gap", "reference_never_beaten", "bound_holds", "episodes", "n_sites",
                        "days", ["informed_h", "best_adaptive", "learnable_room", "chain"],
                        "policies": {"<name>": {"tta_h", "score", "success",
                                                "never_finished"}}}},
     "aggregate": {"<name>": {"mean", "iqm", "ci95", "iqm_ci95", "success", "never_finished"}},
     "aggregate_by_track": {"known" | "measured" | "carbon": {"<name>": {...}}},
     "normaliser": {"zero", "top"}, "normaliser_by_track": {"<track>": {"zero", "top"}},
     "resamples"}

``aggregate`` and ``normaliser`` are the first track's that ran (the known track's, when it
ran); the carbon track's top is ``CarbonOptimiser``.
``read_run`` reads such a folder back (``powertrip readme-tables --leaderboard-from``).

Command line::

    powertrip benchmark --out results/benchmark            # the full leaderboard
    powertrip benchmark --quick --out /tmp/bench           # 2 episodes per task
    powertrip benchmark --model agents/pretrained/model.zip --out results/with-agent
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import powertrip_env
from powertrip_env.atomic import (
    OutputDirError,
    check_output_dir,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.baselines.carbon_bound import CARBON_BOUND, carbon_bound_rows
from powertrip_env.baselines.registry import (
    ADAPTIVE,
    INFORMED,
    LOOKAHEAD,
    default_policy_names,
)
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
from powertrip_env.harness.evaluation.results import YARDSTICK
from powertrip_env.harness.models.loading import ALGOS, load_model
from powertrip_env.harness.reports import carbon_track, leaderboard
from powertrip_env.harness.reports.carbon_track import CARBON_FIXED, CARBON_TOP
from powertrip_env.harness.reports.headroom import BOUND, bound_holds, bound_rows

TOP = "Optimiser"  # the reference: score 1
QUICK_EPISODES = 2
EPISODES, BOARD_MD, BOARD_JSON, PROFILE = (
    "episodes.csv",
    "leaderboard.md",
    "leaderboard.json",
    "profile.png",
)  # the files of one run, written as one set
CHAIN = "chain.png"  # and, when measured tasks ran, their room chains
TRADEOFF = "tradeoff.png"  # and, when carbon tasks ran, their TTA against carbon


def run_task(
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One task's episodes (columns ``task, policy, episode, start_time, tta_h, success``; the
    bound's rows included) and its facts: the optimiser headroom, the bracket and whether the
    reference held. One env serves the task: ``evaluate`` reads its sites from it and the
    bound is computed on it."""
    kwargs = {"jitter": False}
    probe = make_env(env_id, split="test", **kwargs)
    try:
        n_sites = probe.unwrapped.n_sites
        params = probe.unwrapped.params
        measured = bool(params.measured)
        carbon = probe.unwrapped.reward_mode == "carbon"
        deployable = default_policy_names(n_sites, measured=measured, carbon=carbon)
        informed = list(INFORMED) if measured else []
        # the carbon track's references: the time optimiser too, the other end of the front
        references = [TOP, CARBON_FIXED, CARBON_TOP] if carbon else ["BestFixedSet", TOP]
        result = evaluate(
            env_id,
            [*deployable, *informed, *references],
            episodes=episodes,
            split="test",
            seed=seed,
            models=models,
            env_kwargs=kwargs,
            progress=progress,
            probe=probe,
        )
        bounds = (carbon_bound_rows if carbon else bound_rows)(probe, episodes, seed)
    finally:
        probe.close()
    if carbon:
        return carbon_track.carbon_task(
            env_id, result.episodes, bounds, params, [*deployable, *informed]
        )
    frame = result.episodes[["policy", "episode", "start_time", "tta_h", "success"]].copy()
    starts = frame.loc[frame["policy"] == YARDSTICK, ["episode", "start_time"]]
    bounds = bounds[["policy", "episode", "tta_h", "success"]].merge(starts, on="episode")
    frame = pd.concat([frame, bounds], ignore_index=True)
    frame.insert(0, "task", env_id)

    tta = frame.pivot(index="episode", columns="policy", values="tta_h")
    mean = tta.mean()
    never_beaten = bool((tta[TOP] <= tta[[*deployable, *informed]].min(axis=1) + 1e-9).all())
    facts = {
        "track": "measured" if measured else "known",
        "optimiser_headroom": float(mean["BestFixedSet"] / mean[TOP]),
        "optimum_upper_h": float(mean[TOP]),
        "optimum_lower_h": float(mean[BOUND]),
        "gap": float(mean[TOP] / mean[BOUND]),
        "reference_never_beaten": never_beaten,
        "bound_holds": bound_holds(tta),
        "episodes": episodes,
        "n_sites": n_sites,
    }
    if measured:
        facts.update(room_chain(mean))
    return frame, facts


def room_chain(mean: pd.Series) -> dict[str, Any]:
    """A measured task's room, split (docs/measured.md): PowerTrip → the best rule on the
    stated model → the best adaptive rule → ``Informed`` (the best rule told the draw) →
    the Optimiser, with each step's share of PowerTrip → Optimiser. ``learnable_room`` is the
    best adaptive rule over Informed: what measuring costs, and what an agent may take."""
    nominal = min(LOOKAHEAD, key=lambda name: mean[name])
    adaptive = min(ADAPTIVE, key=lambda name: mean[name])
    informed = min(INFORMED, key=lambda name: mean[name])
    steps = [("PowerTrip", YARDSTICK), ("nominal", nominal), ("adaptive", adaptive),
             ("informed", informed), ("optimiser", TOP)]  # fmt: skip
    total = float(mean[YARDSTICK] - mean[TOP])
    chain = [{"step": step, "policy": name, "tta_h": float(mean[name])} for step, name in steps]
    for before, after in itertools.pairwise(chain):
        after["share"] = (before["tta_h"] - after["tta_h"]) / total if total > 0 else 0.0
    return {
        "informed_h": float(mean[informed]),
        "best_adaptive": adaptive,
        "learnable_room": float(mean[adaptive] / mean[informed]),
        "chain": chain,
    }


def benchmark(
    env_ids: Sequence[str] | None = None,
    *,
    episodes: int = 30,
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Every task's episodes in one frame, and each task's facts."""
    frames, facts = [], {}
    default = (
        *powertrip_env.SUITE_IDS,
        *powertrip_env.MEASURED_SUITE_IDS,
        *powertrip_env.CARBON_SUITE_IDS,
    )
    for env_id in env_ids or default:
        frame, facts[env_id] = run_task(
            env_id, episodes=episodes, seed=seed, models=fitting(models, env_id), progress=progress
        )
        frames.append(frame)
    return pd.concat(frames, ignore_index=True), facts


def fitting(models: Sequence[tuple[str, str]], env_id: str) -> list[tuple[str, str]]:
    """The ``--model``s whose spaces fit ``env_id``: an agent trained on the known track does not
    read the measured track's telemetry columns, so it sits out those tasks, said on stderr (the
    board lists it only where it ran) instead of stopping the run."""
    if env_id not in powertrip_env.MEASURED_SUITE_IDS:
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
    """The episodes the leaderboard scores: the policies', not the bounds'."""
    return episodes[~episodes["policy"].isin([BOUND, CARBON_BOUND])]


def bracket_lines(facts: dict[str, dict[str, Any]]) -> list[str]:
    """The table of each task's facts (sites, optimiser headroom, the bracket, whether the
    reference held) and the note that reads it."""
    lines = [
        "| task | sites | optimiser headroom | optimum ≥ (h) | optimum ≤ (h) | gap | "
        "never beaten |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    timed = {task: f for task, f in facts.items() if f.get("track") != "carbon"}
    if not timed:
        return []
    for task, f in timed.items():
        lines.append(
            f"| {task} | {f['n_sites']} | {f['optimiser_headroom']:.3f} | "
            f"{f['optimum_lower_h']:.2f} | {f['optimum_upper_h']:.2f} | {f['gap']:.3f} | "
            f"{f['reference_never_beaten']} |"
        )
    return [
        *lines,
        "",
        "optimiser headroom = BestFixedSet / Optimiser (the reference, which starts from every "
        "deployable baseline's episode; `powertrip headroom`'s beam headroom divides by "
        "BeamPlanner instead); optimum ≤ is the reference's feasible plan, optimum ≥ the lower "
        "bound; gap = their ratio; never beaten: no deployable baseline was faster than the "
        "reference in any episode.",
    ]


def chain_lines(facts: dict[str, dict[str, Any]]) -> list[str]:
    """The measured tasks' room chains (``room_chain``), one row each; none on the known track."""
    rows = [(task, f) for task, f in facts.items() if f.get("track") == "measured"]
    if not rows:
        return []
    lines = [
        "| task | PowerTrip (h) | stated model (h) | adaptive (h) | Informed (h) | Optimiser (h) "
        "| learnable room |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for task, f in rows:
        cells = []
        for link in f["chain"]:
            share = f" ({link['share']:.0%})" if "share" in link else ""
            cells.append(f"{link['policy']} {link['tta_h']:.2f}{share}")
        lines.append(f"| {task} | {' | '.join(cells)} | {f['learnable_room']:.3f} |")
    return [
        *lines,
        "",
        "The measured track's room, split: each step's policy, its mean TTA and (in brackets) "
        "its share of PowerTrip → Optimiser; learnable room = best adaptive / Informed.",
        "",
    ]


def report(
    episodes: pd.DataFrame,
    facts: dict[str, dict[str, Any]],
    *,
    board: leaderboard.Board | None = None,
) -> tuple[str, dict]:
    """The Markdown leaderboard (bracket table first) and the JSON object, both laid out from
    one ``leaderboard.Board`` of the scored episodes (``board``, or one made here), so its
    bootstraps run once."""
    lines = [*bracket_lines(facts), "", *chain_lines(facts), *carbon_track.carbon_lines(facts)]
    summary: dict[str, Any] = {}
    for track, tasks in tracks(facts).items():
        part = scored(episodes[episodes["task"].isin(tasks)])
        if track == "carbon":  # scored on the carbon cost
            here = carbon_track.board(part)
        elif board is None or track != "known":
            here = leaderboard.board(part, YARDSTICK, TOP)
        else:
            here = board
        title = {
            "known": "Leaderboard",
            "measured": "Leaderboard: the measured track",
            "carbon": "Leaderboard: the carbon track",
        }[track]
        lines += [leaderboard.to_markdown(here, title=title), ""]
        out = leaderboard.to_json(here, task_facts=facts)
        if not summary:  # the first track's aggregate and normaliser stay the top level's
            summary = {**out, "aggregate_by_track": {}, "normaliser_by_track": {}}
        else:
            summary["tasks"].update(out["tasks"])
        summary["aggregate_by_track"][track] = out["aggregate"]
        summary["normaliser_by_track"][track] = out["normaliser"]
    return "\n".join(lines).rstrip("\n"), summary


def tracks(facts: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The tasks of each track that ran, the known track first: each has its own board, since
    the measured track's adaptive baselines run only there and the two tracks' scores mean
    different things."""
    out: dict[str, list[str]] = {}
    for track in ("known", "measured", "carbon"):
        tasks = [task for task, f in facts.items() if f.get("track", "known") == track]
        if tasks:
            out[track] = tasks
    return out


def write_run(folder: Path, episodes: pd.DataFrame, markdown: str, summary: dict) -> None:
    """The files of one run into ``folder``: the episodes (the bound's rows included), the
    board as Markdown and as JSON, and the performance profile of the policies that ran every
    task."""
    episodes.to_csv(folder / EPISODES, index=False)
    write_text(folder / BOARD_MD, markdown + "\n")
    write_text(folder / BOARD_JSON, json.dumps(summary) + "\n")
    profile = profiled(episodes, summary["tasks"])
    if next(iter(tracks(summary["tasks"])), "known") == "carbon":  # only carbon tasks ran
        profile = carbon_track.on_cost(profile)
        leaderboard.performance_profile(profile, YARDSTICK, CARBON_TOP, folder / PROFILE)
    else:
        leaderboard.performance_profile(profile, YARDSTICK, TOP, folder / PROFILE)
    chains = {task: entry for task, entry in summary["tasks"].items() if "chain" in entry}
    if chains:
        chain_figure(chains, folder / CHAIN)
    carbon = tracks(summary["tasks"]).get("carbon")
    if carbon:
        carbon_track.tradeoff_of(episodes, summary["tasks"], carbon, folder / TRADEOFF)


def profiled(episodes: pd.DataFrame, facts: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The episodes the performance profile draws: the first track's (the known track's when it
    ran), of the policies that ran every one of its tasks. ``facts`` maps each task to its facts
    (the JSON's ``tasks`` will do)."""
    first = next(iter(tracks(facts).values()), [])
    return leaderboard.on_every_task(scored(episodes[episodes["task"].isin(first)]))


def chain_figure(chains: dict[str, dict[str, Any]], path: Path) -> None:
    """Each measured task's room chain as bars of mean TTA, PowerTrip at the top and the
    Optimiser at the bottom: what trusting the stated model, measuring, being told the draw and
    knowing the future each buy. The learnable room is the gap between the third and fourth."""
    from powertrip_env.render import agg_figure, save_png

    fig = agg_figure(7.0, 1.0 + 1.6 * len(chains), layout="constrained")
    axes = fig.subplots(len(chains), 1, squeeze=False)[:, 0]
    labels = {"PowerTrip": "PowerTrip", "nominal": "stated model", "adaptive": "measuring",
              "informed": "told the draw", "optimiser": "clairvoyant"}  # fmt: skip
    colours = ["#999999", "#4c72b0", "#55a868", "#dd8452", "#c44e52"]
    for ax, (task, entry) in zip(axes, chains.items(), strict=True):
        steps = entry["chain"][::-1]
        hours = [step["tta_h"] for step in steps]
        names = [
            step["policy"] if step["policy"] == labels[step["step"]]
            else f"{labels[step['step']]}: {step['policy']}"
            for step in steps
        ]  # fmt: skip
        ax.barh(range(len(steps)), hours, color=colours[::-1])
        ax.set_yticks(range(len(steps)), names, fontsize=8)
        ax.set_xlim(min(hours) * 0.9, max(hours) * 1.02)
        for y, h in enumerate(hours):
            ax.text(h, y, f" {h:.2f}", va="center", fontsize=7)
        ax.set_title(f"{task}: learnable room {entry['learnable_room']:.3f}", fontsize=9)
        ax.set_xlabel("mean time to accuracy (h)", fontsize=8)
    save_png(fig, path)


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
    out = Path(args.out)
    summary = None
    with stop_codes(EvaluationError, OutputDirError, OSError) as stop:
        check_output_dir(out, force=args.force)
        frame, facts = benchmark(
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
