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


def test_force_never_empties_a_folder_that_holds_more_than_a_result_set(tmp_path, monkeypatch):
    from powertrip_env.atomic import OutputDirError, result_dir

    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "model.zip").write_bytes(b"keep")
    with pytest.raises(OutputDirError, match="'sub'"), result_dir(out, force=True) as tmp:
        (tmp / "summary.md").write_text("new")
    assert (out / "sub" / "model.zip").read_bytes() == b"keep"
    monkeypatch.chdir(out / "sub")
    for where in (out / "sub", out):  # the working directory and a parent of it
        with pytest.raises(OutputDirError, match=r"refusing|working directory"):
            with result_dir(where, force=True):
                pass
    assert (out / "sub" / "model.zip").read_bytes() == b"keep"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left behind


def test_a_failed_rename_puts_the_earlier_results_back(tmp_path, monkeypatch):
    import os

    from powertrip_env import atomic

    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.md").write_text("old")
    real = os.replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # the new set onto --out
            raise OSError("disk gone")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", flaky)
    with pytest.raises(atomic.WriteError, match="disk gone"):
        with atomic.result_dir(out, force=True) as tmp:
            (tmp / "summary.md").write_text("new")
    assert (out / "summary.md").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("earlier", [True, False], ids=["over-old-results", "fresh-out"])
def test_a_full_disk_is_one_write_error_naming_the_folder(tmp_path, earlier):
    """An ``OSError`` while the set is written (a full disk) becomes a ``WriteError``, an
    ``OutputDirError`` whose message names the folder and the error: what the tools print as
    one line, with the exit code of their other write failures."""
    from powertrip_env import atomic

    out = tmp_path / "out"
    if earlier:
        out.mkdir()
        (out / "summary.md").write_text("old")
    with pytest.raises(atomic.WriteError) as caught:
        with atomic.result_dir(out, force=True) as tmp:
            (tmp / "episodes.csv").write_text("new")
            raise OSError(28, "No space left on device", str(tmp / "tta.png"))
    assert isinstance(caught.value, atomic.OutputDirError)
    assert str(caught.value) == (
        f"results not written to {str(out)!r}: [Errno 28] No space left on device; what the "
        "folder held is unchanged"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if earlier else [])
    if earlier:
        assert [p.name for p in out.iterdir()] == ["summary.md"]
        assert (out / "summary.md").read_text() == "old"
