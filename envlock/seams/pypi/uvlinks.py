"""The verified wheels as uv reads them: from this user's private store, the very bytes that were checked
(issue 33.1; envlock/seams/trust.py says what the store is and why it is reached through its open directory)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from envlock.errors import EnvCreateError
from envlock.seams import net
from envlock.seams.fs import work_dir
from envlock.seams.trust import for_child


@contextlib.contextmanager
def private_links(paths: Sequence[Path], cache: Path) -> Iterator[list[Path]]:
    """The verified wheels in a folder of this user's private store (reached through its open directory, as uv is
    given it), each from the one file opened and checked: a hard link to that very inode when it is the sealed one
    this user verified (owner, inode, size and ctime), else a copy of it hashed as it is copied. An inode another
    user owns is never linked, and what uv reads can no longer be swapped or rewritten by another user after the
    check. The wheels' records are renewed after (the link moved their ctime)."""
    from envlock.seams.pypi.wheels import store

    trust = store(cache)
    held: list[tuple[str, Path, int]] = []
    try:
        with work_dir(trust.dir, "install-", root=trust.dir) as folder:
            out = []
            for path in paths:
                dest = folder / path.name
                fd = _open_wheel(path)
                held.append((path.parent.name, path, fd))
                if not _linked(fd, trust.check(path.parent.name, path, path.parent.name, os.fstat(fd)), dest):
                    held.pop()
                    got = _copy_of(fd, dest)
                    os.close(fd)
                    if got != path.parent.name:
                        raise EnvCreateError(f"{path.name} changed in envlock's cache while it was being installed",
                                             hint="run `envlock create` again (the wheel is checked again); another "
                                                  "user of the cache may be tampering with it")
                out.append(for_child(dest))
            yield out
        for sha, path, fd in held:  # the link came and went: the same inode, its ctime moved
            trust.remember(sha, path, sha, st=os.fstat(fd))
    finally:
        for _sha, _path, fd in held:
            os.close(fd)


def _open_wheel(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise EnvCreateError(f"cannot read {path.name} in envlock's cache: {exc.strerror or exc}",
                             hint="run `envlock create` again (the wheel is fetched and checked again)") from None


def _linked(fd: int, verdict: str, dest: Path) -> bool:
    """Whether `dest` is now a hard link to the open, trusted file `fd` (and nothing else)."""
    if verdict != "trusted" or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        os.link(f"/proc/self/fd/{fd}", dest, follow_symlinks=True)  # that very inode, whatever the path holds now
    except OSError:
        return False
    if os.lstat(dest).st_ino == os.fstat(fd).st_ino:
        return True
    os.unlink(dest)
    return False


def _copy_of(fd: int, dest: Path) -> str:
    """A copy of the open file `fd` at the new file `dest` (0600): the sha256 of the very bytes written."""
    digest = hashlib.sha256()
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(os.dup(fd), "rb") as fin, os.fdopen(out, "wb") as fout:
        fin.seek(0)
        while chunk := fin.read(net.CHUNK):
            digest.update(chunk)
            fout.write(chunk)
    return digest.hexdigest()
