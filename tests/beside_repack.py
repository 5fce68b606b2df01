"""conda-forge's NCCL and cuSPARSELt packages, repackaged from NVIDIA's own wheels as a python has them installed
(pip torch's nvidia-nccl-cu13 and nvidia-cusparselt-cu13: the lent GPU machine has both, and reaches no conda
channel), for the `--with nccl` / `--with cusparselt` groups (data/extras.yaml) of a channel tests/toolkit_channel.py
builds.

conda-forge's layout and names: `nccl` (include/nccl*.h, lib/libnccl.so.2 and the libnccl.so link),
`cusparselt` (lib/libcusparseLt.so.0) and `cusparselt-dev` (include/cusparseLt*.h, the libcusparseLt.so link;
depends on cusparselt of its version). Each depends on `cuda-version >=X,<X+1.0a0` of the wheel's CUDA major,
as conda-forge's builds pin it (the snapshot's nccl 2.29.7.1 h8340e53_0: cuda-version >=13,<14.0a0); their
libgcc/libstdcxx dependencies are left out: the channel's compilers are the machine's own. Versions are the
wheels'. The files are found through the distributions' RECORD (importlib.metadata in that python).

    python3 -m tests.beside_repack --python python3 --cuda 13 --out DIR   # the packages' specs as a JSON report
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.channelbuilder import PackageSpec
from tests.cuda_repack import _spec

#: wheel distribution (by CUDA major) -> conda-forge packages: name -> (path prefix in the wheel -> in the package)
WHEELS = {"nccl": "nvidia-nccl-cu{major}", "cusparselt": "nvidia-cusparselt-cu{major}"}
_FILES = (
    "import importlib.metadata as m, json, sys\n"
    "d = m.distribution(sys.argv[1])\n"
    "print(json.dumps({'version': d.version, 'files': [[str(f), str(f.locate())] for f in d.files or []]}))\n"
)


def installed(python: str, dist: str) -> tuple[str, dict[str, Path]]:
    """(version, {path in the wheel: file}) of an installed distribution of `python`."""
    got = subprocess.run([python, "-c", _FILES, dist], capture_output=True, text=True, check=True)
    doc = json.loads(got.stdout)
    return doc["version"], {rel: Path(path) for rel, path in doc["files"]}


def packages(python: str, major: str) -> list[PackageSpec]:
    """nccl, cusparselt and cusparselt-dev from `python`'s NVIDIA wheels (CUDA `major`)."""
    pin = f"cuda-version >={major},<{int(major) + 1}.0a0"
    out: list[PackageSpec] = []
    version, files = installed(python, WHEELS["nccl"].format(major=major))
    nccl = {}
    for rel, path in files.items():
        for prefix in ("nvidia/nccl/", f"nvidia/cu{major}/"):
            if rel.startswith(prefix) and rel[len(prefix):].startswith(("include/nccl", "lib/libnccl.so")):
                nccl[rel[len(prefix):]] = (path.read_bytes(), False)
    if "include/nccl.h" not in nccl:
        raise RuntimeError(f"{python}: its nvidia-nccl-cu{major} has no include/nccl.h")
    so = sorted(k for k in nccl if k.startswith("lib/libnccl.so."))
    out.append(_spec("nccl", version, nccl, depends=[pin], symlinks={"lib/libnccl.so": so[0].split("/")[-1]} if so else {}))
    version, files = installed(python, WHEELS["cusparselt"].format(major=major))
    run, dev = {}, {}
    for rel, path in files.items():
        tail = rel.split("/", 2)[-1] if rel.startswith(("nvidia/cu", "nvidia/cusparselt/")) else ""
        if tail.startswith("include/cusparseLt"):
            dev[tail] = (path.read_bytes(), False)
        elif tail.startswith("lib/libcusparseLt.so."):
            run[tail] = (path.read_bytes(), False)
    if "include/cusparseLt.h" not in dev or not run:
        raise RuntimeError(f"{python}: its nvidia-cusparselt-cu{major} lacks cusparseLt.h or libcusparseLt.so.*")
    out.append(_spec("cusparselt", version, run, depends=[pin]))
    link = sorted(run)[0].split("/")[-1]
    out.append(_spec("cusparselt-dev", version, dev, depends=[pin, f"cusparselt =={version}"],
                     symlinks={"lib/libcusparseLt.so": link}))  # fmt: skip
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--cuda", default="13", help="the CUDA major of the wheels (nvidia-nccl-cu13 …)")
    args = ap.parse_args()
    specs = packages(args.python, args.cuda)
    print(json.dumps({s.name: {"version": s.version, "files": sorted(s.files), "depends": s.depends} for s in specs}, indent=1))
