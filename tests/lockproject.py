"""Helpers for tests of `envlock lock/check/update/diff`: real projects resolved against the test channel.

Plain functions (no fixtures) so test_lifecycle, test_check and test_diff share them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import run
from envlock.usecases.resolve import ResolveRequest, Tables, resolve
from tests.output import unfolded

PLATFORMS = ("linux-64", "linux-aarch64", "win-64")
NAME = "torch2.3.0-cu121"


def make_project(
    dest: Path,
    channel: Path,
    *,
    torch: str = "2.3.0",
    platforms: tuple[str, ...] = PLATFORMS,
    name: str | None = None,
    toolchain_only: bool = True,
    tables: Tables | None = None,
    **kwargs: Any,
) -> Path:
    """Resolve one environment into dest (created) against a test channel dir; return dest.

    `tables`: the tables the pure core is handed instead of envlock's own (a lock made under other rules).
    Toolchain-only by default: the lifecycle tests lock win-64, where the default index's torch is a
    CPU build (a full environment there needs a +cuXYZ torch); tests/test_pypi_part.py covers the full one.
    """
    dest.mkdir(parents=True, exist_ok=True)
    resolve(
        ResolveRequest(
            torch=torch,
            platforms=platforms,
            mirrors={"conda-forge": channel.as_uri()},
            project_dir=dest,
            name=name,
            toolchain_only=toolchain_only,
            **kwargs,
        ),
        tables=tables,
    )
    return dest


def copy_project(template: Path, dest: Path) -> Path:
    """A copy of a resolved project (so each test may edit its own)."""
    shutil.copytree(template, dest, symlinks=True)
    return dest


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root with its bytes and mtime_ns: equal snapshots mean nothing was rewritten."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def spec_file(project: Path, name: str = NAME) -> Path:
    return project / "environments" / f"{name}.yml"


def lock_file(project: Path, name: str = NAME) -> Path:
    return project / "locks" / name / "conda-lock.yml"


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace text in a file; fail when it is not there (a test that edits nothing proves nothing)."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr with its `error:`/`hint:`/`warning:` lines unfolded,
    as tests/output.py reads them; no line of it was wider than 80 columns)."""
    code = run(list(args))
    out = capsys.readouterr()
    assert max((len(ln) for ln in out.err.splitlines()), default=0) <= 80, out.err
    return code, out.out, unfolded(out.err)


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = cli(capsys, *args, "--json")
    assert out.strip(), err
    return code, json.loads(out)


def package_blocks(lock_text: str) -> list[str]:
    """The package entries of a conda-lock.yml as they are written (one text block per entry)."""
    section = lock_text[lock_text.index("\npackage:\n") + len("\npackage:\n") :]
    blocks: list[str] = []
    for line in section.splitlines(keepends=True):
        if line.startswith("- "):
            blocks.append(line)
        else:
            blocks[-1] += line
    return blocks
