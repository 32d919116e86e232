"""Broken links of the documentation: README.md and every page under ``docs/``.

The pages are read two ways, as a MkDocs site and as Markdown files on GitHub, and a relative
link must work in both: it must land on a file that exists and, with a ``#fragment``, on a
heading of that file. A page of the site must also stay inside ``docs/``, which is all the site
holds. ``mkdocs build --strict`` checks the same for the site; this check needs no MkDocs, so
``powertrip docs --check`` and the tests run it anywhere, and it names the file and the line.

Anchors are GitHub's (and the site's, which mkdocs.yml sets to the same rule): the heading's
text in lower case, without its Markdown, every character but letters, digits, ``_``, ``-``
and spaces dropped, and spaces made ``-``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

LINK = re.compile(r"(!?\[[^\]]*\])\(([^()\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
EXPLICIT_ID = re.compile(r"\{:?\s*#([\w-]+)[^}]*\}\s*$")
EXTERNAL = ("http://", "https://", "mailto:")
DOCS = "docs"
SKIPPED = ("hooks",)  # build tooling under docs/, left out of the site (mkdocs.yml)


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def without_code(text: str) -> str:
    """``text`` with its code blanked out, every other character where it was: fenced blocks
    become empty lines and inline code spaces, so what looks like a link inside code is not
    taken for one, and offsets and line numbers still point into ``text``."""
    lines = text.split("\n")
    prose = dict(prose_lines(text))
    kept = [prose.get(number, "") for number in range(1, len(lines) + 1)]
    kept = [
        line + " " * (len(original) - len(line)) for line, original in zip(kept, lines, strict=True)
    ]
    return re.sub(r"`[^`\n]+`", lambda m: " " * len(m.group(0)), "\n".join(kept))


def links(text: str) -> Iterator[re.Match[str]]:
    """The Markdown links and images of ``text``'s prose (positions are ``text``'s)."""
    yield from LINK.finditer(without_code(text))


def slug(heading: str) -> str:
    """The anchor of a heading (see the module docstring)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]*>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page defines: its headings' slugs (and their numbered repeats) and the
    ids given with ``{#id}``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if match is None:
            continue
        title = match.group(1)
        explicit = EXPLICIT_ID.search(title)
        if explicit:
            found.add(explicit.group(1))
            continue
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.update([base] if count == 0 else [f"{base}-{count}", f"{base}_{count}"])
    return found


def pages(root: Path) -> list[Path]:
    """README.md and the site's Markdown pages, in a stable order."""
    docs = root / DOCS
    found = [
        path
        for path in sorted(docs.rglob("*.md"))
        if not set(path.relative_to(docs).parts) & set(SKIPPED)
    ]
    readme = root / "README.md"
    return [readme, *found] if readme.is_file() else found


def _check(path: Path, target: str, root: Path, cache: dict[Path, set[str]]) -> str | None:
    """What is wrong with one link of ``path``, or None."""
    file_part, _, fragment = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path.resolve()
    in_site = path.resolve().is_relative_to((root / DOCS).resolve())
    if in_site and not dest.is_relative_to((root / DOCS).resolve()):
        return f"{target}: outside docs/, which is all the site holds"
    if not dest.is_relative_to(root.resolve()):
        return f"{target}: outside the repository"
    if not dest.is_file():
        return f"{target}: no such file"
    if fragment and dest.suffix == ".md":
        if dest not in cache:
            cache[dest] = anchors(dest.read_text(encoding="utf-8"))
        if fragment not in cache[dest]:
            return f"{target}: {dest.name} has no heading with the anchor #{fragment}"
    return None


def broken_links(root: Path) -> list[str]:
    """``file:line: target: what is wrong`` for every relative link that does not land."""
    cache: dict[Path, set[str]] = {}
    found = []
    for path in pages(root):
        text = path.read_text(encoding="utf-8")
        for match in links(text):
            target = match.group(2)
            if target.startswith(EXTERNAL):
                continue
            problem = _check(path, target, root, cache)
            if problem:
                number = text.count("\n", 0, match.start(2)) + 1
                found.append(f"{path.relative_to(root)}:{number}: {problem}")
    return found
