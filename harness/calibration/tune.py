"""Tune the deployable lookahead rules on train days: the grid, each cell's mean TTA, the best.

``powertrip_env.baselines.lookahead.TUNED`` ships the best cell of each rule as measured here on the
flagship's train split (never its test days, which the benchmark scores on)::

    powertrip tune --env PowerTrip-v0 --episodes 20

It prints one Markdown table per rule (mean TTA in hours over the paired train episodes, one
cell per parameter pair) and, as its last line, JSON: ``{"HorizonRule": {"horizon": h,
"margin": m, "tta_h": ...}, "ForecastMPC": {...}}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.lookahead import ForecastMPC, HorizonRule
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import add_env, add_episodes, add_seed
from powertrip_env.harness.evaluation.evaluate import evaluate

GRIDS: dict[str, tuple[str, Sequence[float], str, Sequence[float], Callable[..., Policy]]] = {
    "HorizonRule": (
        "horizon",
        (4, 6, 8, 10, 12, 16, 24),
        "margin",
        (0.0, 0.02, 0.05, 0.1),
        lambda a, b: HorizonRule(a, b),
    ),
    "ForecastMPC": (
        "lookahead",
        (4, 6, 8, 12),
        "margin",
        (0.0, 0.03, 0.05, 0.1),
        lambda a, b: ForecastMPC(int(a), b),
    ),
}


def tune(env_id: str, episodes: int, seed: int = 0) -> dict[str, Any]:
    """Every cell of ``GRIDS`` on the same ``episodes`` train episodes; the best per rule."""
    out: dict[str, Any] = {}
    for rule, (a_name, a_values, b_name, b_values, make) in GRIDS.items():
        cells = list(itertools.product(a_values, b_values))
        policies = []
        for a, b in cells:
            policy = make(a, b)
            policy.name = f"{rule}({a_name}={a:g}, {b_name}={b:g})"
            policies.append(policy)
        result = evaluate(
            env_id, policies, episodes=episodes, split="train", seed=seed, progress=False
        )
        means = result.episodes.groupby("policy")["tta_h"].mean()
        table = {cell: float(means[p.name]) for cell, p in zip(cells, policies, strict=True)}
        best = min(cells, key=lambda cell: (table[cell], cells.index(cell)))
        out[rule] = {
            a_name: best[0],
            b_name: best[1],
            "tta_h": table[best],
            "grid": {f"{a:g},{b:g}": v for (a, b), v in table.items()},
        }
    return out


def to_markdown(result: dict[str, Any], episodes: int) -> str:
    lines = []
    for rule, (a_name, a_values, b_name, b_values, _) in GRIDS.items():
        grid = result[rule]["grid"]
        lines.append(f"{rule}: mean TTA (h) over {episodes} train episodes")
        lines.append("")
        lines.append(f"| {a_name} | " + " | ".join(f"{b_name} {b:g}" for b in b_values) + " |")
        lines.append("|---:|" + "---:|" * len(b_values))
        for a in a_values:
            row = " | ".join(f"{grid[f'{a:g},{b:g}']:.2f}" for b in b_values)
            lines.append(f"| {a:g} | {row} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="powertrip tune", description=__doc__)
    add_env(parser)
    add_episodes(parser, 20, "paired train episodes per cell")
    add_seed(parser)
    args = parser.parse_args(argv)
    try:
        result = tune(args.env, args.episodes, args.seed)
    except EvaluationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(to_markdown(result, args.episodes))
    print(
        json.dumps(
            {rule: {k: v for k, v in r.items() if k != "grid"} for rule, r in result.items()}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
