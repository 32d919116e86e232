"""One leaderboard over the suite of sequential tasks: every deployable baseline, the
references, the bracket on the optimum and any saved agent, on the same paired test episodes.

For each task of ``powertrip_env.SUITE_IDS`` (or ``--env``), on its first ``--episodes`` test
episodes without time jitter (deterministic given the trace, so a clairvoyant plan replays
exactly):

* every deployable baseline (``powertrip_env.baselines.registry.default_policy_names``: PowerTrip,
  the simple rules, MyopicOptimal where it runs, and the lookahead rules HorizonRule and
  ForecastMPC);
* the clairvoyant references: ``BestFixedSet`` and ``Optimiser`` (``BeamPlanner``'s plan
  improved by local search), which starts from the complete episode of every one of those
  baselines, so no shipped policy beats it in any episode (the JSON says whether that held:
  ``reference_never_beaten``);
* the bracket on the optimum: ``optimum_upper_h``, the optimiser's mean TTA (a feasible plan,
  replayed in the env), and ``optimum_lower_h``, the mean of ``lower_bound_h`` (a relaxation no
  policy beats, which charges joins where it can); ``gap`` is their ratio;
* each ``--model`` (a saved agent, as ``powertrip_env.harness.evaluation.evaluate`` loads it).

Scores are normalised per task, 0 = PowerTrip and 1 = the optimiser's feasible plan
(``powertrip_env.harness.reports.leaderboard``), and aggregated over tasks as a mean and an
interquartile
mean with bootstrap intervals that resample start days within each task. It writes ``episodes.csv``,
``leaderboard.md`` and ``profile.png`` (a performance profile) to ``--out`` as one set, prints
the Markdown, and prints as its last line one JSON object::

    {"tasks": {"<ID>": {"headroom", "optimum_upper_h", "optimum_lower_h", "gap",
                        "reference_never_beaten", "policies": {"<name>": {"tta_h", "score"}}}},
     "aggregate": {"<name>": {"mean", "iqm", "ci95"}}}

Command line::

    powertrip benchmark --out results/benchmark            # the full leaderboard
    powertrip benchmark --quick --out /tmp/bench           # 2 episodes per task
    powertrip benchmark --model agents/pretrained/model.zip --out results/with-agent
"""

from __future__ import annotations

import argparse
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
from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.baselines.registry import default_policy_names
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import make_env
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.evaluation.results import YARDSTICK
from powertrip_env.harness.models.loading import ALGOS
from powertrip_env.harness.reports import leaderboard

TOP = "Optimiser"  # the reference: score 1
BOUND = "LowerBound"
QUICK_EPISODES = 2


def run_task(
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    progress: bool = False,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One task's episodes (columns ``task, policy, episode, start_time, tta_h``; the bound's
    rows included) and its facts: headroom, the bracket and whether the reference held."""
    kwargs = {"jitter": False}
    probe = make_env(env_id, split="test", **kwargs)
    n_sites = probe.unwrapped.n_sites
    deployable = default_policy_names(n_sites)
    result = evaluate(
        env_id,
        [*deployable, "BestFixedSet", TOP],
        episodes=episodes,
        split="test",
        seed=seed,
        models=models,
        env_kwargs=kwargs,
        progress=progress,
    )
    frame = result.episodes[["policy", "episode", "start_time", "tta_h"]].copy()
    bounds = []
    for e in range(episodes):
        probe.reset(seed=seed + e)
        bounds.append({"policy": BOUND, "episode": e, "tta_h": lower_bound_h(probe.unwrapped)})
    probe.close()
    starts = frame.loc[frame["policy"] == YARDSTICK, ["episode", "start_time"]]
    frame = pd.concat([frame, pd.DataFrame(bounds).merge(starts, on="episode")], ignore_index=True)
    frame.insert(0, "task", env_id)

    tta = frame.pivot(index="episode", columns="policy", values="tta_h")
    mean = tta.mean()
    never_beaten = bool((tta[TOP] <= tta[deployable].min(axis=1) + 1e-9).all())
    facts = {
        "headroom": float(mean["BestFixedSet"] / mean[TOP]),
        "optimum_upper_h": float(mean[TOP]),
        "optimum_lower_h": float(mean[BOUND]),
        "gap": float(mean[TOP] / mean[BOUND]),
        "reference_never_beaten": never_beaten,
        "bound_holds": bool((tta[BOUND] <= tta.drop(columns=[BOUND]).min(axis=1) + 1e-9).all()),
        "episodes": episodes,
        "n_sites": n_sites,
    }
    return frame, facts


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
    for env_id in env_ids or powertrip_env.SUITE_IDS:
        frame, facts[env_id] = run_task(
            env_id, episodes=episodes, seed=seed, models=models, progress=progress
        )
        frames.append(frame)
    return pd.concat(frames, ignore_index=True), facts


def report(episodes: pd.DataFrame, facts: dict[str, dict[str, Any]]) -> tuple[str, dict]:
    """The Markdown leaderboard (bracket table first) and the JSON object."""
    scored = episodes[episodes["policy"] != BOUND]
    lines = [
        "| task | sites | headroom | optimum ≥ (h) | optimum ≤ (h) | gap | never beaten |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for task, f in facts.items():
        lines.append(
            f"| {task} | {f['n_sites']} | {f['headroom']:.3f} | {f['optimum_lower_h']:.2f} | "
            f"{f['optimum_upper_h']:.2f} | {f['gap']:.3f} | {f['reference_never_beaten']} |"
        )
    lines += [
        "",
        "headroom = BestFixedSet / Optimiser (the reference, which starts from every deployable "
        "baseline's episode); optimum ≤ is the reference's feasible plan, optimum ≥ the lower "
        "bound; gap = their ratio; never beaten: no deployable baseline was faster than the "
        "reference in any episode.",
        "",
    ]
    board = leaderboard.to_markdown(scored, zero=YARDSTICK, top=TOP, title="Leaderboard")
    summary = leaderboard.to_json(scored, zero=YARDSTICK, top=TOP, task_facts=facts)
    return "\n".join(lines) + board, summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip benchmark",
        description="The leaderboard over the suite of sequential tasks (see the module docs).",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="a task's registered ID; may repeat (default: every ID of powertrip_env.SUITE_IDS)",
    )
    parser.add_argument("--episodes", type=int, default=30, help="paired test episodes (30)")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_EPISODES} episodes per task (for CI)"
    )
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    parser.add_argument("--model", action="append", default=[], help="saved agent; may repeat")
    parser.add_argument("--algo", default="ppo", choices=sorted(ALGOS), help="of every --model")
    parser.add_argument("--out", default="results/benchmark", help="output folder")
    parser.add_argument("--force", action="store_true", help="replace the results in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    episodes = QUICK_EPISODES if args.quick else args.episodes
    unknown = [e for e in args.env if e not in powertrip_env.SUITE_IDS]
    if unknown:
        print(
            f"error: --env {unknown[0]!r} is not a suite task; tasks: "
            f"{', '.join(powertrip_env.SUITE_IDS)}",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
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
        with result_dir(out, force=args.force) as folder:
            frame.to_csv(folder / "episodes.csv", index=False)
            write_text(folder / "leaderboard.md", markdown + "\n")
            scored = frame[frame["policy"] != BOUND]
            profiled = leaderboard.on_every_task(scored)
            leaderboard.performance_profile(profiled, YARDSTICK, TOP, folder / "profile.png")
    if stop.code:
        return stop.code
    print(markdown)
    print(f"results written to {out}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
