"""The repository's folders of code and what each installs as, read from pyproject.toml's
``package-dir`` table, the one place the map is written (setup.py and the docs' Griffe extension
read it too). ``maintainers/`` is code of the checkout, never installed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_PACKAGE = "powertrip_env._data"
MAINTAINERS = "maintainers"  # the maintainers' writers: run from a checkout, not in the wheel


def installed_folders() -> dict[str, str]:
    """Folder of code -> the package it installs as: ``powertrip_env`` and the package-dir
    folders (the data folder is not code)."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        table = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    return {"powertrip_env": "powertrip_env"} | {
        folder: package for package, folder in table.items() if package != DATA_PACKAGE
    }


def code_folders() -> dict[str, str]:
    """Every folder of the project's code -> its import name, the maintainers' folder included."""
    return installed_folders() | {MAINTAINERS: MAINTAINERS}
