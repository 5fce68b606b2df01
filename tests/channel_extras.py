"""cuRAND and the `--with` extras of the conda-forge-shaped test channel (tests/channelbuilder.py).

Per CUDA minor and subdir, conda-forge's split shape: a runtime package with the shared library in
targets/<t>/lib (+ lib/ links) and a `-dev` package with the headers and the unversioned .so link, both
pinned to `cuda-version >=X.Y,<X.(Y+1).0a0`. Header-only groups (cuda-profiler-api, cuda-nvml-dev,
cuda-nvtx-dev) have no runtime part. Versions: cuRAND and cuFFT are conda-forge's real ones
(../shared/channels, NVIDIA's release tables for the minors the snapshot lacks); the others reuse the
minor's cudart/nvrtc/nvJitLink version (shape, not history: no test depends on them).
"""

from __future__ import annotations

from tests.channelbuilder import (
    NVIDIA_LICENSE,
    CudaMinor,
    PackageSpec,
    _dev_link,
    _header,
    _layout,
    _runtime_deps,
    _so_files,
    _stub_lib,
    is_win,
    lib_bytes,
)

# fmt: off
CURAND = {"12.0": "10.3.1.50", "12.1": "10.3.2.106", "12.2": "10.3.3.141", "12.3": "10.3.4.107",
          "12.4": "10.3.5.119", "12.5": "10.3.6.82", "12.6": "10.3.7.77", "12.8": "10.3.9.90",
          "12.9": "10.3.10.19", "13.0": "10.4.0.35", "13.1": "10.4.1.81", "13.2": "10.4.2.55"}
CUFFT = {"12.0": "11.0.0.21", "12.1": "11.0.2.54", "12.2": "11.0.8.103", "12.3": "11.0.12.1",
         "12.4": "11.2.0.44", "12.5": "11.2.3.61", "12.6": "11.3.0.4", "12.8": "11.3.3.83",
         "12.9": "11.4.1.4", "13.0": "12.0.0.61", "13.1": "12.1.0.78", "13.2": "12.2.0.46"}
# fmt: on

#: (runtime package or None, -dev package, library, headers) of each group; `version` picks the version.
GROUPS: tuple[tuple[str | None, str, str | None, tuple[str, ...]], ...] = (
    ("libcurand", "libcurand-dev", "libcurand", ("curand.h", "curand_kernel.h")),
    (None, "cuda-profiler-api", None, ("cuda_profiler_api.h", "cudaProfiler.h")),
    ("libcufft", "libcufft-dev", "libcufft", ("cufft.h", "cufftXt.h")),
    (None, "cuda-nvrtc-dev", None, ("nvrtc.h",)),  # cuda-nvrtc (runtime) is built by channelbuilder
    (None, "cuda-nvtx-dev", None, ("nvtx3/nvToolsExt.h",)),
    ("libcufile", "libcufile-dev", "libcufile", ("cufile.h",)),
    (None, "cuda-nvml-dev", None, ("nvml.h",)),
    ("cuda-cupti", "cuda-cupti-dev", "libcupti", ("cupti.h",)),
    (None, "libnvjitlink-dev", None, ("nvJitLink.h",)),  # libnvjitlink is built by channelbuilder
    ("libnpp", "libnpp-dev", "libnppc", ("npp.h",)),
    ("libnvjpeg", "libnvjpeg-dev", "libnvjpeg", ("nvjpeg.h",)),
)
LINUX_ONLY = frozenset({"libcufile", "libcufile-dev"})


def version(dev: str, cm: CudaMinor) -> str:
    """The version of a group's packages for one minor."""
    if dev == "libcurand-dev":
        return CURAND[cm.minor]
    if dev == "libcufft-dev":
        return CUFFT[cm.minor]
    if dev == "cuda-nvrtc-dev":
        return cm.nvrtc
    if dev == "libnvjitlink-dev":
        return cm.nvjitlink
    if dev == "libcufile-dev":
        return f"1.{cm.major * 10 + int(cm.minor.split('.')[1]) - 115}.1.6"  # 13.0 -> 1.15.1.6 (real)
    return cm.cudart


