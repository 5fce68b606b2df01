"""`envlock create`: resolve → create → activate in real shells, cross-platform prefixes, every fault.

Locks come from real `envlock resolve` runs against the test channel (canonical conda-forge URLs,
fetched through `--mirror conda-forge=<file:// or http://127.0.0.1>`), so create sees what users see.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.output import flat, logical_lines, unfolded

from envlock.cli import run
from envlock.usecases.create import CreateRequest, create_env
from envlock.seams import envrecord
from envlock.seams.conda import cache as pkgcache
from envlock.errors import ChannelError, EnvCreateError, LockfileError
from envlock.formats import read_lock
from tests.test_activation import snapshots

ENVLOCK = [sys.executable, "-m", "envlock"]
NAME = "torch2.3.0-cu121"


def _resolve(project: Path, cache: Path, channel_uri: str, *args: str) -> None:
    project.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVLOCK_CACHE_DIR", str(cache))
        code = run(["resolve", "--torch", "2.3.0", "--mirror", f"conda-forge={channel_uri}", *args,
                    "--project-dir", str(project), "--json"])
    assert code == 0


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """A project with locks/torch2.3.0-cu121 for linux-64, linux-aarch64 and win-64."""
    root = tmp_path_factory.mktemp("project")
    _resolve(root, root / ".cache", test_channel_url, "--toolchain-only",
             "--platform", "linux-64", "--platform", "linux-aarch64", "--platform", "win-64")
    return root


@pytest.fixture(scope="session")
def project_124(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """Another lock of the same env name, CUDA 12.4 (linux-64): 'a different lock' for updates."""
    root = tmp_path_factory.mktemp("project124")
    _resolve(root, root / ".cache", test_channel_url, "--toolchain-only", "--cuda", "12.4", "--platform", "linux-64")
    return root


def lock_of(project: Path) -> Path:
    return next((project / "locks").glob("*/conda-lock.yml"))


@pytest.fixture
def mirror(test_channel_url: str) -> dict[str, str]:
    return {"conda-forge": test_channel_url}


def req(lock: Path, prefix: Path, tmp_path: Path, mirrors: dict[str, str], **kw: object) -> CreateRequest:
    return CreateRequest(lock_path=lock, prefix=prefix, platform=kw.pop("platform", "linux-64"),  # type: ignore[arg-type]
                         cache_dir=tmp_path / "pkgs", mirrors=mirrors, **kw)  # type: ignore[arg-type]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root with its content (symlinks as their target)."""
    out: dict[str, bytes] = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = os.readlink(p).encode()
        elif p.is_file():
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def assert_one_error(proc: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    """One `error:` and one `hint:` at the end of stderr (each folded to 80 columns: no line is wider)."""
    assert proc.returncode == code, proc.stderr
    assert max(len(ln) for ln in proc.stderr.splitlines()) <= 80, proc.stderr
    lines = logical_lines(proc.stderr.strip())
    assert lines[-2].startswith("error: ") and needle in lines[-2], proc.stderr
    assert lines[-1].startswith("hint: ") and len(lines[-1]) > 10
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_resolve_create_activate_in_a_real_shell(project: Path, tmp_path: Path, mirror: dict[str, str],
                                                 shell: str) -> None:
    """The issue's end-to-end test: nvcc, CUDA_HOME and cusparse.h work only while activated."""
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed here (.ci/run installs zsh and fish)")
    # shell characters on purpose (quoting); a space is one nvcc cannot read, refused: tests/test_prefix_path.py
    prefix = tmp_path / "my(envs)" / "cu&121"
    result = create_env(req(lock_of(project), prefix, tmp_path, mirror))
    assert result.action == "created" and result.packages > 20
    ext = "fish" if shell == "fish" else "sh"
    hook = prefix / f"etc/conda/activate.d/envlock-cuda.{ext}"
    unhook = prefix / f"etc/conda/deactivate.d/envlock-cuda.{ext}"
    status = "$status" if shell == "fish" else "$?"
    probe = f"printf '#include <cusparse.h>\\n' | gcc -E -x c - > /dev/null 2>&1; echo $status > probe"
    probe = probe.replace("$status", status)
    src = f"source '{hook}'" if shell != "bash" else f". '{hook}'"
    steps = [
        probe.replace("probe", "p0"),
        src + "; " + probe.replace("probe", "p1") + "; command -v nvcc > which; nvcc --version > version",
        src,
        f"source '{unhook}'; " + probe.replace("probe", "p2"),
    ]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "CUDA_HOME": "/usr/local/cuda-11.8"}
    before, active, again, after = snapshots(exe, steps, env, tmp_path)
    read = lambda name: (tmp_path / name).read_text().strip()  # noqa: E731
    assert (read("p0"), read("p1"), read("p2")) == ("1", "0", "1")  # cusparse.h: only while active
    assert read("which") == str(prefix / "bin" / "nvcc")
    assert "release 12.1" in read("version")
    assert active["CUDA_HOME"] == active["CUDA_PATH"] == str(prefix)
    assert active["CUDNN_HOME"] == str(prefix)  # cuDNN is in the lock
    assert again == active  # sourcing twice = once
    assert after == before  # every variable back, CUDA_HOME to its old value


