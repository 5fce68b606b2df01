"""What an attacker hands envlock, built by the tests: real tiny conda packages and wheels, locks written entry by
entry (every byte of them the attacker's), a file server on 127.0.0.1 that serves any path it is asked, and a
snapshot of what lies outside a root (the prefix's or the mirror's parent, a stand-in $HOME and /etc/profile.d).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from envlock.models import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from envlock.formats import render_conda_lock, render_package_section
from envlock.models import LockedPackage, PypiPackage
from envlock.names import file_url_path
from tests.channelbuilder import PackageSpec, python_packages, write_package
from tests.loopserver import LoopbackServer

ENVLOCK = [sys.executable, "-m", "envlock"]
CF = "https://conda.anaconda.org/conda-forge"
PLATFORM = "linux-64"
NVCC = "#!/bin/sh\necho 'Cuda compilation tools, release {v}, V{v}.1'\n"


# --------------------------------------------------------------------------- packages and locks


def tool(version: str = "12.1", **kw: Any) -> PackageSpec:
    """A small linux-64 package with bin/nvcc (prints its version) and a header."""
    files = {"bin/nvcc": NVCC.format(v=version), "include/tool.h": f"/* tool {version} */\n", **kw.pop("files", {})}
    return PackageSpec("cuda-nvcc", version, subdir=PLATFORM, files=files, executables={"bin/nvcc"}, **kw)


def python311() -> PackageSpec:
    return python_packages(PLATFORM, ["3.11"])[0]


def locked(spec: PackageSpec, archive: Path, url: str | None = None, **fields: Any) -> LockedPackage:
    """The lock entry of a built archive (its real hashes), at `url` (default: conda-forge's canonical URL)."""
    data = archive.read_bytes()
    url = url or f"{CF}/{spec.subdir}/{archive.name}"
    pkg = LockedPackage(name=spec.name, version=spec.version, build=spec.build, platform=PLATFORM, url=url,
                        md5=hashlib.md5(data).hexdigest(), sha256=hashlib.sha256(data).hexdigest(),
                        subdir=spec.subdir)
    return replace(pkg, **fields)


def built(spec: PackageSpec, channel: Path, url: str | None = None, **fields: Any) -> LockedPackage:
    """Write `spec` into `channel/<subdir>/` and return its lock entry."""
    return locked(spec, write_package(spec, channel / spec.subdir), url, **fields)


def wheel_entry(name: str, version: str, url: str, data: bytes) -> PypiPackage:
    return PypiPackage(name=name, version=version, platform=PLATFORM, url=url, sha256=hashlib.sha256(data).hexdigest())


def write_lock(path: Path, packages: Sequence[LockedPackage], wheels: Sequence[PypiPackage] = (),
               env_name: str = "hostile", extra_meta: Mapping[str, str] | None = None, index: bool = True) -> Path:
    """A conda-lock v1 file holding exactly these entries (envlock's own header, so it reads as envlock's).

    `index`: the local channels its file:// URLs point into are indexed (envlock reads a lock's file:// URL only
    inside a conda channel whose repodata.json lists the file)."""
    if index:
        from tests.channelbuilder import index_channel

        for chan in sorted({file_url_path(p.url).parent.parent for p in packages if p.url.startswith("file:")}):
            if chan.is_dir():
                index_channel(chan, write_zst=False, write_shards=False)
    meta = {"envlock.version": "0.0", "envlock.lock_format": "1", "envlock.env_name": env_name, **(extra_meta or {})}
    text = render_conda_lock(packages=packages, platforms=[PLATFORM], channels=[CF], content_hashes={PLATFORM: "0" * 64},
                             sources=[], custom_metadata=meta,
                             package_section=render_package_section(packages, [PLATFORM], wheels))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def craft_archive(tmp_path: Path, lock_text: str, extra: dict[str, bytes], manifest: dict[str, Any] | None = None) -> Path:
    """A pack archive as an attacker makes it: any members, a manifest whose hashes match them."""
    staging = tmp_path / "craft"
    for rel, data in {"locks/hostile/conda-lock.yml": lock_text.encode(), **extra}.items():
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging / rel).write_bytes(data)
    doc = {"envlock_pack_version": 1, "envlock_version": "0.0", "name": "hostile", "platform": "linux-64",
           "lock": "locks/hostile/conda-lock.yml", "channels": {"https://conda.anaconda.org/conda-forge/": "channels/conda-forge"},
           "pypi": "pypi/simple", **(manifest or {})}
    out = tmp_path / "hostile.tar"
    from envlock.usecases.pack import _write_tar  # the real writer: the attacker's archive is well-formed

    out.unlink(missing_ok=True)  # the writer makes a new file (O_EXCL)
    _write_tar(staging, doc, out)
    return out


