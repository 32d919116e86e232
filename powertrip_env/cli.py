"""``powertrip``: one command line for every tool, ``powertrip <command> [arguments]``.

Each command is the ``main`` of one module, imported only when that command runs, so
``powertrip --help`` starts without torch or SB3 and a tool's own ``--help`` is its whole
reference (``powertrip evaluate --help``). The same modules run as ``python -m <module>``.

This module is the top of the project's layers (``tests/test_imports.py``): it may import any
of them, and nothing imports it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
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
        "powertrip_env.baselines.evaluate",
        "play policies and saved agents on identical episodes; tables and figures",
    ),
    "benchmark": Command(
        "powertrip_env.baselines.benchmark",
        "the leaderboard over the suite of sequential tasks",
    ),
    "headroom": Command(
        "powertrip_env.baselines.headroom",
        "how sequential a scenario is: best fixed set, clairvoyant plans, lower bound",
    ),
    "fidelity": Command(
        "powertrip_env.baselines.fidelity", "the model against published runs (calibration table)"
    ),
    "sensitivity": Command(
        "powertrip_env.baselines.sensitivity", "sweep the calibrated knobs over published ranges"
    ),
    "calibrate": Command(
        "powertrip_env.baselines.calibrate",
        "fit the surrogate's learning curve to real federated training",
    ),
    "validate": Command(
        "powertrip_env.baselines.validate",
        "the same episodes under the surrogate and real training",
    ),
    "pretrain": Command(
        "powertrip_env.agents.pretrain", "train the shipped general agent and its zero-shot table"
    ),
    "imitation": Command(
        "powertrip_env.agents.imitation",
        "clone a clairvoyant teacher into a candidate-set agent (BC, DAgger)",
    ),
    "datasets": Command(
        "powertrip_env.baselines.datasets", "record Minari datasets of references and baselines"
    ),
    "tune": Command(
        "powertrip_env.baselines.tune", "tune the lookahead rules' horizon and margin on train days"
    ),
    "readme-tables": Command(
        "powertrip_env.baselines.readme_tables",
        "regenerate the tables of results in README.md and docs/",
    ),
    "docs": Command(
        "powertrip_env.baselines.docs_site",
        "write the documentation site's generated pages, or --check them",
    ),
}


def usage() -> str:
    """The top-level help: every command with its one-line summary."""
    width = max(map(len, COMMANDS))
    lines = [
        "usage: powertrip <command> [arguments]     (powertrip <command> --help for its options)",
        "",
        "commands:",
        *(f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command with the rest of ``argv``; its exit code is ours."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    command = COMMANDS.get(name)
    if command is None:
        sys.stderr.write(
            f"powertrip: unknown command {name!r}; the commands are {', '.join(COMMANDS)}\n"
        )
        return 2
    tool = importlib.import_module(command.module)
    return int(tool.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