def test_lock_dir_activate_sh_from_resolve(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """locks/<name>/activate.sh (written by resolve, prefix given at activation time) does the same."""
    prefix = tmp_path / "a;b"  # a shell character (a space is refused: tests/test_prefix_path.py)
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    ldir = lock_of(project).parent
    assert {"activate.sh", "deactivate.sh", "activate.ps1", "activate.bat"} <= {p.name for p in ldir.iterdir()}
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/torch/lib"}
    steps = ["true", f". '{ldir}/activate.sh' '{prefix}'", f". '{ldir}/activate.sh' '{prefix}'",
             f". '{ldir}/deactivate.sh'"]
    base, active, again, after = snapshots("bash", ["set -u; " + steps[0], *steps[1:]], env, tmp_path)
    hook = prefix / "etc/conda/activate.d/envlock-cuda.sh"
    (via_hook,) = snapshots("bash", [f". '{hook}'"], env, tmp_path)
    assert active == via_hook == again
    assert active["LD_LIBRARY_PATH"] == f"/torch/lib:{prefix}/lib"  # pip torch: appended
    assert after == base


def test_installed_hooks_are_safe_under_set_u_and_match_envlock_run(project: Path, tmp_path: Path,
                                                                    mirror: dict[str, str]) -> None:
    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    hook = prefix / "etc/conda/activate.d/envlock-cuda.sh"
    unhook = prefix / "etc/conda/deactivate.d/envlock-cuda.sh"
    env = {"PATH": "/usr/bin:/bin"}
    base, active, after = snapshots("bash", ["set -eu", f". '{hook}'", f". '{unhook}'"], env, tmp_path)
    assert active["CPATH"] == f"{prefix}/targets/x86_64-linux/include"
    assert after == base
    dump = subprocess.run([*ENVLOCK, "run", "-p", str(prefix), "--", "/usr/bin/env", "-0"],
                          env=base, capture_output=True, check=True).stdout.decode()
    via_run = dict(item.split("=", 1) for item in dump.split("\0") if item)
    # run = conda's activation: envlock's variables are the hook's, PATH's bin/ is conda's (not recorded),
    # and the compilers' and cuda-nvcc's scripts ran too.
    for var in ("CUDA_HOME", "CUDA_PATH", "CPATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "CUDNN_HOME", "PATH"):
        assert via_run[var] == active[var], var
    assert "_ENVLOCK_PREPENDED_PATH" in active and "_ENVLOCK_PREPENDED_PATH" not in via_run
    assert via_run["CONDA_PREFIX"] == str(prefix) and via_run["CC"].startswith(f"{prefix}/bin/")


def test_conda_style_activation_with_conda_forge_hooks(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """All activate.d scripts in conda's (sorted) order: envlock's plus the gcc and cuda-nvcc ones."""
    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    scripts = sorted((prefix / "etc/conda/activate.d").glob("*.sh"))
    assert [p.name for p in scripts][-1] == "~cuda-nvcc_activate.sh"
    env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix)}
    sources = "; ".join(f". '{s}'" for s in scripts)
    (active,) = snapshots("bash", [sources], env, tmp_path)
    assert active["CUDA_HOME"] == str(prefix)
    assert "-ccbin" in active.get("NVCC_PREPEND_FLAGS", "")  # cuda-nvcc's own, left alone by envlock
    assert active["NVCC_PREPEND_FLAGS"].count("-ccbin") == 1


# --------------------------------------------------------------------------- create behaviour


def test_second_create_is_a_no_op_that_says_so(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    prefix = tmp_path / "env"
    first = create_env(req(lock_of(project), prefix, tmp_path, mirror))
    before = tree(prefix)
    second = create_env(req(lock_of(project), prefix, tmp_path, mirror))
    assert (first.action, second.action) == ("created", "unchanged")
    assert tree(prefix) == before


class _Heard:
    """A Progress that keeps what it hears (a terminal's bars hear the same calls)."""

    wants_sizes = False

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def start(self, phase: str, total: int) -> None:
        pass

    def advance(self, phase: str, item: str) -> None:
        self.items.append((phase, item))

    def finish(self, phase: str) -> None:
        pass

    def expect(self, phase: str, nbytes: int) -> None:
        pass

    def transfer(self, phase: str, nbytes: int) -> None:
        pass


def test_packages_linked_are_heard_where_someone_listens(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """rattler calls a link reporter six times a package from its threads: a create whose progress shows nothing
    (a pipe, --json, -q) links without one, into the same env; bars (and the on_linked seam) hear every package."""
    from envlock.progress import NoProgress
    from envlock.seams.conda import install

    heard = _Heard()
    create_env(req(lock_of(project), tmp_path / "a", tmp_path, mirror), heard)
    names = sorted(p.name for p in read_lock(lock_of(project)).packages_for("linux-64"))
    assert sorted(item for phase, item in heard.items if phase == "link") == names
    create_env(req(lock_of(project), tmp_path / "b", tmp_path, mirror))  # NoProgress
    assert sorted(tree(tmp_path / "a")) == sorted(tree(tmp_path / "b")) and len(names) > 20
    assert install._reporter(NoProgress()) is None and install._reporter(heard) is not None
    install.on_linked = print
    try:
        assert install._reporter(NoProgress()) is not None
    finally:
        install.on_linked = None


def test_an_env_is_not_a_cache(project: Path, project_124: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """rattler's installer leaves a CACHEDIR.TAG at the prefix's root: backup tools run with --exclude-caches
    would skip the env. Gone after a create and after an update; one that a package installed stays."""
    from envlock.seams.conda.install import CACHE_TAG_SIGNATURE, drop_cache_tag

    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    assert not (prefix / "CACHEDIR.TAG").exists() and not list(prefix.glob("*.TAG"))
    assert create_env(req(lock_of(project_124), prefix, tmp_path, mirror)).action == "updated"
    assert not (prefix / "CACHEDIR.TAG").exists()
    (prefix / "CACHEDIR.TAG").write_bytes(CACHE_TAG_SIGNATURE + b"\n# a package's own\n")
    record = next((prefix / "conda-meta").glob("cuda-version-*.json"))
    doc = json.loads(record.read_text())
    record.write_text(json.dumps({**doc, "files": [*doc["files"], "CACHEDIR.TAG"]}))
    assert not drop_cache_tag(prefix) and (prefix / "CACHEDIR.TAG").is_file()
    # The record's bytes are only scanned for the name when they cannot spell it otherwise: a JSON escape can.
    escaped = json.dumps({**doc, "files": [*doc["files"], "CACHEDIR.TAG"]}).replace('"CACHEDIR.TAG"', '"\\u0043ACHEDIR.TAG"')
    assert "CACHEDIR" not in escaped and json.loads(escaped)["files"][-1] == "CACHEDIR.TAG"
    record.write_text(escaped)
    assert not drop_cache_tag(prefix) and (prefix / "CACHEDIR.TAG").is_file()
    record.write_text(json.dumps(doc))  # no package lists it: rattler's, removed
    assert drop_cache_tag(prefix) and not (prefix / "CACHEDIR.TAG").exists()


def test_a_package_s_own_cache_tag_stays_and_rattler_s_goes_unread(tmp_path: Path) -> None:
    """Whether rattler's CACHEDIR.TAG may go is decided from the linked packages' sealed summaries when none has a path
    at the prefix's root (no conda-meta record read); a package that ships the tag at the root keeps it (its records
    read as before)."""
    from envlock.seams.conda import cache as pkgcache
    from envlock.seams.conda.install import CACHE_TAG_SIGNATURE, drop_cache_tag
    from tests.channelbuilder import PackageSpec, index_channel, write_package

    own = CACHE_TAG_SIGNATURE + b"\n# the package's own\n"
    archives = [write_package(PackageSpec("tagged", "1.0", files={"CACHEDIR.TAG": own, "share/tagged/x": "y"}),
                              tmp_path / "ch" / "noarch"),
                write_package(PackageSpec("plain", "1.0", files={"share/plain/x": "y"}), tmp_path / "ch" / "noarch")]
    index_channel(tmp_path / "ch")
    lines = [f"{a.as_uri()}#{hashlib.md5(a.read_bytes()).hexdigest()}\n" for a in archives]
    for name, chosen, kept in (("both", lines, True), ("plain", lines[1:], False)):
        lock = tmp_path / f"{name}.lock"
        lock.write_text("# platform: linux-64\n@EXPLICIT\n" + "".join(chosen))
        assert create_env(req(lock, tmp_path / name, tmp_path, {})).action == "created"
        tag = tmp_path / name / "CACHEDIR.TAG"
        assert tag.is_file() == kept and (not kept or tag.read_bytes() == own)
        summaries = [pkgcache.cached(tmp_path / "pkgs", p).summary for p in read_lock(lock).packages]
        assert any("" in s["dirs"] for s in summaries) == kept  # what create decided from
    (tmp_path / "plain" / "CACHEDIR.TAG").write_bytes(CACHE_TAG_SIGNATURE + b"\n")
    record = next((tmp_path / "plain" / "conda-meta").glob("plain-*.json"))
    doc = json.loads(record.read_text())
    record.write_text(json.dumps({**doc, "files": [*doc["files"], "CACHEDIR.TAG"]}))
    assert not drop_cache_tag(tmp_path / "plain")  # read: a record lists it
    assert drop_cache_tag(tmp_path / "plain", records=False)  # told that no package has a root path: none read


def test_create_repairs_files_deleted_by_hand(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    header = next(prefix.glob("targets/*/include/cusparse.h"))
    original = header.read_bytes()
    header.unlink()
    again = create_env(req(lock_of(project), prefix, tmp_path, mirror))
    assert again.action == "updated"
    assert header.read_bytes() == original
    assert create_env(req(lock_of(project), prefix, tmp_path, mirror)).action == "unchanged"


def test_envlock_json_has_the_keys_doctor_reads(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    meta = json.loads((prefix / envrecord.REL).read_text())
    # conda, micromamba and rattler read every conda-meta/*.json as a package record: only records there.
    from rattler import PrefixRecord

    for record in (prefix / "conda-meta").glob("*.json"):
        assert PrefixRecord.from_path(record).file_name
    lock = read_lock(lock_of(project))
    assert meta["envlock_json_version"] == 1
    assert meta["lock_path"] == str(lock_of(project).absolute())
    assert meta["content_hash"] == lock.content_hash["linux-64"]
    assert meta["platform"] == "linux-64" and meta["env_name"] == NAME
    assert meta["anchor"] == {"torch": "2.3.0", "cuda": "12.1", "cudnn": "8.9.2.26", "torch_source": "pip",
                              "source": "table"}  # where the anchor came from (doctor's re-plan fix, issue 34.3)
    assert {"envlock_version", "state"} <= set(meta) and meta["state"] == "complete"


def test_a_different_lock_updates_the_prefix(project: Path, project_124: Path, tmp_path: Path,
                                             mirror: dict[str, str]) -> None:
    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    result = create_env(req(lock_of(project_124), prefix, tmp_path, mirror))
    assert result.action == "updated"
    out = subprocess.run([str(prefix / "bin" / "nvcc"), "--version"], capture_output=True, text=True).stdout
    assert "release 12.4" in out
    names = {p.stem for p in (prefix / "conda-meta").glob("*.json")}
    wanted = {p.filename.removesuffix(".tar.bz2").removesuffix(".conda")
              for p in read_lock(lock_of(project_124)).packages_for("linux-64")}
    assert names == wanted  # 12.1 packages gone, exactly the new lock's set
    assert envrecord.read(prefix)["lock_path"] == str(lock_of(project_124).absolute())


def test_explicit_file_creates_the_same_env(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    create_env(req(lock_of(project), a, tmp_path, mirror))
    explicit = lock_of(project).parent / "conda-linux-64.lock"
    create_env(req(explicit, b, tmp_path, mirror))
    strip = lambda t: {k: v for k, v in t.items() if not k.startswith(("conda-meta", "etc/conda"))}  # noqa: E731
    ta, tb = tree(a), tree(b)
    assert strip(ta).keys() == strip(tb).keys()


@pytest.mark.parametrize("platform,probe", [
    ("linux-aarch64", "targets/sbsa-linux/include/cusparse.h"),
    ("win-64", "Library/bin/nvcc.exe"),
])
def test_cross_platform_prefixes(project: Path, tmp_path: Path, mirror: dict[str, str], platform: str,
                                 probe: str) -> None:
    prefix = tmp_path / platform
    result = create_env(req(lock_of(project), prefix, tmp_path, mirror, platform=platform))
    assert result.action == "created"
    assert (prefix / probe).is_file()
    assert envrecord.read(prefix)["platform"] == platform
    hooks = sorted(p.name for p in (prefix / "etc/conda/activate.d").glob("envlock-cuda.*"))
    assert hooks == (["envlock-cuda.bat", "envlock-cuda.ps1"] if platform == "win-64"
                     else ["envlock-cuda.fish", "envlock-cuda.sh"])
    if platform == "win-64":
        ps1 = (prefix / "etc/conda/activate.d/envlock-cuda.ps1").read_text()
        assert f"$_envlock_p = '{prefix}'" in ps1


def test_offline_uses_only_the_package_cache(project: Path, tmp_path: Path, channel_server) -> None:
    http = {"conda-forge": channel_server.channel_url("conda-forge")}
    create_env(req(lock_of(project), tmp_path / "a", tmp_path, http))
    before = channel_server.count()
    result = create_env(req(lock_of(project), tmp_path / "b", tmp_path, http, offline=True))
    assert result.action == "created" and result.downloaded == 0
    assert channel_server.count() == before  # not one request
    with pytest.raises(EnvCreateError, match="not in the package cache"):
        create_env(CreateRequest(lock_of(project), tmp_path / "c", "linux-64", offline=True,
                                 cache_dir=tmp_path / "empty", mirrors=http))
    assert not (tmp_path / "c").exists()


def test_cli_create_by_name_json_and_no_op(project: Path, tmp_path: Path, test_channel_url: str) -> None:
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_ENVS_DIR": str(tmp_path / "envs")}
    mirror = f"conda-forge={test_channel_url}"
    proc = cli("create", "--mirror", mirror, "--json", "--project-dir", str(project), env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["action"] == "created" and doc["prefix"] == str(tmp_path / "envs" / NAME)
    assert doc["platform"] == "linux-64" and doc["packages"] == doc["downloaded"]
    again = cli("create", NAME, "--mirror", mirror, "--project-dir", str(project), env=env)
    assert again.returncode == 0 and "nothing to do" in flat(again.stderr)  # folded where the path is long


def test_cli_several_locks_need_a_name(project: Path, tmp_path: Path) -> None:
    both = tmp_path / "proj"
    shutil.copytree(project / "locks", both / "locks")
    shutil.copytree(project / "locks" / NAME, both / "locks" / "other")
    proc = cli("create", "--project-dir", str(both), "-p", str(tmp_path / "x"))
    assert_one_error(proc, 1, "several locks")
    assert "other" in proc.stderr and NAME in proc.stderr


# --------------------------------------------------------------------------- faults


def _copy_channel(test_channel: Path, dest: Path) -> Path:
    for sub in ("noarch", "linux-64"):
        shutil.copytree(test_channel / sub, dest / sub)
    return dest


def test_sha256_mismatch_on_file_url_leaves_prefixes_alone(project: Path, project_124: Path, tmp_path: Path,
                                                           test_channel: Path, mirror: dict[str, str]) -> None:
    """rattler would install a tampered file:// package; envlock refuses before linking."""
    bad = _copy_channel(test_channel, tmp_path / "bad-channel")
    victim = next((bad / "linux-64").glob("cuda-nvcc-impl-12.1*"))
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    existing = tmp_path / "existing"
    create_env(req(lock_of(project_124), existing, tmp_path / "c1", mirror))  # another lock: an update
    before = tree(existing)
    for prefix in (tmp_path / "new", existing):
        with pytest.raises(EnvCreateError, match=f"sha256 mismatch for {victim.name}") as info:
            # a fresh cache, so the tampered archive has to be read
            create_env(req(lock_of(project), prefix, tmp_path / "c2", {"conda-forge": bad.as_uri()}))
        assert "nothing was installed" in (info.value.hint or "")
    assert not (tmp_path / "new").exists()
    assert tree(existing) == before
    dist = victim.name.removesuffix(".tar.bz2")
    assert not (tmp_path / "c2" / "pkgs" / victim.name).exists()  # never kept
    assert not (pkgcache.entries(tmp_path / "c2" / "pkgs") / dist).exists()  # never extracted as an entry


def test_sha256_mismatch_over_http(project: Path, tmp_path: Path, channel_root: Path, make_channel_server) -> None:
    server = make_channel_server(channel_root, faults={"*/linux-64/libcusparse-dev-*": "corrupt"})
    with pytest.raises(EnvCreateError, match="sha256 mismatch for libcusparse-dev"):
        create_env(req(lock_of(project), tmp_path / "new", tmp_path, {"conda-forge": server.channel_url()}))
    assert not (tmp_path / "new").exists()


def test_md5_only_lock_is_verified_by_md5(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """An @EXPLICIT file without envlock's sha256 comments (conda's own format): md5 is checked."""
    explicit = (lock_of(project).parent / "conda-linux-64.lock").read_text()
    plain = "\n".join(ln for ln in explicit.splitlines() if not ln.startswith("# sha256:")) + "\n"
    first_url = next(ln for ln in plain.splitlines() if "#" in ln and not ln.startswith("#"))
    bad = plain.replace(first_url, first_url.split("#")[0] + "#" + "0" * 32)
    (tmp_path / "ok.lock").write_text(plain)
    (tmp_path / "bad.lock").write_text(bad)
    assert create_env(req(tmp_path / "ok.lock", tmp_path / "ok", tmp_path, mirror)).action == "created"
    with pytest.raises(EnvCreateError, match="md5 mismatch"):
        create_env(req(tmp_path / "bad.lock", tmp_path / "bad", tmp_path / "fresh", mirror))
    assert not (tmp_path / "bad").exists()


def test_unreachable_url_is_a_channel_error(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    # one retry, not the default three: the error after retries is the subject, not rattler's ~7 s of backoff
    # (tests/reliability/test_channel_faults.py counts the retries; its refused case waits them out, slow tier)
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "1")
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ChannelError, match="connection refused"):
        create_env(req(lock_of(project), tmp_path / "new", tmp_path,
                       {"conda-forge": f"http://127.0.0.1:{port}/conda-forge"}))
    assert not (tmp_path / "new").exists()


def test_http_404_and_flaky_server(project: Path, tmp_path: Path, channel_root: Path, make_channel_server) -> None:
    missing = make_channel_server(channel_root, faults={"*/linux-64/cuda-nvcc-impl-*": "status:404"})
    with pytest.raises(ChannelError, match="HTTP 404"):
        create_env(req(lock_of(project), tmp_path / "a", tmp_path / "c1", {"conda-forge": missing.channel_url()}))
    assert not (tmp_path / "a").exists()
    flaky = make_channel_server(channel_root)
    flaky.add_fault("*/linux-64/*", "close-mid-body", times=2)  # two truncated answers, then fine
    flaky.add_fault("*/noarch/*", "status:503", times=1)
    result = create_env(req(lock_of(project), tmp_path / "b", tmp_path / "c2", {"conda-forge": flaky.channel_url()}))
    assert result.action == "created"


def test_cli_faults_are_one_error_and_a_hint(project: Path, tmp_path: Path, test_channel_url: str) -> None:
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    mirror = f"conda-forge={test_channel_url}"
    corrupt = tmp_path / "corrupt.yml"
    corrupt.write_text("version: 1\nmetadata: [this is: not, a lock\n")
    not_env = tmp_path / "not-env"
    not_env.mkdir()
    (not_env / "notes.txt").write_text("mine")
    win_only = tmp_path / "win.lock"
    win_only.write_text((lock_of(project).parent / "conda-win-64.lock").read_text())
    ro = Path("/proc/envlock-not-writable") if os.geteuid() == 0 else tmp_path / "ro" / "env"
    if os.geteuid() != 0:
        ro.parent.mkdir()
        ro.parent.chmod(0o500)
    cases = [
        (["--lock", str(tmp_path / "nope.yml"), "-p", str(tmp_path / "a")], 1, "no lock at"),
        (["--lock", str(corrupt), "-p", str(tmp_path / "a")], 1, "not a valid conda-lock v1 file"),
        (["--lock", str(win_only), "-p", str(tmp_path / "a")], 1, "has no linux-64 packages"),
        (["--lock", str(lock_of(project)), "-p", str(not_env), "--mirror", mirror], 1, "is not a conda environment"),
        (["--lock", str(lock_of(project)), "-p", str(ro), "--mirror", mirror], 1, "cannot write to"),
        (["--lock", str(lock_of(project)), "-p", str(tmp_path / "a"), "--offline"], 1, "--offline"),
    ]
    for args, code, needle in cases:
        proc = cli("create", *args, env=env)
        assert_one_error(proc, code, needle)
    assert not (tmp_path / "a").exists()
    assert [p.name for p in not_env.iterdir()] == ["notes.txt"]


def test_ctrl_c_during_download(project: Path, project_124: Path, tmp_path: Path, channel_root: Path,
                                make_channel_server, mirror: dict[str, str]) -> None:
    """SIGINT while a download hangs: exit 130, one error, new prefix absent, existing one untouched."""
    server = make_channel_server(channel_root)
    existing = tmp_path / "existing"
    create_env(req(lock_of(project_124), existing, tmp_path / "warm", mirror))  # another lock: an update
    before = tree(existing)
    for prefix in (tmp_path / "new", existing):
        stall = server.add_fault("*/linux-64/libcublas-dev-*", "stall:30", times=1)
        env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / f"cache-{prefix.name}")}
        proc = subprocess.Popen([*ENVLOCK, "create", "--lock", str(lock_of(project)), "-p", str(prefix), "-q",
                                 "--mirror", f"conda-forge={server.channel_url()}"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not stall.hits:  # the request is in, and the server sits on it
            assert time.monotonic() < deadline and proc.poll() is None, "the download never started"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-2].startswith("error: interrupted")
        assert "Traceback" not in err
    assert not (tmp_path / "new").exists()
    assert tree(existing) == before


def test_link_failure_removes_a_new_prefix_and_leaves_an_existing_one_as_it_was(
    project: Path, project_124: Path, tmp_path: Path, mirror: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package-cache entry damaged after it was checked makes rattler's link fail: a new prefix is removed, an
    existing env is left exactly as it was (an update is built beside it and swapped in: envlock/usecases/update.py);
    the next run repairs (an entry damaged before the check is extracted again: test_a_damaged_entry_is_repaired...)."""
    from envlock.seams.conda import install

    cache = tmp_path / "c"
    existing = tmp_path / "existing"
    create_env(req(lock_of(project), existing, cache, mirror))  # fills the cache with 12.1
    create_env(req(lock_of(project_124), tmp_path / "tmp124", cache, mirror))  # and with 12.4
    shutil.rmtree(tmp_path / "tmp124")
    real_link, armed = install.link, [True]

    def damage() -> None:  # the entry was checked, and its files go before rattler links them
        shutil.rmtree(next(pkgcache.entries(cache / "pkgs").glob("cuda-nvcc-impl-12.4*/bin")))

    def damaging_link(*args: Any, **kw: Any) -> None:
        if armed:
            armed.clear()
            damage()
        real_link(*args, **kw)

    monkeypatch.setattr(install, "link", damaging_link)
    with pytest.raises(EnvCreateError, match="linking into .* failed") as info:
        create_env(req(lock_of(project_124), tmp_path / "new", cache, mirror))
    assert "removed" in (info.value.hint or "")
    assert not (tmp_path / "new").exists()
    # The failed entry lost its 'verified' mark, so running again fetches it again and works.
    assert create_env(req(lock_of(project_124), tmp_path / "new", cache, mirror)).action == "created"
    armed.append(True)
    before = tree(existing)
    with pytest.raises(EnvCreateError) as info:
        create_env(req(lock_of(project_124), existing, cache, mirror))
    assert "left as it was" in (info.value.hint or "")
    assert envrecord.read(existing)["state"] == "complete" and tree(existing) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".existing.envlock-")]
    repaired = create_env(req(lock_of(project_124), existing, cache, mirror))
    assert repaired.action == "updated" and envrecord.read(existing)["state"] == "complete"
    assert (existing / "bin" / "nvcc").is_file()


def test_freshness_hook_runs_before_anything(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """`create --locked/--frozen` (lock lifecycle) plugs in here; a stale lock stops create early."""
    seen: list[str] = []

    def stale(lock: object, platform: str) -> None:
        seen.append(platform)
        raise LockfileError("lock is stale", hint="envlock lock")

    with pytest.raises(LockfileError, match="stale"):
        create_env(req(lock_of(project), tmp_path / "new", tmp_path, mirror, freshness_check=stale))
    assert seen == ["linux-64"] and not (tmp_path / "new").exists() and not (tmp_path / "pkgs").exists()


def test_cache_entries_are_verified_archives(project: Path, tmp_path: Path, mirror: dict[str, str],
                                             test_channel: Path) -> None:
    create_env(req(lock_of(project), tmp_path / "env", tmp_path, mirror))
    lock = read_lock(lock_of(project))
    for pkg in lock.packages_for("linux-64"):
        dist = pkg.filename.removesuffix(".tar.bz2").removesuffix(".conda")
        hit = pkgcache.cached(tmp_path / "pkgs", pkg)
        archive = test_channel / pkg.subdir / pkg.filename
        assert hit is not None and hit.path == pkgcache.entry(tmp_path / "pkgs", pkg) and hit.path.name == dist
        assert hit.sha256 == pkg.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
        assert pkgcache.entry(tmp_path / "pkgs", pkg, ".lock").read_bytes()[8:].hex() == pkg.sha256
        assert (tmp_path / "pkgs" / pkg.filename).read_bytes() == archive.read_bytes()  # the kept archive


def test_conda_meta_records_are_readable_by_other_users(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """rattler writes conda-meta/*.json 0600; a shared env needs them (and envlock's record) 0644 under umask 022."""
    prefix = tmp_path / "shared-env"
    old = os.umask(0o022)
    try:
        create_env(req(lock_of(project), prefix, tmp_path, mirror))
    finally:
        os.umask(old)
    records = [*(prefix / "conda-meta").glob("*.json"), prefix / envrecord.REL]
    assert len(records) > 20
    assert {oct(p.stat().st_mode & 0o777) for p in records} == {"0o644"}
    # An env of an older envlock (0600 records) gets them fixed by the next create, which changes nothing else.
    for p in records:
        p.chmod(0o600)
    old = os.umask(0o022)
    try:
        assert create_env(req(lock_of(project), prefix, tmp_path, mirror)).action == "unchanged"
    finally:
        os.umask(old)
    assert {oct(p.stat().st_mode & 0o777) for p in records} == {"0o644"}


def test_doctor_recognises_an_envlock_env_by_its_content(project: Path, tmp_path: Path, mirror: dict[str, str]) -> None:
    """No readable record (another user's 0600 file, or removed): envlock's hook still marks the env as envlock's."""
    from envlock.doctor.observe import read_meta as _read_meta

    prefix = tmp_path / "env"
    create_env(req(lock_of(project), prefix, tmp_path, mirror))
    meta, problem = _read_meta(prefix)
    assert meta is not None and meta["platform"] == "linux-64" and problem is None
    (prefix / envrecord.REL).unlink()
    meta, problem = _read_meta(prefix)
    assert meta is None and "envlock's activation hook but no record" in (problem or "")
    proc = subprocess.run([*ENVLOCK, "doctor", "-p", str(prefix), "--json"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    target = {f["code"]: f for f in json.loads(proc.stdout)["findings"]}["env.target"]
    assert target["severity"] == "warning" and "envlock environment, but" in target["message"]
    assert target["details"]["envlock_env"] is True


def test_an_entry_missing_from_the_store_is_extracted_again_without_a_tamper_notice(
        project: Path, tmp_path: Path, mirror: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    """An older envlock's records (its entries lay in the shared pkgs/) or an entry removed from the store: extracted
    again from the kept archive, without telling the user that someone changed it (nobody did)."""
    create_env(req(lock_of(project), tmp_path / "env1", tmp_path, mirror))
    shutil.rmtree(pkgcache.entries(tmp_path / "pkgs"))
    capfd.readouterr()
    result = create_env(req(lock_of(project), tmp_path / "env2", tmp_path, {}, offline=True))
    assert result.action == "created" and "not the one you verified" not in flat(capfd.readouterr().err)
    assert (tmp_path / "env2" / "bin" / "nvcc").is_file()
