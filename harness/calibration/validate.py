"""How far can the surrogate be trusted? The same paired episodes under both learners.

    powertrip validate --env PowerTrip-Digits-v1 --scenario calibrated.toml \\
        --policies PowerTrip,AllSites,MyopicOptimal,RandomK,Nearest-2,FastestK-4 --episodes 10

Runs every policy on the same test episodes twice, with the same clock, start times and jitter:
once with real federated training (``learner="torch"``) and once with the surrogate of the
scenario (``--scenario``, typically the ``calibrated.toml`` that ``powertrip
calibrate`` wrote). It reports each policy's mean time to accuracy under
each, the relative error of the surrogate's TTA, and the Kendall τ between the two rankings of the
policies: a surrogate is good enough to compare policies on when τ is near 1, and good enough to
quote TTAs from when the errors are small.

τ over all pairs counts every pair of policies, including pairs whose real mean TTAs are within
noise of each other, where a swapped order says nothing about the surrogate. So a second τ
counts only the pairs real training separates: those whose 95% intervals of the real mean TTA
do not overlap. The intervals are ``powertrip_env.harness.evaluation.evaluate``'s block bootstrap
over the
episodes' UTC start days (episodes starting on the same day share its weather, so days are the
independent draws); with one start day they are undefined, no pair is separated and that τ is
reported as undefined (``null``).

Writes ``validation.csv`` (per policy, episode and learner), ``validation.md`` and
``validation.png`` to ``--out`` as one set (a ``--out`` that holds an earlier run's files is
refused before anything runs, unless ``--force``), prints the table, and as its last line one
JSON object:
``{"kendall_tau", "kendall_tau_separated", "separated_pairs", "pairs", "start_days",
"median_abs_tta_error", "policies": {name: {"real_tta_h", "real_ci95_h", "surrogate_tta_h",
"relative_error"}}, ...}``, where ``separated_pairs`` lists the separated pairs as ``[faster,
slower]`` under real training (``pairs`` counts all pairs), ``real_ci95_h`` is ``[low, high]``
(``null`` with one start day) and ``kendall_tau_separated`` is ``null`` when no pair is
separated or the surrogate ties every separated pair. Needs the ``train`` extra (torch).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.atomic import (
    OutputDirError,
    check_output_dir,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import (
    REAL_TRAINING,
    add_env,
    add_episodes,
    add_force,
    add_no_progress,
    add_out,
    add_seed,
)
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.evaluation.statistics import (
    BOOTSTRAP_RESAMPLES,
    day_bootstrap_ci95,
    start_days,
)
from powertrip_env.learners import require_torch
from powertrip_env.render import agg_figure, has_matplotlib, save_png

DEFAULT_POLICIES = "PowerTrip,AllSites,MyopicOptimal,RandomK,Nearest-2,TopPower-4,FastestK-4"


def _pair_counts(
    a: Sequence[float], b: Sequence[float], pairs: Iterable[tuple[int, int]]
) -> tuple[int, int, int, int]:
    """Concordant, discordant, tied-in-``a``-only and tied-in-``b``-only counts over ``pairs``."""
    concordant = discordant = ties_a = ties_b = 0
    for i, j in pairs:
        da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
        if da == 0 and db == 0:
            continue
        if da == 0:
            ties_a += 1
        elif db == 0:
            ties_b += 1
        elif da == db:
            concordant += 1
        else:
            discordant += 1
    return concordant, discordant, ties_a, ties_b


def kendall_tau(
    a: Sequence[float],
    b: Sequence[float],
    pairs: Iterable[tuple[int, int]] | None = None,
) -> float:
    """Kendall's τ-b between two scorings of the same items (ties in either count as neither).

    Args:
        a: one scoring, e.g. the real mean TTAs.
        b: the other, in the same order.
        pairs: index pairs ``(i, j)`` to count; all pairs when ``None``. ``validate`` passes the
            pairs real training separates, so that pairs within noise do not dilute τ.

    Returns:
        τ-b; 1.0 when either scoring ties every counted pair (the convention callers such as
        ``powertrip_env.harness.calibration.sensitivity`` rely on; ``summarise`` reports that case
        for the separated pairs as undefined instead).
    """
    if pairs is None:
        pairs = itertools.combinations(range(len(a)), 2)
    concordant, discordant, ties_a, ties_b = _pair_counts(a, b, pairs)
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denominator if denominator else 1.0


def separated_pairs(intervals: Sequence[tuple[float, float]]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, whose intervals do not overlap.

    Two means whose 95% intervals are disjoint differ by more than the noise of either, so the
    order of such a pair is a fact about the policies rather than about the episodes drawn; this
    is a conservative test (it separates fewer pairs than a test of the difference would). An
    undefined (NaN) interval separates nothing.
    """
    found = []
    for i, j in itertools.combinations(range(len(intervals)), 2):
        (lo_i, hi_i), (lo_j, hi_j) = intervals[i], intervals[j]
        if hi_i < lo_j or hi_j < lo_i:  # False whenever an end is NaN
            found.append((i, j))
    return found


