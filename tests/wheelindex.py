"""A PEP 691 / PEP 503 package index of small real wheels, served from 127.0.0.1 (tests and benchmarks).

The wheels are built here (zip + METADATA + WHEEL + RECORD, installable by uv and pip): torch for every
release of envlock's torch table, shaped like the default index (Linux x86_64: the CUDA runtime and
cuDNN pins of the table; aarch64 CPU-only where the real one is; win_amd64 CPU-only), the nvidia-*
wheels and cuda-toolkit they pin, ninja (with a real `ninja` script), and torch's plain dependencies.
`torch/version.py` says the CUDA, so `import torch; torch.version.cuda` answers in a created env.

The JSON pages carry PEP 700 `upload-time` (what uv's --exclude-newer compares) and PEP 714
`core-metadata` (uv reads `<wheel>.metadata` instead of the wheel); HTML pages carry neither. A
second tree, `/whl/<variant>/`, is a PyTorch-wheel-index stand-in (local labels, no upload dates).
Every request is recorded; `corrupt(filename)` serves other bytes for one file. `login=(user, password)`
answers 401 to a request without that Basic authorization, `token=` serves everything under a conda-style
`/t/<token>/` prefix only (tests of credentials, tests/security/test_secrets.py).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import quote, unquote

from tests.loopserver import LoopbackServer

#: Upload time of every default-index file (before any test's resolution cutoff).
UPLOADED = "2024-01-01T00:00:00Z"
PYTHONS = ("3.10", "3.11", "3.12")
_ZIP_TIME = (2024, 1, 1, 0, 0, 0)


@dataclass
class Wheel:
    """One built wheel (or, with `data=None`, a file the index lists but cannot serve)."""

    project: str
    version: str
    filename: str
    data: bytes
    metadata: bytes
    upload_time: str | None = UPLOADED

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(
    name: str,
    version: str,
    tag: str = "py3-none-any",
    *,
    requires: Sequence[str] = (),
    files: Mapping[str, str | bytes] | None = None,
    scripts: Mapping[str, str | bytes] | None = None,
    entry_points: Mapping[str, str] | None = None,
    upload_time: str | None = UPLOADED,
) -> Wheel:
    """A real wheel: deterministic bytes for the same arguments."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = "\n".join(
        ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: envlock test wheel",
         *[f"Requires-Dist: {r}" for r in requires]]
    ) + "\n\n"
    members: dict[str, bytes] = {}
    module = files if files is not None else {f"{dist}/__init__.py": f'__version__ = "{version}"\n'}
    for path, content in module.items():
        members[path] = content.encode() if isinstance(content, str) else content
    for script, content in (scripts or {}).items():
        members[f"{dist}-{version}.data/scripts/{script}"] = content.encode() if isinstance(content, str) else content
    members[f"{info}/METADATA"] = meta.encode()
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: envlock-tests\nRoot-Is-Purelib: {'true' if tag.endswith('any') else 'false'}\n"
        + "".join(f"Tag: {t}\n" for t in _expand(tag))
    ).encode()
    if entry_points:
        members[f"{info}/entry_points.txt"] = (
            "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        ).encode()
    record = [_record_line(p, d) for p, d in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            zi = zipfile.ZipInfo(path, _ZIP_TIME)
            zi.external_attr = (0o755 if "/scripts/" in path else 0o644) << 16
            zf.writestr(zi, data)
    return Wheel(name, version, f"{dist}-{version}-{tag}.whl", buf.getvalue(), meta.encode(), upload_time)


def _expand(tag: str) -> list[str]:
    py, abi, plats = tag.split("-")
    return [f"{p}-{a}-{pl}" for p in py.split(".") for a in abi.split(".") for pl in plats.split(".")]


# --------------------------------------------------------------------------- catalogues


def _cp(py: str) -> str:
    return "cp" + py.replace(".", "")


def _runtime_pin(requires: str) -> tuple[str, str]:
    """(name, version) of a table pin like nvidia-cuda-runtime-cu12==12.6.77 or cuda-toolkit[...]==13.0.2."""
    name, _, version = requires.partition("==")
    return name.split("[")[0], version


def torch_wheels(pythons: Iterable[str] = PYTHONS, releases: Iterable[str] | None = None) -> list[Wheel]:
    """torch for every release of envlock's table, plus the CUDA wheels its Linux x86_64 build pins."""
    from envlock.core.tables import torch_table

    out: dict[str, Wheel] = {}
    wanted = set(releases) if releases is not None else None
    for row in torch_table().rows:
        runtime, rt_version = _runtime_pin(row.pypi_requires)
        cu = "cu" + row.pypi_cuda.split(".")[0]
        cudnn = f"nvidia-cudnn-{cu}=={row.pypi_cudnn}" if row.pypi_cudnn else None
        for release in row.releases:
            if wanted is not None and release not in wanted:
                continue
            for py in pythons:
                for plat, cuda in (("manylinux_2_28_x86_64", True), ("manylinux_2_28_aarch64", row.aarch64_pypi_cuda),
                                   ("win_amd64", False)):
                    marker = '; platform_system == "Linux"'
                    reqs = ["filelock", "typing-extensions>=4.8.0", "sympy>=1.13.3"]
                    if cuda:
                        reqs += [f"{row.pypi_requires}{marker}", *([f"{cudnn}{marker}"] if cudnn else [])]
                    w = _torch(release, py, plat, row.pypi_cuda if cuda else None, reqs)
                    out[w.filename] = w
        out.update({w.filename: w for w in _cuda_wheels(runtime, rt_version, row.pypi_cudnn, cu)})
    return list(out.values())


def _torch(version: str, py: str, plat: str, cuda: str | None, requires: Sequence[str],
           upload_time: str | None = UPLOADED) -> Wheel:
    files = {
        "torch/__init__.py": f'__version__ = "{version}"\nfrom torch import version\n',
        "torch/version.py": f'__version__ = "{version}"\ncuda = {cuda!r}\n',
    }
    return build_wheel("torch", version, f"{_cp(py)}-{_cp(py)}-{plat}", requires=requires, files=files,
                       entry_points={"torchrun": "torch:__init__"}, upload_time=upload_time)


def _cuda_wheels(runtime: str, version: str, cudnn: str | None, cu: str) -> list[Wheel]:
    out = []
    for arch in ("x86_64", "aarch64"):
        plats = f"manylinux2014_{arch}.manylinux_2_17_{arch}"
        if runtime == "cuda-toolkit":  # 2.11+: the metapackage whose cudart extra pins the unsuffixed runtime
            rt = f"{version.split('.')[0]}.{version.split('.')[1]}.96"
            out.append(build_wheel("nvidia-cuda-runtime", rt, f"py3-none-{plats}"))
        else:
            out.append(build_wheel(runtime, version, f"py3-none-{plats}"))
        if cudnn:
            out.append(build_wheel(f"nvidia-cudnn-{cu}", cudnn, f"py3-none-{plats}"))
    if runtime == "cuda-toolkit":
        out.append(build_wheel("cuda-toolkit", version, "py3-none-any",
                               requires=[f'nvidia-cuda-runtime=={rt}; extra == "cudart"']))
    return out


NINJA_SCRIPT = "#!/bin/sh\necho 1.13.2.envlock-test\n"


def common_wheels() -> list[Wheel]:
    """torch's plain dependencies and ninja (a `ninja` script that answers like the real one)."""
    return [
        build_wheel("filelock", "3.16.1"),
        build_wheel("typing-extensions", "4.12.2", files={"typing_extensions.py": "X = 1\n"}),
        build_wheel("sympy", "1.13.3", requires=["mpmath<1.4,>=1.1.0"]),
        build_wheel("sympy", "1.12.1", requires=["mpmath<1.4,>=1.1.0"]),
        build_wheel("mpmath", "1.3.0"),
        build_wheel("einops", "0.8.0"),
        build_wheel("ninja", "1.13.2", "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
                    scripts={"ninja": NINJA_SCRIPT}),
        build_wheel("ninja", "1.13.2", "py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64",
                    scripts={"ninja": NINJA_SCRIPT}),
        build_wheel("ninja", "1.13.2", "py3-none-win_amd64", scripts={"ninja": NINJA_SCRIPT}),
        # Uploaded after every test's cutoff: a resolve must never lock it.
        build_wheel("sympy", "1.99.0", requires=["mpmath<1.4,>=1.1.0"], upload_time="2099-01-01T00:00:00Z"),
        # Only a Windows wheel: "no wheel for linux-64".
        build_wheel("winonly", "1.0", "py3-none-win_amd64"),
        # Its sha256 is right, its bytes are no zip: uv's install fails after the conda part is linked.
        Wheel("brokenwheel", "1.0", "brokenwheel-1.0-py3-none-any.whl", b"PK\x03\x04 not a zip archive",
              b"Metadata-Version: 2.1\nName: brokenwheel\nVersion: 1.0\n\n"),
    ]


def variant_wheels(variant: str, version: str, cuda: str, pythons: Iterable[str] = PYTHONS) -> list[Wheel]:
    """A PyTorch-wheel-index variant: torch <version>+<variant> (Linux x86_64 with pins, win_amd64 bundled)."""
    out = []
    cu = "cu" + cuda.split(".")[0]
    rt = {"12.6": "12.6.77", "12.8": "12.8.90", "12.4": "12.4.127", "11.8": "11.8.89"}.get(cuda, f"{cuda}.0")
    for py in pythons:
        reqs = ["filelock", "sympy", f'nvidia-cuda-runtime-{cu}=={rt}; platform_system == "Linux"']
        out.append(_torch(f"{version}+{variant}", py, "manylinux_2_28_x86_64", cuda, reqs, upload_time=None))
        out.append(_torch(f"{version}+{variant}", py, "win_amd64", cuda, ["filelock", "sympy"], upload_time=None))
        out.append(_torch(f"{version}+cpu", py, "manylinux_2_28_x86_64", None, ["filelock"], upload_time=None))
    out.append(build_wheel(f"nvidia-cuda-runtime-{cu}", rt, "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64",
                           upload_time=None))
    return out


# --------------------------------------------------------------------------- the server


@dataclass
class WheelIndex:
    """Projects under /simple/ (the default index) and /whl/<variant>/ (PyTorch-index stand-ins)."""

    trees: dict[str, dict[str, list[Wheel]]] = field(default_factory=dict)  # tree -> project -> wheels
    requests: list[str] = field(default_factory=list)
    corrupted: set[str] = field(default_factory=set)
    down: bool = False
    ranges: bool = False  # answer HTTP range requests (206), as file hosts do
    no_metadata: set[str] = field(default_factory=set)  # wheels whose PEP 658 .metadata is a 404
    ranged: list[str] = field(default_factory=list)  # the Range header of every request that had one
    login: tuple[str, str] | None = None  # (user, password) every request must send as Basic authorization
    token: str | None = None  # every path must start with /t/<token>/
    authorizations: list[str] = field(default_factory=list)  # the Authorization headers received
    _server: LoopbackServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, wheels: Iterable[Wheel], tree: str = "simple") -> WheelIndex:
        for w in wheels:
            self.trees.setdefault(tree, {}).setdefault(_norm(w.project), []).append(w)
        return self

    @property
    def base(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """The default index (what PIP_INDEX_URL holds)."""
        return self.base + "/simple/"

    def variant_url(self, variant: str) -> str:
        return f"{self.base}/whl/{variant}"

    def corrupt(self, filename: str) -> None:
        """Serve other bytes for this file from now on (the index's listing keeps the locked hash)."""
        self.corrupted.add(filename)

    def downloads(self) -> list[str]:
        """Wheel files fetched (not their .metadata)."""
        with self._lock:
            return [p for p in self.requests if p.endswith(".whl")]

    def start(self) -> WheelIndex:
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _find(self, tree: str, filename: str) -> Wheel | None:
        for wheels in self.trees.get(tree, {}).values():
            for w in wheels:
                if w.filename == filename:
                    return w
        return None


class _Server(LoopbackServer):
    pass


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _handler(idx: WheelIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        def _send(self, status: int, body: bytes = b"", ctype: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = unquote(self.path.split("?", 1)[0])
            with idx._lock:
                idx.requests.append(path)
                idx.authorizations.append(self.headers.get("Authorization", ""))
            if idx.down:
                self._send(503, b"down for the test")
                return
            if idx.token is not None:
                if not path.startswith(f"/t/{idx.token}/"):
                    self._send(404, b"not found")
                    return
                path = path[len(f"/t/{idx.token}") :]
            if idx.login is not None:
                want = "Basic " + base64.b64encode(":".join(idx.login).encode()).decode()
                if self.headers.get("Authorization") != want:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="test index"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            parts = [p for p in path.split("/") if p]
            if len(parts) >= 2 and parts[0] == "simple":
                tree, rest, root = "simple", parts[1:], "/files/"
            elif len(parts) >= 3 and parts[0] == "whl":
                tree, rest, root = f"whl/{parts[1]}", parts[2:], f"/whl/{parts[1]}/"
            elif len(parts) == 2 and parts[0] == "files":
                tree, rest, root = "simple", ["@file", parts[1]], ""
            else:
                self._send(404, b"not found")
                return
            if idx.token is not None:
                root = f"/t/{idx.token}{root}" if root else root
            if rest[0] == "@file" or rest[-1].endswith((".whl", ".metadata")):
                self._file(tree, rest[-1])
            else:
                self._page(tree, _norm(rest[0]), root)

        def _file(self, tree: str, name: str) -> None:
            meta = name.endswith(".metadata")
            w = idx._find(tree, name.removesuffix(".metadata"))
            wanted = self.headers.get("Range")
            if wanted:
                with idx._lock:
                    idx.ranged.append(wanted)
            if w is None or (meta and w.filename in idx.no_metadata):
                self._send(404, b"not found")
            elif meta:
                self._send(200, w.metadata)
            elif w.filename in idx.corrupted:
                self._send(200, w.data[:-1] + bytes([w.data[-1] ^ 1]), "application/octet-stream")
            elif idx.ranges and wanted and wanted.startswith("bytes="):
                self._range(w.data, wanted.removeprefix("bytes="))
            else:
                self._send(200, w.data, "application/octet-stream")

        def _range(self, data: bytes, spec: str) -> None:
            first, _, last = spec.partition("-")
            start, end = (len(data) - int(last), len(data) - 1) if not first else (int(first), int(last or len(data) - 1))
            start, end = max(0, start), min(end, len(data) - 1)
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _page(self, tree: str, project: str, root: str) -> None:
            wheels = idx.trees.get(tree, {}).get(project)
            if not wheels:
                self._send(404, b"not found")
                return
            if "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
                files = []
                for w in wheels:
                    entry = {"filename": w.filename, "url": root + quote(w.filename),
                             "hashes": {"sha256": w.sha256}, "core-metadata": {"sha256": hashlib.sha256(w.metadata).hexdigest()}}
                    if w.upload_time:
                        entry["upload-time"] = w.upload_time
                    files.append(entry)
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()
                self._send(200, body, "application/vnd.pypi.simple.v1+json")
                return
            links = "".join(f'<a href="{root}{quote(w.filename)}#sha256={w.sha256}">{w.filename}</a><br/>\n' for w in wheels)
            self._send(200, f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html")

    return Handler


def default_index(pythons: Iterable[str] = PYTHONS) -> WheelIndex:
    """The default-index stand-in (every torch release, its CUDA wheels, ninja, deps) plus cu126/cu128 variants."""
    idx = WheelIndex().add(torch_wheels(pythons)).add(common_wheels())
    idx.add(variant_wheels("cu126", "2.7.1", "12.6", pythons), "whl/cu126")
    idx.add(variant_wheels("cu128", "2.7.1", "12.8", pythons), "whl/cu128")
    idx.add(variant_wheels("cu121", "2.3.0", "12.1", pythons), "whl/cu121")
    return idx


def write_pip_conf(path: Path, index_url: str) -> Path:
    """A pip.conf naming only that index."""
    path.write_text(f"[global]\nindex-url = {index_url}\n")
    return path


def write_static(root: Path, wheels: Iterable[Wheel], *, files_apart: bool = False) -> str:
    """A static PEP 503 index in a folder (what `pip download` + an index generator, or an air-gapped site's mirror
    makes): `index.html` pages, no upload times (those are PEP 691 JSON only). `files_apart`: the pages live in
    `<root>/index/<project>/` and link `../../files/<wheel>` beside them, outside the index folder. Returns the
    file:// URL that PIP_INDEX_URL names."""
    pages = root / ("index" if files_apart else "simple")
    projects: dict[str, list[Wheel]] = {}
    for w in wheels:
        if w.data is not None and w.data.startswith(b"PK\x03\x04") and len(w.data) > 64:
            projects.setdefault(_norm(w.project), []).append(w)
    for project, ws in projects.items():
        page = pages / project
        page.mkdir(parents=True, exist_ok=True)
        links = []
        for w in ws:
            where = (root / "files") if files_apart else page
            where.mkdir(parents=True, exist_ok=True)
            (where / w.filename).write_bytes(w.data)
            href = f"../../files/{quote(w.filename)}" if files_apart else quote(w.filename)
            links.append(f'<a href="{href}#sha256={w.sha256}">{w.filename}</a><br/>')
        (page / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (pages / "index.html").write_text("<!DOCTYPE html><html><body>\n"
                                      + "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects)) + "</body></html>\n")
    return pages.as_uri()


def undated(wheels: Iterable[Wheel]) -> list[Wheel]:
    """The same wheels without upload times (an index that serves none: devpi, a plain mirror, a static folder)."""
    import dataclasses

    return [dataclasses.replace(w, upload_time=None) for w in wheels]
