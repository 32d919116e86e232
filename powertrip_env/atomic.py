"""Atomic file writes for results, models, data and documents.

A run can be stopped at any moment (Ctrl-C, a killed job, a full disk). Writing straight onto
``summary.md`` or ``best_model.zip`` would leave a truncated file where a good one was if that
happened mid-write. These helpers write to a temporary file in the same directory and then
``os.replace`` it onto the final name, which is atomic on POSIX and Windows: a reader sees the
old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success move it onto ``path``.

    The temporary name keeps ``path``'s suffix, because some writers (SB3's ``save``,
    matplotlib's ``savefig``) act on the suffix. On an exception the temporary file is removed
    and ``path`` is untouched.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.stem}.", suffix=final.suffix)
    os.close(fd)
    os.chmod(tmp, _default_mode())  # mkstemp makes 0600; give the file the usual permissions
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a UTF-8 text file atomically, with the newlines given; returns its path."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write a file atomically and flush it to disk before it takes the final name."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return Path(path)


def _default_mode() -> int:
    """Permissions of a newly created file under the current umask (0644 under 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
