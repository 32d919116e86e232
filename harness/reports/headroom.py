"""How sequential is a scenario? The best fixed set against a clairvoyant planner, and a bound.

A scenario poses a *sequential* problem only if changing sites during an episode pays: if one
well-chosen set, kept for the whole episode, is as fast as the best plan that changes sets as
power moves, an agent has nothing to learn that a one-off choice would not give. This command
measures that on paired test episodes:

* ``LowerBound``: a time to accuracy no policy can beat (``lower_bound.lower_bound_h``);
* ``BeamPlanner`` and ``BestFixedSet``: clairvoyant references (``baselines/references.py``);
* ``MyopicOptimal``, ``PowerTrip`` and ``AllSites``: deployable policies for scale;
* the *sequential headroom* ``BestFixedSet / BeamPlanner`` (mean TTA over mean TTA). Below
  ``ONE_SHOT_BELOW`` the scenario is labelled a one-shot choice.

Command line::

    powertrip headroom --env PowerTrip-v0 --episodes 30 --out results/headroom
    powertrip headroom --env PowerTrip-v0 --scenario my.toml --episodes 10

Episodes run without time jitter by default (deterministic given the trace, as the references'
plans are exact then; ``--jitter`` keeps the scenario's). It writes ``headroom.csv`` (one row per
episode and policy, the bound included) and ``headroom.md`` to ``--out`` as one set (a ``--out``
that holds an earlier run's files is refused before anything runs, unless ``--force``), prints
the table, and prints as its last line one JSON object: for one ``--env``, ``{"env",
"episodes", "mean_tta_h": {policy: hours}, "headroom", "one_shot", "mean_episode_h",
"mean_rounds", "bound_holds"}``; for several, an object mapping each ID to that.
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
from powertrip_env.baselines.base import MAX_EXHAUSTIVE_SITES
from powertrip_env.baselines.lower_bound import lower_bound_h
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import make_env, powertrip_env_ids
from powertrip_env.harness.evaluation.evaluate import evaluate

ONE_SHOT_BELOW = 1.02
POLICIES = ("BeamPlanner", "BestFixedSet", "MyopicOptimal", "PowerTrip", "AllSites")
BOUND = "LowerBound"


def headroom(
    env_id: str,
    *,
    episodes: int = 30,
    seed: int = 0,
    scenario: str | None = None,
    jitter: bool = False,
    progress: bool = True,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Run the references, the bound and the scale policies on paired test episodes.

    Returns the summary (the JSON object described in the module docstring) and the episodes
    frame (columns ``env, policy, episode, seed, tta_h, success, rounds``). Raises
    ``EvaluationError`` for bad input.
    """
    kwargs: dict[str, Any] = {"jitter": jitter}
    if scenario is not None:
        kwargs["scenario"] = scenario
    probe = make_env(env_id, split="test", **kwargs)
    n_sites = probe.unwrapped.n_sites
    names = [p for p in POLICIES if p != "MyopicOptimal" or n_sites <= MAX_EXHAUSTIVE_SITES]
    result = evaluate(
        env_id, names, episodes=episodes, split="test", seed=seed, env_kwargs=kwargs,
        progress=progress,
    )  # fmt: skip
    bounds = []
    for e in range(episodes):
        probe.reset(seed=seed + e)
        bound = lower_bound_h(probe.unwrapped)
        bounds.append({"policy": BOUND, "episode": e, "seed": seed + e, "tta_h": bound,
                       "success": True, "rounds": 0})  # fmt: skip
    probe.close()
    frame = pd.concat(
        [result.episodes[["policy", "episode", "seed", "tta_h", "success", "rounds"]],
         pd.DataFrame(bounds)], ignore_index=True,
    )  # fmt: skip
    frame.insert(0, "env", env_id if scenario is None else f"{env_id}:{scenario}")

    mean = frame.groupby("policy", sort=False)["tta_h"].mean()
    ratio = float(mean["BestFixedSet"] / mean["BeamPlanner"])
    per_episode = frame.pivot(index="episode", columns="policy", values="tta_h")
    others = per_episode.drop(columns=[BOUND])
    bound_holds = bool((per_episode[BOUND].to_numpy()[:, None] <= others.to_numpy() + 1e-9).all())
    played = result.episodes
    summary = {
        "env": env_id,
        "scenario": scenario,
        "episodes": episodes,
        "jitter": jitter,
        "mean_tta_h": {name: round(float(mean[name]), 4) for name in [BOUND, *names]},
        "headroom": round(ratio, 4),
        "one_shot": ratio < ONE_SHOT_BELOW,
        "mean_episode_h": round(float(played["tta_h"].mean()), 3),
        "mean_rounds": round(float(played["rounds"].mean()), 1),
        "rounds": {
            name: round(float(played.loc[played["policy"] == name, "rounds"].mean()), 1)
            for name in names
        },
        "bound_holds": bound_holds,
    }
    return summary, frame


