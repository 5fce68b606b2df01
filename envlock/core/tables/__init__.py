"""Every table envlock ships (package data envlock/data/*.yaml), loaded once per process and validated.

The pure core never loads a table itself: a caller loads what it needs here and passes it in
(`rules.make_plan(anchor, options, cuda_tables(), extras_tables())`, `anchor.derive(..., torch_table())`).

    torch.py   data/torch.yaml    torch release -> CUDA/cuDNN of its builds; the Requires-Dist pin parser
    cuda.py    data/cuda.yaml     CUDA minor -> toolchain packages, gcc cap, cuDNN, virtual packages
               data/extras.yaml   `--with NAME` groups of CUDA headers
    other.py   data/driver.yaml, gpu_arch.yaml, deepspeed_ops.yaml (doctor), pypi.yaml (the PyPI part),
               docker.yaml (export dockerfile)
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.core.tables.cuda import (
    TOOLCHAINS,
    Bundle,
    CudaMinor,
    CudaTables,
    Extra,
    ExtrasTables,
    minor_key,
    parse_cuda,
    parse_extras,
)
from envlock.core.tables.torch import (
    CudaPins,
    TorchRow,
    TorchTable,
    TorchVariant,
    cuda_of_tag,
    parse_cuda_pins,
    parse_torch_table,
    torch_table_of,
)

if TYPE_CHECKING:
    from envlock.core.tables.other import DockerTables, split_ref

#: The smaller tables' names, loaded from envlock/core/tables/other.py on first use (doctor, export: not resolve).
_OTHER = ("DockerTables", "parse_deepspeed_ops", "parse_docker", "parse_driver", "parse_gpu_arch", "parse_pypi",
          "split_ref")


def __getattr__(name: str) -> Any:
    if name in _OTHER:
        from envlock.core.tables import other

        return getattr(other, name)
    raise AttributeError(f"module 'envlock.core.tables' has no attribute {name!r}")


__all__ = [
    "TOOLCHAINS", "Bundle", "CudaMinor", "CudaPins", "CudaTables", "DockerTables", "Extra", "ExtrasTables",
    "TorchRow", "TorchTable", "TorchVariant", "cuda_of_tag", "cuda_tables", "deepspeed_ops_table",
    "docker_table", "driver_table", "extras_tables", "gpu_arch_table", "minor_key", "parse_cuda",
    "parse_cuda_pins", "parse_extras", "parse_torch_table", "pypi_table", "split_ref", "torch_table", "variant_index_url",
]  # fmt: skip


DATA = Path(__file__).resolve().parents[2] / "data"  # package data beside the code (envlock is never zipped)


def text_of(name: str) -> str:
    """The text of envlock/data/<name> (not via importlib.resources: its import is ~8 ms of every start-up)."""
    return (DATA / name).read_text(encoding="utf-8")


def _yaml(name: str) -> Any:
    import yaml

    # libyaml's parser when PyYAML has it (~10x faster than the pure one; the same document).
    return yaml.load(text_of(name), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe


def _structured(name: str, parse: Any) -> Any:
    from envlock.core.tables.compiled import document
    from envlock.core.tables.cuda import table_error

    doc = document(name)  # the compiled copy of this very YAML (envlock/core/tables/compiled.py), else the YAML
    try:
        return parse(_yaml(name) if doc is None else doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise table_error(f"{name}: {exc}") from exc


@functools.cache
def torch_table() -> TorchTable:
    """data/torch.yaml (duplicate keys refused: PyYAML would keep the last one silently)."""
    from envlock.core.tables.compiled import document

    doc = document("torch.yaml")  # compiled from this very YAML (duplicate keys refused there), else the YAML
    return parse_torch_table(text_of("torch.yaml")) if doc is None else torch_table_of(doc)


def torch_for_hint(cuda: str | None = None) -> tuple[str, str]:
    """(a torch release a hint can name, why that one): the newest of the table whose default wheel is built for
    `cuda` (an nvcc's X.Y), else the newest of the table; a hint names it where envlock cannot know the user's."""
    rows = torch_table().rows
    if cuda:
        matched = [r for r in rows if r.pypi_cuda == cuda]
        if matched:
            return matched[-1].releases[-1], f"the newest torch built for CUDA {cuda}"
    return example_torch(), "the newest torch envlock knows"


@functools.cache
def cuda_tables() -> CudaTables:
    """data/cuda.yaml."""
    return _structured("cuda.yaml", parse_cuda)  # type: ignore[no-any-return]  # _structured returns what the parser given to it returns


@functools.cache
def extras_tables() -> ExtrasTables:
    """data/extras.yaml."""
    return _structured("extras.yaml", parse_extras)  # type: ignore[no-any-return]  # _structured returns what the parser given to it returns


@functools.cache
def driver_table() -> dict[str, Any]:
    """data/driver.yaml."""
    from envlock.core.tables.other import parse_driver

    return parse_driver(_yaml("driver.yaml"))


@functools.cache
def gpu_arch_table() -> dict[str, dict[str, Any]]:
    """data/gpu_arch.yaml."""
    from envlock.core.tables.other import parse_gpu_arch

    return parse_gpu_arch(_yaml("gpu_arch.yaml"))


@functools.cache
def deepspeed_ops_table() -> dict[str, Any]:
    """data/deepspeed_ops.yaml."""
    from envlock.core.tables.other import parse_deepspeed_ops

    return parse_deepspeed_ops(_yaml("deepspeed_ops.yaml"))


@functools.cache
def pypi_table() -> dict[str, Any]:
    """data/pypi.yaml (from tables.json when compiled from this very text: a full env's resolve needs no PyYAML)."""
    from envlock.core.tables.other import parse_pypi

    return _structured("pypi.yaml", parse_pypi)  # type: ignore[no-any-return]  # _structured returns what the parser given to it returns


def variant_index_url(variant: str) -> str:
    """The canonical PyTorch wheel index of a variant (cu126 -> …/whl/cu126)."""
    return str(pypi_table()["variant_index"]).format(variant=variant)


@functools.cache
def docker_table() -> DockerTables:
    """data/docker.yaml."""
    from envlock.core.tables.other import parse_docker

    return parse_docker(_yaml("docker.yaml"))


def example_torch() -> str:
    """A torch release for an example command in a hint: the newest the table knows."""
    from packaging.version import Version

    return max(torch_table().releases(), key=Version)
