"""Regenerate the documentation's tables of results with the harness: README.md's and docs/'.

The tables are harness output, never typed by hand: each sits between ``<!-- results:NAME -->``
and ``<!-- /results:NAME -->`` markers, in README.md or in one page of ``docs/``
(``maintainers.doc_blocks`` finds the file that holds each), and this command
replaces it with a fresh table. ``<!-- results:ID -->`` gets the harness's ``summary.md`` for
the ID; ``headroom`` gets ``powertrip_env.harness.reports.headroom``'s table over every ID,
``fidelity`` and ``sensitivity`` the flagship's calibration table
(``powertrip_env.harness.calibration.fidelity``) and its sweep
(``powertrip_env.harness.calibration.sensitivity``,
10 episodes a setting), ``sensitivity-moving`` the sweep of each moving task's processes
(``sensitivity.room_sweep``, 30 episodes a setting, docs/moving.md), ``leaderboard`` the
benchmark's tables over the suite (``powertrip_env.harness.reports.benchmark``), and one board
a track: ``leaderboard-scores`` the known track's (the aggregate and each task's score, with
success beside them), ``leaderboard-measured`` and ``leaderboard-moving`` the measured and
moving tracks' (their room chains, then their own aggregates) and ``leaderboard-carbon`` the
carbon track's; docs/benchmark.md holds them. README shows each track
in a few lines (``summary-known``, ``summary-measured``, ``summary-carbon``: the tasks, the
reference, the best deployable rule and the agents), laid out from the same board as the track's
block and filled wherever a page holds them. All are laid out from the benchmark's episodes and
facts, not read back from its Markdown. The benchmark's performance
profile is copied to ``docs/leaderboard-profile.png``, the measured track's room chains drawn to
``docs/measured-chain.png``, and ``--leaderboard-from DIR`` takes the
episodes, the facts (``episodes.csv``, ``leaderboard.json``) and the profile from a finished
``powertrip benchmark --out DIR`` instead of running it. ``--tables scratch --scratch-from DIR``
puts a finished ``powertrip scratch --out DIR`` run's rows in the ``scratch`` block (README's:
one per track and algorithm) and ``scratch-tasks`` (docs/agents.md: each task's), and its
learning curves in ``docs/scratch-curves.png``; no other command trains them.

``powertrip readme-tables`` re-runs every registered ID and updates the README.md in the
current folder and the pages under the docs/ folder beside it (run it from the repository root,
or pass ``--readme``): an installed package has no documentation of its own to find. The site's
pages that show these tables are generated from them: run ``powertrip docs`` afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import powertrip_env
from maintainers.doc_blocks import BlockFiles, doc_files, has_block
from powertrip_env.agents.scratch_report import CURVES, read_scratch
from powertrip_env.atomic import write_bytes
from powertrip_env.baselines.registry import policy_names
from powertrip_env.harness.arguments import (
    CLAIRVOYANT,
    SHIPPED,
    add_env,
    add_episodes,
    add_no_progress,
    add_seed,
)
from powertrip_env.harness.calibration import fidelity, sensitivity
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.reports import benchmark, headroom, leaderboard, measures
from powertrip_env.harness.tracks import TRACKS, Track
from powertrip_env.harness.tracks.carbon import TRADEOFF
from powertrip_env.harness.tracks.time import CHAIN, MOVING_CHAIN

HEADROOM = "headroom"  # the block of the headroom table
LEADERBOARD = "leaderboard"  # the benchmark's tables over the suite (docs/benchmark.md)
SCORES = "leaderboard-scores"  # the known track's board: the aggregate and each task's score
PROFILE = Path("docs") / "leaderboard-profile.png"  # under the README, as the board shows it
SCRATCH = "scratch"  # the from-scratch rows of each track (README), from `powertrip scratch`
SCRATCH_TASKS = "scratch-tasks"  # and each task's (docs/agents.md)
SCRATCH_CURVES = Path("docs") / "scratch-curves.png"  # their learning curves (docs/agents.md)
MULTIJOB = "multijob"  # the multi-job track's board (docs/multijob.md), from `powertrip multijob`
MULTIJOB_SUMMARY = "summary-multijob"  # and its lines in the README
MEASURED = "leaderboard-measured"  # the measured track's board, with its room chains
CHAIN_FIGURE = Path("docs") / "measured-chain.png"  # the measured tasks' room chains
MOVING = "leaderboard-moving"  # the moving track's board, with its room chains
MOVING_FIGURE = Path("docs") / "moving-chain.png"  # the moving tasks' room chains
CARBON = "leaderboard-carbon"  # the carbon track's board, scored on the carbon cost
# README's few lines on each track (its tasks, the reference, the best rule, the agents), laid
# out from the same board as the track's block, which docs/benchmark.md holds in full
SUMMARIES = {
    "known": "summary-known",
    "measured": "summary-measured",
    "moving": "summary-moving",
    "carbon": "summary-carbon",
}
TRADEOFF_FIGURE = Path("docs") / "carbon-tradeoff.png"  # the carbon tasks' TTA against carbon
TRACK_BLOCKS = {"known": SCORES, "measured": MEASURED, "moving": MOVING, "carbon": CARBON}
"""Each shipped track's board in the docs (SUMMARIES: README's lines on it), by its name (a track
of a user's has none)."""
FIGURES = {CHAIN: CHAIN_FIGURE, MOVING_CHAIN: MOVING_FIGURE, TRADEOFF: TRADEOFF_FIGURE}
"""Where the docs keep each track figure a benchmark run draws, by the run's file name."""
FIDELITY, SENSITIVITY = "fidelity", "sensitivity"  # the flagship's calibration blocks
MOVING_SWEEP = "sensitivity-moving"  # where the moving flagship's room is (docs/moving.md)
SENSITIVITY_EPISODES = 10  # per setting: ten settings of the references cost minutes each
ROOM_EPISODES = 30  # per setting of the moving sweep, as the benchmark's: no reference plans

# The IDs with a per-ID table of their own: the flagship and the settings; the other suite
# tasks' tables are in the leaderboard.
RESULT_IDS = [
    env_id
    for env_id in powertrip_env.ENV_IDS
    if env_id == "PowerTrip-v0" or env_id not in powertrip_env.suite_ids()
]

DEFAULT_README = Path("README.md")  # relative: the README of the checkout you run it in


def board_block(board: str) -> str:
    """The benchmark's Markdown inside a page's own section: its title dropped and its headings
    bold lines, so they neither outrank the section nor repeat the per-ID headings' anchors."""
    lines: list[str] = []
    titles = 0
    for line in board.splitlines():
        if line.startswith("# "):
            titles += 1
            if titles == 1:
                continue  # the title; a second board's (the measured track's) stays, in bold
            line = f"## {line[2:]}"
        if not line and lines and not lines[-1]:
            continue  # the second blank line a dropped title leaves
        lines.append(f"**{line[3:]}**" if line.startswith("## ") else line)
    return "\n".join(lines).strip("\n") + "\n"


def board_scores(board: leaderboard.Board, facts: dict[str, dict[str, Any]], track: Track) -> str:
    """README's leaderboard, laid out from the benchmark's own board and task facts (not read
    back from its Markdown): the bracket table, the caption, and one table of the aggregate
    (mean score and IQM with their intervals, and success) with each task's score beside it,
    then the aggregate's notes. The per-task tables of hours live on docs/benchmark.md.

    A score is marked where the policy never finished (on any task in the aggregate's cells, on
    that task in a task's column), as on the board: such policies all count at the time budget
    and share a score that would otherwise read as a tie. Policies the aggregate leaves out
    (they did not run every task) follow it with their tasks' scores only.
    """
    tasks = board.tasks
    scores = {
        (r.task, r.policy): leaderboard.score_cell(r.score, r.success)
        for r in board.table.itertuples(index=False)
    }
    rows = [(policy, leaderboard.aggregate_cells(row)) for policy, row in board.ranked()]
    rows += [(policy, ["–", "–", "–"]) for policy in board.left_out]
    lines = [
        *track.sections()[0](facts),  # the track's first table of facts: its bracket
        measures.caption(board.zero, board.top, board.measure),
        "",
        f"**{leaderboard.aggregate_heading(len(tasks))}, and each task's score**",
        "",
        "| policy | mean score [95% CI] | IQM [95% CI] | success | " + " | ".join(tasks) + " |",
        "|---|---:|---:|---:|" + "---:|" * len(tasks),
    ]
    for policy, cells in rows:
        each = [scores.get((task, policy), "–") for task in tasks]
        lines.append(f"| {policy} | " + " | ".join([*cells, *each]) + " |")
    return "\n".join([*lines, "", *leaderboard.aggregate_notes(board)]) + "\n"


def policy_role(policy: str, site_counts: Sequence[int], track: Track) -> str:
    """What ``policy`` is on a board whose tasks have ``site_counts`` sites: ``reference``
    (clairvoyant, or told the draw), ``rule`` (a deployable baseline of the registry on any of
    those counts) or ``agent`` (a saved model, named by its file: a name the registry lacks)."""
    if policy in {*track.references, *track.board_references, *track.told(True)}:
        return "reference"
    return "rule" if any(policy in policy_names(n) for n in set(site_counts)) else "agent"


def track_summary(board: leaderboard.Board, facts: dict[str, dict[str, Any]], track: Track) -> str:
    """README's few lines on one track, laid out from the same ``Board`` as its block: the
    tasks, then the reference (score 1), the best deployable rule and every agent, each with its
    cells of the board's aggregate (mean score [95% CI] and success), so README's numbers are
    the board's, copied, and cannot go stale apart from it. An agent the aggregate leaves out
    (it did not run every task) is listed with the board's dashes."""
    counts = [int(f["n_sites"]) for f in facts.values()]
    roles = {p: policy_role(p, counts, track) for p in [*board.aggregate, *board.left_out]}
    cells = {p: leaderboard.aggregate_cells(row) for p, row in board.ranked()}
    ranked = list(cells)  # best first
    best = [p for p in ranked if roles[p] == "rule"][:1]
    agents = [p for p in [*ranked, *board.left_out] if roles[p] == "agent"]
    tasks = ", ".join(f"`{task}`" for task in board.tasks)
    none = "" if agents else "; no agent ran on this track"
    lines = [
        f"Tasks: {tasks}, scored on the {board.measure.name}: 0 = {board.zero}, "
        f"1 = {board.top}{none}.",
        "",
        "| role | policy | mean score [95% CI] | success |",
        "|---|---|---:|---:|",
    ]
    picked = [("reference", board.top), *(("best rule", p) for p in best)]
    for role, policy in [*picked, *(("agent", p) for p in agents)]:
        mean, _, success = cells.get(policy, ["–", "–", "–"])
        lines.append(f"| {role} | {policy} | {mean} | {success} |")
    return "\n".join(lines) + "\n"


def table_for(env_id: str, episodes: int, seed: int, progress: bool) -> str:
    """The harness's summary for ``env_id``, with the heading dropped (README has its own)."""
    result = evaluate(env_id, ["all"], episodes=episodes, seed=seed, progress=progress)
    lines = result.to_markdown().splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")).strip("\n") + "\n"


def _parser() -> argparse.ArgumentParser:
    """``powertrip readme-tables``' options; the module's docstring is its description."""
    parser = argparse.ArgumentParser(prog="powertrip readme-tables", description=__doc__)
    add_env(
        parser,
        None,
        ids=SHIPPED,
        repeat=True,
        fixed_sites=CLAIRVOYANT,
        what="an ID whose tables to refresh",
        default_text="every ID of powertrip_env.ENV_IDS",
    )
    add_episodes(parser, 30)
    add_seed(parser)
    parser.add_argument(
        "--readme",
        type=Path,
        default=DEFAULT_README,
        help="the README whose checkout to update: it and the pages under docs/ beside it hold "
        "the blocks (default: README.md in the current folder)",
    )
    parser.add_argument(
        "--tables",
        choices=(
            "all",
            "results",
            "headroom",
            "calibration",
            "moving",
            "leaderboard",
            "scratch",
            "multijob",
        ),
        default="all",
        help="the per-ID baseline tables, the headroom table, the flagship's calibration and "
        "sensitivity tables (with the moving flagship's sweep), that sweep alone, the "
        "benchmark's leaderboard, the from-scratch rows (with --scratch-from), the multi-job "
        "board (with --multijob-from), or all of them but the last two",
    )
    parser.add_argument(
        "--leaderboard-from",
        type=Path,
        default=None,
        help="a finished `powertrip benchmark --out DIR` run to take the leaderboard "
        "and its profile from (default: run the benchmark)",
    )
    parser.add_argument(
        "--scratch-from",
        type=Path,
        default=None,
        help="a finished `powertrip scratch --out DIR` run: its rows and curves (--tables scratch)",
    )
    parser.add_argument(
        "--multijob-from",
        type=Path,
        default=None,
        help="a finished `powertrip multijob --out DIR` run: its board (--tables multijob)",
    )
    add_no_progress(parser)
    return parser


def _blocks(
    args: argparse.Namespace, tabled: list[str], parser: argparse.ArgumentParser
) -> list[str]:
    """The blocks ``--tables`` names (``tabled``: the IDs whose summaries it refreshes)."""
    if (args.tables == "scratch") != (args.scratch_from is not None):
        parser.error("--tables scratch and --scratch-from DIR go together")
    if (args.tables == "multijob") != (args.multijob_from is not None):
        parser.error("--tables multijob and --multijob-from DIR go together")
    return {
        "all": [*tabled, HEADROOM, FIDELITY, SENSITIVITY, MOVING_SWEEP, LEADERBOARD, SCORES],
        "results": tabled,
        "headroom": [HEADROOM],
        "calibration": [FIDELITY, SENSITIVITY, MOVING_SWEEP],
        "moving": [MOVING_SWEEP],
        "leaderboard": [LEADERBOARD, SCORES],
        "scratch": [SCRATCH, SCRATCH_TASKS],
        "multijob": [MULTIJOB, MULTIJOB_SUMMARY],
    }[args.tables]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: refresh the chosen blocks of the documentation; returns 0.

    Every argument and every marker is checked before the first table is computed, since a
    full refresh runs for a long time and a typo found at its end would waste all of it; each
    page is written once, at the end, so a stop half-way leaves them all as they were.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    env_ids = args.env or list(powertrip_env.ENV_IDS)
    if not args.readme.is_file():
        parser.error(
            f"--readme {str(args.readme)!r}: file not found ({args.readme.absolute()}); run "
            "from the repository root or pass --readme PATH"
        )
    blocks = _blocks(args, [env_id for env_id in env_ids if env_id in RESULT_IDS], parser)
    pages = BlockFiles(args.readme)
    try:
        pages.locate(*blocks)  # fail before any long run if a marker is missing
        scratch_run = read_scratch(args.scratch_from) if args.scratch_from else None
        multijob_run = _read_multijob(args.multijob_from) if args.multijob_from else None
    except ValueError as exc:
        parser.error(f"--readme {str(args.readme)!r}, --scratch-from or --multijob-from: {exc}")
    finished = None  # a finished benchmark's episodes, facts and JSON, read before the long runs
    if LEADERBOARD in blocks and args.leaderboard_from is not None:
        try:
            finished = benchmark.read_run(args.leaderboard_from)
        except ValueError as exc:  # a folder that is not a finished benchmark's
            parser.error(f"--leaderboard-from {str(args.leaderboard_from)!r}: {exc}")
    for track, block in TRACK_BLOCKS.items():
        if block in blocks:
            continue  # located above
        if LEADERBOARD in blocks and (finished is None or track in benchmark.tracks(finished[1])):
            try:  # a run with the track (a fresh one has both) fills its block too
                pages.locate(block)
            except ValueError as exc:
                parser.error(f"--readme {str(args.readme)!r}: {exc}")
    summaries = _summaries(pages, parser, args.readme) if LEADERBOARD in blocks else set()
    progress = not args.no_progress
    named = (HEADROOM, FIDELITY, SENSITIVITY, MOVING_SWEEP, LEADERBOARD, SCORES, MEASURED, MOVING)
    named += (CARBON, SCRATCH, SCRATCH_TASKS, MULTIJOB, MULTIJOB_SUMMARY)
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
    if MOVING_SWEEP in blocks:
        tables = []
        for env_id in powertrip_env.MOVING_SUITE_IDS:
            print(f"the moving world's sweep on {env_id} ...", file=sys.stderr)
            room = sensitivity.room_sweep(
                env_id, episodes=ROOM_EPISODES, seed=args.seed, progress=progress
            )
            tables.append(sensitivity.room_markdown({**room, "titled": True}))
        pages.splice(MOVING_SWEEP, "\n".join(tables))
    if LEADERBOARD in blocks:
        _splice_leaderboard(pages, args, finished, summaries)
    _splice_finished(pages, args, scratch_run, multijob_run)
    for path in pages.write():
        print(f"updated {path}", file=sys.stderr)
    print("then run `powertrip docs` to refresh the site's pages built from them", file=sys.stderr)
    return 0


def _read_multijob(folder: Path) -> dict[str, Any]:
    """A finished ``powertrip multijob`` run's board (the pettingzoo extra, only for it)."""
    from powertrip_env.harness.multijob.board import read_board

    return read_board(folder)


def _splice_finished(
    pages: BlockFiles, args: argparse.Namespace, scratch_run: Any, multijob_run: Any
) -> None:
    """The blocks read from finished runs: ``powertrip scratch``'s rows and curves, and
    ``powertrip multijob``'s board."""
    if scratch_run is not None:
        pages.splice(SCRATCH, scratch_run[2])
        pages.splice(SCRATCH_TASKS, scratch_run[1])
        curves = args.scratch_from / CURVES
        write_bytes(args.readme.parent / SCRATCH_CURVES, curves.read_bytes())
    if multijob_run is not None:
        from powertrip_env.harness.multijob.board import markdown, summary_markdown

        pages.splice(MULTIJOB, markdown(multijob_run))
        pages.splice(MULTIJOB_SUMMARY, summary_markdown(multijob_run))


def _summaries(pages: BlockFiles, parser: argparse.ArgumentParser, readme: Path) -> set[str]:
    """The blocks of README's lines on each track (``SUMMARIES``) that the pages hold, located.

    Unlike a board's block, a summary's may be absent: a checkout whose README shows no
    summaries still gets its boards. One held by two pages exits 2, as any block does.
    """
    found = set()
    for name in SUMMARIES.values():
        if any(has_block(path.read_text(encoding="utf-8"), name) for path in doc_files(readme)):
            try:
                pages.locate(name)
            except ValueError as exc:
                parser.error(f"--readme {str(readme)!r}: {exc}")
            found.add(name)
    return found


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


def _splice_leaderboard(
    pages: BlockFiles,
    args: argparse.Namespace,
    finished: tuple[Any, ...] | None,
    summaries: set[str],
) -> None:
    """Put the benchmark's tables in the leaderboard block of ``pages``, each track's board in
    its block and, of the ``summaries`` blocks the pages hold, each track's few lines in its
    own; writes the profile PNG and the tracks' figures.

    The board and its profile come from one benchmark (run here, or the ``--leaderboard-from``
    folder, read from its episodes and JSON), so no table and no picture describe two
    different runs. A track's board and README's lines on it are laid out from one
    ``leaderboard.Board`` of its episodes; a folder's board must give its saved JSON again,
    number for number, or its files are not one run's (``ValueError``).
    """

    profile = args.readme.parent / PROFILE
    profile.parent.mkdir(parents=True, exist_ok=True)
    saved = None
    if finished is not None:  # the --leaderboard-from folder, read and checked up front
        frame, facts, saved = finished
        png = (args.leaderboard_from / benchmark.PROFILE).read_bytes()
    else:
        print("the benchmark over the suite ...", file=sys.stderr)
        frame, facts = benchmark.benchmark(episodes=args.episodes, seed=args.seed)
        first, on_first = benchmark.profiled(frame, facts)
        png_path = leaderboard.performance_profile(
            on_first, first.zero, first.top, profile.with_suffix(".tmp.png")
        )
        png = png_path.read_bytes()
        png_path.unlink()
    ran = benchmark.tracks(facts)
    boards = {
        name: TRACKS[name].board(benchmark.scored(frame[frame["task"].isin(tasks)]))
        for name, tasks in ran.items()
    }
    markdown, summary = benchmark.report(frame, facts, boards=boards)
    if saved is not None and summary != saved:
        differ = [key for key in (*summary, *saved) if summary.get(key) != saved.get(key)]
        print(
            f"powertrip readme-tables: error: --leaderboard-from {str(args.leaderboard_from)!r}: "
            f"its {benchmark.EPISODES} does not give its {benchmark.BOARD_JSON} again (they "
            f"differ in {', '.join(dict.fromkeys(differ))}): the two are not one run's",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if next(iter(TRACKS)) in ran:  # the docs' profile is the first track's: a run without it
        # (of the measured track alone, say) leaves the whole board and the profile as they are
        pages.splice(LEADERBOARD, board_block(markdown))
        write_bytes(profile, png)
    for name, tasks in ran.items():
        if name in TRACK_BLOCKS:
            here = {task: facts[task] for task in tasks}
            drawn = {task: summary["tasks"][task] for task in tasks}  # the figures read the JSON
            _splice_track(pages, TRACKS[name], boards[name], frame, here, drawn, args.readme)
            if SUMMARIES[name] in summaries:
                pages.splice(SUMMARIES[name], track_summary(boards[name], here, TRACKS[name]))


def _splice_track(
    pages: BlockFiles,
    track: Track,
    board: leaderboard.Board,
    frame: pd.DataFrame,
    facts: dict[str, dict[str, Any]],
    entries: dict[str, Any],
    readme: Path,
) -> None:
    """One track's board in its block (its tables of facts beyond the bracket, then its scores)
    and its figures (drawn from its tasks' JSON ``entries``) where the docs keep them."""
    more = [line for section in track.sections()[1:] for line in section(facts)]
    scores = board_scores(board, facts, track)
    pages.splice(TRACK_BLOCKS[track.name], "\n".join(more) + "\n" + scores if more else scores)
    with tempfile.TemporaryDirectory() as tmp:
        for name in track.figures(frame, entries, Path(tmp)):
            write_bytes(readme.parent / FIGURES[name], (Path(tmp) / name).read_bytes())


if __name__ == "__main__":
    raise SystemExit(main())
