"""docs/changelog.md's table of moved import paths is true: every new path imports, and no old
one does (no forwarding module was kept, so a stale import fails at once)."""

from __future__ import annotations

import importlib
import re

import pytest
from layout import ROOT

CHANGELOG = ROOT / "docs" / "changelog.md"
ROW = re.compile(r"^\| `([\w.]+)`[^|]* \| `([\w.]+)` \|$", re.MULTILINE)
GONE = re.compile(r"^\| `([\w.]+)`[^|]* \| not installed: [^|]* \|$", re.MULTILINE)


def moved() -> list[tuple[str, str]]:
    return ROW.findall(CHANGELOG.read_text(encoding="utf-8"))


def test_the_table_lists_the_moves() -> None:
    pairs = dict(moved())
    assert len(pairs) >= 20
    assert pairs["powertrip_env.baselines.evaluate"] == "powertrip_env.harness.evaluation.evaluate"


@pytest.mark.parametrize(("old", "new"), moved())
def test_a_moved_module_imports_from_its_new_path_only(old: str, new: str) -> None:
    if not new.endswith("__main__"):  # importing a __main__ would run the command
        importlib.import_module(new)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def removed() -> list[str]:
    return GONE.findall(CHANGELOG.read_text(encoding="utf-8"))


@pytest.mark.parametrize("old", removed())
def test_a_module_that_left_the_package_no_longer_imports(old: str) -> None:
    """The maintainers' writers are not installed: the old path must not import either."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_table_lists_what_left_the_package() -> None:
    assert {"powertrip_env.baselines.docs_site", "powertrip_env.agents.pretrain"} <= set(removed())
