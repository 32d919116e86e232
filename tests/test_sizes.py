"""Sizes that keep the code easy to move in: no module over 500 lines, no function over 80.

A module past 500 lines has grown a second job; a function past 80 holds steps that want names
of their own. Both limits count every line, docstrings and comments included, over every folder of
code (``layout.code_folders``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from layout import code_folders

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = tuple(code_folders())
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return [
        path
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function or method of ``source`` over ``limit``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return found


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for path in _modules()
        for name, line, length in long_functions(path.read_text(encoding="utf-8"), 80)
    ]
    assert not long, "functions over 80 lines:\n" + "\n".join(long)


def test_the_measure_counts_what_it_says() -> None:
    body = "\n".join(f"    x = {i}" for i in range(80))
    assert long_functions(f"def f():\n{body}\n", 80) == [("f", 1, 81)]
    assert long_functions(f"def f():\n{body}\n", 81) == []
    nested = f"class A:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    assert long_functions(nested, 80) == [("m", 2, 81)]
    assert _modules() and all(p.suffix == ".py" for p in _modules())
