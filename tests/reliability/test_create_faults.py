"""`envlock create` under package-server faults, hostile archives, SIGKILL while linking, and two at once.

Every create runs as a real `envlock create` subprocess (a regression that makes rattler panic must
not take pytest down with it) against locks from real resolves of the small test channel.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.channelbuilder import ChannelServer, PackageSpec, build_channel
from tests.paused_envlock import LAUNCHER
from tests.paused_envlock import environ as paused_env
from tests.reliability.conftest import LOCK, MINORS, TORCH, snapshot
from tests.output import flat

ENVLOCK = [sys.executable, "-m", "envlock"]
PKG = "*/linux-64/*.tar.bz2"


def _tree(root: Path) -> dict[str, bytes]:
    """Files (bytes) and symlinks (their target) under root."""
    out: dict[str, bytes] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = os.readlink(p).encode()
        elif p.is_file():
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _create(lock: Path, prefix: Path, mirror: str, env: dict[str, str], *extra: str,
            wait: bool = True) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    launcher = LAUNCHER if any(k.startswith("ENVLOCK_TEST_PAUSE") for k in env) else ENVLOCK  # tests/paused_envlock.py
    args = [*launcher, "create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64",
            "--mirror", f"conda-forge={mirror}", "--json", *extra]
    if not wait:
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_HTTP_TIMEOUT": "2"}


@pytest.fixture(scope="module")
def lock(previous_project: Path) -> Path:
    return previous_project / LOCK


@pytest.fixture(scope="module")
def lock_120(small_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lock of the same env on CUDA 12.0: other packages, so creating over a 12.1 env links for real."""
    from envlock.cli import run

    project = tmp_path_factory.mktemp("lock120")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVLOCK_CACHE_DIR", str(project / ".cache"))
        code = run(["resolve", *TORCH, "--cuda", "12.0", "--mirror", f"conda-forge={(small_root / 'conda-forge').as_uri()}",
                    "--project-dir", str(project), "--json"])
    assert code == 0
    return next((project / "locks").glob("*/conda-lock.yml"))


# --------------------------------------------------------------------------- faults of the package server

CREATE_CASES = [
    # (id, faults, expected exit code, substring of the error)
    ("503 twice, then served", [(PKG, "status:503", 2)], 0, ""),
    ("500 on every try", [(PKG, "status:500", None)], 4, "HTTP 500"),
    ("404", [(PKG, "status:404", None)], 4, "HTTP 404"),
    ("reset once, then served", [(PKG, "reset", 1)], 0, ""),
    ("closed mid-body once, then served", [(PKG, "close-mid-body", 1)], 0, ""),
    ("closed mid-body on every try", [(PKG, "close-mid-body", None)], 4, "connection closed"),
    ("stall past the timeout once, then served", [(PKG, "stall:3", 1)], 0, ""),
    ("bytes differ from the lock's sha256", [(PKG, "corrupt", 1)], 1, "sha256 mismatch"),
]


SLOW_CREATE = {"404", "reset once, then served", "closed mid-body on every try",
               "stall past the timeout once, then served"}


