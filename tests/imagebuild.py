"""Real image builds without a daemon or a registry: buildah (vfs storage, chroot isolation), local base
images made from this machine's own files, a conda channel and a package index on file://.

What each piece is, and what is not the real thing:
  python base   busybox-static + bash + this interpreter's own CPython (stdlib, ensurepip) at /usr/local,
                with the shared libraries it and its extension modules load, and the CA bundle: the build
                stage's "python image".
  runtime base  busybox-static + this machine's g++ (driver, cc1plus, libstdc++ and libc headers): a small
                runtime image with a host compiler nvcc can preprocess through.
  channel       tests/nvidia_wheels.py's CUDA 13.0 packages (real nvcc, real cusparse.h ...) in conda-forge's
                layout, with cuda-nvcc's activation in cuda-nvcc_linux-64 as conda-forge ships it, and:
                gcc_linux-64/gxx_linux-64 whose activation is conda-forge's (CC=<prefix>/bin/<triplet>-cc,
                CXX=…-c++) and whose <triplet>-cc/-c++ exec /usr/bin/gcc, /usr/bin/g++ (no conda-forge gcc can
                exist here); python = a copy of this interpreter's launcher with a pyvenv.cfg (home =
                /usr/local/bin), i.e. a real Python whose prefix is the env, as `python -m venv --copies` makes.
  index         the wheels envlock/data/image-requirements.txt pins (pip download, hash-checked, cached) and a tiny
                wheel for the PyPI part, as a PEP 503 tree pip reads over file://; no envlock-cuda (the build
                context holds envlock's own wheel).
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.channelbuilder import PackageSpec, index_channel, write_package

REPO = Path(__file__).resolve().parent.parent
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TRIPLET = "x86_64-conda-linux-gnu"
PROBE = ("envlock-probe", "1.0")  # the PyPI part's wheel


# --------------------------------------------------------------------------- buildah


class Buildah:
    """buildah with its own storage under `root` (vfs: no overlay mounts needed), removed by `cleanup`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = ["buildah", "--storage-driver", "vfs", "--root", str(root / "storage"),
                     "--runroot", str(root / "run")]

    def __call__(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr[-3000:]}")
        return proc

    def image_from_rootfs(self, rootfs: Path, name: str, env: dict[str, str] | None = None) -> str:
        """Commit a directory as an image; return NAME@sha256:DIGEST as a Dockerfile would pin it."""
        container = self("from", "scratch").stdout.strip()
        self("copy", container, f"{rootfs}/", "/")
        for key, value in (env or {}).items():
            self("config", "--env", f"{key}={value}", container)
        self("commit", "-q", container, f"{name}:test")
        self("rm", container)
        digest = self("images", "--digests", "--format", "{{.Digest}}", f"{name}:test").stdout.split()[0]
        return f"{name}@{digest}"

    def size(self, image: str) -> str:
        """The image's size as buildah reports it ("356 MB")."""
        return str(json.loads(self("images", "--json", image).stdout)[0]["size"])

    def cleanup(self) -> None:
        self("rm", "--all", check=False)
        self("rmi", "--all", "--force", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def buildah_problem(tmp: Path) -> str | None:
    """Why buildah cannot build here, or None (it must create a container and run a step in it)."""
    if shutil.which("buildah") is None or shutil.which("busybox") is None:
        return "needs buildah and a static busybox (Debian: apt-get install buildah busybox-static)"
    if os.geteuid() != 0:
        return "buildah with --isolation chroot needs root here"
    b = Buildah(tmp / "probe")
    try:
        rootfs = tmp / "probe-rootfs"
        _busybox(rootfs)
        image = b.image_from_rootfs(rootfs, "localhost/envlock-probe")
        c = b("from", "--pull=false", image).stdout.strip()
        out = b("run", "--isolation", "chroot", c, "--", "sh", "-c", "echo ok", check=False)
        return None if out.stdout.strip() == "ok" else f"buildah run does not work here: {out.stderr.strip()[-300:]}"
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return f"buildah does not work here: {exc}"
    finally:
        b.cleanup()
        shutil.rmtree(tmp / "probe-rootfs", ignore_errors=True)


# --------------------------------------------------------------------------- root filesystems


def _copy(src: Path, rootfs: Path) -> None:
    """Copy a file (or a symlink and what it points to) to the same absolute path under rootfs."""
    dest = rootfs / str(src).lstrip("/")
    if dest.exists() or dest.is_symlink():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        target = os.readlink(src)
        os.symlink(target, dest)
        _copy((src.parent / target) if not os.path.isabs(target) else Path(target), rootfs)
    else:
        shutil.copy2(src, dest)


def _needed_libs(files: list[Path]) -> set[Path]:
    """The shared libraries `files` load, as ldd resolves them here."""
    libs: set[Path] = set()
    for f in files:
        out = subprocess.run(["ldd", str(f)], capture_output=True, text=True).stdout
        for m in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", out):
            libs.add(Path(m.group(1)))
    return libs


def _busybox(rootfs: Path) -> None:
    """busybox-static with every applet, /etc/passwd, /etc/group and a sticky /tmp."""
    (rootfs / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(shutil.which("busybox") or "/bin/busybox", rootfs / "bin" / "busybox")
    applets = subprocess.run([str(rootfs / "bin" / "busybox"), "--list"], capture_output=True, text=True).stdout.split()
    for applet in applets:
        link = rootfs / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    (rootfs / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc").mkdir(exist_ok=True)
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (rootfs / "etc" / "group").write_text("root:x:0:\n")
    (rootfs / "root").mkdir(exist_ok=True)
    (rootfs / "tmp").mkdir(exist_ok=True)
    os.chmod(rootfs / "tmp", 0o1777)


def glibc_rootfs(rootfs: Path) -> None:
    """busybox and glibc's shared libraries (what a dynamically linked nvcc needs to start), no compiler."""
    _busybox(rootfs)
    for lib in _needed_libs([Path(shutil.which("env") or "/usr/bin/env")]) | _manylinux_libs():
        _copy(lib, rootfs)


def python_rootfs(rootfs: Path) -> None:
    """The build stage's base: busybox, bash, and this CPython at /usr/local (python3, python, pip via venv)."""
    _busybox(rootfs)
    base = Path(sys.base_prefix)
    exe = base / "bin" / f"python{PY}"
    local = rootfs / "usr" / "local"
    (local / "bin").mkdir(parents=True)
    shutil.copy2(exe, local / "bin" / f"python{PY}")
    for alias in ("python3", "python"):
        (local / "bin" / alias).symlink_to(f"python{PY}")
    skip = {"site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "__pycache__", f"config-{PY}-x86_64-linux-gnu"}
    shutil.copytree(base / "lib" / f"python{PY}", local / "lib" / f"python{PY}",
                    ignore=lambda _d, names: [n for n in names if n in skip])
    (local / "lib" / f"python{PY}" / "site-packages").mkdir()
    binaries = [exe, *sorted((base / "lib" / f"python{PY}" / "lib-dynload").glob("*.so"))]
    libpython = [p for p in base.glob("lib/libpython*.so*") if p.is_file() and not p.is_symlink()]
    bash = Path(shutil.which("bash") or "/bin/bash")
    # libpython where the dynamic loader looks without the build-time RUNPATH
    for lib in libpython:
        dest = rootfs / "usr" / "lib" / "x86_64-linux-gnu" / lib.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dest)
        for link in base.glob("lib/libpython*.so*"):
            if link.is_symlink() and not (dest.parent / link.name).exists():
                (dest.parent / link.name).symlink_to(os.readlink(link))
    _copy(bash.resolve(), rootfs)
    (rootfs / "bin" / "bash").unlink(missing_ok=True)
    (rootfs / "bin" / "bash").symlink_to(str(bash.resolve()))
    for lib in _needed_libs([*binaries, *libpython, bash]) | _manylinux_libs():
        if "libpython" not in lib.name:
            _copy(lib, rootfs)
    # Python images carry the CA bundle; py-rattler's HTTP client panics without one, even for file:// URLs.
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if bundle.is_file():
        _copy(bundle.resolve(), rootfs)
        if bundle.resolve() != bundle:
            (rootfs / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
            (rootfs / "etc/ssl/certs/ca-certificates.crt").symlink_to(str(bundle.resolve()))


def _manylinux_libs() -> set[Path]:
    """The system libraries manylinux wheels may load (py-rattler, pydantic-core ...): libgcc_s, libstdc++, glibc's."""
    names = ("libgcc_s.so.1", "libstdc++.so.6", "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1",
             "libpthread.so.0", "libutil.so.1", "libresolv.so.2", "libz.so.1")
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    found: dict[str, Path] = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)", line)
        if m and m.group(1) in names and m.group(1) not in found:
            found[m.group(1)] = Path(m.group(2))
    return set(found.values())


def runtime_rootfs(rootfs: Path) -> None:
    """The final stage's base: busybox and this machine's g++ (what nvcc -E needs: driver, cc1plus, headers)."""
    _busybox(rootfs)
    gxx = Path(shutil.which("g++") or "/usr/bin/g++").resolve()
    gcc = Path(shutil.which("gcc") or "/usr/bin/gcc").resolve()
    cc1plus = Path(subprocess.run([str(gxx), "-print-prog-name=cc1plus"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    for tool in (gxx, gcc, cc1plus):
        _copy(tool, rootfs)
    for name, tool in (("g++", gxx), ("gcc", gcc)):
        (rootfs / "usr" / "bin" / name).symlink_to(str(tool))
    probe = subprocess.run([str(gxx), "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True)
    dirs = re.search(r"search starts here:\n(.*?)End of search list", probe.stderr, re.S)
    for d in (Path(line.strip()) for line in (dirs.group(1) if dirs else "").splitlines()):
        if not d.is_dir() or d == Path("/usr/include") or d == Path("/usr/include/x86_64-linux-gnu") or \
                d == Path("/usr/local/include"):
            continue
        shutil.copytree(d, rootfs / str(d).lstrip("/"), symlinks=True, dirs_exist_ok=True)
    # libc's and the kernel's headers (dpkg's file lists where there are some, else all of /usr/include)
    listed = subprocess.run(["dpkg", "-L", "libc6-dev", "linux-libc-dev"], capture_output=True, text=True)
    headers = [Path(p) for p in listed.stdout.splitlines() if p.startswith("/usr/include/")] if listed.returncode == 0 else []
    if headers:
        for h in headers:
            if h.is_file() or h.is_symlink():
                _copy(h, rootfs)
    else:
        shutil.copytree("/usr/include", rootfs / "usr" / "include", symlinks=True, dirs_exist_ok=True)
    for lib in _needed_libs([gxx, gcc, cc1plus]) | _manylinux_libs():
        _copy(lib, rootfs)


# --------------------------------------------------------------------------- the conda channel


def docker_channel(dest: Path) -> Path:
    """tests/nvidia_wheels.py's CUDA 13.0 packages + conda-forge-shaped compilers and a venv-style python."""
    from tests import nvidia_wheels

    wheels, _ = nvidia_wheels.download()
    specs = nvidia_wheels.cuda_packages(wheels)
    nvcc = next(s for s in specs if s.name == "cuda-nvcc")
    activate = nvcc.files.pop("etc/conda/activate.d/~cuda-nvcc_activate.sh")
    nvcc_plat = PackageSpec(
        "cuda-nvcc_linux-64", nvcc.version, subdir="linux-64", fmt=".conda",
        files={"etc/conda/activate.d/~cuda-nvcc_activate.sh": activate},
    )
    nvcc.depends.append(f"cuda-nvcc_linux-64 {nvcc.version}")
    gv = subprocess.run(["gcc", "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                        check=True).stdout.strip()

    def shim(target: str) -> str:
        return f'#!/bin/sh\nexec {target} "$@"\n'

    compilers = [
        PackageSpec(
            "gcc_linux-64", gv, subdir="linux-64", fmt=".conda",
            files={f"bin/{TRIPLET}-cc": shim("/usr/bin/gcc"), f"bin/{TRIPLET}-gcc": shim("/usr/bin/gcc"),
                   # conda-forge's activate-gcc.sh exports CC=${CONDA_PREFIX}/bin/${CHOST}-cc (facts §6)
                   "etc/conda/activate.d/activate-gcc_linux-64.sh": f'export CC="${{CONDA_PREFIX}}/bin/{TRIPLET}-cc"\n'},
            executables={f"bin/{TRIPLET}-cc", f"bin/{TRIPLET}-gcc"},
        ),
        PackageSpec(
            "gxx_linux-64", gv, subdir="linux-64", fmt=".conda", depends=[f"gcc_linux-64 {gv}"],
            files={f"bin/{TRIPLET}-c++": shim("/usr/bin/g++"), f"bin/{TRIPLET}-g++": shim("/usr/bin/g++"),
                   "etc/conda/activate.d/activate-gxx_linux-64.sh": f'export CXX="${{CONDA_PREFIX}}/bin/{TRIPLET}-c++"\n'},
            executables={f"bin/{TRIPLET}-c++", f"bin/{TRIPLET}-g++"},
        ),
    ]
    full = ".".join(str(x) for x in sys.version_info[:3])
    launcher = (Path(sys.base_prefix) / "bin" / f"python{PY}").read_bytes()
    python = PackageSpec(
        "python", full, subdir="linux-64", fmt=".conda",
        files={f"bin/python{PY}": launcher,
               "pyvenv.cfg": f"home = /usr/local/bin\ninclude-system-site-packages = false\nversion = {full}\n",
               f"lib/python{PY}/site-packages/README.envlock-test": "a venv-style python (tests/imagebuild.py)\n"},
        executables={f"bin/python{PY}"},
        symlinks={"bin/python3": f"python{PY}", "bin/python": f"python{PY}"},
    )
    for spec in [*specs, nvcc_plat, *compilers, python]:
        write_package(spec, dest / spec.subdir)
    index_channel(dest, write_zst=False, write_shards=False)
    return dest


# --------------------------------------------------------------------------- the package index


def probe_wheel(dest: Path) -> Path:
    """A real, tiny, pure-Python wheel (the PyPI part of the test lock)."""
    name, version = PROBE
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": b'"""envlock test: installed from the PyPI part with --require-hashes."""\nVALUE = 42\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: envlock-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = hashlib.sha256(data).digest()
        import base64

        record.append(f"{path},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"{mod}-{version}-py3-none-any.whl"
    out.write_bytes(buf.getvalue())
    return out


def _pip(*args: str, timeout: float = 1800) -> None:
    from tests.pipenv import user_pip_environ  # envlock's dependencies come from the real index

    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                          env=user_pip_environ())
    if proc.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed: {proc.stderr.strip()[-800:]}")


IMAGE_REQUIREMENTS = REPO / "envlock" / "data" / "image-requirements.txt"


def dependency_wheels(cache: Path) -> Path:
    """The files envlock/data/image-requirements.txt pins for this Python, downloaded by pip with their hashes
    checked (cached by that file and the Python): what the image's build stage installs envlock's
    dependencies from."""
    key = hashlib.sha256(IMAGE_REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    out = cache / key
    if (out / ".complete").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    _pip("download", "-q", "--no-deps", "--only-binary", ":all:", "--dest", str(out), "-r", str(IMAGE_REQUIREMENTS))
    (out / ".complete").write_text("ok\n")
    return out


def package_index(dest: Path, cache: Path) -> Path:
    """A PEP 503 tree under dest/simple: envlock's pinned dependencies and the probe wheel. No envlock-cuda:
    the build stage installs envlock from the wheel `envlock export dockerfile` writes beside the Dockerfile."""
    wheels = dest / "wheels"
    wheels.mkdir(parents=True)
    for whl in dependency_wheels(cache).glob("*.whl"):
        shutil.copy2(whl, wheels / whl.name)
    probe_wheel(wheels)
    projects: dict[str, list[Path]] = {}
    for whl in sorted(wheels.glob("*.whl")):
        project = re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
        projects.setdefault(project, []).append(whl)
    for project, files in projects.items():
        page = dest / "simple" / project
        page.mkdir(parents=True)
        links = "".join(
            f'<a href="../../wheels/{html.escape(f.name)}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
            f"{html.escape(f.name)}</a>\n" for f in files
        )
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return dest
