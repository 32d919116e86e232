"""Regenerate README.md's baseline tables and its headroom table with the harness.

The tables in README.md are harness output, never typed by hand: each sits between
``<!-- results:ID -->`` and ``<!-- /results:ID -->`` markers and this command replaces it with a
fresh ``summary.md`` table; the block ``<!-- results:headroom -->`` gets
``baselines.headroom``'s table over every ID, and ``fidelity`` and ``sensitivity`` get the
flagship's calibration table (``baselines.fidelity``) and its sweep (``baselines.sensitivity``,
10 episodes a setting). ``python -m baselines.readme_tables`` re-runs
every registered ID and updates ``README.md`` in the current folder (run it from the
repository root, or pass ``--readme``): an installed package has no README of its own to find.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import powertrip_env
from baselines import fidelity, headroom, sensitivity
from baselines.evaluate import evaluate
from powertrip_env.atomic import write_text

HEADROOM = "headroom"  # the block of the headroom table
FIDELITY, SENSITIVITY = "fidelity", "sensitivity"  # the flagship's calibration blocks
SENSITIVITY_EPISODES = 10  # per setting: ten settings of the references cost minutes each

DEFAULT_README = Path("README.md")  # relative: the README of the checkout you run it in


def splice(text: str, env_id: str, table: str) -> str:
    """Replace the block between the markers of ``env_id`` in ``text`` with ``table``."""
    pattern = re.compile(
        rf"(<!-- results:{re.escape(env_id)} -->\n).*?(<!-- /results:{re.escape(env_id)} -->)",
        re.DOTALL,
    )
    if not pattern.search(text):
        raise ValueError(
            f"README has no '<!-- results:{env_id} -->' ... '<!-- /results:{env_id} -->' block"
        )
    return pattern.sub(lambda m: m.group(1) + table.rstrip("\n") + "\n" + m.group(2), text)


def table_for(env_id: str, episodes: int, seed: int, progress: bool) -> str:
    """The harness's summary for ``env_id``, with the heading dropped (README has its own)."""
    result = evaluate(env_id, ["all"], episodes=episodes, seed=seed, progress=progress)
    lines = result.to_markdown().splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")).strip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.readme_tables", description=__doc__)
    parser.add_argument("--env", action="append", help="an ID to refresh (default: every ID)")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--readme",
        type=Path,
        default=DEFAULT_README,
        help="the README to update (default: README.md in the current folder)",
    )
    parser.add_argument(
        "--tables",
        choices=("all", "results", "headroom", "calibration"),
        default="all",
        help="the per-ID baseline tables, the headroom table, the flagship's calibration and "
        "sensitivity tables, or all of them",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    env_ids = args.env or list(powertrip_env.ENV_IDS)
    unknown = sorted(set(env_ids) - set(powertrip_env.ENV_IDS))
    if unknown:
        parser.error(f"--env {unknown}: unknown; allowed: {list(powertrip_env.ENV_IDS)}")
    if not args.readme.is_file():
        parser.error(
            f"--readme {str(args.readme)!r}: file not found ({args.readme.absolute()}); run "
            "from the repository root or pass --readme PATH"
        )
    text = args.readme.read_text(encoding="utf-8")
    blocks = {
        "all": [*env_ids, HEADROOM, FIDELITY, SENSITIVITY],
        "results": list(env_ids),
        "headroom": [HEADROOM],
        "calibration": [FIDELITY, SENSITIVITY],
    }[args.tables]
    for block in blocks:
        try:
            splice(text, block, "")  # fail before any long run if a marker is missing
        except ValueError as exc:
            parser.error(f"--readme {str(args.readme)!r}: {exc}")
    progress = not args.no_progress
    for env_id in (b for b in blocks if b not in (HEADROOM, FIDELITY, SENSITIVITY)):
        print(f"evaluating {env_id} ...", file=sys.stderr)
        text = splice(text, env_id, table_for(env_id, args.episodes, args.seed, progress))
    if HEADROOM in blocks:
        summaries = []
        for env_id in env_ids:
            print(f"headroom of {env_id} ...", file=sys.stderr)
            summary, _ = headroom.headroom(
                env_id, episodes=args.episodes, seed=args.seed, progress=progress
            )
            summaries.append(summary)
        text = splice(text, HEADROOM, headroom.to_markdown(summaries))
    if FIDELITY in blocks:
        print("fidelity of PowerTrip-v0 ...", file=sys.stderr)
        report = fidelity.fidelity(
            "PowerTrip-v0", episodes=args.episodes, seed=args.seed, progress=progress
        )
        text = splice(text, FIDELITY, fidelity.to_markdown(report))
    if SENSITIVITY in blocks:
        print("sensitivity of PowerTrip-v0 ...", file=sys.stderr)
        swept = sensitivity.sensitivity(
            "PowerTrip-v0", episodes=SENSITIVITY_EPISODES, seed=args.seed, progress=progress
        )
        text = splice(text, SENSITIVITY, sensitivity.to_markdown(swept))
    write_text(args.readme, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
