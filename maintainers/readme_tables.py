"""Regenerate the documentation's tables of results with the harness: README.md's and docs/'.

The tables are harness output, never typed by hand: each sits between ``<!-- results:NAME -->``
and ``<!-- /results:NAME -->`` markers, in README.md or in one page of ``docs/``
(``maintainers.doc_blocks`` finds the file that holds each), and this command
replaces it with a fresh table. ``<!-- results:ID -->`` gets the harness's ``summary.md`` for
the ID; ``headroom`` gets ``powertrip_env.harness.reports.headroom``'s table over every ID,
``fidelity`` and ``sensitivity`` the flagship's calibration table
(``powertrip_env.harness.calibration.fidelity``) and its sweep
(``powertrip_env.harness.calibration.sensitivity``,
10 episodes a setting), ``leaderboard`` the benchmark's tables over the suite
(``powertrip_env.harness.reports.benchmark``) and ``leaderboard-scores`` README's one table of them
(the aggregate and each task's score). The benchmark's performance profile is copied to
``docs/leaderboard-profile.png``, and ``--leaderboard-from DIR`` takes the board and the profile
from a finished ``powertrip benchmark --out DIR`` instead of running it.

``powertrip readme-tables`` re-runs every registered ID and updates the README.md in the
current folder and the pages under the docs/ folder beside it (run it from the repository root,
or pass ``--readme``): an installed package has no documentation of its own to find. The site's
pages that show these tables are generated from them: run ``powertrip docs`` afterwards.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import powertrip_env
from maintainers.doc_blocks import BlockFiles
from powertrip_env.atomic import write_bytes
from powertrip_env.harness.calibration import fidelity, sensitivity
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.reports import benchmark, headroom, leaderboard

HEADROOM = "headroom"  # the block of the headroom table
LEADERBOARD = "leaderboard"  # the benchmark's tables over the suite (docs/benchmark.md)
SCORES = "leaderboard-scores"  # README's leaderboard: the aggregate and each task's score
PROFILE = Path("docs") / "leaderboard-profile.png"  # beside the README, as README links it
FIDELITY, SENSITIVITY = "fidelity", "sensitivity"  # the flagship's calibration blocks
SENSITIVITY_EPISODES = 10  # per setting: ten settings of the references cost minutes each

# The IDs with a per-ID table of their own: the flagship and the settings; the other suite
# tasks' tables are in the leaderboard.
RESULT_IDS = [
    env_id
    for env_id in powertrip_env.ENV_IDS
    if env_id == "PowerTrip-v0" or env_id not in powertrip_env.SUITE_IDS
]

DEFAULT_README = Path("README.md")  # relative: the README of the checkout you run it in


def board_block(board: str) -> str:
    """The benchmark's Markdown inside a page's own section: its title dropped and its headings
    bold lines, so they neither outrank the section nor repeat the per-ID headings' anchors."""
    lines = []
    for line in board.splitlines():
        if line.startswith("# "):
            continue
        lines.append(f"**{line[3:]}**" if line.startswith("## ") else line)
    return "\n".join(lines).strip("\n") + "\n"


def _table_rows(lines: Sequence[str]) -> list[list[str]]:
    """The cells of a Markdown table's body rows among ``lines`` (header and rule skipped)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines
            if line.startswith("|")]  # fmt: skip
    return rows[2:]


def board_scores(board: str) -> str:
    """README's leaderboard: one table of the aggregate (mean score and IQM with their
    intervals) and each task's score beside it, from the benchmark's Markdown ``board``
    (``leaderboard.to_markdown``), whose per-task tables of hours live on docs/benchmark.md.

    Raises ``ValueError`` when ``board`` has no aggregate section, as a board that is not the
    benchmark's would.
    """
    sections: dict[str, list[str]] = {"": []}
    name = ""
    for line in board.splitlines():
        if line.startswith("## "):
            name = line[3:]
            sections[name] = []
        elif not line.startswith("# "):
            sections[name].append(line)
    aggregate = next((n for n in sections if n.startswith("Aggregate")), None)
    if aggregate is None:
        raise ValueError("the benchmark's board has no '## Aggregate' section")
    tasks = [n for n in sections if n not in ("", aggregate)]
    scores = {task: {row[0]: row[-1] for row in _table_rows(sections[task])} for task in tasks}
    policies = {row[0]: row[1:] for row in _table_rows(sections[aggregate])}
    for task in tasks:  # those left out of the aggregate after it, as the board lists them
        policies.update({p: ["–", "–"] for p in scores[task] if p not in policies})
    lines = [
        "\n".join(sections[""]).strip("\n"),
        "",
        f"**{aggregate}, and each task's score**",
        "",
        "| policy | mean score [95% CI] | IQM [95% CI] | " + " | ".join(tasks) + " |",
        "|---|---:|---:|" + "---:|" * len(tasks),
    ]
    for policy, cells in policies.items():
        each = [scores[task].get(policy, "–") for task in tasks]
        lines.append(f"| {policy} | " + " | ".join([*cells, *each]) + " |")
    notes = [line for line in sections[aggregate] if line.startswith("- ")]
    return "\n".join([*lines, "", *notes]).strip("\n") + "\n"


def table_for(env_id: str, episodes: int, seed: int, progress: bool) -> str:
    """The harness's summary for ``env_id``, with the heading dropped (README has its own)."""
    result = evaluate(env_id, ["all"], episodes=episodes, seed=seed, progress=progress)
    lines = result.to_markdown().splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")).strip("\n") + "\n"


