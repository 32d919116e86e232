"""Atomic saving of SB3 models (the mechanism is ``powertrip_env.atomic``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from powertrip_env.atomic import atomic_path, write_text

__all__ = ["atomic_path", "save_model", "write_text"]


def save_model(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save an SB3 model to ``path`` (a ``.zip``) atomically; returns the final path."""
    final = Path(path)
    if final.suffix != ".zip":
        final = final.with_name(final.name + ".zip")
    with atomic_path(final) as tmp:
        model.save(tmp)
    return final
