"""What the trace converters share: their error for bad input, and how their command lines end.

A converter's ``main`` parses its arguments, then hands ``finish`` the work (read, convert,
write atomically) as a function returning the line that says what it wrote. Bad input and a
failed write end as one line on stderr and exit status 2, never a traceback, the same way for
every converter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


class ConvertError(Exception):
    """Bad input; the message is shown to the user as is (no traceback)."""


def finish(work: Callable[[], str], *outs: Path) -> int:
    """Run ``work`` and report it on stderr: its "wrote ..." line and exit status 0, or the error
    and 2. A write the OS refuses names the outputs ``outs`` and the OS's reason."""
    try:
        done = work()
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the OS refused an output (its own name may be a temporary's)
        where = " or ".join(str(out) for out in outs)
        print(f"error: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(done, file=sys.stderr)
    return 0
