"""Lock a full environment's PyPI part beside its conda part (use case of resolve/lock/update).

uv compiles every platform while rattler solves the conda part (two seams, side by side); then a
PyPI package the conda part already provides is dropped, and the locked torch is checked against
the anchor (envlock.seams.pypi.part.check_variant).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envlock.seams.mirror_urls import PYPI
from envlock.models import Anchor, LockedPackage, Plan, PlatformResult, PypiPackage, replace
from envlock.formats.spec import EnvSpec, pip_requirements


@dataclass(frozen=True)
class PypiPart:
    """What the PyPI part of one spec locked to."""

    packages: dict[str, tuple[PypiPackage, ...]]
    warnings: tuple[str, ...] = ()
    undated: tuple[str, ...] = ()  # the indexes that gave no upload times (the spec records them)


def compile_request(
    spec: EnvSpec,
    anchor: Anchor,
    *,
    mirrors: Mapping[str, str],
    offline: bool,
    pypi_locked: Mapping[str, Sequence[PypiPackage]] | None = None,
    upgrade: Sequence[str] = (),
    prefer: Mapping[str, Sequence[PypiPackage]] | None = None,
) -> Any:
    """The uv compile request of a spec."""
    from envlock.seams.pypi import compile as pypi_compile
    from envlock.seams.pypi import part as pypi_part

    requirements, users, _ = pip_requirements(spec.pip, spec.torch, spec.torch_source)
    index, extras = pypi_part.spec_indexes(spec.torch_label, spec.torch_source, mirrors)
    mirror_root, mirror_files = "", {}
    if PYPI in mirrors:  # fetched from a mirror: the lock records each wheel's canonical URL from its wheels.json
        mirror_root, mirror_files = pypi_part.index_root(mirrors[PYPI]), pypi_part.canonical_wheel_urls(mirrors[PYPI])
    request = pypi_compile.CompileRequest(
        requirements=requirements,
        python=spec.python or "3.11",  # lock_spec sets a full environment's python before it gets here
        platforms=spec.platforms,
        glibc=spec.glibc,
        index=index,
        extra_indexes=extras,
        exclude_newer=spec.exclude_newer,
        offline=offline,
        preferences=dict(pypi_locked or {}),
        upgrade=tuple(upgrade),
        exempt=_exempt(spec, pypi_locked or {}, upgrade),
        mirror_files=mirror_files,
        mirror_root=mirror_root,
        users=users,
        undated=spec.undated_indexes,
        prefer=dict(prefer or {}),
    )
    return request


def _exempt(spec: EnvSpec, held: Mapping[str, Sequence[PypiPackage]], upgrade: Sequence[str]) -> tuple[str, ...]:
    """Packages the resolution cutoff does not apply to.

    A `+cuXYZ` torch comes from the PyTorch wheel index, whose files carry no upload date (uv would drop
    them all). `envlock update` holds every package it does not move at its locked version: the cutoff
    says nothing about those, and applying it to them failed on that same index ("has no publish time").
    """
    names = {"torch"} if "+" in spec.torch and spec.torch_source == "pip" else set()
    names |= {p.name for ps in held.values() for p in ps} - set(upgrade)
    return tuple(sorted(names))


def lock_pypi_part(
    spec: EnvSpec,
    anchor: Anchor,
    solve_conda: Callable[..., list[PlatformResult]],
    plan: Plan,
    *,
    mirrors: Mapping[str, str],
    offline: bool,
    locked: Mapping[str, Sequence[LockedPackage]] | None = None,
    pypi_locked: Mapping[str, Sequence[PypiPackage]] | None = None,
    upgrade: Sequence[str] = (),
    prefer: Mapping[str, Sequence[PypiPackage]] | None = None,
    allow_insecure: bool = False,
) -> tuple[list[PlatformResult], PypiPart]:
    """Solve the conda part (rattler) and compile the PyPI part (uv) at once; one error if either fails.

    `solve_conda(plan, locked=, optional=)` solves the conda part; it is called once uv is started, so what it
    loads first (the solver's module, rattler) overlaps uv's run instead of delaying it."""
    from envlock.seams.conda.channels import check_channel_security
    from envlock.seams.pypi import compile as pypi_compile
    from envlock.seams.pypi import part as pypi_part

    index, extras = pypi_part.spec_indexes(spec.torch_label, spec.torch_source, mirrors)
    for url in (index.url, *(e.url for e in extras), *([mirrors[PYPI]] if PYPI in mirrors else [])):
        # plain http off loopback, as for a channel: refused before uv or envlock asks it anything
        check_channel_security(url, allow_insecure=allow_insecure, what="package index")
    request = compile_request(spec, anchor, mirrors=mirrors, offline=offline, pypi_locked=pypi_locked,
                              upgrade=upgrade, prefer=prefer)
    from envlock import progress

    progress.report("PyPI part", f"uv: {len(request.requirements)} requirement(s) for {', '.join(spec.platforms)}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="envlock-uv") as pool:
        running = _Running(len(request.platforms))
        compiling = pool.submit(pypi_compile.compile_part, request, running.one)
        compiling.add_done_callback(lambda _: running.all.set())  # it ended (or failed) before every uv ran
        try:
            # The conda part starts once every uv runs: what it does first in Python (loading rattler, ~40-60 ms)
            # would otherwise hold the interpreter while uv is being started, and start it that much later.
            running.all.wait()
            # pip where the channel has it (conda-forge does): `pip install` in the env installs into it, as in a
            # conda env (conda adds pip to every python); without it, the user's next pip was the system's.
            results = solve_conda(plan, locked=locked, optional=("pip",))  # a conda failure first (the pool waits)
            compiled = compiling.result()
        finally:
            progress.done("PyPI part")
    index = request.extra_indexes[0].canonical if spec.torch_label and spec.torch_source == "pip" else request.index.canonical
    packages: dict[str, tuple[PypiPackage, ...]] = {}
    for res in results:
        wheels = _not_in_conda(compiled.packages.get(res.platform, ()), res.packages)
        if spec.torch_source == "pip":
            pypi_part.check_variant(wheels, anchor.cuda, anchor.torch, res.platform, index)
        packages[res.platform] = wheels
    return results, PypiPart(packages, compiled.warnings, compiled.undated)  # a replaced `- pip:` line: said by the solve


class _Running:
    """Counts the platforms whose uv runs; `all` is set once each does."""

    def __init__(self, platforms: int) -> None:
        self.all = threading.Event()
        self._left = platforms
        self._lock = threading.Lock()

    def one(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left <= 0:
                self.all.set()


def _not_in_conda(wheels: Sequence[PypiPackage], conda: Sequence[LockedPackage]) -> tuple[PypiPackage, ...]:
    """The wheels whose package the conda part does not already provide (conda's pytorch is torch)."""
    provided = {p.name for p in conda}
    if "pytorch" in provided:
        provided.add("torch")
    kept = [w for w in wheels if w.name not in provided]
    names = {w.name for w in kept}
    return tuple(replace(w, dependencies=tuple(d for d in w.dependencies if d in names)) for w in kept)