def summarise(
    episodes_frame: pd.DataFrame,
    *,
    env_id: str,
    scenario: str | None = None,
    episodes: int | None = None,
) -> dict[str, Any]:
    """The JSON summary (module docstring) of a frame of both learners' paired episodes.

    Args:
        episodes_frame: columns ``learner`` (``"real"`` or ``"surrogate"``), ``policy``,
            ``start_time`` (ISO UTC) and ``tta_h``, one row per learner, policy and episode.
        env_id: the environment, recorded in the summary.
        scenario: the scenario both learners ran, recorded in the summary.
        episodes: paired episodes per policy and learner; counted from the frame if ``None``.
    """
    means = episodes_frame.groupby(["learner", "policy"], sort=False)["tta_h"].mean()
    order = list(dict.fromkeys(episodes_frame["policy"]))
    real = np.array([means["real", p] for p in order])
    surrogate = np.array([means["surrogate", p] for p in order])
    errors = (surrogate - real) / real
    real_frame = episodes_frame[episodes_frame["learner"] == "real"]
    n_days = len(set(start_days(real_frame["start_time"])))
    intervals = []
    for p in order:
        played = real_frame[real_frame["policy"] == p]
        intervals.append(day_bootstrap_ci95(played["tta_h"], start_days(played["start_time"])))
    pairs = separated_pairs(intervals)
    counts = _pair_counts(real, surrogate, pairs)
    tau_separated = round(kendall_tau(real, surrogate, pairs), 4) if counts[0] + counts[1] else None
    if episodes is None:
        episodes = int(real_frame.groupby("policy").size().max())
    return {
        "env": env_id,
        "scenario": scenario,
        "episodes": episodes,
        "kendall_tau": round(kendall_tau(real, surrogate), 4),
        "kendall_tau_separated": tau_separated,
        "separated_pairs": [
            [order[i], order[j]] if real[i] < real[j] else [order[j], order[i]] for i, j in pairs
        ],
        "pairs": len(order) * (len(order) - 1) // 2,
        "start_days": n_days,
        "median_abs_tta_error": round(float(np.median(np.abs(errors))), 4),
        "policies": {
            p: {
                "real_tta_h": round(float(r), 4),
                "real_ci95_h": None if math.isnan(lo) else [round(lo, 4), round(hi, 4)],
                "surrogate_tta_h": round(float(s), 4),
                "relative_error": round(float(e), 4),
            }
            for p, r, (lo, hi), s, e in zip(order, real, intervals, surrogate, errors, strict=True)
        },
    }


