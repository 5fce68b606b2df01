"""Atomic writes: a file (or a set of files) replaced whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envlock.seams.fs import write_all_atomic, write_atomic


def test_write_atomic_skips_identical_content(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    assert write_atomic(path, "a\n") is True
    mtime = path.stat().st_mtime_ns
    assert write_atomic(path, "a\n") is False
    assert path.stat().st_mtime_ns == mtime
    assert write_atomic(path, "b\n") is True and path.read_text() == "b\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # no temp files left behind


def test_write_all_atomic_leaves_no_temp_files_on_failure(tmp_path: Path) -> None:
    class Boom(str):
        def encode(self, *a: object, **k: object) -> bytes:  # type: ignore[override]
            raise OSError("disk full")

    (tmp_path / "a").write_text("old")
    with pytest.raises(OSError):
        write_all_atomic([(tmp_path / "a", "new"), (tmp_path / "b", Boom("x"))])
    assert (tmp_path / "a").read_text() == "old"  # nothing renamed before every file was staged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_written_files_get_normal_permissions_not_mkstemps_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_all_atomic([(tmp_path / "new.yml", "x\n")])
        assert (tmp_path / "new.yml").stat().st_mode & 0o777 == 0o644
        (tmp_path / "kept.yml").write_text("a")
        (tmp_path / "kept.yml").chmod(0o640)
        write_atomic(tmp_path / "kept.yml", "b")
        assert (tmp_path / "kept.yml").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
