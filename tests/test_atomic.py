"""Atomic writes: an interrupted write leaves the previous file, never a truncated one."""

from __future__ import annotations

import pytest

from powertrip_env.atomic import atomic_path, write_text


def test_write_text_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "summary.md"
    write_text(target, "old\n")
    write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "best_model.zip"
    write_text(target, "good")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_text("half of a")
        raise KeyboardInterrupt
    assert target.read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_model.zip"]


def test_the_temporary_keeps_the_suffix_writers_look_at(tmp_path):
    with atomic_path(tmp_path / "sub" / "tta.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path / "sub"
        tmp.write_bytes(b"png")
    assert (tmp_path / "sub" / "tta.png").read_bytes() == b"png"
