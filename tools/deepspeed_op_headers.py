"""Which CUDA toolkit headers each DeepSpeed JIT op includes: writes envlock/data/deepspeed_ops.yaml.

Run with a python that has torch (a CPU build is enough) against an unpacked DeepSpeed sdist:

    python3 -m pip download deepspeed==0.19.8 --no-deps --no-binary :all: -d /tmp/ds && tar xzf ...
    DS_ACCELERATOR=cuda python tools/deepspeed_op_headers.py /tmp/ds/deepspeed-0.19.8 > envlock/data/deepspeed_ops.yaml

Each op builder of `op_builder.all_ops.ALL_OPS` is asked for its sources() and include_paths(); every
`#include` of those files is followed through DeepSpeed's own tree (the op's include paths, the file's
dir); what is not in that tree is an outside header. The CUDA toolkit's among them are kept, with the
envlock group (data/extras.yaml) that ships each. The scan ignores #if: a header included only under
`__HIP_PLATFORM_AMD__` is not a CUDA one anyway, and DeepSpeed guards none of the CUDA ones.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
#: Outside headers that come with the CUDA toolkit (a name, or a folder of the toolkit's include dir).
CUDA_HEADER = re.compile(
    r"^(cuda[\w.]*\.h|cuda\.h|cu(blas|sparse|solver|rand|fft|file|pti|dnn|Complex)\w*\.h|"
    r"nvrtc\.h|nvml\.h|nvToolsExt\w*\.h|nvtx3/.*|npp\w*\.h|nvjpeg\.h|nvJitLink\.h|mma\.h|"
    r"cooperative_groups(/.*|\.h)|(cub|thrust|cuda|nv|crt)/.*|vector_types\.h|library_types\.h|"
    r"driver_types\.h|math_constants\.h|sm_\d+\w*\.h|device_\w+\.h)$"
)
SKIP_BUILDERS = {"CPUOpBuilder", "OpBuilder"}  # CPU-only ops include no CUDA header
NOTES = {  # why an op may fail whatever the toolkit holds (DeepSpeed's own words where it says so)
    "evoformer_attn": "needs CUTLASS (CUTLASS_PATH, or the nvidia-cutlass package)",
    "cutlass_ops": "needs the deepspeed-kernels (dskernels) package's prebuilt libdeepspeedft",
    "ragged_device_ops": "needs the deepspeed-kernels (dskernels) package's prebuilt libblockedflash",
    "gds": "needs libaio (libaio-dev), which no CUDA package gives",
    "async_io": "needs libaio (libaio-dev)",
    "fp_quantizer": "fails to compile under CUDA 13 against a full toolkit too (a DeepSpeed template error, "
    "measured on an H200 with DeepSpeed 0.19.8)",
}


def closure(files: list[Path], include_dirs: list[Path], root: Path) -> set[str]:
    """Outside headers reached from `files` through DeepSpeed's own headers."""
    seen: set[Path] = set()
    outside: set[str] = set()
    todo = list(files)
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        for name in INCLUDE.findall(f.read_text(errors="replace")):
            hit = next((d / name for d in [f.parent, *include_dirs] if (d / name).is_file()), None)
            if hit is not None and root in hit.resolve().parents:
                todo.append(hit.resolve())
            else:
                outside.add(name)
    return outside


def group_of(header: str, groups: dict[str, str]) -> str:
    if header in groups:
        return groups[header]
    if header.startswith("nvtx3/") or header.startswith("nvToolsExt"):
        return "nvtx"
    if header.startswith("cudnn"):
        return "cudnn"
    return "default"


def main(root: Path) -> int:
    import yaml

    sys.path.insert(0, str(root))
    os.chdir(root)
    import torch.utils.cpp_extension as cpp_extension

    if cpp_extension.CUDA_HOME is None:  # async_io/gds/dc build paths from it; any path lists their sources
        cpp_extension.CUDA_HOME = "/usr/local/cuda"
    from op_builder.all_ops import ALL_OPS

    here = Path(__file__).resolve().parent.parent
    extras = yaml.safe_load((here / "envlock" / "data" / "extras.yaml").read_text())["extras"]
    groups = {h: name for name, row in extras.items() for h in row["headers"]}
    version = (root / "version.txt").read_text().strip()
    ops: dict[str, dict] = {}
    for name, builder in sorted(ALL_OPS.items()):
        if type(builder).__mro__[1].__name__ in SKIP_BUILDERS:
            continue
        try:
            sources, includes = builder.sources(), builder.include_paths()
        except Exception as exc:  # evoformer_attn: no CUTLASS here; it still names its sources below
            sources, includes = [], []
            NOTES.setdefault(name, f"its builder raised: {exc}")
        if not sources and name == "evoformer_attn":
            src = root / "csrc/deepspeed4science/evoformer_attn"
            sources = [str(p.relative_to(root)) for p in sorted(src.rglob("*.c*"))]
            includes = [str(src)]
        outside = closure([root / s for s in sources], [root / i for i in includes], root.resolve())
        cuda = sorted(h for h in outside if CUDA_HEADER.match(h))
        row: dict = {
            "builder": type(builder).__name__,
            "cuda_headers": cuda,
            "needs": sorted({group_of(h, groups) for h in cuda} - {"default"}),
            "torch_cuda_headers": any(h.startswith(("ATen/cuda/", "c10/cuda/")) for h in outside),
        }
        if "cutlass" in " ".join(outside):
            row["needs_cutlass"] = True
        if name in NOTES:
            row["note"] = NOTES[name]
        ops[name] = row
    head = (
        f"# DeepSpeed {version}'s JIT ops (CUDA builders of op_builder/all_ops.py) and the CUDA toolkit headers\n"
        "# their sources include, directly or through DeepSpeed's own headers. `needs`: the envlock `--with`\n"
        "# groups (data/extras.yaml) beyond the default set; `torch_cuda_headers`: it also includes torch's\n"
        "# ATen/cuda or c10/cuda headers (so torch's set: cusparse.h, cublas_v2.h, ... applies).\n"
        f"# Made by tools/deepspeed_op_headers.py from the deepspeed-{version} sdist; do not edit by hand.\n"
    )
    doc = {"schema_version": 1, "deepspeed": version, "ops": ops}
    sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=110))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
