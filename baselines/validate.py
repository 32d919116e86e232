"""How far can the surrogate be trusted? The same paired episodes under both learners.

    python -m baselines.validate --env PowerTrip-Digits-v0 --scenario calibrated.toml \\
        --policies PowerTrip,AllSites,MyopicOptimal,RandomK,Nearest-2,FastestK-4 --episodes 10

Runs every policy on the same test episodes twice, with the same clock, start times and jitter:
once with real federated training (``learner="torch"``) and once with the surrogate of the
scenario (``--scenario``, typically the ``calibrated.toml`` that ``python -m
powertrip_env.calibrate`` wrote). It reports each policy's mean time to accuracy under each, the
relative error of the surrogate's TTA, and the Kendall τ between the two rankings of the
policies: a surrogate is good enough to compare policies on when τ is near 1, and good enough to
quote TTAs from when the errors are small.

Writes ``validation.csv`` (per policy, episode and learner), ``validation.md`` and
``validation.png`` to ``--out`` as one set (a ``--out`` that holds an earlier run's files is
refused before anything runs, unless ``--force``), prints the table, and as its last line one
JSON object:
``{"kendall_tau", "median_abs_tta_error", "policies": {name: {"real_tta_h", "surrogate_tta_h",
"relative_error"}}, ...}``. Needs the ``train`` extra (torch).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from baselines.evaluate import EvaluationError, evaluate
from powertrip_env.atomic import OutputDirError, check_output_dir, result_dir, write_text
from powertrip_env.learners import require_torch
from powertrip_env.render import agg_figure, has_matplotlib, save_png

DEFAULT_POLICIES = "PowerTrip,AllSites,MyopicOptimal,RandomK,Nearest-2,TopPower-4,FastestK-4"


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's τ-b between two scorings of the same items (ties in either count as neither)."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
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
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denominator if denominator else 1.0


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
    for learner in ("torch", "surrogate"):
        result = evaluate(
            env_id, policies, episodes=episodes, seed=seed, progress=progress,
            env_kwargs={**base, "learner": learner},
        )  # fmt: skip
        frame = result.episodes[["policy", "episode", "seed", "tta_h", "success", "rounds"]].copy()
        frame.insert(0, "learner", "real" if learner == "torch" else "surrogate")
        frames.append(frame)
    episodes_frame = pd.concat(frames, ignore_index=True)
    means = episodes_frame.groupby(["learner", "policy"], sort=False)["tta_h"].mean()
    order = list(dict.fromkeys(episodes_frame["policy"]))
    real = np.array([means["real", p] for p in order])
    surrogate = np.array([means["surrogate", p] for p in order])
    errors = (surrogate - real) / real
    summary = {
        "env": env_id,
        "scenario": scenario,
        "episodes": episodes,
        "kendall_tau": round(kendall_tau(real, surrogate), 4),
        "median_abs_tta_error": round(float(np.median(np.abs(errors))), 4),
        "policies": {
            p: {
                "real_tta_h": round(float(r), 4),
                "surrogate_tta_h": round(float(s), 4),
                "relative_error": round(float(e), 4),
            }
            for p, r, s, e in zip(order, real, surrogate, errors, strict=True)
        },
    }
    return summary, episodes_frame


def to_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "| policy | real TTA (h) | surrogate TTA (h) | surrogate error | real rank "
        "| surrogate rank |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    items = list(summary["policies"].items())
    real_rank = {
        p: i + 1 for i, (p, _) in enumerate(sorted(items, key=lambda x: x[1]["real_tta_h"]))
    }
    sur_rank = {
        p: i + 1 for i, (p, _) in enumerate(sorted(items, key=lambda x: x[1]["surrogate_tta_h"]))
    }
    for p, v in items:
        lines.append(
            f"| {p} | {v['real_tta_h']:.4f} | {v['surrogate_tta_h']:.4f} | "
            f"{v['relative_error']:+.1%} | {real_rank[p]} | {sur_rank[p]} |"
        )
    lines += [
        "",
        f"Kendall τ between the rankings: {summary['kendall_tau']:.3f}; median absolute TTA "
        f"error: {summary['median_abs_tta_error']:.1%} ({summary['episodes']} paired test "
        "episodes per policy and learner; a failed episode counts at the time budget).",
    ]
    return "\n".join(lines) + "\n"


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
    ax.set_title(f"τ = {summary['kendall_tau']:.2f}, median |error| = "
                 f"{summary['median_abs_tta_error']:.0%}")  # fmt: skip
    save_png(fig, path)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; 0 on success, 2 for bad arguments."""
    p = argparse.ArgumentParser(prog="python -m baselines.validate",
                                description="The surrogate against real training.")  # fmt: skip
    p.add_argument("--env", default="PowerTrip-Digits-v0", help="registered PowerTrip ID")
    p.add_argument("--scenario", default=None, help="the (calibrated) scenario for both runs")
    p.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated policy names")
    p.add_argument("--episodes", type=int, default=10, help="paired test episodes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/validate", help="output folder")
    p.add_argument("--force", action="store_true", help="replace the results in --out")
    p.add_argument("--no-progress", action="store_true")
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
    try:
        summary, frame = validate(
            args.env, policies, episodes=args.episodes, seed=args.seed, scenario=args.scenario,
            progress=not args.no_progress,
        )  # fmt: skip
        table = to_markdown(summary)
        with result_dir(out, force=args.force) as tmp:  # the three files, or none
            write_text(tmp / "validation.csv", frame.to_csv(index=False, lineterminator="\n"))
            write_text(tmp / "validation.md", table)
            plot(summary, tmp / "validation.png")
    except (EvaluationError, OutputDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; no results written", file=sys.stderr)
        return 130
    print(table)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
