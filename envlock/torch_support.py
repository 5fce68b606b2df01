"""What a torch release was built for: refuse a `--cuda` or `--python` it can never work with.

Pure (envlock's torch table only). torch's cpp_extension raises on a CUDA *major* that differs from
torch's own (a minor skew only warns), so an env whose nvcc has another major can never build an
extension; and a full environment needs torch wheels for its python. A release the table does not
know (asked of the index) is not judged here: the index lookup and the solve say what they find.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from envlock.errors import AnchorError, SpecError


def _row(torch: str):  # type: ignore[no-untyped-def]
    from envlock.anchor import load_torch_table

    try:
        return load_torch_table().row_for(Version(Version(torch).public))
    except InvalidVersion:
        return None


def _major(cuda: str) -> int:
    return int(cuda.split(".")[0])


def check_cuda_major(torch: str, cuda: str, *, built_for: tuple[str, ...] = ()) -> None:
    """AnchorError when `cuda`'s major is none of the CUDA majors torch was built for.

    `built_for` names them directly (an installed torch's torch.version.cuda); else the table's
    variants of the release (a release without a verified variant list is not judged).
    """
    if built_for:
        cudas, tags = tuple(built_for), ()
    else:
        row = _row(torch)
        if row is None or row.variants is None:
            return
        cudas, tags = tuple(v.cuda for v in row.variants), tuple(v.tag for v in row.variants)
    if _major(cuda) in {_major(c) for c in cudas}:
        return
    builds = ", ".join(cudas) + (f" ({', '.join(tags)})" if tags else "")
    same = [c for c in cudas if _major(c) == max(_major(x) for x in cudas)]
    raise AnchorError(
        f"torch {torch} was built for CUDA {builds}, never for CUDA {_major(cuda)}: --cuda {cuda} gives an nvcc "
        f"whose major differs from torch's, and torch's extension builder refuses that",
        hint=f"pass a --cuda of a major torch {torch} was built for (e.g. --cuda {same[-1]}), "
        f"or a torch release built for CUDA {_major(cuda)}",
    )


def check_python(torch: str, python: str) -> None:
    """SpecError when the table says torch has no wheels for CPython `python` (X.Y)."""
    row = _row(torch)
    if row is None or row.python is None:
        return
    oldest, newest = row.python
    key = tuple(int(p) for p in python.split(".")[:2])
    if tuple(int(p) for p in oldest.split(".")) <= key <= tuple(int(p) for p in newest.split(".")):
        return
    raise SpecError(
        f"torch {torch} has no wheels for Python {python} (it has {oldest} to {newest}; the newest is {newest})",
        hint=f"pass --python {newest}, or a torch release with wheels for Python {python}",
    )


def python_range(torch: str) -> tuple[str, str] | None:
    """(oldest, newest) CPython X.Y torch has wheels for, if the table says."""
    row = _row(torch)
    return row.python if row is not None else None
