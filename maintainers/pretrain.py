"""Produce the shipped general agent (agents/pretrained) and its zero-shot table.

    powertrip pretrain            # a student of the suite's four tasks, ship it
    powertrip pretrain --table    # the zero-shot tables: RESULTS.md and docs/training.md

Training is ``powertrip imitation`` (``powertrip_env.agents.imitation``) with the arguments in
``IMITATION_ARGS``: the candidate-set network (``agents/candidates.py``, whose features do not
depend on the number of sites) taught by the clairvoyant rollout teacher on the four tasks of
``powertrip_env.SUITE_IDS`` at once, behaviour cloning then DAgger, about four minutes on two
cores. It plays both tracks: on the measured track its slots are built on the telemetry's
estimates (``powertrip_env.agents.candidates.estimates_for``). The student becomes
``agents/pretrained/model.zip``, with the run's command and summary in ``config.yaml`` beside
it. PPO over the same slots and tasks (200k steps) did worse on every scenario of the table
(docs/agents.md, "The pretrained agent"): over four tasks it did not settle on the tuned rule's
slot, which the teacher's labels prefer wherever it is among the best.

The table runs the shipped model, unchanged, against PowerTrip, MyopicOptimal, the strongest
deployable rules (HorizonRule, ForecastMPC; on the measured and moving tracks the adaptive
rules too, and on the moving track ``TrackingHorizon``) and BestFixedSet: on the flagship (its
test days), and on scenarios it never trained on: the two measured tasks, the two moving tasks,
the 32-site LoRA scenario (another job and synthetic power) and the two held-out catalogues in
examples/scenarios (other cities, GPU mixes and site counts).
Run both from the repository root. This is a maintainers' command: it writes the checkout's
``agents/pretrained/`` (``PRETRAINED_DIR``), which the wheel then ships, and never an installed
package.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from maintainers.doc_blocks import BlockFiles
from powertrip_env import SUITE_IDS
from powertrip_env.agents import imitation
from powertrip_env.atomic import atomic_path, write_text
from powertrip_env.baselines.registry import default_policy_names
from powertrip_env.harness.arguments import add_episodes, add_force, add_no_progress, add_seed
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.models.loading import PRETRAINED
from powertrip_env.harness.tracks import track_of
from powertrip_env.scenario.sampling import SiteSampler

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "agents" / "pretrained"
"""The shipped agent's folder in this checkout (what ``--model pretrained`` loads once
installed)."""

# The student of the clairvoyant teacher on the four suite tasks (their catalogues of 10 and 24
# sites; the candidates' features do not depend on N): 300 labelled vector steps of 16
# jitter-free train episodes a task, then three DAgger rounds of 150, as `powertrip imitation`
# runs by default.
#
# Not the measured tasks: taught on all six tasks (72,000 states, 10 min), the student was worse
# everywhere it was compared with this one: 28.70 h against 28.60 on PowerTrip-Measured-v0 (the
# measured track's slots are built on the telemetry's estimates, so a student of the known tasks
# plays it through them), 9.16 h against 8.90 on drawn 32-site catalogues (docs/agents.md).
IMITATION_ARGS = [
    *(arg for env_id in SUITE_IDS for arg in ("--env", env_id)),
    "--n-envs",
    "16",
    "--steps",
    "300",
    "--dagger",
    "3",
    "--epochs",
    "40",
    "--seed",
    "0",
]

# (label, env ID, scenario file or None): where the table compares the agent.
TARGETS = [
    ("PowerTrip-v0 (10 sites)", "PowerTrip-v0", None),
    ("PowerTrip-Large-v0 (32 sites, LoRA job, synthetic power)", "PowerTrip-Large-v0", None),
    ("grid-7.toml (7 grid-only sites, unseen cities)", "PowerTrip-v0",
     "examples/scenarios/grid-7.toml"),
    ("solar-12.toml (12 sites, new GPU mixes, 4 unseen cities)", "PowerTrip-v0",
     "examples/scenarios/solar-12.toml"),
    ("PowerTrip-Measured-v0 (10 sites, unknowns drawn)", "PowerTrip-Measured-v0", None),
    ("PowerTrip-Wide-Measured-v0 (24 sites, unknowns drawn)", "PowerTrip-Wide-Measured-v0",
     None),
    ("PowerTrip-Moving-v0 (10 sites, unknowns drawn, the world moves)", "PowerTrip-Moving-v0",
     None),
    ("PowerTrip-Wide-Moving-v0 (24 sites, unknowns drawn, the world moves)",
     "PowerTrip-Wide-Moving-v0", None),
]  # fmt: skip
# The rules each target is compared with: on the known track the strongest rules on the stated
# values; on the measured track (the scenario draws unknowns) the adaptive rules, which are the
# strongest deployable ones there (the stated-value rules run too, to show what measuring buys).
BASELINES = ["PowerTrip", "MyopicOptimal", "HorizonRule", "ForecastMPC", "BestFixedSet"]
MEASURED_BASELINES = [
    "PowerTrip",
    "MyopicOptimal",
    "ForecastMPC",
    "AdaptiveHorizon",
    "AdaptiveMPC",
    "ExploringHorizon",
]
# On the moving track (the measured tasks' world moving while the job runs) the adaptive rules
# and the track's own, which detect changes and re-probe (docs/moving.md).
MOVING_BASELINES = [*MEASURED_BASELINES, "TrackingHorizon"]
COLUMNS = list(dict.fromkeys([*BASELINES, *MEASURED_BASELINES, *MOVING_BASELINES]))
RULES_BY_TRACK = {"known": BASELINES, "measured": MEASURED_BASELINES, "moving": MOVING_BASELINES}
"""The rules of a target, by the track its ID joined (``powertrip_env.register_task``)."""
ZERO_SHOT_BLOCK = "zero-shot"

# Beyond MyopicOptimal's 16 sites: (label, env ID, gym.make arguments). Every deployable
# heuristic that runs there (``default_policy_names``) and the two clairvoyant references.
BEYOND_16 = [
    ("PowerTrip-Large-v0 (32 sites)", "PowerTrip-Large-v0", {}),
    ("drawn 32-site catalogues", "PowerTrip-Random-v0", {"sites": SiteSampler(n_sites=(32, 32))}),
]
BEYOND_16_BLOCK = "beyond-16"
REFERENCES = ["BestFixedSet", "BeamPlanner"]


def train(run_dir: Path, dest: Path, force: bool = False) -> int:
    """Teach the student with ``IMITATION_ARGS`` into ``run_dir``; copy it to ``dest`` with a
    ``config.yaml`` that records the command and the run's summary.

    ``powertrip imitation`` refuses a ``run_dir`` that holds an earlier run (its files would mix
    with this one's); ``force`` lets it replace them.
    """
    started = time.monotonic()
    argv = [*IMITATION_ARGS, "--out", str(run_dir), *(["--force"] if force else [])]
    code = imitation.main(argv)
    if code != 0:
        return code
    with atomic_path(dest / "model.zip") as tmp:
        shutil.copyfile(run_dir / "model.zip", tmp)
    summary = json.loads((run_dir / "imitation.json").read_text(encoding="utf-8"))
    record = {"command": "powertrip imitation " + " ".join(argv), "summary": summary}
    header = "# produced by `powertrip pretrain`: model.zip is the student of the run below\n"
    write_text(dest / "config.yaml", header + yaml.safe_dump(record, sort_keys=False))
    minutes = (time.monotonic() - started) / 60
    print(f"shipped {run_dir / 'model.zip'} as {dest / 'model.zip'} after {minutes:.1f} min")
    return 0


def zero_shot_table(episodes: int, seed: int, progress: bool) -> str:
    """Mean TTA (h) of the pretrained agent and the baselines on every target, as Markdown."""
    header = (
        "| scenario | pretrained | "
        + " | ".join(COLUMNS)
        + " | vs PowerTrip | vs the strongest rule |\n"
        "|---|" + "---:|" * (len(COLUMNS) + 3) + "\n"
    )
    rows = []
    for label, env_id, scenario in TARGETS:
        print(f"zero-shot: {label} ...", file=sys.stderr)
        track = track_of(env_id)
        rules = RULES_BY_TRACK[track.name if track is not None else "known"]
        result = evaluate(
            env_id,
            [
                b
                for b in rules
                if not (b == "MyopicOptimal" and ("Large" in env_id or "Wide" in env_id))
            ],
            episodes=episodes,
            split="test",
            seed=seed,
            models=[(PRETRAINED, "ppo")],
            env_kwargs={"scenario": scenario} if scenario else None,
            progress=progress,
        )
        rows.append(f"| {label} | " + " | ".join(_cells(result.summary)) + " |")
    note = (
        f"\nMean time to accuracy (h) ± half a 95% interval (a block bootstrap over the start days "
        f"of the episodes) over {episodes} paired test episodes with jitter "
        "(episode e uses seed e). The agent trained on the train days of the four known suite "
        "tasks: it never saw the catalogues of the LoRA scenario and the two example files, nor "
        "a measured or moving task's drawn unknowns and events (there its slots are built on "
        "the telemetry's estimates). The strongest rule is the fastest deployable one in the row "
        "(BestFixedSet is clairvoyant); the adaptive rules run only on the measured and moving "
        "tracks, whose episodes draw unknowns, and the tracking rule on the moving track. "
        "MyopicOptimal enumerates subsets and stops at 16 sites. Regenerate with "
        "`powertrip pretrain --table`.\n"
    )
    return header + "\n".join(rows) + "\n" + note


def beyond_16_table(episodes: int, seed: int, progress: bool) -> str:
    """Mean TTA (h) of the pretrained agent, every deployable heuristic and the references on
    catalogues of 32 sites, as Markdown: one row per policy, one column per setting."""
    columns: list[dict[str, str]] = []
    order: list[str] = []
    for label, env_id, kwargs in BEYOND_16:
        print(f"beyond 16 sites: {label} ...", file=sys.stderr)
        result = evaluate(
            env_id,
            [*default_policy_names(32), *REFERENCES],
            episodes=episodes,
            split="test",
            seed=seed,
            models=[(PRETRAINED, "ppo")],
            env_kwargs=kwargs,
            progress=progress,
        )
        summary = result.summary
        tta = dict(zip(summary["policy"], summary["mean_tta_h"], strict=True))
        ci = dict(zip(summary["policy"], summary["ci95_tta_h"], strict=True))
        digits = 2 if min(tta.values()) >= 1.0 else 3
        best = min((n for n in tta if n not in (PRETRAINED, *REFERENCES)), key=tta.__getitem__)
        cells = {n: f"{tta[n]:.{digits}f} ± {ci[n]:.{digits}f}" for n in tta}
        cells[PRETRAINED] = f"**{cells[PRETRAINED]}**"
        cells["vs the best heuristic"] = f"{100 * (tta[PRETRAINED] / tta[best] - 1):+.1f}% ({best})"
        columns.append(cells)
        order = [PRETRAINED, *(n for n in tta if n != PRETRAINED), "vs the best heuristic"]
    labels = [label for label, _, _ in BEYOND_16]
    lines = [
        "| policy | " + " | ".join(labels) + " |",
        "|---|" + "---:|" * len(labels),
        *(f"| {name} | " + " | ".join(c.get(name, "–") for c in columns) + " |" for name in order),
    ]
    note = (
        f"\nMean time to accuracy (h) ± half a 95% interval over {episodes} paired test episodes "
        "with jitter (episode e uses seed e; a drawn catalogue is drawn from the episode's seed, "
        "so every policy meets the same 32 sites). MyopicOptimal cannot run beyond 16 sites. "
        "BestFixedSet and BeamPlanner are clairvoyant. Regenerate with "
        "`powertrip pretrain --table`.\n"
    )
    return "\n".join(lines) + "\n" + note


def _cells(summary: pd.DataFrame) -> list[str]:
    """The table's cells for one scenario from an evaluation summary: mean TTA ± CI of the
    agent and each baseline ("–" if it did not run), then the agent's change against
    PowerTrip and MyopicOptimal."""
    tta = dict(zip(summary["policy"], summary["mean_tta_h"], strict=True))
    ci = dict(zip(summary["policy"], summary["ci95_tta_h"], strict=True))
    digits = 2 if min(tta.values()) >= 1.0 else 3  # jobs shorter than an hour: 3 decimals
    cells = [
        (
            f"{tta[name]:.{digits}f} ± {ci[name]:.{digits}f}"
            if math.isfinite(ci[name])
            else f"{tta[name]:.{digits}f} ± –"
        )
        if name in tta
        else "–"
        for name in (PRETRAINED, *COLUMNS)
    ]
    cells.append(f"{100 * (tta[PRETRAINED] / tta['PowerTrip'] - 1):+.1f}%")
    rules = [n for n in tta if n not in (PRETRAINED, *REFERENCES)]
    best = min(rules, key=tta.__getitem__)
    cells.append(f"{100 * (tta[PRETRAINED] / tta[best] - 1):+.1f}% ({best})")
    return cells


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="powertrip pretrain", description=__doc__)
    parser.add_argument("--table", action="store_true", help="only regenerate the table")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/pretrained"))
    add_force(parser, "replace an earlier training run in --run-dir")
    add_episodes(parser, 30, "paired test episodes of the tables")
    add_seed(parser)
    parser.add_argument(
        "--readme",
        type=Path,
        default=Path("README.md"),
        help="the README whose checkout to update: it or a page under docs/ beside it holds each "
        "table's block (default: README.md in the current folder)",
    )
    add_no_progress(parser)
    args = parser.parse_args(argv)
    dest = PRETRAINED_DIR
    if not args.table:
        return train(args.run_dir, dest, args.force)
    if not args.readme.is_file():
        parser.error(f"--readme {str(args.readme)!r}: not found; run from the repository root")
    pages = BlockFiles(args.readme)
    try:
        pages.locate(ZERO_SHOT_BLOCK, BEYOND_16_BLOCK)  # fail before the long run if one is missing
    except ValueError as exc:
        parser.error(f"--readme {str(args.readme)!r}: {exc}")
    table = zero_shot_table(args.episodes, args.seed, not args.no_progress)
    beyond = beyond_16_table(args.episodes, args.seed, not args.no_progress)
    write_text(
        dest / "RESULTS.md",
        f"# Zero-shot results of the pretrained agent\n\n{table}\n## Beyond 16 sites\n\n{beyond}",
    )
    pages.splice(ZERO_SHOT_BLOCK, table)
    pages.splice(BEYOND_16_BLOCK, beyond)
    pages.write()
    print(table)
    print(beyond)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
