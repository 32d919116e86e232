"""Error types for bad user input.

Both subclass ``ValueError`` so callers that already guard against bad values keep working,
while tools (and tests) can tell a broken scenario from a broken trace.
"""

from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario file (TOML) or site/GPU catalogue is malformed or inconsistent."""


class TraceError(ValueError):
    """A power-trace file is unreadable, malformed or out of range."""
