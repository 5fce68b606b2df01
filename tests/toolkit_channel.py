"""A conda channel made on this machine from a system CUDA toolkit directory (e.g. /usr/local/cuda-13.0).

For a machine that reaches no conda channel (the lent GPU machine): its own toolkit's real NVIDIA binaries,
repackaged under conda-forge's names, versions, dependencies and layout by tests/cuda_repack.py (shared
with tests/nvidia_wheels.py), indexed with rattler's indexer, so that `envlock resolve --channel file://…`
and `envlock create` make a real env from it. Run as a script (needs py-rattler and zstandard):

    python3 -m tests.toolkit_channel --toolkit /usr/local/cuda-13.0 --out /tmp/cuda-channel [--libs all]

Reading a toolkit directory:
  * headers from targets/x86_64-linux/include (else include/), libraries from targets/x86_64-linux/lib
    (else lib64/, lib/), bin/, nvvm/, and a runfile's extras/CUPTI/{include,lib64};
  * which file is which component: tests/cuda_repack.PATTERNS (first match; cudart takes the include/
    files no other component claims); static libraries other than cudart's are left out (conda-forge puts
    them in -static packages), so are bin/ tools that are not nvcc's (cuda-gdb, nsys, ...);
  * component versions from the toolkit's version.json (runfile installs), else from the dist-info folders
    of a toolkit assembled from NVIDIA's wheels, else the CUDA 13.0 Update 2 versions when nvcc is 13.0.88,
    else nvcc's own version for every component (said in the report).
The report (JSON on stdout and in <out>/envlock-repack.json) lists components, versions, sizes, seconds and
the files no component took.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

from tests import cuda_repack
from tests.cuda_repack import T, Toolkit, component_of, walk_tree

#: version.json key (runfile installs) -> component.
VERSION_KEYS = {
    "cuda_nvcc": "nvcc", "cuda_crt": "crt", "cuda_nvvm": "nvvm", "cuda_cudart": "cudart", "cuda_cccl": "cccl",
    "libcusparse": "cusparse", "libcublas": "cublas", "libcusolver": "cusolver", "libcurand": "curand",
    "cuda_profiler_api": "profiler-api", "libcufft": "cufft", "cuda_nvrtc": "nvrtc", "cuda_nvtx": "nvtx",
    "cuda_cupti": "cupti", "cuda_nvml_dev": "nvml", "libcufile": "cufile", "libnvjitlink": "nvjitlink",
    "libnpp": "npp", "libnvjpeg": "nvjpeg",
}  # fmt: skip
#: CUDA 13.0 Update 2 (cuda-toolkit==13.0.2 on PyPI, what torch 2.11 pins): component -> version.
CUDA_13_0_U2 = {
    "nvcc": "13.0.88", "crt": "13.0.88", "nvvm": "13.0.88", "cudart": "13.0.96", "cccl": "13.0.85",
    "cusparse": "12.6.3.3", "cublas": "13.1.0.3", "cusolver": "12.0.4.66", "curand": "10.4.0.35",
    "profiler-api": "13.0.85", "cufft": "12.0.0.61", "nvrtc": "13.0.88", "nvtx": "13.0.85", "cupti": "13.0.85",
    "nvml": "13.0.87", "cufile": "1.15.1.6", "nvjitlink": "13.0.88", "npp": "13.0.1.2", "nvjpeg": "13.0.1.86",
}  # fmt: skip


def _first_dir(*candidates: Path) -> Path | None:
    return next((c.resolve() for c in candidates if c.is_dir()), None)


def nvcc_version(root: Path) -> str:
    out = subprocess.run([str(root / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"release \d+\.\d+, V(\d+(?:\.\d+)+)", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"{root}/bin/nvcc --version failed: {(out.stderr or out.stdout).strip()[-300:]}")
    return m.group(1)


def component_versions(root: Path, nvcc: str) -> tuple[dict[str, str], str]:
    """component -> version, and where the versions came from."""
    vj = root / "version.json"
    if vj.is_file():
        doc = json.loads(vj.read_text())
        got = {comp: str(doc[key]["version"]) for key, comp in VERSION_KEYS.items() if isinstance(doc.get(key), dict)}
        for comp in ("crt", "nvvm"):
            got.setdefault(comp, got.get("nvcc", nvcc))
        return got, str(vj)
    dists = sorted((root / "dist-info").glob("*.dist-info")) if (root / "dist-info").is_dir() else []
    if dists:
        got = {}
        for d in dists:
            dist, _, version = d.name[: -len(".dist-info")].partition("-")
            comp = cuda_repack.WHEEL_COMPONENTS.get(dist.replace("_", "-"))
            if comp:
                got[comp] = version
        return {**(CUDA_13_0_U2 if nvcc == "13.0.88" else {}), **got}, f"{root}/dist-info"
    if nvcc == "13.0.88":
        return dict(CUDA_13_0_U2), "CUDA 13.0 Update 2 (nvcc 13.0.88; no version.json)"
    return {}, f"nvcc {nvcc} for every component (no version.json, no dist-info)"


def _wanted(comp: str, rel: str, libs: str) -> bool:
    """Whether a claimed file is read and packaged (libraries per `libs`; no foreign static libraries)."""
    if not rel.startswith("lib/"):
        return True
    if rel.endswith(".a"):
        return comp == "cudart"
    if comp == "cudart" or "/stubs/" in f"/{rel}" or "cmake/" in rel:
        return True
    return libs == "all" or (libs == "linked" and comp in cuda_repack.LINKED)


def read_toolkit(root: Path, *, libs: str = "linked") -> Toolkit:
    """A toolkit directory as a cuda_repack.Toolkit (see the module docstring)."""
    root = Path(root)
    if not (root / "bin" / "nvcc").is_file():
        raise RuntimeError(f"{root} has no bin/nvcc: not a CUDA toolkit directory")
    nvcc = nvcc_version(root)
    versions, where = component_versions(root, nvcc)
    inc = _first_dir(root / T / "include", root / "include")
    lib = _first_dir(root / T / "lib", root / "lib64", root / "lib")
    trees = [("bin/", root / "bin"), ("nvvm/", root / "nvvm"), ("include/", inc), ("lib/", lib),
             ("include/", root / "extras" / "CUPTI" / "include"), ("lib/", root / "extras" / "CUPTI" / "lib64")]  # fmt: skip
    paths: dict[str, Path] = {}
    links: dict[str, str] = {}
    for prefix, d in trees:
        if d is None:
            continue
        f, ln = walk_tree(d, prefix)
        for k, v in f.items():
            paths.setdefault(k, v)
        for k, v in ln.items():
            links.setdefault(k, v)
    tk = Toolkit(cuda_repack.cuda_minor(nvcc), {}, source=f"{root.resolve()} (versions: {where})")
    for rel in sorted({*paths, *links}):
        comp = component_of(rel)
        if comp is None:
            tk.unclaimed.append(rel)
            continue
        if not _wanted(comp, rel, libs):
            continue
        if rel in paths:
            p = paths[rel]
            tk.files.setdefault(comp, {})[rel] = (p.read_bytes(), os.access(p, os.X_OK))
        else:
            tk.symlinks.setdefault(comp, {})[rel] = links[rel]
    for comp in {*tk.files, *tk.symlinks}:
        tk.versions[comp] = versions.get(comp, nvcc)
        tk.files.setdefault(comp, {})
    return tk


def toolkit_dir_from_wheels(wheels: Mapping[str, Path], dest: Path) -> Path:
    """Unpack NVIDIA's wheels into a runfile-shaped toolkit dir (for tests off the GPU machine).

    bin/, nvvm/, targets/x86_64-linux/{include,lib} with include -> and lib64 -> links, and a version.json
    like the runfile's: what /usr/local/cuda-13.0 looks like, built from the same binaries.
    """
    from tests.nvidia_wheels import NVVM_PATHS, WHEELS

    versions: dict[str, dict[str, str]] = {}
    for name, path in wheels.items():
        comp = cuda_repack.WHEEL_COMPONENTS[name]
        key = next((k for k, c in VERSION_KEYS.items() if c == comp), None)
        if key:
            versions[key] = {"name": name, "version": WHEELS.get(name, path.name.split("-")[1])}
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                rel = info.filename.removeprefix("nvidia/cu13/")
                if info.is_dir() or rel == info.filename or rel.startswith(".metadata/") or rel.endswith("__init__.py"):
                    continue
                if name == "nvidia-nvvm":
                    rel = next((dst + rel[len(src) :] for src, dst in NVVM_PATHS if rel.startswith(src)), rel)
                for top, where in (("include/", f"{T}/include/"), ("lib/", f"{T}/lib/")):
                    if rel.startswith(top):
                        rel = where + rel[len(top) :]
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(info))
                if (info.external_attr >> 16) & 0o111:
                    out.chmod(0o755)
    for link, target in (("include", f"{T}/include"), ("lib64", f"{T}/lib")):
        if not (dest / link).exists():
            (dest / link).symlink_to(target)
    (dest / "version.json").write_text(json.dumps(versions, indent=1, sort_keys=True))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--toolkit", default="/usr/local/cuda", help="the CUDA toolkit directory")
    ap.add_argument("--out", required=True, help="the channel directory to write (replaced)")
    ap.add_argument("--libs", default="linked", choices=("all", "linked", "none"), help="shared libraries to package")
    ap.add_argument("--python", default=sys.executable, help="the python the env's `python` shim runs")
    ap.add_argument("--beside", metavar="PYTHON", help="also nccl, cusparselt and cusparselt-dev, repackaged from "
                    "this python's NVIDIA wheels (tests/beside_repack.py)")  # fmt: skip
    args = ap.parse_args(argv)
    tk = read_toolkit(Path(args.toolkit), libs=args.libs)
    extra = []
    if args.beside:
        from tests import beside_repack

        extra = beside_repack.packages(args.beside, tk.cuda.split(".")[0])
    report = cuda_repack.build(tk, Path(args.out), libs=args.libs, python=args.python, extra=extra)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # rattler (used by the indexer) can crash at interpreter exit
