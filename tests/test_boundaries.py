"""What a package keeps to itself: no private name crosses packages, no slot leaves the kernel.

A leading underscore says "only this package relies on me": its owner may rename it, change its
arguments or fold it away without looking further. A private name imported from another package
breaks that promise silently, so a helper two packages share gets a public name and a docstring
(``power_data.GridCsv`` for ``carbon_data``, ``statistics.bootstrap_seed`` for the scores).

The kernel packs its state, records and info into float64 arrays whose slots
``powertrip_env.dynamics.layout`` numbers. Above the kernel, code reads them by name
(``SimState``, ``RoundResult``, ``first_info``, or a field's name in the ``*_FIELDS`` tuples),
so a new slot or a reordering stays inside ``dynamics/``. Tests may reach into both: they check
the insides.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from layout import ROOT, code_folders

KERNEL = "powertrip_env.dynamics"


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the folders of code, as installed."""
    out = {}
    for folder, package in code_folders().items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "__pycache__" not in parts:
                out[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return out


def _package(module: str, modules: dict[str, Path]) -> str:
    """The package a module belongs to: itself for an ``__init__``, else its parent."""
    path = modules.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def private_imports(source: str, module: str, modules: dict[str, Path]) -> Iterator[str]:
    """``target._name`` for every private name ``source`` (module ``module``) takes from another
    package: ``from target import _name``, or ``alias._name`` where ``alias`` names a module of
    another package it imported."""
    tree = ast.parse(source)
    own = _package(module, modules)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    if node.module in modules and _package(node.module, modules) != own:
                        yield f"{node.module}.{alias.name}"
                elif target in modules:
                    aliases[alias.asname or alias.name] = target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            target = aliases[node.value.id]
            if _package(target, modules) != own:
                yield f"{target}.{node.attr}"


def slot_indices() -> frozenset[str]:
    """The names ``layout`` numbers slots with: every name unpacked from a ``range``, and the
    first joined slot."""
    tree = ast.parse((ROOT / "powertrip_env" / "dynamics" / "layout.py").read_text("utf-8"))
    names = {"JOINED"}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "range"
        ):
            for target in node.targets:
                if isinstance(target, ast.Tuple):
                    names.update(e.id for e in target.elts if isinstance(e, ast.Name))
    return frozenset(names)


def slot_reads(source: str, slots: frozenset[str]) -> Iterator[str]:
    """Every slot index ``source`` imports from the kernel or reads as ``dynamics.X`` or
    ``layout.X``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(KERNEL):
            yield from (a.name for a in node.names if a.name in slots)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in slots
            and isinstance(node.value, ast.Name)
            and node.value.id in ("dynamics", "layout")
        ):
            yield node.attr


def test_no_private_name_crosses_a_package() -> None:
    modules = _modules()
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for module, path in modules.items()
        for name in private_imports(path.read_text("utf-8"), module, modules)
    ]
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def test_no_slot_index_is_read_above_the_kernel() -> None:
    slots = slot_indices()
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for module, path in _modules().items()
        if not (module == KERNEL or module.startswith(KERNEL + "."))
        for name in slot_reads(path.read_text("utf-8"), slots)
    ]
    assert not found, "slot indices read above the kernel (read by name):\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for() -> None:
    modules = {
        "p.a": Path("p/a.py"),
        "p.b": Path("p/b.py"),
        "q": Path("q/__init__.py"),
        "q.c": Path("q/c.py"),
    }
    source = "from p.a import _x, y\nfrom p import a as m\nimport q.c as qc\nqc._z\nm._w\n"
    assert list(private_imports(source, "p.b", modules)) == ["q.c._z"]  # p.a is of its package
    assert list(private_imports(source, "q.c", modules)) == ["p.a._x", "p.a._w"]
    slots = slot_indices()
    assert {"I_ROUND_S", "R_TERMINATED", "TIME", "JOINED"} <= slots
    assert not {"KEY_LIMIT", "J_PER_KWH", "RECORD_FIELDS"} & slots
    reads = "from powertrip_env.dynamics import R_CUT, RECORD_FIELDS\nx = dynamics.TIME\n"
    assert list(slot_reads(reads, slots)) == ["R_CUT", "TIME"]
