"""Probe run by `envlock doctor` inside the environment's own python (stdlib only, never imports envlock).

Usage: python probe.py torch | cudart SONAME PATH | extension BUILD_DIR
Prints one line `ENVLOCK_PROBE_JSON=<json>` (last line of stdout); everything else is diagnostics.
It is a file run by path, not imported, because the environment's python may not have envlock installed.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import time

MARK = "ENVLOCK_PROBE_JSON="
#: The CUDA libraries torch loads (tool libraries such as libnvperf or libnvtx3interop are left out).
CUDA_LIB_PREFIXES = (
    "libcudart",
    "libcublas",
    "libcusparse",
    "libcusolver",
    "libnvJitLink",
    "libcufft",
    "libcurand",
    "libnvrtc",
    "libcudnn",
    "libnccl",
    "libcufile",
)


def emit(doc: dict) -> None:
    """Print the result line the caller parses."""
    sys.stdout.flush()
    sys.stdout.write("\n" + MARK + json.dumps(doc) + "\n")
    sys.stdout.flush()


def loaded_libs() -> dict:
    """File name -> path of the CUDA shared objects mapped into this process (what the loader really picked)."""
    out: dict = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if ".so" in name and name.startswith(CUDA_LIB_PREFIXES):
                    out.setdefault(name, path)
    except OSError:
        pass
    return out


def bundled_nvidia_libs(site_dirs: list) -> dict:
    """Libraries pip wheels put under site-packages/nvidia, with the version of the wheel that owns each."""
    libs: dict = {}
    for site in site_dirs:
        for dist in sorted(glob.glob(os.path.join(site, "nvidia_*.dist-info"))):
            stem = os.path.basename(dist)[: -len(".dist-info")]
            dist_name, _, version = stem.partition("-")
            try:
                with open(os.path.join(dist, "RECORD"), encoding="utf-8") as fh:
                    rows = fh.read().splitlines()
            except OSError:
                continue
            for row in rows:
                rel = row.split(",")[0]
                name = os.path.basename(rel)
                if rel.startswith("nvidia/") and "/lib/" in rel and ".so" in name:
                    full = os.path.join(site, rel)
                    if os.path.exists(full):
                        libs.setdefault(name, {"path": full, "version": version, "dist": dist_name})
    return libs


def site_dirs_with_nvidia(first: str | None) -> list:
    """sys.path entries holding an `nvidia/` package folder, torch's own site dir first."""
    dirs = [first] if first else []
    dirs += [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]
    seen: list = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return seen


def deepspeed_version():
    """DeepSpeed's installed version without importing it (None when absent)."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.util.find_spec("deepspeed") is None:
            return None
        return importlib.metadata.version("deepspeed")
    except Exception:  # found but without metadata (a source checkout on sys.path)
        return "unknown"


def probe_torch() -> dict:
    """What torch is here (if any), where its bundled CUDA libraries are, and which ones import loaded."""
    doc: dict = {"python": sys.executable, "python_version": sys.version.split()[0]}
    site = None
    try:
        import torch  # noqa: PLC0415 - the point of the probe

        site = os.path.dirname(os.path.dirname(torch.__file__))
        doc["torch"] = {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "file": torch.__file__,
            "cudnn": torch.backends.cudnn.version() if torch.version.cuda else None,
        }
        try:
            available = bool(torch.cuda.is_available())
            doc["torch"]["cuda_available"] = available
            if available:
                doc["torch"]["device"] = torch.cuda.get_device_name(0)
                doc["torch"]["capability"] = list(torch.cuda.get_device_capability(0))
                doc["torch"]["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:  # a broken driver must not hide the rest of the probe
            doc["torch"]["cuda_error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # ImportError, or an OSError/undefined symbol from a shadowed CUDA library
        doc["torch_error"] = f"{type(exc).__name__}: {exc}"
    doc["deepspeed"] = deepspeed_version()
    doc["loaded"] = loaded_libs()
    doc["nvidia_libs"] = bundled_nvidia_libs(site_dirs_with_nvidia(site))
    return doc


def probe_cudart(soname: str, path: str) -> dict:
    """Load libcudart the way a built program would (by soname), else by path; ask its version."""
    doc: dict = {}
    lib = None
    for how, target in (("soname", soname), ("path", path)):
        if not target:
            continue
        try:
            lib = ctypes.CDLL(target)
            doc["loaded_by"] = how
            break
        except OSError as exc:
            doc[f"{how}_error"] = str(exc)
    if lib is None:
        return doc
    version = ctypes.c_int(0)
    rc = lib.cudaRuntimeGetVersion(ctypes.byref(version))
    doc["rc"] = int(rc)
    doc["version"] = int(version.value)
    doc["file"] = next((p for n, p in loaded_libs().items() if n.startswith("libcudart")), None)
    return doc


CPP = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
torch::Tensor add_one(torch::Tensor x);
"""

CU = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""


def probe_extension(build_dir: str) -> dict:
    """Build a CUDA extension that includes ATen/cuda/CUDAContext.h with load_inline; run it on a GPU."""
    doc: dict = {}
    try:
        import torch
        from torch.utils import cpp_extension
    except Exception as exc:
        return {"stage": "import", "error": f"{type(exc).__name__}: {exc}"}
    doc["cuda_home"] = cpp_extension.CUDA_HOME
    start = time.monotonic()
    try:
        module = cpp_extension.load_inline(
            "envlock_doctor_probe",
            cpp_sources=[CPP],
            cuda_sources=[CU],
            functions=["add_one"],
            build_directory=build_dir,
            verbose=False,
            with_cuda=True,
        )
    except Exception as exc:
        doc.update(
            stage="build", seconds=round(time.monotonic() - start, 2), error=f"{type(exc).__name__}: {exc}"
        )
        return doc
    doc["build_seconds"] = round(time.monotonic() - start, 2)
    if not torch.cuda.is_available():
        doc["stage"] = "built"
        return doc
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    y = module.add_one(x)
    torch.cuda.synchronize()
    doc.update(stage="ran", device=torch.cuda.get_device_name(0), correct=bool(torch.equal(y, x + 1)))
    return doc


def main(argv: list) -> int:
    """Dispatch on the first argument; always end with the JSON line."""
    what = argv[0] if argv else "torch"
    if what == "torch":
        emit(probe_torch())
    elif what == "cudart":
        emit(probe_cudart(argv[1], argv[2]))
    elif what == "extension":
        emit(probe_extension(argv[1]))
    else:
        emit({"error": f"unknown probe {what!r}"})
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
