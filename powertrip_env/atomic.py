"""Atomic file writes for results, models, data and documents.

A run can be stopped at any moment (Ctrl-C, a killed job, a full disk). Writing straight onto
``summary.md`` or ``best_model.zip`` would leave a truncated file where a good one was if that
happened mid-write. These helpers write to a temporary file in the same directory and then
``os.replace`` it onto the final name, which is atomic on POSIX and Windows: a reader sees the
old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
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
    return 0o666 & ~_umask()


class OutputDirError(ValueError):
    """A results folder that holds an earlier run's files, and ``force`` was not given."""


class WriteError(OutputDirError):
    """A result set that could not be written (a full disk, a lost mount, a permission taken
    away): none of it is in place, and its folder holds what it held before.

    An ``OutputDirError``, so that every tool ends it as it ends its other write failures: one
    line naming the folder and the error, and exit code 2 (``stop_codes``), not a traceback from
    deep inside the writer (matplotlib's, Minari's) that says neither.
    """


def write_error(folder: str | os.PathLike[str], exc: OSError) -> WriteError:
    """The ``WriteError`` of ``exc``, raised while ``folder``'s result set was written."""
    reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno and exc.strerror else str(exc)
    return WriteError(
        f"results not written to {os.fspath(folder)!r}: {reason}; what the folder held is unchanged"
    )


def probe_writable(folder: str | os.PathLike[str]) -> None:
    """Make ``folder`` if need be and prove a file can be written in it (``OSError`` if not),
    so that a long run fails at its start, not when it saves."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
        pass


def check_output_dir(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Refuse a non-empty results folder unless ``force``; prove its parent can be written.

    Called before a long run, so a tool fails in a second instead of after an hour. A folder
    that holds an earlier run's files is refused because mixing two runs' files (a new
    ``episodes.csv`` beside an old ``summary.md``) gives results that no run produced.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"output folder {os.fspath(out)!r} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise OutputDirError(
            f"output folder {os.fspath(out)!r} already holds results; choose another with "
            "--out, or pass --force to replace them"
        )
    try:
        probe_writable(out.absolute().parent)
    except OSError as exc:
        raise OutputDirError(
            f"output folder {os.fspath(out)!r} cannot be written: {exc.strerror or exc}; "
            "choose another with --out"
        ) from None
    return out


def check_replaceable(
    path: str | os.PathLike[str],
    inputs: Sequence[str | os.PathLike[str] | None] = (),
    *,
    flat: bool = False,
) -> None:
    """Refuse ``--force`` on a folder whose deletion would lose more than an earlier run.

    ``--force`` deletes what ``--out`` holds; a slip such as ``--out .`` or ``--out runs`` must
    not empty the working directory, a home directory, a repository or a folder of other runs,
    nor delete a file the run reads (``inputs``). With ``flat`` (a result set is a few files),
    a folder that holds any subfolder is refused too.
    """
    out = Path(path)
    where = out.resolve()
    cwd = Path.cwd().resolve()
    if where == Path(where.anchor) or where == Path.home().resolve() or where in cwd.parents:
        raise OutputDirError(f"--force: refusing to empty {os.fspath(out)!r}; give another --out")
    if where == cwd or (where / ".git").exists():
        raise OutputDirError(
            f"--force: {os.fspath(out)!r} is the working directory or a repository, not a "
            "results folder; give --out a folder of its own"
        )
    if not where.is_dir():
        return
    for item in inputs:
        if item is not None and where in Path(item).resolve().parents:
            raise OutputDirError(
                f"--force: {os.fspath(out)!r} holds {os.fspath(item)!r}, which this run reads "
                "and --force would delete"
            )
    if any(p.name == "config.yaml" for p in where.glob("*/**/config.yaml")):
        raise OutputDirError(
            f"--force: {os.fspath(out)!r} holds other runs (a config.yaml in a subfolder); "
            "give --out the run's own folder"
        )
    if flat:
        sub = next((p for p in where.iterdir() if p.is_dir()), None)
        if sub is not None:
            raise OutputDirError(
                f"--force: {os.fspath(out)!r} holds the folder {sub.name!r}, which no result set "
                "of this tool writes; give another --out or empty it yourself"
            )


@contextlib.contextmanager
def result_dir(path: str | os.PathLike[str], *, force: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; on success it becomes ``path`` at once.

    A result set (a table, its CSV, its plots) must appear whole or not at all: a reader, or a
    Ctrl-C between two files, must never leave a new ``episodes.csv`` beside an old summary.
    Everything is written into a hidden sibling folder, which is renamed onto ``path`` when the
    block ends without an exception. With ``force``, an existing ``path`` is moved aside first
    and deleted after the rename; without it a non-empty ``path`` is refused (see
    ``check_output_dir``). On an exception the temporary folder is removed and ``path`` is
    untouched; an ``OSError`` (a full disk) becomes a ``WriteError`` naming ``path``.
    """
    final = check_output_dir(path, force=force)
    if force and final.is_dir() and any(final.iterdir()):
        check_replaceable(final, flat=True)
    try:
        final.absolute().parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.absolute().parent, prefix=f".{final.name}.tmp-"))
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as exc:
        raise write_error(final, exc) from exc
    try:
        yield tmp
        old = None
        if final.exists():
            if any(final.iterdir()) and not force:  # filled by someone else meanwhile
                raise OutputDirError(
                    f"output folder {os.fspath(final)!r} was filled while this run wrote; "
                    f"its results are left in {os.fspath(tmp)!r}"
                )
            old = Path(tempfile.mkdtemp(dir=tmp.parent, prefix=f".{final.name}.old-"))
            os.replace(final, old / final.name)
        try:
            os.replace(tmp, final)
        except BaseException:
            if old is not None:  # put the earlier results back where they were
                os.replace(old / final.name, final)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OutputDirError:
        raise
    except OSError as exc:  # the disk filled, say: one line naming the folder, not a traceback
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(final, exc) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@dataclasses.dataclass
class Stop:
    """How the run under ``stop_codes`` ended: ``code`` is 0 if it finished."""

    code: int = 0


@contextlib.contextmanager
def stop_codes(*errors: type[Exception]) -> Iterator[Stop]:
    """Run the long part of a result-writing command; a stop becomes its exit code.

    Every such command ends a failed run the same way: one of ``errors`` (a bad input the run
    only meets on the way, or a result set it could not write: ``OutputDirError``, of which
    ``WriteError`` is one) prints ``error: ...`` and sets 2; Ctrl-C says that no result was
    written (``result_dir`` leaves the earlier set as it was) and sets 130. Both are swallowed,
    so the command returns ``code`` when it is not 0.
    """
    stop = Stop()
    try:
        yield stop
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        stop.code = 2
    except KeyboardInterrupt:
        print("interrupted; no results written", file=sys.stderr)
        stop.code = 130


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
