"""Atomic saving of SB3 models and of a run's files (the mechanism is ``powertrip_env.atomic``).

Besides single files, a training run writes two things that must stay whole: its
``config.yaml``, which a resumed run extends but never rewrites (``append_to_list``), and the
final comparison, whose files must appear as one set (``install_results``). A folder that
``--force`` reuses is emptied by ``clear_folder``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from powertrip_env.atomic import atomic_path, write_text

__all__ = [
    "append_to_list",
    "atomic_path",
    "clear_folder",
    "install_results",
    "save_model",
    "write_text",
]


def save_model(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save an SB3 model to ``path`` (a ``.zip``) atomically; returns the final path."""
    final = Path(path)
    if final.suffix != ".zip":
        final = final.with_name(final.name + ".zip")
    with atomic_path(final) as tmp:
        model.save(tmp)
    return final


def append_to_list(text: str, key: str, item: Mapping[str, Any]) -> str:
    """The YAML mapping ``text`` with ``item`` added to its top-level list ``key``.

    A run's ``config.yaml`` is its record: a resume adds an entry and keeps every byte that was
    there, so the original command and settings can still be read (and diffed) as written. The
    entry is appended as text; only if that would not parse to the expected mapping (``key``
    is not the file's last entry, e.g. after a hand edit) is the mapping dumped again, which
    keeps every value but not the formatting.

    Args:
        text: the current file, a YAML mapping (may be empty).
        key: the top-level key of the list, created if missing.
        item: the entry to add; plain YAML values only.

    Returns:
        The new text, to be written with ``write_text``.
    """
    data = yaml.safe_load(text) or {}
    entry = dict(item)
    expected = {**data, key: [*(data.get(key) or []), entry]}
    new = text if not text or text.endswith("\n") else text + "\n"
    if data.get(key) is None and not new.rstrip().endswith(f"{key}:"):
        new += f"{key}:\n"
    new += yaml.safe_dump([entry], sort_keys=False)
    try:
        if yaml.safe_load(new) == expected:
            return new
    except yaml.YAMLError:
        pass
    return yaml.safe_dump(expected, sort_keys=False)


def install_results(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Move a finished comparison's files from the folder ``src`` into ``dest``, as a set.

    ``dest`` is the run folder, which also holds the models, so it cannot be swapped whole.
    Instead the old ``summary.md`` goes first, then the other old result files, then the new
    files move in (each an atomic rename on the same filesystem) with ``summary.md`` last.
    Whatever moment this is stopped at, ``dest`` holds the old set, no summary, or the new set:
    never a new ``episodes.csv`` beside an old summary. A ``dest`` that does not exist yet is
    the whole folder renamed at once. ``src`` is removed.

    Returns:
        ``dest``.
    """
    # What evaluate writes, as it names it; imported here, as training imports the harness
    # only for the final comparison.
    from powertrip_env.harness.evaluation.evaluate import RESULT_FILES

    src, dest = Path(src), Path(dest)
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        return dest
    new = sorted(p.name for p in src.iterdir())
    for name in RESULT_FILES:  # the old summary first
        (dest / name).unlink(missing_ok=True)
    for name in sorted(new, key=lambda n: n == "summary.md"):  # the summary last
        target = dest / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(src / name, target)
    shutil.rmtree(src, ignore_errors=True)
    return dest


def clear_folder(path: str | os.PathLike[str]) -> Path:
    """Delete everything inside the folder ``path`` (not the folder itself, nor a symlink's
    target): what ``--force`` does to an earlier run's folder, once every argument is checked.

    The folder is kept, rather than removed and made again, so that a symlinked run folder or
    one whose permissions were set by hand stays as it was.
    """
    folder = Path(path)
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    return folder
