"""``powertrip``: one command line for every tool, ``powertrip <command> [arguments]``.

Each command is the ``main`` of one module, imported only when that command runs, so
``powertrip --help`` starts without torch or SB3 and a tool's own ``--help`` is its whole
reference (``powertrip evaluate --help``). The same modules run as ``python -m <module>``.

Two kinds of command. ``COMMANDS`` are what a user runs, and what ``powertrip --help`` lists.
``MAINTAINER_COMMANDS`` write the repository's own files (its docs, README's tables, the shipped
pretrained agent): their modules live in ``maintainers/``, outside the wheel, and run only when
the ``powertrip_env`` being run is a checkout's (``pip install -e .``); from a wheel they
refuse in one line, so none can write into site-packages.

This module is the top of the package's layers (``tests/test_imports.py``): it may import any
of them, and nothing in the package imports it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple


class Command(NamedTuple):
    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "train": Command(
        "powertrip_env.agents.training",
        "train an SB3 agent and compare it with the baselines (as train_agent.py)",
    ),
    "evaluate": Command(
        "powertrip_env.harness.evaluation.evaluate",
        "play policies and saved agents on identical episodes; tables and figures",
    ),
    "benchmark": Command(
        "powertrip_env.harness.reports.benchmark",
        "the leaderboard over the suite of sequential tasks",
    ),
    "headroom": Command(
        "powertrip_env.harness.reports.headroom",
        "how sequential a scenario is: best fixed set, clairvoyant plans, lower bound",
    ),
    "fidelity": Command(
        "powertrip_env.harness.calibration.fidelity",
        "the model against published runs (calibration table)",
    ),
    "room": Command(
        "powertrip_env.harness.reports.room",
        "a measured task's room: what measuring recovers, which unknown holds it, a sweep",
    ),
    "sensitivity": Command(
        "powertrip_env.harness.calibration.sensitivity",
        "sweep the calibrated knobs over published ranges",
    ),
    "calibrate": Command(
        "powertrip_env.harness.calibration.calibrate",
        "fit the surrogate's learning curve to real federated training",
    ),
    "validate": Command(
        "powertrip_env.harness.calibration.validate",
        "the same episodes under the surrogate and real training",
    ),
    "imitation": Command(
        "powertrip_env.agents.imitation",
        "clone a clairvoyant teacher into a candidate-set agent (BC, DAgger)",
    ),
    "datasets": Command(
        "powertrip_env.harness.datasets.build",
        "record Minari datasets of references and baselines",
    ),
    "scratch": Command(
        "powertrip_env.agents.scratch",
        "standard algorithms from scratch on every task, several seeds: board rows and curves",
    ),
    "multijob": Command(
        "powertrip_env.harness.multijob.board",
        "the multi-job track's board: jobs sharing sites, joint rules, trained agents",
    ),
    "tune": Command(
        "powertrip_env.harness.calibration.tune",
        "tune the lookahead rules' horizon and margin on train days",
    ),
}
"""The commands a user runs, in ``powertrip --help``'s order."""

MAINTAINER_COMMANDS: dict[str, Command] = {
    "docs": Command(
        "maintainers.docs_site", "write the documentation site's generated pages, or --check them"
    ),
    "readme-tables": Command(
        "maintainers.readme_tables", "regenerate the tables of results in README.md and docs/"
    ),
    "pretrain": Command(
        "maintainers.pretrain", "train the shipped general agent and its zero-shot table"
    ),
}
"""The maintainers' commands: they write a checkout's files, and run only in one."""

MAINTAINERS = "maintainers"  # their folder, beside powertrip_env/ in a checkout


def checkout() -> Path | None:
    """The repository the running ``powertrip_env`` was imported from, or ``None`` when it is an
    installed wheel: the folder above the package, if it holds ``maintainers/``."""
    import powertrip_env

    root = Path(powertrip_env.__file__).resolve().parents[1]
    found = (root / MAINTAINERS / "__init__.py").is_file() and (root / "pyproject.toml").is_file()
    return root if found else None


def usage() -> str:
    """The top-level help: every user's command with its one-line summary, and the maintainers'
    commands where they can run (in a checkout)."""
    shown = COMMANDS | (MAINTAINER_COMMANDS if checkout() is not None else {})
    width = max(map(len, shown))
    lines = [
        "usage: powertrip <command> [arguments]     (powertrip <command> --help for its options)",
        "",
        "commands:",
        *(f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()),
    ]
    if checkout() is not None:
        lines += [
            "",
            "maintainers' commands (this checkout's files):",
            *(f"  {n:<{width}}  {c.summary}" for n, c in MAINTAINER_COMMANDS.items()),
        ]
    return "\n".join(lines) + "\n"


def _module(name: str) -> object | None:
    """The module of command ``name``; ``None`` after one line on stderr when it cannot run."""
    if name in COMMANDS:
        return importlib.import_module(COMMANDS[name].module)
    if name in MAINTAINER_COMMANDS:
        root = checkout()
        if root is None:
            sys.stderr.write(
                f"powertrip {name}: a maintainers' command; it writes a checkout's files and runs"
                " only from one (git clone, then pip install -e .), not from an installed wheel\n"
            )
            return None
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        return importlib.import_module(MAINTAINER_COMMANDS[name].module)
    known = [*COMMANDS, *(MAINTAINER_COMMANDS if checkout() is not None else ())]
    sys.stderr.write(f"powertrip: unknown command {name!r}; the commands are {', '.join(known)}\n")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command with the rest of ``argv``; its exit code is ours."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(usage())
        return 0 if args else 2
    tool = _module(args[0])
    if tool is None:
        return 2
    return int(tool.main(args[1:]) or 0)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
