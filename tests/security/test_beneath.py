"""envlock/seams/beneath.py: envlock's own writes into a prefix never follow a symlink out of it, whichever component of
the path the link is (a directory on the way, or the file's own name), however deep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envlock.seams import beneath
from envlock.errors import EnvCreateError


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "prefix", tmp_path / "outside"
    (root / "etc" / "conda").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.sh").write_text("old\n")
    return root, outside


@pytest.mark.parametrize("link,rel", [
    ("etc/conda/activate.d", "etc/conda/activate.d/envlock-cuda.sh"),  # the last directory
    ("etc/conda", "etc/conda/activate.d/envlock-cuda.sh"),  # one above
    ("etc", "etc/conda/activate.d/envlock-cuda.sh"),  # the first component
    ("conda-meta", "conda-meta/envlock"),
])
def test_a_directory_link_on_the_way_is_refused(link: str, rel: str, layout: tuple[Path, Path]) -> None:
    root, outside = layout
    target = root / link
    if target.exists():
        os.rename(target, outside / "moved")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside)
    with pytest.raises(EnvCreateError, match="symlink or not a directory"):
        beneath.write_bytes(root, rel, b"pwned\n")
    assert sorted(p.name for p in outside.iterdir()) in (["keep.sh"], ["keep.sh", "moved"])
    assert (outside / "keep.sh").read_text() == "old\n"


def test_a_link_in_the_files_place_is_replaced_not_followed(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "bin").mkdir()
    (root / "bin" / "torchrun").symlink_to(outside / "keep.sh")
    beneath.write_bytes(root, "bin/torchrun", b"#!/bin/sh\n", mode=0o755)
    assert (outside / "keep.sh").read_text() == "old\n"
    assert not (root / "bin" / "torchrun").is_symlink() and (root / "bin" / "torchrun").read_bytes() == b"#!/bin/sh\n"
    assert (root / "bin" / "torchrun").stat().st_mode & 0o777 == 0o755


def test_a_relative_chain_of_links_is_refused_too(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("../outside")
    with pytest.raises(EnvCreateError):
        beneath.write_bytes(root, "a/x", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["keep.sh"]


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/x", ""])
def test_a_path_that_is_not_inside_is_refused(rel: str, layout: tuple[Path, Path]) -> None:
    with pytest.raises(EnvCreateError):
        beneath.write_bytes(layout[0], rel, b"x")


def test_unlink_and_chmod_leave_a_links_target_alone(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "conda-meta").mkdir()
    (root / "conda-meta" / "x.json").symlink_to(outside / "keep.sh")
    (outside / "keep.sh").chmod(0o600)
    beneath.chmod_files(root, "conda-meta", 0o644)
    assert (outside / "keep.sh").stat().st_mode & 0o777 == 0o600
    beneath.unlink(root, "conda-meta/x.json")
    assert not os.path.lexists(root / "conda-meta" / "x.json") and (outside / "keep.sh").is_file()
