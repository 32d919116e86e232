"""The repository stands on its own: nothing it ships points outside it.

A user clones this repository alone. A link or a path to a file beside the checkout (a sibling
folder, a design note the project does not carry) is a dead end for them, and inside the
installed wheel such a path means nothing at all. Every relative Markdown link must also land on
a file that exists in the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".csv", ".yaml", ".yml", ".txt", ".cfg", ".ini", ""}
# Names of outside documents earlier versions pointed at, and any path climbing out of the root.
OUTSIDE = re.compile(r"\.\./shared|\bshared/|\bDESIGN\.md\b|\bREFERENCES\.md\b|\bSTYLE\.md\b")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def tracked_files() -> list[Path]:
    """The repository's tracked text files (every file, outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split("\n")
        files = [ROOT / line for line in out if line]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    return [
        f
        for f in files
        if f.is_file()
        and f.suffix in TEXT_SUFFIXES
        and f.name != Path(__file__).name
        and f.stat().st_size < 5_000_000
    ]


FILES = tracked_files()


def test_the_repository_has_files_to_check() -> None:
    assert len(FILES) > 50
    assert ROOT / "README.md" in FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_refers_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    hits = [
        (n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)
    ]
    assert not hits, f"{path.relative_to(ROOT)} refers outside the repository: {hits[:3]}"


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.suffix == ".md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_relative_markdown_links_land_on_files_in_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.relative_to(ROOT)}: {target} leaves the repo"
        assert resolved.exists(), f"{path.relative_to(ROOT)}: link {target} has no file"