def to_markdown(summaries: Sequence[dict[str, Any]]) -> str:
    """One row per scenario: the bound, the references, the policies and the headroom."""
    names = [BOUND, *POLICIES]
    head = "| ID | " + " | ".join(names) + " | headroom | poses |"
    lines = [head, "|---|" + "---:|" * (len(names) + 1) + "---|"]
    for s in summaries:
        cells = [_hours(s["mean_tta_h"][n]) if n in s["mean_tta_h"] else "–" for n in names]
        label = s["env"] if s["scenario"] is None else f"{s['env']} with {s['scenario']}"
        poses = "a one-shot choice" if s["one_shot"] else "a sequential problem"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {s['headroom']:.3f} | {poses} |")
    k = {s["episodes"] for s in summaries}
    lines += [
        "",
        f"Mean time to accuracy (h) over {', '.join(map(str, sorted(k)))} paired test episodes"
        + ("" if any(s["jitter"] for s in summaries) else ", without time jitter")
        + ". headroom = BestFixedSet / BeamPlanner; below "
        f"{ONE_SHOT_BELOW} the scenario is a one-shot choice. A failed episode counts at the "
        "time budget.",
    ]
    return "\n".join(lines) + "\n"


def _hours(value: float) -> str:
    """Two decimals, or three significant digits for jobs of minutes."""
    return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="powertrip headroom",
        description="Sequential headroom: the best fixed set against a clairvoyant planner.",
    )
    parser.add_argument(
        "--env", action="append", default=None,
        help="registered ID (repeatable; 'all' for every shipped ID; default PowerTrip-v0)",
    )  # fmt: skip
    parser.add_argument("--scenario", default=None, help="a scenario name or TOML file")
    parser.add_argument("--episodes", type=int, default=30, help="paired test episodes (30)")
    parser.add_argument("--seed", type=int, default=0, help="episode e uses seed + e (0)")
    parser.add_argument("--jitter", action="store_true", help="keep the scenario's time jitter")
    parser.add_argument("--out", default="results/headroom", help="output folder")
    parser.add_argument("--force", action="store_true", help="replace the results in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    env_ids = args.env or ["PowerTrip-v0"]
    if env_ids == ["all"]:
        env_ids = list(powertrip_env.ENV_IDS)
    unknown = [e for e in env_ids if e not in powertrip_env_ids()]
    if unknown:
        print(
            f"error: unknown environment(s) {unknown}; registered PowerTrip IDs: "
            f"{', '.join(powertrip_env_ids())} (or 'all')",
            file=sys.stderr,
        )
        return 2
    if args.episodes < 1:
        print(f"error: --episodes {args.episodes}: must be >= 1", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        check_output_dir(out, force=args.force)  # now, not after the long run
    except OutputDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summaries, frames = [], []
    with stop_codes(EvaluationError, OutputDirError) as stop:
        for env_id in env_ids:
            summary, frame = headroom(
                env_id, episodes=args.episodes, seed=args.seed, scenario=args.scenario,
                jitter=args.jitter, progress=not args.no_progress,
            )  # fmt: skip
            summaries.append(summary)
            frames.append(frame)
        table = to_markdown(summaries)
        with result_dir(out, force=args.force) as tmp:  # both files, or neither
            episodes = pd.concat(frames).to_csv(index=False, lineterminator="\n")
            write_text(tmp / "headroom.csv", episodes)
            write_text(tmp / "headroom.md", table)
    if stop.code:
        return stop.code
    print(table)
    if not all(s["bound_holds"] for s in summaries):
        print(
            "warning: a policy beat LowerBound in some episode; the bound is wrong", file=sys.stderr
        )
    last = summaries[0] if len(summaries) == 1 else {s["env"]: s for s in summaries}
    print(json.dumps(last, separators=(", ", ": ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
