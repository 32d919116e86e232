"""Error types for bad user input, and the one wording of a bad choice.

Both error types subclass ``ValueError`` so callers that already guard against bad values keep
working, while tools (and tests) can tell a broken scenario from a broken trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ScenarioError(ValueError):
    """A scenario file (TOML) or site/GPU catalogue is malformed or inconsistent."""


class TraceError(ValueError):
    """A power-trace file is unreadable, malformed or out of range."""


class EvaluationError(ValueError):
    """Bad input to a tool (names, files, folders, saved models): every command line prints it
    as one line and exits 2. Here, below every tool, so that each can raise it and each command
    line catch it without importing another tool."""


class ResultsNotWritten(EvaluationError):
    """A finished run whose result set could not be written (a full disk, a folder filled
    meanwhile): the message names the folder and the error, and ``result`` holds what the run
    found, so that its caller can still print it: a failed write must not lose the run."""

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


def is_whole(value: Any) -> bool:
    """Whether an argument is a whole number: a Python or numpy integer, never a bool (which
    Python counts as an int, but no count, seed or size means True). Every check of a count,
    seed or size asks this, then says what it wanted in its own words."""
    return not isinstance(value, bool) and isinstance(value, int | np.integer)


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Validate a keyword argument against its allowed values, naming both.

    The interface, the episode starts and the constructor checks each own some of the choices;
    written here, below all of them, a bad choice reads the same whichever one refuses it.
    """
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; allowed: {', '.join(allowed)}")
    return value
