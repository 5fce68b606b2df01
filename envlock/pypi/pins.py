"""torch's CUDA pins out of a wheel's Requires-Dist (pure: the index client and the torch table share it)."""

from __future__ import annotations

import email.parser
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.errors import AnchorError

_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime-cu\d+$")
_CUDNN = re.compile(r"^nvidia-cudnn(-cu\d+)?$")
_NVIDIA = re.compile(r"^(nvidia-|cuda-toolkit$)")


@dataclass(frozen=True, slots=True)
class CudaPins:
    """What a wheel's Requires-Dist says about CUDA (cuda None: no CUDA dependency at all)."""

    cuda: str | None  # "12.1"
    cudnn: str | None  # "8.9.2.26"
    requirement: str | None  # the pin that decided the CUDA, e.g. "nvidia-cuda-runtime-cu12==12.1.105"


def _exact_pin(req: Requirement) -> str | None:
    """The version of an ==/=== specifier (wildcard stripped), else None."""
    for spec in req.specifier:
        if spec.operator in ("==", "==="):
            return spec.version.removesuffix(".*")
    return None


def _cuda_of(pin: str, requirement: str) -> str:
    """'12.1.105' -> '12.1'."""
    parts = pin.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise AnchorError(
            f"cannot read a CUDA version from the requirement {requirement!r}",
            hint="pass the CUDA torch was built with as --cuda X.Y",
        )
    return f"{int(parts[0])}.{int(parts[1])}"


def _applies(req: Requirement, python: str) -> bool:
    """Whether the requirement applies to a Linux x86_64 CPython install of that python."""
    if req.marker is None:
        return True
    env = {
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "sys_platform": "linux",
        "os_name": "posix",
        "python_version": python,
        "python_full_version": python + ".0",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "extra": "",
    }
    try:
        return bool(req.marker.evaluate(env))
    except Exception:  # noqa: BLE001 - an odd marker must not hide a CUDA pin
        return True


def parse_cuda_pins(requires_dist: Iterable[str], python: str = "3.11") -> CudaPins:
    """CUDA/cuDNN pins of Requires-Dist lines (facts 1.3: runtime-cu1X, then cuda-toolkit, then runtime)."""
    runtime: Requirement | None = None
    toolkit: Requirement | None = None
    bare_runtime: Requirement | None = None
    cudnn: str | None = None
    nvidia_seen: list[str] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue  # a line we cannot read cannot be a CUDA pin we understand
        if not _applies(req, python):
            continue
        name = canonicalize_name(req.name)
        if _NVIDIA.match(name):
            nvidia_seen.append(name)
        if _CUDA_RUNTIME.match(name):
            runtime = runtime or req
        elif name == "cuda-toolkit":
            toolkit = toolkit or req
        elif name == "nvidia-cuda-runtime":
            bare_runtime = bare_runtime or req
        elif _CUDNN.match(name):
            cudnn = cudnn or _exact_pin(req)
    chosen = runtime or toolkit or bare_runtime
    if chosen is None:
        if nvidia_seen:
            raise AnchorError(
                f"the wheel depends on {', '.join(sorted(set(nvidia_seen)))} but names no CUDA runtime",
                hint="pass the CUDA torch was built with as --cuda X.Y",
            )
        return CudaPins(cuda=None, cudnn=None, requirement=None)
    text = str(chosen).split(";")[0].strip()
    pin = _exact_pin(chosen)
    if pin is None:
        raise AnchorError(
            f"the CUDA requirement {text!r} is not an exact pin",
            hint="pass the CUDA torch was built with as --cuda X.Y",
        )
    return CudaPins(cuda=_cuda_of(pin, text), cudnn=cudnn, requirement=text)


def requires_dist_of(metadata: str) -> list[str]:
    """The Requires-Dist lines of a core metadata file."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    return [str(v) for v in (msg.get_all("Requires-Dist") or [])]