def validate(
    env_id: str,
    policies: Sequence[str],
    *,
    episodes: int = 10,
    seed: int = 0,
    scenario: str | None = None,
    progress: bool = True,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Both learners on the same paired episodes: the summary and the per-episode frame."""
    base = {"scenario": scenario} if scenario else {}
    frames = []
    columns = ["policy", "episode", "seed", "start_time", "tta_h", "success", "rounds"]
    for learner in ("torch", "surrogate"):
        result = evaluate(
            env_id,
            policies,
            episodes=episodes,
            seed=seed,
            progress=progress,
            env_kwargs={**base, "learner": learner},
        )
        frame = result.episodes[columns].copy()
        frame.insert(0, "learner", "real" if learner == "torch" else "surrogate")
        frames.append(frame)
    episodes_frame = pd.concat(frames, ignore_index=True)
    summary = summarise(episodes_frame, env_id=env_id, scenario=scenario, episodes=episodes)
    return summary, episodes_frame


def to_markdown(summary: dict[str, Any]) -> str:
    """The table of ``summary`` with its notes: both τs and how the intervals were made."""
    lines = [
        "| policy | real TTA (h) | real 95% CI (h) | surrogate TTA (h) | surrogate error "
        "| real rank | surrogate rank |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    items = list(summary["policies"].items())
    real_rank = {
        p: i + 1 for i, (p, _) in enumerate(sorted(items, key=lambda x: x[1]["real_tta_h"]))
    }
    sur_rank = {
        p: i + 1 for i, (p, _) in enumerate(sorted(items, key=lambda x: x[1]["surrogate_tta_h"]))
    }
    for p, v in items:
        ci = v.get("real_ci95_h")
        lines.append(
            f"| {p} | {v['real_tta_h']:.4f} | {f'{ci[0]:.4f}–{ci[1]:.4f}' if ci else '–'} | "
            f"{v['surrogate_tta_h']:.4f} | {v['relative_error']:+.1%} | {real_rank[p]} | "
            f"{sur_rank[p]} |"
        )
    lines += [
        "",
        f"Kendall τ between the rankings: {summary['kendall_tau']:.3f}; median absolute TTA "
        f"error: {summary['median_abs_tta_error']:.1%} ({summary['episodes']} paired test "
        "episodes per policy and learner; a failed episode counts at the time budget).",
        "",
        _separated_note(summary),
    ]
    return "\n".join(lines) + "\n"


def _separated_note(summary: dict[str, Any]) -> str:
    """The line on τ over the pairs real training separates, or why it is undefined."""
    n_sep, days = len(summary["separated_pairs"]), summary["start_days"]
    if days < 2:
        return (
            f"Kendall τ over separated pairs: undefined. The episodes start on {days} UTC day, "
            "so the 95% CIs of the real mean TTAs (a block bootstrap over start days) are "
            "undefined and no pair can be told apart."
        )
    rule = (
        "a pair is separated when the 95% CIs of its two real mean TTAs do not overlap; the "
        f"CIs are a block bootstrap over {days} distinct UTC start days, "
        f"{BOOTSTRAP_RESAMPLES:,} resamples"
    )
    if not n_sep:
        return f"Kendall τ over separated pairs: undefined, as no pair is separated ({rule})."
    tau = summary["kendall_tau_separated"]
    value = f"{tau:.3f}" if tau is not None else "undefined, as the surrogate ties every one"
    return (
        f"Kendall τ over the {n_sep} of {summary['pairs']} pairs real training separates: "
        f"{value} ({rule})."
    )


def plot(summary: dict[str, Any], path: Path) -> bool:
    """Surrogate against real TTA, one point per policy, with the diagonal."""
    if not has_matplotlib():
        return False
    fig = agg_figure(6, 5, dpi=110, layout="constrained")
    ax = fig.add_subplot()
    real = [v["real_tta_h"] for v in summary["policies"].values()]
    sur = [v["surrogate_tta_h"] for v in summary["policies"].values()]
    ax.scatter(real, sur)
    for name, x, y in zip(summary["policies"], real, sur, strict=True):
        ax.annotate(name, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    top = max(real + sur) * 1.05
    ax.plot([0, top], [0, top], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("mean TTA with real training (h)")
    ax.set_ylabel("mean TTA with the surrogate (h)")
    ax.set_title(
        f"τ = {summary['kendall_tau']:.2f}, median |error| = {summary['median_abs_tta_error']:.0%}"
    )
    save_png(fig, path)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; 0 on success, 2 for bad arguments and for results that could
    not be written (the table is printed first, so a full disk does not lose it)."""
    p = argparse.ArgumentParser(
        prog="powertrip validate", description="The surrogate against real training."
    )
    add_env(p, "PowerTrip-Digits-v1", fixed_sites=REAL_TRAINING, scenario_hint=True)
    p.add_argument("--scenario", default=None, help="the (calibrated) scenario for both runs")
    p.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated policy names")
    add_episodes(p, 10)
    add_seed(p)
    add_out(p, "results/validate")
    add_force(p)
    add_no_progress(p)
    args = p.parse_args(argv)
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    if len(policies) < 2:
        p.error("--policies: give at least two policies to rank")
    try:
        require_torch("validation (it trains real models)")
        out = check_output_dir(args.out, force=args.force)  # now, not after the long run
    except (ImportError, OutputDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = None
    with stop_codes(EvaluationError, OutputDirError) as stop:
        summary, frame = validate(
            args.env,
            policies,
            episodes=args.episodes,
            seed=args.seed,
            scenario=args.scenario,
            progress=not args.no_progress,
        )
        table = to_markdown(summary)
        print(table)  # before the write: a failed one must not lose the table
        with result_dir(out, force=args.force) as tmp:  # the three files, or none
            write_text(tmp / "validation.csv", frame.to_csv(index=False, lineterminator="\n"))
            write_text(tmp / "validation.md", table)
            plot(summary, tmp / "validation.png")
    if summary is not None:
        print(json.dumps(summary))  # the last line, written or not
    return stop.code


if __name__ == "__main__":
    sys.exit(main())