@pytest.mark.parametrize(
    "faults,code,says",
    [pytest.param(*c[1:], id=c[0], marks=[pytest.mark.slow] if c[0] in SLOW_CREATE else []) for c in CREATE_CASES],
)
def test_create_under_fault_new_and_existing_prefix(faults, code: int, says: str, lock: Path, small_root: Path,
                                                    make_channel_server, tmp_path: Path,
                                                    env: dict[str, str]) -> None:
    server: ChannelServer = make_channel_server(small_root)
    existing = tmp_path / "existing"
    fresh_env = {**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache0")}
    assert _create(lock, existing, (small_root / "conda-forge").as_uri(), fresh_env).returncode == 0
    before = _tree(existing)
    for pattern, action, times in faults:
        server.add_fault(pattern, action, times)
    new = tmp_path / "new"
    done = _create(lock, new, server.channel_url(), env)
    assert done.returncode == code, done.stdout + done.stderr
    if code:
        doc = json.loads(done.stdout)
        assert says in doc["error"] and doc["hint"] and "Traceback" not in done.stderr
        assert not new.exists()  # nothing partial: a new prefix is not left behind
        _assert_cache_holds_only_verified(Path(env["ENVLOCK_CACHE_DIR"]) / "pkgs", lock)
        # The same fault against an existing env leaves it exactly as it was (nothing is linked before
        # every archive is fetched and verified). An exhausted fault is re-armed first.
        # A request of the first create still being answered would take the re-armed fault (its client is
        # gone, the second create then fetches clean bytes and exits 0): seen once at load ~8.
        server.settle()
        for pattern, action, times in faults:
            server.add_fault(pattern, action, times)
        other_cache = {**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache2")}
        other_lock = _lock_needing_downloads(lock, tmp_path)
        again = _create(other_lock, existing, server.channel_url(), other_cache)
        assert again.returncode == code
        assert _tree(existing) == before
    else:
        assert json.loads(done.stdout)["action"] == "created"


def _assert_cache_holds_only_verified(cache: Path, lock: Path) -> None:
    """Every archive create kept, and every entry it remembered (this user's store: envlock/seams/trust.py), has the
    sha256 the lock pins (a bad archive is never kept, extracted or remembered)."""
    import hashlib

    from envlock.formats import read_lock

    want = {p.filename.removesuffix(".tar.bz2").removesuffix(".conda"): p.sha256 for p in read_lock(lock).packages}
    for archive in [*cache.glob("*.tar.bz2"), *cache.glob("*.conda")]:
        dist = archive.name.removesuffix(".tar.bz2").removesuffix(".conda")
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == want[dist], dist
    for record in cache.glob(f".envlock-trust/{os.geteuid()}/*.json"):
        dist = record.name.removesuffix(".json")
        if dist in want:
            assert json.loads(record.read_text())["extra"]["fetched"]["sha256"] == want[dist], dist


def _lock_needing_downloads(lock: Path, tmp_path: Path) -> Path:
    """The same lock under another env name, so create does not call the existing prefix up to date."""
    other = tmp_path / "other" / "conda-lock.yml"
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(lock.read_text().replace("# previous lock", "# another copy"))
    return other


def test_create_follows_a_redirect_to_another_host_and_still_verifies(lock: Path, small_root: Path,
                                                                        make_channel_server, tmp_path: Path,
                                                                        env: dict[str, str]) -> None:
    other = make_channel_server(small_root)
    origin = make_channel_server(small_root)
    origin.add_fault(PKG, f"redirect:http://localhost:{other.port}")
    other.add_fault(PKG, "corrupt", 1)  # the other host serves one wrong archive
    done = _create(lock, tmp_path / "env", origin.channel_url(), env)
    assert done.returncode == 1 and "sha256 mismatch" in json.loads(done.stdout)["error"]
    assert not (tmp_path / "env").exists()
    done = _create(lock, tmp_path / "env", origin.channel_url(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert other.count(PKG, status=200) > 0


# --------------------------------------------------------------------------- hostile archives

EVIL = {
    "dotdot path": lambda victim: PackageSpec(name="evilpkg", version="1.0", files={"../../escape.txt": "pwned"}),
    "absolute path": lambda victim: PackageSpec(name="evilpkg", version="1.0", files={str(victim / "escape.txt"): "x"}),
    "absolute symlink": lambda victim: PackageSpec(name="evilpkg", version="1.0", symlinks={"lib/out": str(victim)}),
    "relative symlink out": lambda victim: PackageSpec(name="evilpkg", version="1.0",
                                                       symlinks={"lib/out": "../../victim"}),
    "symlink then a file through it": lambda victim: PackageSpec(
        name="evilpkg", version="1.0", symlinks={"lib/out": str(victim)}, files={"lib/out/escape.txt": "x"}),
}


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=[] if k in ("absolute path", "relative symlink out") else [pytest.mark.slow])
             for k in EVIL]
)
def test_hostile_archive_is_refused_before_anything_is_linked(kind: str, tmp_path: Path, env: dict[str, str],
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.reliability.conftest import resolve_json

    victim = tmp_path / "victim"
    victim.mkdir()
    chan = build_channel(tmp_path / "chan", cuda_minors=["12.1"], subdirs=("linux-64",), with_cuda11=False,
                         pythons=("3.11",), with_cudnn=False, extra=[EVIL[kind](victim)])
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", env["ENVLOCK_CACHE_DIR"])
    clean_lock = project / LOCK
    assert resolve_json(project, capsys, "--mirror", f"conda-forge={chan.as_uri()}")[0] == 0
    existing = tmp_path / "env-existing"
    assert _create(clean_lock, existing, chan.as_uri(), env).returncode == 0
    before = _tree(existing)
    spec = project / "environments" / "torch2.3.0-cu121.yml"
    spec.write_text(spec.read_text().replace("platforms:", "  - evilpkg\nplatforms:"))
    done = subprocess.run([*ENVLOCK, "lock", "--project-dir", str(project), "--mirror",
                           f"conda-forge={chan.as_uri()}"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and "evilpkg" in clean_lock.read_text(), done.stdout + done.stderr
    for prefix in (tmp_path / "env-new", existing):
        done = _create(clean_lock, prefix, chan.as_uri(), env)
        assert done.returncode == 1, done.stdout + done.stderr
        doc = json.loads(done.stdout)
        assert "is unsafe" in doc["error"] or "outside of destination" in doc["error"], doc
        assert "Traceback" not in done.stderr and "panic" not in done.stderr
    assert not (tmp_path / "env-new").exists()
    assert _tree(existing) == before
    assert list(victim.iterdir()) == [] and not list(tmp_path.glob("escape*"))


def test_package_check_accepts_the_test_channels_real_symlinks(small_root: Path, tmp_path: Path) -> None:
    """cuda-nvcc's targets/x86_64-linux/bin/nvcc -> ../../../bin/nvcc and lib/*.so links stay inside."""
    from rattler.package_streaming import extract

    from envlock.seams.pkgcheck import problems

    archives = sorted((small_root / "conda-forge" / "linux-64").glob("*.tar.bz2"))
    assert archives
    for archive in archives:
        out = tmp_path / archive.name
        extract(archive, out)
        assert problems(out) == [], archive.name


# --------------------------------------------------------------------------- SIGKILL while linking, two at once


def _wait_line(proc: subprocess.Popen[str], needle: str, timeout: float = 120) -> str:
    """Read the child's stderr until a line holds `needle`; the lines read, that one included."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"ended (exit {proc.wait()}) before printing {needle!r}: {''.join(seen)}")
        seen.append(line)
        if needle in flat("".join(seen)):  # a notice is folded to 80 columns (a long path cut after a '/'): as one
            return "".join(seen)
    raise AssertionError(f"no {needle!r} within {timeout} s")


@pytest.mark.parametrize("existing", [False, True], ids=["new prefix", "existing prefix"])
def test_sigkill_while_linking_is_reported_and_repaired(existing: bool, lock: Path, lock_120: Path,
                                                        small_root: Path, tmp_path: Path,
                                                        env: dict[str, str]) -> None:
    """A new prefix killed half-linked says so (doctor, the next create repairs it); an existing env is updated in a
    clone beside it (envlock/usecases/update.py), so a kill leaves it exactly as it was."""
    mirror = (small_root / "conda-forge").as_uri()
    prefix = tmp_path / "env"
    target_lock = lock
    if existing:
        assert _create(lock_120, prefix, mirror, env).returncode == 0
        before = _tree(prefix)
    proc = _create(target_lock, prefix, mirror, paused_env(env, PAUSE_IN_LINK="60"), wait=False)
    _wait_line(proc, "envlock-test: pausing while linking")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    if existing:
        assert _tree(prefix) == before
        assert json.loads((prefix / "conda-meta" / "envlock").read_text())["state"] == "complete"
        done = _create(target_lock, prefix, mirror, env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["action"] == "updated"
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".env.envlock-")]  # the clone was removed
        return
    meta = json.loads((prefix / "conda-meta" / "envlock").read_text())
    assert meta["state"] == "incomplete"
    doctor = subprocess.run([*ENVLOCK, "doctor", "-p", str(prefix), "--json"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert doctor.returncode == 1
    target = next(f for f in json.loads(doctor.stdout)["findings"] if f["code"] == "env.target")
    assert target["severity"] == "error" and "incomplete" in target["message"] and "envlock create" in target["hint"]
    done = _create(target_lock, prefix, mirror, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((prefix / "conda-meta" / "envlock").read_text())["state"] == "complete"
    assert (prefix / "bin" / "nvcc").is_file()
    again = _create(target_lock, prefix, mirror, env)
    assert json.loads(again.stdout)["action"] == "unchanged"


def test_two_creates_of_one_prefix_are_serialised_and_the_second_names_the_holder(
    lock: Path, small_root: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    mirror = (small_root / "conda-forge").as_uri()
    prefix = tmp_path / "env"
    release = tmp_path / "release-the-first"  # the first holds its pause until the second says it waits
    first = _create(lock, prefix, mirror, paused_env(env, PAUSE_IN_LINK=f"until={release}"), wait=False)
    _wait_line(first, "envlock-test: pausing while linking")
    second = _create(lock, prefix, mirror, env, wait=False)
    # the whole notice (folded over lines: communicate() cannot see what readline() buffered past the match)
    waiting = _wait_line(second, f"waiting for the environment {prefix}, held by pid {first.pid} (envlock create")
    release.touch()
    out2, rest = second.communicate(timeout=120)
    err2 = waiting + rest
    out1, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert f"waiting for the environment {prefix}, held by pid {first.pid} (envlock create" in flat(err2)
    assert json.loads(out1)["action"] == "created" and json.loads(out2)["action"] == "unchanged"


def test_create_after_a_killed_resolve_uses_the_whole_old_lock(project: Path, small_root: Path, tmp_path: Path,
                                                               env: dict[str, str]) -> None:
    """resolve killed before renaming conda-lock.yml: create installs the old, whole lock."""
    lock = project / LOCK
    old = lock.read_bytes()
    args = [*LAUNCHER, "resolve", *TORCH, "--cuda", MINORS[0], "--mirror",
            f"conda-forge={(small_root / 'conda-forge').as_uri()}", "--project-dir", str(project)]
    proc = subprocess.Popen(args, env=paused_env(env, PAUSE_BEFORE_REPLACE="60:conda-lock.yml"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_line(proc, "pausing before replace of conda-lock.yml")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert lock.read_bytes() == old
    done = _create(lock, tmp_path / "env", (small_root / "conda-forge").as_uri(), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p for p in snapshot(project) if p.endswith(".tmp")]  # left by the kill; the next resolve clears them