# --------------------------------------------------------------------------- a server of any path


class AnyPathServer:
    """HTTP on 127.0.0.1 (or `host`): `routes` maps a request path's last segment (percent-decoded) to the bytes
    served; `stall`: seconds it sits on a body after its first 64 KB (a download a test can kill half-way)."""

    def __init__(self, routes: Mapping[str, bytes], host: str = "127.0.0.1", stall: float = 0) -> None:
        self.routes = dict(routes)
        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.paths.append(self.path)
                last = unquote(self.path.split("?", 1)[0].rsplit("/", 1)[-1])
                body = outer.routes.get(last)
                if body is None:
                    body = next((b for k, b in outer.routes.items() if self.path.endswith(k)), None)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if stall:
                    self.wfile.write(body[:65536])
                    self.wfile.flush()
                    time.sleep(stall)
                    body = body[65536:]
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the client is gone (killed)

            do_HEAD = do_GET  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = LoopbackServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> AnyPathServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --------------------------------------------------------------------------- running envlock, judging the outcome


def envlock(*args: str, env: Mapping[str, str], cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def assert_refused(done: subprocess.CompletedProcess[str], *says: str) -> str:
    """Non-zero exit, one error line and a hint (`error:`/`hint:`, or --json's "error"/"hint"), no traceback, no
    internal error; the error mentions each of `says`. Returns the error line."""
    out = done.stdout + done.stderr
    assert done.returncode not in (0, None), out
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "error" in doc:
        errors, hinted = [f"error: {doc['error']}"], bool(doc.get("hint"))
        assert "\n" not in doc["error"], out
    else:  # lines are folded to 80 columns: read as a terminal shows them, continuations joined (tests/output.py)
        from tests.output import logical_lines

        errors = [ln for ln in logical_lines(out) if ln.startswith("error:")]
        hinted = any(ln.startswith("hint:") for ln in logical_lines(out))
    assert len(errors) == 1 and hinted, out
    assert "Traceback" not in out and "internal error" not in out, out
    for s in says:
        assert s in errors[0], (s, out)
    return errors[0]


def tree(root: Path, skip: Iterable[Path] = ()) -> dict[str, tuple[Any, ...]]:
    """Every entry under `root` (but those under `skip`): kind, mode, and bytes or link target."""
    skipped = {os.path.realpath(p) for p in skip}
    out: dict[str, tuple[Any, ...]] = {}
    if not os.path.lexists(root):
        return out
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.realpath(os.path.join(top, d)) not in skipped]
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            if os.path.realpath(path) in skipped and not os.path.islink(path):
                continue
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(path, "rb") as fh:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(fh.read()).hexdigest())
    return out


class Outside:
    """Snapshots of what must not change: everything under `base` but the roots envlock may write (the test puts
    its stand-ins for $HOME and /etc/profile.d there), and the real /etc/profile.d (tests run as root here, so a
    hook planted there would be real)."""

    def __init__(self, base: Path, *roots: Path) -> None:
        self.base, self.roots = base, roots
        self.before = self._take()

    def _take(self) -> dict[str, Any]:
        return {"base": tree(self.base, self.roots), "/etc/profile.d": tree(Path("/etc/profile.d"))}

    def changed(self) -> dict[str, Any]:
        after = self._take()
        out = {}
        for k in self.before:
            b, a = self.before[k], after[k]
            diff = {p: (b.get(p), a.get(p)) for p in set(b) | set(a) if b.get(p) != a.get(p)}
            if diff:
                out[k] = diff
        return out


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment for a hostile run: its own cache, HOME inside `tmp` (so $HOME is one the test watches)."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp / "cache"), "HOME": str(home), "NO_COLOR": "1",
            "ENVLOCK_HTTP_RETRIES": "0", **extra}


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(done.stdout)
