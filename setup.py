"""Package discovery, the one thing pyproject.toml cannot say on its own.

Every folder under ``powertrip_env/``, ``baselines/`` and ``agents/`` is a package of the wheel,
found here so that a new subpackage can never be left out (a hand-written list once forgot
``powertrip_env.learners``, and only a non-editable install noticed). ``powertrip_env._data`` is
the ``traces/`` folder installed inside the package (see ``package-dir`` in pyproject.toml);
setuptools' discovery cannot combine with that mapping, hence this file.
"""

from setuptools import find_namespace_packages, setup

TOP_LEVEL = ("powertrip_env", "baselines", "agents")

setup(
    packages=[
        *find_namespace_packages(
            include=[f"{name}{tail}" for name in TOP_LEVEL for tail in ("", ".*")],
            exclude=["*.__pycache__", "*.__pycache__.*"],
        ),
        "powertrip_env._data",
    ]
)
