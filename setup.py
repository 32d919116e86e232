"""Package discovery, the one thing pyproject.toml cannot say on its own.

Every folder under ``powertrip_env/``, ``baselines/`` and ``agents/`` is a package of the wheel,
found here so that a new subpackage can never be left out (a hand-written list once forgot
``powertrip_env.learners``, and only a non-editable install noticed). The repository's
``baselines/`` and ``agents/`` install as ``powertrip_env.baselines`` and
``powertrip_env.agents``, and ``traces/`` as ``powertrip_env._data`` (``package-dir`` in
pyproject.toml), so ``powertrip_env`` is the wheel's only top-level name; setuptools' discovery
cannot combine with those mappings, hence this file.
"""

from setuptools import find_namespace_packages, setup

# folder in the repository -> the package it installs as
FOLDERS = {
    "powertrip_env": "powertrip_env",
    "baselines": "powertrip_env.baselines",
    "agents": "powertrip_env.agents",
}


def _packages(folder: str, package: str) -> list[str]:
    found = find_namespace_packages(
        include=[folder, f"{folder}.*"], exclude=["*.__pycache__", "*.__pycache__.*"]
    )
    return [package + name[len(folder) :] for name in found]


setup(
    packages=[
        *(name for folder, package in FOLDERS.items() for name in _packages(folder, package)),
        "powertrip_env._data",
    ]
)
