"""Fixtures of the reliability tier: small channels (sharded and plain) and a resolve runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envlock.cli import run
from tests.channelbuilder import build_channel

# CUDA 12.1 (table), candidates 12.1 → 12.0 → 12.2. The conda side is what these tests fault: toolchain
# only, and one fixed cutoff so two runs of the same inputs give the same bytes.
TORCH = ("--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--exclude-newer", "2026-01-01T00:00:00Z")
ENV = "torch2.3.0-cu121"
LOCK = f"locks/{ENV}/conda-lock.yml"
MINORS = ["12.0", "12.1", "12.2"]


@pytest.fixture(scope="session")
def small_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding conda-forge/ for linux-64 with repodata.json, .zst and shards (what rattler prefers)."""
    root = tmp_path_factory.mktemp("rel-sharded")
    build_channel(root, cuda_minors=MINORS, subdirs=("linux-64",), with_cuda11=False, pythons=("3.11",))
    return root


@pytest.fixture(scope="session")
def plain_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same channel without shards: rattler falls back to repodata.json.zst, then repodata.json."""
    root = tmp_path_factory.mktemp("rel-plain")
    build_channel(root, cuda_minors=MINORS, subdirs=("linux-64",), with_cuda11=False, pythons=("3.11",), write_shards=False)
    return root


def resolve_json(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    """`envlock resolve … --json` in-process: (exit code, the JSON document on stdout)."""
    code = run(["resolve", *TORCH, *args, "--project-dir", str(project), "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (hidden ones included) → its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def previous_project(small_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding a previous lock (resolved once from file://, then marked so a rewrite shows)."""
    import os

    project = tmp_path_factory.mktemp("previous")
    old = os.environ.get("ENVLOCK_CACHE_DIR")
    os.environ["ENVLOCK_CACHE_DIR"] = str(tmp_path_factory.mktemp("previous-cache"))
    try:
        mirror = f"conda-forge={(small_root / 'conda-forge').as_uri()}"
        code = run(["resolve", *TORCH, "--mirror", mirror, "--project-dir", str(project), "--json"])
    finally:
        if old is None:
            os.environ.pop("ENVLOCK_CACHE_DIR", None)
        else:
            os.environ["ENVLOCK_CACHE_DIR"] = old
    assert code == 0
    lock = project / LOCK
    lock.write_text(lock.read_text() + "# previous lock: a rewrite drops this line\n")
    return project


@pytest.fixture
def project(previous_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the previous project, with an empty cache of its own (faults are not masked by a cache)."""
    dst = tmp_path / "project"
    shutil.copytree(previous_project, dst)
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    return dst

