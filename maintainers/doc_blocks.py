"""The documentation's generated blocks: ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``.

Tables of results are harness output, never typed by hand. Each sits between the two markers of
its name, in README.md or in one page of ``docs/`` (each track's few lines in the README, the
boards on docs/benchmark.md, the per-ID tables on docs/evaluation.md, and so on): a block can
move from page to page as the documentation is reorganised, and the tools that regenerate it
(``powertrip readme-tables``, ``powertrip pretrain --table``) and the site's generator, which
reads them (``powertrip docs``), find it wherever it is now. The files searched are a README
and the Markdown pages under the ``docs/`` folder beside it, so ``--readme PATH`` still names the
checkout to update. A name must be held by exactly one file: two copies of one generated table
could drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

from powertrip_env.atomic import write_text

DOCS = "docs"  # the site's pages, beside the README


def begin(name: str) -> str:
    """The line that opens the block of ``name`` (an HTML comment: invisible where rendered)."""
    return f"<!-- results:{name} -->"


def end(name: str) -> str:
    """The line that closes the block of ``name``."""
    return f"<!-- /results:{name} -->"


MARKER_LINE = re.compile(r"^<!-- /?results:\S+ -->\n", re.MULTILINE)  # any block's begin or end


def without_markers(text: str) -> str:
    """``text`` with every block's marker lines removed, its tables kept: a page generated from
    a file that holds blocks shows them without claiming to hold them."""
    return MARKER_LINE.sub("", text)


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"({re.escape(begin(name))}\n)(.*?)({re.escape(end(name))})", re.DOTALL)


def has_block(text: str, name: str) -> bool:
    """Whether ``text`` holds the block of ``name``, both markers in order."""
    return _pattern(name).search(text) is not None


def splice(text: str, name: str, table: str) -> str:
    """Replace the block between the markers of ``name`` in ``text`` with ``table``."""
    if not has_block(text, name):
        raise ValueError(f"no '{begin(name)}' ... '{end(name)}' block")
    return _pattern(name).sub(lambda m: m.group(1) + table.rstrip("\n") + "\n" + m.group(3), text)


def contents(text: str, name: str) -> str:
    """What the block of ``name`` in ``text`` holds, without its markers."""
    match = _pattern(name).search(text)
    if match is None:
        raise ValueError(f"no '{begin(name)}' ... '{end(name)}' block")
    return match.group(2)


def doc_files(readme: Path) -> list[Path]:
    """The files a block may live in: ``readme`` and the pages under ``docs/`` beside it."""
    pages = sorted((readme.parent / DOCS).rglob("*.md"))
    return [readme, *pages] if readme.is_file() else pages


def holder(name: str, readme: Path) -> Path:
    """The one file among `doc_files` that holds the block of ``name``.

    Raises ``ValueError`` naming the files searched when none holds it, and the files when
    more than one does.
    """
    files = doc_files(readme)
    found = [path for path in files if has_block(path.read_text(encoding="utf-8"), name)]
    if len(found) == 1:
        return found[0]
    where = f"{readme} or the pages under {readme.parent / DOCS}"
    if not found:
        raise ValueError(f"no '{begin(name)}' ... '{end(name)}' block in {where}")
    raise ValueError(f"'{begin(name)}' is in {len(found)} files: {', '.join(map(str, found))}")


def read_block(name: str, readme: Path) -> str:
    """The contents of the block of ``name``, wherever it lives beside ``readme``."""
    return contents(holder(name, readme).read_text(encoding="utf-8"), name)


class BlockFiles:
    """The files that hold some blocks, spliced in memory and written together at the end.

    A tool checks every block it will fill before its first long run (`locate`), fills them
    one by one as results come in (`splice`), and writes each changed file once (`write`): a
    stop half-way leaves every page as it was.
    """

    def __init__(self, readme: Path) -> None:
        self.readme = readme
        self._where: dict[str, Path] = {}
        self._texts: dict[Path, str] = {}
        self._changed: set[Path] = set()

    def locate(self, *names: str) -> None:
        """Find the file of each name; ``ValueError`` (see `holder`) for the first missing."""
        for name in names:
            path = holder(name, self.readme)
            self._where[name] = path
            self._texts.setdefault(path, path.read_text(encoding="utf-8"))

    def splice(self, name: str, table: str) -> None:
        """Put ``table`` in the block of ``name``, in memory until `write`."""
        if name not in self._where:
            self.locate(name)
        path = self._where[name]
        self._texts[path] = splice(self._texts[path], name, table)
        self._changed.add(path)

    def write(self) -> list[Path]:
        """Write every file a block of which was spliced; returns them."""
        for path in sorted(self._changed):
            write_text(path, self._texts[path])
        return sorted(self._changed)
