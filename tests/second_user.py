"""Running a command as a second user (uid/gid 65534) through setpriv, for the tests of what several users share:
a package cache, its file locks. Those tests skip with the reason where this cannot work (not root, no setpriv,
or a checkout or virtualenv that uid 65534 cannot read, e.g. under a 0700 home or mktemp folder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

UID = GID = 65534


def second_user() -> tuple[list[str], dict[str, str]]:
    """The command prefix that runs this python as uid 65534 (`[..., python]`), and its environment."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run a second user")
    as_other = ["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups", sys.executable]
    # its temporary files (uv's, rattler's) where it can write them: this user's $TMPDIR may be closed to it
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "TMPDIR": str(reachable_tmp(writable=True))}
    probe = subprocess.run([*as_other, "-c", "import envlock.cli"], capture_output=True, text=True, cwd="/", env=env)
    if probe.returncode != 0:
        pytest.skip(f"uid {UID} cannot import envlock from here: {probe.stderr.strip().splitlines()[-1:]}")
    return as_other, env


def reachable_tmp(*, writable: bool = False) -> Path:
    """A temporary root the second user can reach: $TMPDIR when every folder on its way lets others in (o+x), else
    the first of /tmp and /var/tmp that does (a 0700 or a user's private TMPDIR, a long one under a 0700 home).
    `writable`: one it can also write in (o+w, as /tmp is), for its own TMPDIR (uv's, rattler's temporary files):
    a 0755 $TMPDIR lets it in but not write."""
    for root in (Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")):
        try:
            resolved = root.resolve()
            if (resolved.is_dir() and all(p.stat().st_mode & 0o001 for p in (resolved, *resolved.parents))
                    and (not writable or resolved.stat().st_mode & 0o002)):
                return resolved
        except OSError:
            continue
    pytest.skip(f"no temporary folder another user can {'write' if writable else 'reach'} ($TMPDIR, /tmp and /var/tmp"
                " are closed to others)")


@contextmanager
def open_dir(prefix: str, mode: int = 0o755) -> Iterator[Path]:
    """A temporary folder outside pytest's 0700 tmp_path (and, where $TMPDIR is closed to others, outside
    $TMPDIR: reachable_tmp), so that the second user can reach it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=reachable_tmp()))
    try:
        path.chmod(mode)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
