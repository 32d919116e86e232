"""A Griffe extension for the API reference (mkdocs.yml, mkdocstrings): the package as installed.

Griffe reads the source without importing it, and finds a package's modules by walking its
folder. Two things of this project it cannot see that way:

* ``baselines/``, ``harness/`` and ``agents/`` install inside the package as
  ``powertrip_env.baselines``, ``powertrip_env.harness`` and ``powertrip_env.agents``
  (``[tool.setuptools.package-dir]`` in pyproject.toml), so they are not under
  ``powertrip_env/``. The extension reads that table, the one place the mapping is written, and
  loads each folder as the subpackage it installs as.
* A docstring finished at import time: ``PowerTripEnv``'s observation table is written into its
  ``__doc__`` from ``powertrip_env.dynamics.features`` when the module is imported. The objects
  named in ``runtime_docstrings`` take the docstring Python's ``help()`` shows.

This file is build tooling, not a page: mkdocs.yml leaves ``hooks/`` out of the site.
"""

from __future__ import annotations

import importlib
import inspect
import tomllib
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parents[2]


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Subpackage name -> folder, for the folders of pyproject.toml's ``package-dir`` that hold
    Python code (an ``__init__.py``); data folders are left out."""
    with (root / "pyproject.toml").open("rb") as handle:
        table = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    folders = {name: root / folder for name, folder in table.items()}
    return {name: folder for name, folder in folders.items() if (folder / "__init__.py").is_file()}


class InstalledLayout(griffe.Extension):
    """Load the ``package-dir`` folders into their parent package, and take the runtime
    docstring of the objects listed in ``runtime_docstrings``."""

    def __init__(self, runtime_docstrings: list[str] | None = None) -> None:
        super().__init__()
        self.runtime_docstrings = list(runtime_docstrings or [])

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Once ``pkg`` is loaded, before any object of it is looked up: add its folders."""
        for name, folder in package_dirs().items():
            parent, _, child = name.rpartition(".")
            if parent != pkg.path:
                continue
            # The loader's own module walk, started at the folder (Griffe has no public call for
            # a module whose folder is elsewhere than its name says).
            module = loader._load_module(child, folder / "__init__.py", parent=pkg)
            pkg.set_member(child, module)
        for path in self.runtime_docstrings:
            if path.split(".", 1)[0] == pkg.path:
                self._take_runtime_docstring(pkg, path)

    @staticmethod
    def _take_runtime_docstring(pkg: griffe.Module, path: str) -> None:
        module_name, _, attribute = path.rpartition(".")
        doc = getattr(importlib.import_module(module_name), attribute).__doc__
        obj = pkg.get_member(path.split(".", 1)[1])
        if obj.docstring is None or doc is None:
            raise ValueError(f"{path}: no docstring to replace")
        obj.docstring.value = inspect.cleandoc(doc)
