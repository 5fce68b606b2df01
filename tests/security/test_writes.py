"""Writes that follow a symlink (issue 33, Why 2 / Build 2): one way to write.

On e081238: the lock files (`pkgs/.envlock-locks/*.lock`, `file-locks/prefix-*.lock`, the project's lock under
`file-locks/`) were opened with O_CREAT and rewritten with `r+b` through whatever link lay in their place, so a
group member's symlink in a shared cache made root truncate or create files anywhere; `envlock mirror DIR`
wrote wheels, pages and wheels.json through a symlinked `DIR/pypi`, and its holder line through a symlinked
`DIR/.envlock-mirror.lock`; `create` adopted any `.NAME.envlock-old-*` folder beside a prefix that did not exist
yet (another user's, with an activation hook of theirs, became root's env: `envlock run` then sourced it).

Now every file envlock creates goes through envlock/seams/beneath.py (openat from its root, O_NOFOLLOW, a link on
the way followed only where it stays under the root), a lock file must be a regular file with one name (a link
in its place is refused), and recovery adopts only this user's own folder whose record names that very prefix.
`test_every_write_goes_through_the_one_way` keeps the rule: a write anywhere else in envlock/ must say here why
it is safe.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.output import flat
from tests.second_user import UID, open_dir
from tests.security.hostile import (AnyPathServer, Outside, assert_refused, built, cli_env, envlock, tool, wheel_entry,
                                    write_lock)
from tests.security.inputs import TOOLCHAIN, copy, toolchain_template
from tests.wheelindex import build_wheel

__all__ = ["toolchain_template"]  # fixtures used here
VICTIM = "root's file: not to be touched\n"
DEAD = "conda-forge=http://127.0.0.1:9/dead"  # no solve may happen: no channel answers


def _channel_lock(tmp_path: Path) -> Path:
    """A lock of one tiny package in a local indexed channel (create needs no network)."""
    chan = tmp_path / "chan"
    pkg = built(tool(), chan, url=(chan / "linux-64").as_uri() + "/" + tool().filename)
    return write_lock(tmp_path / "lock" / "conda-lock.yml", [pkg])


def _plant(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


# --------------------------------------------------------------------------- lock files


def _lock_file(which: str, tmp_path: Path, prefix: Path) -> Path:
    cache = tmp_path / "cache"
    if which == "entry":  # pkgs/.envlock-locks/<dist>.lock (a package cache entry's)
        return cache / "pkgs" / ".envlock-locks" / f"{tool().filename.removesuffix('.tar.bz2')}.lock"
    from envlock.seams.prefix import prefix_lock

    return prefix_lock(prefix, cache).path  # file-locks/prefix-<name>-<key>.lock


@pytest.mark.parametrize("which", ["entry", "prefix"])
@pytest.mark.parametrize("target", ["existing", "dangling"])
def test_a_link_in_a_lock_files_place_is_refused_never_followed(which: str, target: str, tmp_path: Path) -> None:
    lock = _channel_lock(tmp_path)
    prefix = tmp_path / "envs" / "env"
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    if target == "existing":
        victim.write_text(VICTIM)
    _plant(_lock_file(which, tmp_path, prefix), victim)
    done = envlock("create", "--lock", str(lock), "-p", str(prefix), env=cli_env(tmp_path))
    assert_refused(done, "refusing the lock file", "symlink")
    if target == "existing":
        assert victim.read_text() == VICTIM  # e081238: truncated to the holder line, then blanked
    else:
        assert not victim.exists()  # e081238: created
    assert not prefix.exists()


def test_a_lock_folder_linked_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    """`file-locks -> <elsewhere>` (a group member's link in a shared cache): no lock file is made there."""
    lock = _channel_lock(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(tmp_path / "cache" / "file-locks", outside)
    done = envlock("create", "--lock", str(lock), "-p", str(tmp_path / "env"), env=cli_env(tmp_path))
    assert_refused(done, "file-locks")
    assert list(outside.iterdir()) == []  # e081238: prefix-env-<key>.lock made there


def test_the_project_lock_refuses_a_link_in_its_place(toolchain_template: Path, tmp_path: Path) -> None:
    """`envlock lock NAME` renders a deleted file again (no solve) under the project's lock (file-locks/NAME-KEY.lock)."""
    from envlock.project.layout import ProjectLock

    project = copy(toolchain_template, tmp_path / "p")
    (project / "locks" / TOOLCHAIN / "activate.sh").unlink()
    victim = tmp_path / "victim"
    victim.write_text(VICTIM)
    _plant(ProjectLock(project, TOOLCHAIN, tmp_path / "cache" / "file-locks").path, victim)
    done = envlock("lock", TOOLCHAIN, "--project-dir", str(project), env=cli_env(tmp_path, ENVLOCK_MIRRORS=DEAD))
    assert_refused(done, "refusing the lock file")
    assert victim.read_text() == VICTIM  # e081238: the holder line written into it


def test_a_lock_folder_linked_out_of_the_project_is_not_written(toolchain_template: Path, tmp_path: Path) -> None:
    """A pull request can commit `locks/<name>` as a symlink (git keeps links): `envlock lock` must not write the
    lock's files wherever it points."""
    project = copy(toolchain_template, tmp_path / "p")
    outside = tmp_path / "outside"
    shutil.move(project / "locks" / TOOLCHAIN, outside)
    (outside / "activate.sh").unlink()
    (project / "locks" / TOOLCHAIN).symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    done = envlock("lock", TOOLCHAIN, "--project-dir", str(project), env=cli_env(tmp_path, ENVLOCK_MIRRORS=DEAD))
    assert_refused(done, f"locks/{TOOLCHAIN}")
    assert sorted(p.name for p in outside.iterdir()) == before  # e081238: activate.sh written there


def test_another_users_lock_file_is_locked_but_never_written(tmp_path: Path) -> None:
    """A shared cache: uid 65534's lock file (a regular file of one name) is locked as it is; root writes no byte
    into a file it does not own."""
    with open_dir("envlock-shared-", 0o1777) as shared:
        lock = _channel_lock(tmp_path)
        prefix = shared / "env"
        from envlock.seams.prefix import prefix_lock

        theirs = prefix_lock(prefix, shared / "cache").path
        theirs.parent.mkdir(parents=True)
        os.chmod(theirs.parent, 0o1777)
        theirs.write_text("their bytes\n")
        os.chown(theirs, UID, UID)
        done = envlock("create", "--lock", str(lock), "-p", str(prefix), env=cli_env(tmp_path, ENVLOCK_CACHE_DIR=str(shared / "cache")))
        assert done.returncode == 0, done.stdout + done.stderr
        assert theirs.read_text() == "their bytes\n"


# --------------------------------------------------------------------------- mirror DIR


def _mirror(tmp_path: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    chan = tmp_path / "chan"
    pkg = built(tool(), chan, url=(chan / "linux-64").as_uri() + "/" + tool().filename)
    wheel = build_wheel("ninja", "1.11.1")
    with AnyPathServer({wheel.filename: wheel.data}) as server:
        lock = write_lock(tmp_path / "lock" / "conda-lock.yml", [pkg],
                          [wheel_entry("ninja", "1.11.1", f"{server.url}/simple/ninja/{wheel.filename}", wheel.data)])
        return envlock("mirror", "--lock", str(lock), str(dest), env=cli_env(tmp_path))


@pytest.mark.parametrize("planted", ["pypi", "pypi/files", "pypi/simple", ".envlock-mirror.lock", "pypi/wheels.json"])
def test_mirror_never_writes_through_a_link_out_of_dir(planted: str, tmp_path: Path) -> None:
    dest = tmp_path / "m"
    dest.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text(VICTIM)
    target = outside / "victim" if "." in Path(planted).name else outside
    _plant(dest / planted, target)
    watch = Outside(tmp_path, dest, tmp_path / "cache", tmp_path / "chan", tmp_path / "lock", tmp_path / "home")
    done = _mirror(tmp_path, dest)
    if planted == "pypi/wheels.json":  # a link in a file's own place: replaced by the file, never written through
        assert done.returncode == 0, done.stdout + done.stderr
        assert not (dest / planted).is_symlink() and (dest / planted).is_file()
    else:  # a folder leading out of DIR, or the mirror's lock file: refused
        assert_refused(done, planted)
    assert watch.changed() == {}  # e081238: wheels, pages, wheels.json or the holder line written into outside/


def test_a_link_that_stays_inside_dir_is_followed(tmp_path: Path) -> None:
    """The rule is the gate's `under`: a link whose target lies under DIR is the user's own layout."""
    dest = tmp_path / "m"
    (dest / "pypi-store").mkdir(parents=True)
    (dest / "pypi").symlink_to("pypi-store")
    done = _mirror(tmp_path, dest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (dest / "pypi-store" / "files" / build_wheel("ninja", "1.11.1").filename).is_file()


# --------------------------------------------------------------------------- recovery of a killed update


@pytest.mark.parametrize("case", ["another user's", "record of another prefix", "no record", "this user's own"])
def test_recovery_adopts_only_this_users_env_made_for_this_prefix(case: str, tmp_path: Path) -> None:
    """Two renames stand in for the exchange where renameat2 cannot; a kill between them leaves the old env at
    `.<name>.envlock-old-<random>` and no prefix. In a folder others can write (/tmp) anyone can put such a
    folder there, with an activation hook of their own."""
    lock = _channel_lock(tmp_path)
    with open_dir("envlock-recover-", 0o1777) as parent:
        made = parent / "made"
        env = cli_env(tmp_path)
        assert envlock("create", "--lock", str(lock), "-p", str(made), env=env).returncode == 0
        prefix = parent / ("other" if case == "record of another prefix" else "env")
        old = parent / f".env.envlock-old-1a2b3c4d"
        if case == "this user's own":
            assert envlock("create", "--lock", str(lock), "-p", str(prefix), env=env).returncode == 0
            os.rename(prefix, old)  # what a kill between the two renames leaves
            prefix = parent / "env"
        else:
            shutil.copytree(made, old, symlinks=True)
            (old / "etc" / "conda" / "activate.d" / "zz-planted.sh").write_text("echo PLANTED\n")
            if case == "no record":
                (old / "conda-meta" / "envlock").unlink()
            if case == "another user's":
                for top, dirs, files in os.walk(old):
                    for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
                        os.lchown(name, UID, UID)
                newer = parent / ".env.envlock-new-5e6f7a8b"  # another user's clone: not ours to remove
                newer.mkdir()
                os.chown(newer, UID, UID)
            if case == "record of another prefix":
                old = old.rename(parent / ".other.envlock-old-1a2b3c4d")  # the record says …/made
        done = envlock("create", "--lock", str(lock), "-p", str(prefix), env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        if case == "this user's own":
            assert "nothing to do" in done.stdout + done.stderr and not old.exists()  # adopted: the env is back
            return
        assert not (prefix / "etc" / "conda" / "activate.d" / "zz-planted.sh").exists()  # e081238: adopted
        assert old.is_dir() and (old / "etc" / "conda" / "activate.d" / "zz-planted.sh").is_file()  # left alone
        assert f"left {old} alone" in flat(done.stderr), done.stderr  # and named (a long path is cut after a '/')
        if case == "another user's":
            assert (parent / ".env.envlock-new-5e6f7a8b").is_dir()


# --------------------------------------------------------------------------- the rule, kept


PACKAGE = Path(__file__).resolve().parents[2] / "envlock"
#: The modules that are the one way to write (envlock/seams/beneath.py's walk, fs.py's writers, the lock files).
ONE_WAY = {"seams/beneath.py", "seams/fs.py", "seams/filelocks.py"}
#: Every other place that makes, truncates or renames a file or folder, and why it cannot be sent elsewhere.
ALLOWED = {
    ("doctor/programs.py", "write_text"): "probe.cu in its own TemporaryDirectory (0700, this process's)",
    ("doctor/programs.py", "TemporaryDirectory"): "a private temp folder (0700)",
    ("seams/pypi/compile.py", "write_text"): "held.txt in its own TemporaryDirectory (0700)",
    ("seams/pypi/compile.py", "TemporaryDirectory"): "a private temp folder (0700)",
    ("seams/prefix.py", "mkstemp"): "the writability probe: O_EXCL, unlinked at once",
    ("seams/prefix.py", "mkdir"): "the user's own -p PREFIX (a root), made as named",
    ("seams/dirs.py", "mkdir"): "ENVLOCK_CACHE_DIR itself and private-<uid> (lstat-checked: 0700, this user's)",
    ("seams/dirs.py", "TemporaryFile"): "the writability probe: O_EXCL|O_TMPFILE, never named",
    ("project/layout.py", "mkdir"): "the user's own --project-dir (a root), made as named",
    ("usecases/update.py", "mkdir"): "the clone's folders, inside the clone this run made (O_EXCL mkdir)",
    ("usecases/update.py", "symlink"): "the clone copies the env's own links into the clone this run made",
    ("usecases/update.py", "link"): "the clone hard-links the env's files into the clone this run made",
    ("usecases/update.py", "copy2"): "conda-meta copied into the clone this run made (never following a link)",
    ("usecases/update.py", "rename"): "the exchange's fallback and recovery: only this user's folder for this prefix",
    ("usecases/pack.py", "open"): "the tar beside the staging folder: O_CREAT|O_EXCL|O_NOFOLLOW",
    ("usecases/pack.py", "replace"): "the finished tar over -o (a link there is replaced, not followed)",
    ("usecases/pack.py", "copyfile"): "into the staging folder this run made (0700)",
    ("usecases/pack.py", "mkdir"): "inside the staging folder this run made (0700)",
    ("usecases/pack.py", "write_text"): "inside the staging folder this run made (0700)",
    ("usecases/unpack.py", "mkdir"): "inside the extraction folder this run made (0700), names through the gate",
    ("usecases/unpack.py", "open"): "inside the extraction folder this run made (0700), each member once",
    ("usecases/mirror.py", "mkdir"): "the user's own mirror DIR (a root), made as named",
    ("seams/net.py", "open"): "a download into this run's own work folder: O_NOFOLLOW",
    ("seams/conda/cache.py", "mkdir"): "an extraction folder (0700) inside this run's held folder of the user's 0700 "
                                        "store, reached through its open directory; the store's entries/ (0700)",
    ("seams/conda/cache.py", "open"): "rattler's <dist>.lock in this user's 0700 store: O_EXCL|O_NOFOLLOW temp file",
    ("seams/conda/cache.py", "replace"): "that temp file over <dist>.lock, within this user's 0700 store",
    ("seams/conda/fetch.py", "open"): "copy_hashed: a new file (O_EXCL|O_NOFOLLOW) in the caller's own work folder",
    ("seams/pypi/uvlinks.py", "open"): "a wheel copied from the open, checked file into this user's 0700 store's "
                                      "install folder: O_EXCL|O_NOFOLLOW",
    ("seams/trust.py", "open"): "this user's 0700 trust store: O_EXCL|O_NOFOLLOW",
    ("seams/trust.py", "replace"): "within this user's 0700 trust store",
    ("seams/trust.py", "rename"): "a cache entry swapped for this user's verified one (names under the gate)",
    ("seams/trust.py", "mkdir"): "this user's 0700 trust store (lstat-checked)",
    ("seams/pypi/uvlinks.py", "link"): "the open, checked wheel (/proc/self/fd/N) linked into this user's 0700 store's "
                                      "install folder",
    ("usecases/create.py", "link"): "rattler links the prefix (envlock/seams/conda/install.py; pkgcheck checks every link first)",
    ("seams/conda/index.py", "index_fs"): "rattler's indexer, after every link in the channel dir is checked",
    ("core/tables/compiled.py", "write_text"): "a maintainer's tool regenerating envlock's own data file",
    ("seams/conda/pixilock.py", "TemporaryDirectory"): "a private temp folder (0700) rattler writes the pixi.lock in",
    ("seams/conda/pixilock.py", "write_text"): "the pixi.lock in its own TemporaryDirectory (0700)",
}
_WRITE_ATTRS = {"write_text", "write_bytes", "touch", "mkdir", "makedirs", "rename", "symlink", "symlink_to",
                "hardlink_to", "link", "copyfile", "copy", "copy2", "copytree", "move", "mkstemp", "mkdtemp",
                "TemporaryDirectory", "TemporaryFile", "NamedTemporaryFile", "index_fs"}


def _writes(tree: ast.AST) -> set[str]:
    """The write-like calls in a module: the names above, `os.replace`, and open()/`.open()` with a writing mode or
    O_CREAT/O_WRONLY/O_RDWR flags."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        base = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if base in ("beneath", "fs", "copy"):  # the one way itself (and copy.copy, no file)
            continue
        if name in _WRITE_ATTRS:
            found.add(name)
        elif name == "replace" and base == "os":
            found.add(name)
        elif name in ("open", "fdopen") and _writing(node, method=isinstance(func, ast.Attribute) and base != "os"):
            found.add("open")
    return found


def _writing(call: ast.Call, *, method: bool) -> bool:
    text = ast.unparse(call)
    given = call.args[0:1] if method else call.args[1:2]  # path.open(mode) / open(path, mode), os.fdopen(fd, mode)
    modes = [a.value for a in given + [k.value for k in call.keywords if k.arg == "mode"]
             if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return any(set(m) & set("wax+") for m in modes) or any(f in text for f in ("O_CREAT", "O_WRONLY", "O_RDWR"))


def test_every_write_goes_through_the_one_way() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in ONE_WAY:
            found |= {(rel, name) for name in _writes(ast.parse(path.read_text(encoding="utf-8")))}
    unexplained = sorted(found - set(ALLOWED))
    assert unexplained == [], ("write through envlock/seams/fs.py (write_atomic, copy_atomic, work_dir, move_in) or "
                               "beneath.py, or say in ALLOWED why this one cannot be sent elsewhere", unexplained)
    assert sorted(set(ALLOWED) - found) == []  # an entry no longer needed goes


def test_the_scan_finds_a_write() -> None:
    """Control: the scan sees the writes it looks for, in the forms envlock spells them."""
    code = ("import os\nopen(p, 'w')\np.open('ab')\nos.open(p, os.O_RDWR | os.O_CREAT)\np.write_text('x')\n"
            "os.replace(a, b)\nshutil.copyfile(a, b)\n'x'.replace('a', 'b')\nopen(p)\np.open('rb')\n"
            "beneath.write_bytes(r, 'x', b'')\n")
    assert _writes(ast.parse(code)) == {"open", "write_text", "replace", "copyfile"}
    assert _writes(ast.parse("open(p)\np.open('rb')\nos.fdopen(fd, 'rb')\nbeneath.write_bytes(r, 'x', b'')\n")) == set()
