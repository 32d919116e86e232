"""Sizes that keep the code easy to move in: no module over 500 lines of code, no function over 80.

A module past 500 lines of code has grown a second job; a function past 80 holds steps that want
names of their own. The module cap counts lines that hold code (``code_lines``): a docstring, a
comment or a blank line says why and costs nothing to move, so a cap that counted them would
reward cutting explanations, or cutting a module where it happened to reach the line, not where
its concerns part. The function cap counts every line of the function, as a reader scrolls it.
Both run over every folder of code (``layout.code_folders``).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from layout import code_folders

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = tuple(code_folders())
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# tokens that are not code: layout and comments
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def _modules() -> list[Path]:
    return [
        path
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring: the module's, each class's and each function's."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """Lines of ``source`` that hold a code token: not blank, not only a comment, not part of a
    docstring. A line of code with a trailing comment counts; a multi-line string that is not a
    docstring (a value the code uses) counts every line it spans."""
    docstrings = _docstring_lines(ast.parse(source))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function or method of ``source`` over ``limit``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return found


def test_no_module_is_over_500_lines_of_code() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := code_lines(path.read_text(encoding="utf-8"))) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines of code: {long}"


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


def test_code_lines_leave_out_docstrings_comments_and_blank_lines() -> None:
    source = '''"""A module docstring
over two lines."""

# a comment
import os  # a trailing comment keeps its line


class A:
    """A class docstring."""

    def m(self):
        """A method's
        docstring."""
        return os.sep


TEXT = """a string the code uses
is code, every line of it"""
CALL = max(
    1,
    2,
)
'''
    # import, class, def, return, TEXT's 2 lines, CALL's 4 lines
    assert code_lines(source) == 10
    assert code_lines("") == 0


def test_the_module_cap_fails_on_501_lines_of_code_only() -> None:
    doc = '"""' + "\n".join(["words"] * 600) + '"""\n'
    code = "".join(f"x{i} = {i}\n" for i in range(MAX_MODULE_LINES))
    assert code_lines(doc + code) == MAX_MODULE_LINES  # 1100 lines, 500 of them code: allowed
    assert code_lines(doc + code + "# note\n\nlast = 0\n") == MAX_MODULE_LINES + 1  # over