def extra_packages(cm: CudaMinor, subdir: str) -> list[PackageSpec]:
    """cuRAND + every `--with` group for one CUDA 12+/13 minor and subdir."""
    inc = _layout(subdir)[0]
    rt = _runtime_deps(subdir)
    pin = cm.version_pin
    out: list[PackageSpec] = []
    for runtime, dev, lib, headers in GROUPS:
        if is_win(subdir) and dev in LINUX_ONLY:
            continue
        v = version(dev, cm)
        dev_deps = [pin, *rt]
        files: dict[str, bytes | str] = {
            f"{inc}/{h}": _header(h, dev, f"#define ENVLOCK_TEST_{dev.upper().replace('-', '_')} {v.replace('.', '')}")
            for h in headers
        }
        links: dict[str, str] = {}
        if runtime is not None and lib is not None:
            major = v.split(".")[0]
            so, so_links = _so_files(subdir, lib, v, major, runtime)
            rt_spec = PackageSpec(
                runtime, v, subdir=subdir, depends=[pin, *rt], files=so, symlinks=so_links, license=NVIDIA_LICENSE
            )
            out.append(rt_spec)
            dev_deps.append(f"{runtime} {v} {rt_spec.build}")
            dfiles, links = _dev_link(subdir, lib, major)
            files.update(dfiles)
        elif dev == "cuda-nvrtc-dev":
            dev_deps.append(f"cuda-nvrtc {v}")
        elif dev == "libnvjitlink-dev":
            dev_deps.append(f"libnvjitlink {v}")
        out.append(
            PackageSpec(dev, v, subdir=subdir, depends=dev_deps, files=files, symlinks=links, license=NVIDIA_LICENSE)
        )
    return out


# ------------------------------------------------------------------------------ beside the toolkit
#: The libraries conda-forge ships beside the toolkit (extras.yaml `beside: true`), in their real shape:
#: one build per CUDA major pinned `cuda-version >=X,<X+1.0a0` (none for the CUDA-free ones), headers in
#: include/ (Library/include on win-64), libraries in lib/. (runtime, dev, library, headers, CUDA majors or
#: None, linux only); versions: the feedstocks' (recipe/meta.yaml at the commits extras.yaml names).
# fmt: off
BESIDE: tuple[tuple[str | None, str, str | None, tuple[str, ...], dict[int, str] | None, bool], ...] = (
    (None, "nccl", "libnccl", ("nccl.h",), {11: "2.27.3.1", 12: "2.27.7.1", 13: "2.29.7.1"}, True),
    ("cusparselt", "cusparselt-dev", "libcusparseLt", ("cusparseLt.h",), {12: "0.7.1.0", 13: "0.8.1.1"}, False),
    ("libcudss", "libcudss-dev", "libcudss", ("cudss.h",), {12: "0.7.1.4", 13: "0.7.1.4"}, False),
    (None, "cutensor", "libcutensor", ("cutensor.h",), {12: "2.3.1.0", 13: "2.3.1.0"}, False),
    (None, "cutlass", None, ("cutlass/cutlass.h", "cute/tensor.hpp"), None, False),
    (None, "libaio", "libaio", ("libaio.h",), None, True),
    (None, "eigen", None, ("eigen3/Eigen/Core", "eigen3/Eigen/Dense"), None, False),
)
# fmt: on
BESIDE_VERSIONS = {"cutlass": "4.2.1", "libaio": "0.3.113", "eigen": "3.4.0"}


def beside_packages(subdir: str, majors: list[int]) -> list[tuple[str | None, PackageSpec]]:
    """(tag, spec) of the groups beside the toolkit for one subdir: tag = the CUDA major ("12") or None."""
    win = is_win(subdir)
    inc, libdir = ("Library/include", "Library/lib") if win else ("include", "lib")
    out: list[tuple[str | None, PackageSpec]] = []
    for runtime, dev, lib, headers, by_major, linux_only in BESIDE:
        if linux_only and win:
            continue
        builds = [(str(m), v, [f"cuda-version >={m},<{m + 1}.0a0"]) for m, v in (by_major or {}).items()
                  if m in majors] if by_major else [(None, BESIDE_VERSIONS[dev], [])]  # fmt: skip
        for tag, v, pin in builds:
            files: dict[str, bytes | str] = {
                f"{inc}/{h}": _header(h, dev, f"#define ENVLOCK_TEST_{dev.upper().replace('-', '_')} 1") for h in headers
            }
            links: dict[str, str] = {}
            deps = [*pin, *([] if lib is None else _runtime_deps(subdir))]
            if lib is not None and not win:
                real = f"{lib}.so.{v}"
                lib_files = {f"lib/{real}": lib_bytes(subdir, lib, v, dev, v.split(".")[0])}
                lib_links = {f"lib/{lib}.so.{v.split('.')[0]}": real}
                links[f"lib/{lib}.so"] = f"{lib}.so.{v.split('.')[0]}"
            elif lib is not None:
                lib_files = {f"Library/bin/{lib.removeprefix('lib')}.dll": _stub_lib(lib, dev)}
                lib_links = {}
                files[f"{libdir}/{lib.removeprefix('lib')}.lib"] = _stub_lib(lib, dev)
            if lib is not None and runtime is not None:
                rt = PackageSpec(runtime, v, subdir=subdir, depends=deps, files=lib_files, symlinks=lib_links,
                                 license=NVIDIA_LICENSE)  # fmt: skip
                out.append((tag, rt))
                deps = [*deps, f"{runtime} {v} {rt.build}"]
            elif lib is not None:
                files.update(lib_files)
                links.update(lib_links)
            out.append((tag, PackageSpec(dev, v, subdir=subdir, depends=deps, files=files, symlinks=links)))
    return out
