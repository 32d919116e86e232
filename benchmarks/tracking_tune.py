"""Tune the moving track's change detection on train days: the grid behind ``TUNED_TRACKING``.

    python benchmarks/tracking_tune.py --episodes 60
    python benchmarks/tracking_tune.py --episodes 60 --stress

``TrackingHorizon`` (``baselines/adaptive.py``) is ``AdaptiveHorizon`` with a threshold (σ of
the scenario's jitter) past which a measurement replaces a site's estimate, and a time
(``tau_h``) over which an unmeasured site's belief returns to its long-run level. This plays
every cell of the grid and ``AdaptiveHorizon`` (the same rule without them) on the same paired
train episodes of ``PowerTrip-Moving-v0`` (episode e resets with seed e, never a test day) and
prints the mean TTA of each cell and its paired difference to ``AdaptiveHorizon`` with its
standard error: the differences are a few hundredths of an hour, so the error says which cells
are apart. About four minutes for 60 episodes.

On the flagship's ``[moving]`` the fail-slows last 24 minutes, and every cell up to 8σ loses
to ``AdaptiveHorizon`` (12σ ties it; the grid is in ``baselines/adaptive.py``):
``--stress`` plays the same train days in a harsher world (``STRESS``: longer, deeper and more
frequent events), where the re-probing time is told apart.
"""

from __future__ import annotations

import argparse
import itertools
import math
import tempfile
from pathlib import Path

import numpy as np

from powertrip_env.baselines.adaptive import Adaptive, Tracking
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import make_policy
from powertrip_env.harness.evaluation.evaluate import evaluate

THRESHOLDS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0)
TAUS_H = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
REFERENCE = "AdaptiveHorizon"
STRESS = """extends = "moving"
name = "moving-stress"
description = "The moving track's world, harsher: where tau_h is told apart"
[moving]
slow_per_day = 2.0
slow_hours = 3.0
slow_factor = 2.0
link_per_day = 0.5
link_hours = 2.0
link_depth = 0.5
callback_per_day = 0.4
callback_hours = 3.0
callback_depth = 0.5
"""


def cell_name(threshold: float, tau_h: float) -> str:
    return f"threshold={threshold:g},tau_h={tau_h:g}"


def grid() -> list[Policy]:
    """A ``TrackingHorizon`` for every cell, named by it."""
    return [
        Adaptive(make_policy("HorizonRule", 0), cell_name(a, b), tracking=Tracking(a, b))
        for a, b in itertools.product(THRESHOLDS, TAUS_H)
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-Moving-v0")
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--stress", action="store_true", help="in STRESS's harsher world")
    args = parser.parse_args(argv)
    policies = [REFERENCE, *grid()]
    with tempfile.TemporaryDirectory() as folder:
        kwargs = {}
        if args.stress:
            kwargs["scenario"] = str(Path(folder) / "moving-stress.toml")
            Path(kwargs["scenario"]).write_text(STRESS, encoding="utf-8")
        result = evaluate(
            args.env,
            policies,
            episodes=args.episodes,
            split="train",
            env_kwargs=kwargs,
            progress=False,
        )
    tta = result.episodes.pivot(index="episode", columns="policy", values="tta_h")
    ref = tta[REFERENCE]
    world = " (--stress)" if args.stress else ""
    print(
        f"{REFERENCE}: {ref.mean():.3f} h over {args.episodes} train episodes of {args.env}{world}"
    )
    print("mean TTA (h), and its paired difference to it (± standard error)\n")
    print("| threshold (σ) | " + " | ".join(f"tau {b:g} h" for b in TAUS_H) + " |")
    print("|---:|" + "---:|" * len(TAUS_H))
    for a in THRESHOLDS:
        cells = []
        for b in TAUS_H:
            diff = tta[cell_name(a, b)] - ref
            se = float(np.std(diff) / math.sqrt(len(diff)))
            cells.append(f"{tta[cell_name(a, b)].mean():.3f} ({diff.mean():+.3f} ± {se:.3f})")
        print(f"| {a:g} | " + " | ".join(cells) + " |")
    best = min(tta.columns.drop(REFERENCE), key=lambda name: tta[name].mean())
    print(f"\nbest: {best} at {tta[best].mean():.3f} h")


if __name__ == "__main__":
    main()
