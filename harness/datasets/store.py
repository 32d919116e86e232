"""Where the offline datasets live: their Minari IDs, Minari's data folder and the namespaces.

``powertrip_env.harness.datasets.build`` records and loads the datasets; this module is what both
need of Minari itself, kept apart so that nothing here plays an episode: the dataset IDs
(``dataset_id``, ``DATASET_VERSION``), the folder Minari reads and writes (``default_root``,
``minari_root``), the namespaces' descriptions, and ``require_minari``, which imports Minari
only when a dataset is touched, since it is the optional ``datasets`` extra.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from powertrip_env.errors import EvaluationError

NAMESPACE = "powertrip"
DATASET_VERSION = 0
"""The version of every dataset ID: bump it when what a step records changes."""
DEFAULT_SPLIT = "train"
DOCS = "docs/datasets.md"
_INSTALL_HINT = "pip install 'powertrip-env[datasets]'"


class DatasetError(EvaluationError):
    """Bad input to a dataset command: an unknown ID or policy, an existing dataset, ..."""


# --------------------------------------------------------------------------- Minari


def require_minari() -> Any:
    """``minari``, imported when needed: ``nearest_slot`` and the rest of the package run
    without it (it is the ``datasets`` extra)."""
    try:
        import minari
        import minari.dataset.minari_dataset
        import minari.namespace
    except ImportError:
        raise DatasetError(f"Minari is not installed: {_INSTALL_HINT}") from None
    try:
        import h5py  # noqa: F401  # Minari's default storage, its 'hdf5' extra
    except ImportError:
        raise DatasetError(
            f"h5py (Minari's HDF5 storage) is not installed: {_INSTALL_HINT}"
        ) from None
    return minari


def dataset_id(env_id: str, policy: str, split: str = DEFAULT_SPLIT) -> str:
    """``powertrip/<env ID>/<policy lower case>[-<split>]-v<DATASET_VERSION>``; the split is
    named unless it is ``train``. Raises ``DatasetError`` for an ID Minari would not parse."""
    name = policy.lower() if split == DEFAULT_SPLIT else f"{policy.lower()}-{split}"
    out = f"{NAMESPACE}/{env_id}/{name}-v{DATASET_VERSION}"
    parse = require_minari().dataset.minari_dataset.parse_dataset_id
    try:
        parsed = parse(out)
    except ValueError:
        parsed = None
    if parsed != (f"{NAMESPACE}/{env_id}", name, DATASET_VERSION):
        raise DatasetError(
            f"{env_id!r} and {policy!r} make the dataset ID {out!r}, which Minari reads as "
            f"{parsed}; IDs and policy names may hold letters, digits, '-' and '_'"
        )
    return out


def default_root() -> Path:
    """Minari's data folder: ``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


@contextlib.contextmanager
def minari_root(root: str | os.PathLike[str] | None) -> Iterator[Path]:
    """Point Minari's functions (which read ``MINARI_DATASETS_PATH`` on every call) at ``root``
    for the block; ``None`` keeps its own folder."""
    if root is None:
        yield default_root()
        return
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = os.fspath(root)
    try:
        yield Path(root)
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def _namespaces(env_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            NAMESPACE,
            {
                "description": "powertrip-env: episodes of geo-distributed training's site "
                "choices (which datacenters train each round), played by the clairvoyant "
                "references and the strongest deployable baselines, for offline RL and "
                f"imitation. See {DOCS} in powertrip-env.",
                "docs": DOCS,
            },
        ),
        (
            f"{NAMESPACE}/{env_id}",
            {
                "description": f"Episodes of the Gymnasium environment {env_id} "
                "(import powertrip_env to register it), one dataset per policy and split. "
                f"See {DOCS} in powertrip-env.",
                "env_id": env_id,
                "docs": DOCS,
            },
        ),
    ]


def write_namespaces(env_id: str) -> None:
    """Create (or bring up to date) the namespaces of ``env_id``'s datasets in Minari's
    current folder, with their descriptions."""
    namespace = require_minari().namespace
    for name, meta in _namespaces(env_id):
        if name not in namespace.list_local_namespaces():
            namespace.create_namespace(name, **meta)
        elif namespace.get_namespace_metadata(name) != meta:
            namespace.update_namespace_metadata(name, **meta)
