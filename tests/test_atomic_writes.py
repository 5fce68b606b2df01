"""Atomic writes: a file (or a set of files) replaced whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envlock.seams.fs import write_all_atomic, write_atomic


def test_write_atomic_skips_identical_content(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    assert write_atomic(path, "a\n", root=tmp_path) is True
    mtime = path.stat().st_mtime_ns
    assert write_atomic(path, "a\n", root=tmp_path) is False
    assert path.stat().st_mtime_ns == mtime
    assert write_atomic(path, "b\n", root=tmp_path) is True and path.read_text() == "b\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # no temp files left behind


def test_write_all_atomic_leaves_no_temp_files_on_failure(tmp_path: Path) -> None:
    class Boom(str):
        def encode(self, *a: object, **k: object) -> bytes:  # type: ignore[override]
            raise OSError("disk full")

    (tmp_path / "a").write_text("old")
    with pytest.raises(OSError):
        write_all_atomic([(tmp_path / "a", "new"), (tmp_path / "b", Boom("x"))], root=tmp_path)
    assert (tmp_path / "a").read_text() == "old"  # nothing renamed before every file was staged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_written_files_get_normal_permissions_not_mkstemps_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_all_atomic([(tmp_path / "new.yml", "x\n")], root=tmp_path)
        assert (tmp_path / "new.yml").stat().st_mode & 0o777 == 0o644
        (tmp_path / "kept.yml").write_text("a")
        (tmp_path / "kept.yml").chmod(0o640)
        write_atomic(tmp_path / "kept.yml", "b", root=tmp_path)
        assert (tmp_path / "kept.yml").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_a_record_written_beneath_a_prefix_is_synced_only_when_it_replaces_one(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """envlock/seams/beneath.py follows envlock/seams/fs.py's rule: the temp file replacing a record (conda-meta/envlock's
    final state over its `incomplete` one) is fsync'd before the rename; a new record is not (nothing to lose)."""
    from envlock.seams import beneath

    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    beneath.write_json(tmp_path, "conda-meta/envlock", {"state": "incomplete"})
    assert synced == [] and (tmp_path / "conda-meta" / "envlock").is_file()
    beneath.write_json(tmp_path, "conda-meta/envlock", {"state": "complete!"})
    assert len(synced) == 1 and synced[0] == len(b'{\n  "state": "complete!"\n}\n')
    assert (tmp_path / "conda-meta" / "envlock").read_text() == '{\n  "state": "complete!"\n}\n'
    (tmp_path / "conda-meta" / "other").symlink_to(tmp_path / "nowhere")  # a link in the name's place counts
    beneath.write_json(tmp_path, "conda-meta/other", {})
    assert len(synced) == 2 and not (tmp_path / "conda-meta" / "other").is_symlink()
    assert sorted(p.name for p in (tmp_path / "conda-meta").iterdir()) == ["envlock", "other"]  # no temp left
