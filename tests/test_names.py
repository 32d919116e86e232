"""One meaning per word (issue 50): no two classes of the project share a name, and
``DecisionView``'s fields are grouped, each group and each field saying what it is.

Two classes once shared ``Unknowns``: the scenario's spreads (``scenario.types.UnknownSpreads``)
and the factors drawn from them (``dynamics.UnknownFactors``); a reader of either could not tell
which one a signature meant.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections import defaultdict

from layout import ROOT, code_folders

from powertrip_env import view
from powertrip_env.view import FIELD_GROUPS, DecisionView

HEADER = re.compile(r"^    # ---- (\w+): ")


def test_no_two_classes_of_the_project_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for folder in code_folders():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    assert {"UnknownSpreads", "UnknownFactors", "DecisionView"} <= set(where)  # the scan saw them
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"classes named twice: {twice}"


def test_the_field_groups_list_every_field_once_in_the_class_order() -> None:
    names = [f.name for f in dataclasses.fields(DecisionView)]
    grouped = [name for group in FIELD_GROUPS.values() for name in group]
    assert len(grouped) == len(set(grouped)), "a field is in two groups"
    assert grouped == names


def source_groups() -> dict[str, list[str]]:
    """The class body's ``# ---- group:`` comments and the fields under each; every field line
    must carry its own comment (its unit or kind)."""
    lines = inspect.getsource(DecisionView).splitlines()
    (body,) = ast.parse("\n".join(lines)).body
    groups: dict[str, list[str]] = {}
    current, seen = None, 0
    for node in body.body:
        if not isinstance(node, ast.AnnAssign):
            continue
        name = node.target.id  # type: ignore[attr-defined]
        for line in lines[seen : node.lineno - 1]:
            if header := HEADER.match(line):
                current = header.group(1)
                groups[current] = []
        seen = node.lineno
        assert current is not None, f"{name} comes before any group's comment"
        assert "  # " in lines[node.lineno - 1], f"{name} has no comment saying what it holds"
        groups[current].append(name)
    return groups


def test_the_class_comments_group_the_fields_as_the_mapping_does() -> None:
    assert source_groups() == {name: list(fields) for name, fields in FIELD_GROUPS.items()}


def test_the_module_exports_the_groups() -> None:
    assert "FIELD_GROUPS" in view.__all__