def _parser() -> argparse.ArgumentParser:
    """``powertrip readme-tables``' options; the module's docstring is its description."""
    parser = argparse.ArgumentParser(prog="powertrip readme-tables", description=__doc__)
    parser.add_argument("--env", action="append", help="an ID to refresh (default: every ID)")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--readme",
        type=Path,
        default=DEFAULT_README,
        help="the README whose checkout to update: it and the pages under docs/ beside it hold "
        "the blocks (default: README.md in the current folder)",
    )
    parser.add_argument(
        "--tables",
        choices=("all", "results", "headroom", "calibration", "leaderboard"),
        default="all",
        help="the per-ID baseline tables, the headroom table, the flagship's calibration and "
        "sensitivity tables, the benchmark's leaderboard, or all of them",
    )
    parser.add_argument(
        "--leaderboard-from",
        type=Path,
        default=None,
        help="a finished `powertrip benchmark --out DIR` run to take the leaderboard "
        "and its profile from (default: run the benchmark)",
    )
    parser.add_argument("--no-progress", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: refresh the chosen blocks of the documentation; returns 0.

    Every argument and every marker is checked before the first table is computed, since a
    full refresh runs for a long time and a typo found at its end would waste all of it; each
    page is written once, at the end, so a stop half-way leaves them all as they were.
    """
    parser = _parser()
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
    tabled = [env_id for env_id in env_ids if env_id in RESULT_IDS]
    blocks = {
        "all": [*tabled, HEADROOM, FIDELITY, SENSITIVITY, LEADERBOARD, SCORES],
        "results": tabled,
        "headroom": [HEADROOM],
        "calibration": [FIDELITY, SENSITIVITY],
        "leaderboard": [LEADERBOARD, SCORES],
    }[args.tables]
    pages = BlockFiles(args.readme)
    try:
        pages.locate(*blocks)  # fail before any long run if a marker is missing
    except ValueError as exc:
        parser.error(f"--readme {str(args.readme)!r}: {exc}")
    progress = not args.no_progress
    named = (HEADROOM, FIDELITY, SENSITIVITY, LEADERBOARD, SCORES)
    for env_id in (b for b in blocks if b not in named):
        print(f"evaluating {env_id} ...", file=sys.stderr)
        pages.splice(env_id, table_for(env_id, args.episodes, args.seed, progress))
    if HEADROOM in blocks:
        pages.splice(HEADROOM, _headroom_table(env_ids, args, progress))
    if FIDELITY in blocks:
        print("fidelity of PowerTrip-v0 ...", file=sys.stderr)
        report = fidelity.fidelity(
            "PowerTrip-v0", episodes=args.episodes, seed=args.seed, progress=progress
        )
        pages.splice(FIDELITY, fidelity.to_markdown(report))
    if SENSITIVITY in blocks:
        print("sensitivity of PowerTrip-v0 ...", file=sys.stderr)
        swept = sensitivity.sensitivity(
            "PowerTrip-v0", episodes=SENSITIVITY_EPISODES, seed=args.seed, progress=progress
        )
        pages.splice(SENSITIVITY, sensitivity.to_markdown(swept))
    if LEADERBOARD in blocks:
        try:
            _splice_leaderboard(pages, args)
        except ValueError as exc:  # a --leaderboard-from board that is not the benchmark's
            parser.error(f"--leaderboard-from {str(args.leaderboard_from)!r}: {exc}")
    for path in pages.write():
        print(f"updated {path}", file=sys.stderr)
    print("then run `powertrip docs` to refresh the site's pages built from them", file=sys.stderr)
    return 0


def _headroom_table(env_ids: list[str], args: argparse.Namespace, progress: bool) -> str:
    """The headroom table over ``env_ids``: one ``headroom`` run per ID, in the given order."""
    summaries = []
    for env_id in env_ids:
        print(f"headroom of {env_id} ...", file=sys.stderr)
        summary, _ = headroom.headroom(
            env_id, episodes=args.episodes, seed=args.seed, progress=progress
        )
        summaries.append(summary)
    return headroom.to_markdown(summaries)


def _splice_leaderboard(pages: BlockFiles, args: argparse.Namespace) -> None:
    """Put the benchmark's tables in the leaderboard block of ``pages`` and its scores in
    README's; writes the profile PNG.

    The board and its profile come from one benchmark (run here, or the ``--leaderboard-from``
    folder), so the README's table and its picture never describe two different runs.
    """
    profile = args.readme.parent / PROFILE
    profile.parent.mkdir(parents=True, exist_ok=True)
    if args.leaderboard_from is not None:
        board = (args.leaderboard_from / "leaderboard.md").read_text(encoding="utf-8")
        png = (args.leaderboard_from / "profile.png").read_bytes()
    else:
        print("the benchmark over the suite ...", file=sys.stderr)
        frame, facts = benchmark.benchmark(episodes=args.episodes, seed=args.seed)
        board, _ = benchmark.report(frame, facts)
        scored = frame[frame["policy"] != benchmark.BOUND]
        png_path = leaderboard.performance_profile(
            leaderboard.on_every_task(scored),
            benchmark.YARDSTICK,
            benchmark.TOP,
            profile.with_suffix(".tmp.png"),
        )
        png = png_path.read_bytes()
        png_path.unlink()
    pages.splice(LEADERBOARD, board_block(board))
    pages.splice(SCORES, board_scores(board))
    write_bytes(profile, png)


if __name__ == "__main__":
    raise SystemExit(main())
