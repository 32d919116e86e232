"""Atomic writes for models and small text files.

A run can be stopped at any moment (Ctrl-C, a killed job, a full disk). Writing a model straight
to ``best_model.zip`` would leave a truncated zip where a good one was if that happened mid-write.
Everything here writes to a temporary file in the same directory and then ``os.replace``s it
onto the final name, which is atomic on POSIX and Windows: a reader sees the old file or the new
one, never half of one (DESIGN.md §9).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``.

    The temporary name keeps ``path``'s suffix, because SB3 appends ``.zip`` to a save path
    that lacks one. On an exception the temporary file is removed and ``path`` is untouched.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.stem}.", suffix=final.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_model(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save an SB3 model to ``path`` (a ``.zip``) atomically; returns the final path."""
    final = Path(path)
    if final.suffix != ".zip":
        final = final.with_name(final.name + ".zip")
    with atomic_path(final) as tmp:
        model.save(tmp)
    return final


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file atomically; returns its path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
