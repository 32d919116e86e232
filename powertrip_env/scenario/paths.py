"""Where scenarios and their data files are found: the shipped scenarios and data, or a path.

A scenario names itself (``"default"``, one of ``powertrip_env/scenario/shipped/*.toml``) or
is a TOML path; a data file it names resolves next to the scenario first, then in the shipped data.
"""

from __future__ import annotations

import os
from pathlib import Path

from powertrip_env.errors import ScenarioError

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
SCENARIO_DIR = Path(__file__).resolve().parent / "shipped"


def data_dir() -> Path:
    """Where the shipped catalogues and traces live.

    In an installed wheel they travel inside the package (``powertrip_env/_data``); in a source
    checkout (and an editable install) they are the repository's ``traces/`` folder.
    """
    for candidate in (_PACKAGE_DIR / "_data", _PACKAGE_DIR.parent / "traces"):
        if (candidate / "gpus.csv").is_file():
            return candidate
    raise ScenarioError(
        f"the packaged data folder was not found (looked in {_PACKAGE_DIR / '_data'} and "
        f"{_PACKAGE_DIR.parent / 'traces'}); reinstall powertrip-env"
    )


def resolve_file(name: str, scenario_path: Path, where: str) -> Path:
    """A data file named in a scenario: next to the scenario first, then the shipped data."""
    candidate = Path(os.path.expanduser(name))
    if candidate.is_absolute():
        options = [candidate]
    else:
        options = [scenario_path.parent / candidate, data_dir() / candidate]
    for option in options:
        if option.is_file():
            return option.resolve()
    raise ScenarioError(
        f"{where} = {name!r}: file not found (looked in {', '.join(str(o) for o in options)})"
    )


def scenario_names() -> list[str]:
    """The named scenarios that ship with the package."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def scenario_path(name_or_path: str | os.PathLike[str]) -> Path:
    """Map a scenario name (``"default"``) or a path to the TOML file it means."""
    text = os.fspath(name_or_path)
    if text in scenario_names():
        return SCENARIO_DIR / f"{text}.toml"
    path = Path(os.path.expanduser(text))
    if path.suffix == ".toml" or os.sep in text or path.exists():
        if not path.is_file():
            raise ScenarioError(f"{path}: scenario file not found")
        return path.resolve()
    raise ScenarioError(
        f"unknown scenario {text!r}: give one of {scenario_names()} or the path of a .toml file"
    )
