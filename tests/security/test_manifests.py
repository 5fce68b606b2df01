"""Manifests of wrong types (issue 22, smaller items): a pack archive's envlock-pack.json and a mirror
directory's envlock-mirror.json are written by whoever built or can write them. `envlock_pack_version: "x"`
ended in `internal error: ValueError`; other shapes in TypeError, AttributeError, RecursionError or
OverflowError. Each is now one `error:` line, with nothing installed and nothing left behind.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.security.inputs import TOOLCHAIN, assert_one_error, copy, envlock, toolchain_template

__all__ = ["toolchain_template"]  # a fixture used here

GOOD = {"envlock_pack_version": 1, "envlock_version": "0.1.0", "name": "x", "platform": "linux-64",
        "lock": "locks/x/conda-lock.yml", "channels": {"https://conda.anaconda.invalid/conda-forge": "channels/c"},
        "pypi": None, "members": {"locks/x/conda-lock.yml": "0" * 64}}

# Each case: the manifest's text (JSON) as the archive's first member.
PACK_MANIFESTS = {
    "version-text": json.dumps({**GOOD, "envlock_pack_version": "x"}),
    "version-list": json.dumps({**GOOD, "envlock_pack_version": [1]}),
    "version-infinite": json.dumps(GOOD).replace('"envlock_pack_version": 1', '"envlock_pack_version": 1e999'),
    "version-bool": json.dumps({**GOOD, "envlock_pack_version": True}),
    "lock-list": json.dumps({**GOOD, "lock": ["locks/x/conda-lock.yml"]}),
    "lock-number": json.dumps({**GOOD, "lock": 7}),
    "members-list": json.dumps({**GOOD, "members": ["locks/x/conda-lock.yml"]}),
    "member-hash-object": json.dumps({**GOOD, "members": {"locks/x/conda-lock.yml": {"sha256": "0"}}}),
    "channels-list": json.dumps({**GOOD, "channels": ["channels/c"]}),
    "channel-dir-number": json.dumps({**GOOD, "channels": {"https://x.invalid/c": 1}}),
    "platform-object": json.dumps({**GOOD, "platform": {"linux-64": 1}}),
    "pypi-list": json.dumps({**GOOD, "pypi": ["pypi/simple"]}),
    "top-level-list": json.dumps([GOOD]),
    "nested-100k": '{"envlock_pack_version": 1, "members": {}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "not-utf8": '{"envlock_pack_version": 1, "name": "\udcff"}',
}


def _archive(path: Path, manifest: str) -> Path:
    data = manifest.encode("utf-8", errors="surrogateescape")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("envlock-pack.json")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("case", sorted(PACK_MANIFESTS))
def test_a_pack_manifest_of_wrong_types_is_one_error(case: str, tmp_path: Path) -> None:
    archive = _archive(tmp_path / "env.tar", PACK_MANIFESTS[case])
    done = envlock("unpack", str(archive), "-p", str(tmp_path / "env"), env={"ENVLOCK_CACHE_DIR": str(tmp_path / "c")},
                   timeout=60)
    assert_one_error(done, str(archive))
    assert not (tmp_path / "env").exists()
    assert not list((tmp_path / "c").glob("unpack/*"))


def test_an_oversized_pack_manifest_is_refused_unread(tmp_path: Path) -> None:
    """A manifest member of 80 MB (64 MiB is the cap): refused before it is read into memory."""
    archive = tmp_path / "env.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("envlock-pack.json")
        info.size = 80_000_000
        tf.addfile(info, io.BytesIO(b'{"x": "' + b"y" * (info.size - 10) + b'"}   '))
    done = envlock("unpack", str(archive), "-p", str(tmp_path / "env"), env={"ENVLOCK_CACHE_DIR": str(tmp_path / "c")},
                   timeout=60)
    assert_one_error(done, "64 MiB")
    assert not (tmp_path / "env").exists()


MIRROR_MANIFESTS = {
    "version-text": {"envlock_mirror_version": "x"},
    "version-list": {"envlock_mirror_version": [2]},
    "locks-list": {"envlock_mirror_version": 1, "locks": [1, 2]},
    "lock-entry-text": {"envlock_mirror_version": 1, "locks": {TOOLCHAIN: "x"}},
    "channels-text": {"envlock_mirror_version": 1, "channels": "conda-forge"},
    "top-level-list": [1],
}


@pytest.mark.parametrize("case", sorted(MIRROR_MANIFESTS))
def test_a_mirror_manifest_of_wrong_types_is_one_error_or_rewritten(case: str, toolchain_template: Path,
                                                                   tmp_path: Path, test_channel_url: str) -> None:
    """`envlock mirror` into a directory whose envlock-mirror.json another user wrote: refused with one error
    line, or rewritten whole; never an internal error."""
    project = copy(toolchain_template, tmp_path / "p")
    dest = tmp_path / "mirror"
    dest.mkdir()
    (dest / "envlock-mirror.json").write_text(json.dumps(MIRROR_MANIFESTS[case]))
    done = envlock("mirror", TOOLCHAIN, str(dest), "--project-dir", str(project),
                   env={"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}", "ENVLOCK_CACHE_DIR": str(tmp_path / "c")},
                   timeout=120)
    if done.returncode == 0:
        doc = json.loads((dest / "envlock-mirror.json").read_text())
        assert doc["envlock_mirror_version"] == 1 and TOOLCHAIN in doc["locks"], doc
    else:
        assert_one_error(done, "envlock-mirror.json")
