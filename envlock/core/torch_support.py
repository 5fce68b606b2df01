"""What a torch release was built for: refuse a `--cuda` or `--python` it can never work with.

Pure: the caller passes what envlock's torch table (or an installed torch) says. torch's cpp_extension
raises on a CUDA *major* that differs from torch's own (a minor skew only warns), so an env whose nvcc
has another major can never build an extension; and a full environment needs torch wheels for its
python. A release the table does not know (asked of the index) is not judged: the index lookup and the
solve say what they find.
"""

from __future__ import annotations

from collections.abc import Sequence

from envlock.errors import AnchorError, HintPart, SpecError, again


def _major(cuda: str) -> int:
    return int(cuda.split(".")[0])


def _key(xy: str) -> tuple[int, ...]:
    return tuple(int(p) for p in xy.split(".")[:2])


def check_cuda_major(torch: str, cuda: str, built_for: Sequence[str], tags: Sequence[str] = ()) -> None:
    """AnchorError when `cuda`'s major is none of the CUDA majors torch was built for (`built_for`: X.Y)."""
    if not built_for or _major(cuda) in {_major(c) for c in built_for}:
        return
    builds = ", ".join(built_for) + (f" ({', '.join(tags)})" if tags else "")
    nearest = min(built_for, key=lambda c: (abs(_major(c) - _major(cuda)), -_key(c)[1]))
    raise AnchorError(
        f"torch {torch} was built for CUDA {builds}, never for CUDA {_major(cuda)}: --cuda {cuda} gives an nvcc "
        f"whose major differs from torch's, and torch's extension builder refuses that",
        hint=("a CUDA torch ", torch, " was built for: ", again("--cuda", nearest), ", or its own: ",
              again(drop=("--cuda",))),
    )


def check_python(torch: str, python: str, span: tuple[str, str] | None, *, release_for: str | None = None) -> None:
    """SpecError when CPython `python` (X.Y) is outside `span`, the (oldest, newest) torch has wheels for.

    `release_for`: the torch release nearest to `torch` that has wheels for `python` (None: none known).
    """
    if span is None:
        return
    oldest, newest = span
    if _key(oldest) <= _key(python) <= _key(newest):
        return
    nearest = newest if _key(python) > _key(newest) else oldest
    fix: tuple[HintPart, ...] = ("its nearest Python: ", again("--python", nearest))
    if release_for:
        fix += (", or a torch with wheels for Python ", python, ": ", again("--torch", release_for))
    raise SpecError(f"torch {torch} has no wheels for Python {python} (it has {oldest} to {newest})", hint=fix)


def newest_python(span: tuple[str, str] | None, have: Sequence[str]) -> str | None:
    """The newest of `have` (X.Y) inside `span` (None when there is no span or nothing fits)."""
    if span is None:
        return None
    fits = [v for v in have if _key(span[0]) <= _key(v) <= _key(span[1])]
    return fits[-1] if fits else None
