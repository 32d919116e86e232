"""Package discovery, the one thing pyproject.toml cannot say on its own.

Every folder under ``powertrip_env/`` and under each folder of pyproject.toml's ``package-dir``
(``baselines/``, ``harness/``, ``agents/``) is a package of the wheel, found here so that a new
subpackage can never be left out (a hand-written list once forgot ``powertrip_env.learners``,
and only a non-editable install noticed). The folder -> package map is read from that table,
the one place it is written; ``traces/`` installs as ``powertrip_env._data``. setuptools'
discovery cannot combine with those mappings, hence this file. ``maintainers/`` is in no table:
it stays out of the wheel.
"""

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

DATA = "powertrip_env._data"


def folders() -> dict[str, str]:
    """Folder in the repository -> the package it installs as, for every folder of code."""
    with (Path(__file__).parent / "pyproject.toml").open("rb") as handle:
        table = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    return {"powertrip_env": "powertrip_env"} | {
        folder: package for package, folder in table.items() if package != DATA
    }


def _packages(folder: str, package: str) -> list[str]:
    found = find_namespace_packages(
        include=[folder, f"{folder}.*"], exclude=["*.__pycache__", "*.__pycache__.*"]
    )
    return [package + name[len(folder) :] for name in found]


setup(
    packages=[
        *(name for folder, package in folders().items() for name in _packages(folder, package)),
        DATA,
    ]
)
