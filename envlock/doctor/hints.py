"""The one-line fixes doctor's findings carry, built from the Observation in one place.

For an envlock-made env (its record conda-meta/envlock) the fix is an envlock command (`envlock create
--lock … -p …` to repair, `envlock resolve --torch …` to re-plan, `envlock run -p … --` to activate);
otherwise the conda-forge package to add or the variable to set.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from envlock.doctor.data import HEADERS
from envlock.doctor.observation import Observation


def q(path: Any) -> str:
    """A path as a shell reads it back (spaces, quotes): every path a fix names goes through this."""
    return shlex.quote(str(path))


class Hints:
    """Fixes for one Observation (pure: reads it, nothing else)."""

    def __init__(self, obs: Observation) -> None:
        self.obs = obs

    def repair(self) -> str | None:
        """`envlock create --lock … -p …` for an envlock-made env (None otherwise)."""
        lock = (self.obs.meta or {}).get("lock_path")
        return f"envlock create --lock {q(lock)} -p {q(self.obs.prefix)}" if lock and self.obs.prefix else None

    def replan(self) -> str | None:
        """`envlock resolve …` that plans the toolchain from torch's own CUDA, never an override (`--cuda` is what
        moved it: a fix that kept it would lead back here): the torch doctor asked where there is one, else the
        lock's release (its label, its source), beside it only (--toolchain-only) where the env has no python of its
        own. None without either."""
        obs, anchor = self.obs, self.obs.anchor
        if obs.torch.get("cuda") and obs.python:
            return f"{self.installed()} && envlock create"
        torch = anchor.get("torch")
        if not torch:
            return None
        label = anchor.get("local_label")
        words = [f"envlock resolve --torch {torch}{'+' + label if label else ''}"]
        if anchor.get("torch_source") == "conda-forge":
            words.append("--torch-source conda-forge")
        if obs.prefix is not None and not (obs.python and PurePath(obs.python).parent == obs.prefix / "bin"):
            words.append("--toolchain-only")
        return " ".join(words) + " && envlock create"

    def activation(self) -> str:
        """How to run a build inside the env's activation."""
        p = q(self.obs.prefix)
        return f'envlock run -p {p} -- <your build command>  (or: eval "$(envlock shell-hook -p {p})")'

    def installed(self, *more: str) -> str:
        """`envlock resolve --torch installed --python-exe PY …`: the python doctor asked, named, so the command asks
        the same torch wherever it runs (resolve's rule would pick another python outside the diagnosed env); with
        --toolchain-only where that python is not an envlock env's own (torch stays where it is installed)."""
        obs = self.obs
        words = ["envlock resolve --torch installed"]
        if obs.python:
            words.append(f"--python-exe {q(obs.python)}")
            own = obs.meta is not None and obs.prefix is not None and PurePath(obs.python).parent == obs.prefix / "bin"
            if not own:
                words.append("--toolchain-only")
        return " ".join([*words, *more])

    def resolve(self) -> str:
        """`envlock resolve … && envlock create`: from the installed torch when there is one to ask."""
        if self.obs.torch.get("cuda"):
            return f"{self.installed()} && envlock create"
        torch, why = self.torch()
        return f"envlock resolve --torch {torch} && envlock create  ({why}; or the torch you will use)"

    def torch(self) -> tuple[str, str]:
        """(a torch release to name where none is installed, why): built for this nvcc's CUDA where there is one."""
        from envlock.core.tables import torch_for_hint

        nvcc = self.obs.nvcc
        return torch_for_hint(nvcc.minor if nvcc and nvcc.minor else None)

    def package(self, package: str, what: str) -> str:
        """How to add a missing piece: the envlock command, or the package for a conda prefix / system CUDA."""
        repair = self.repair()
        if repair:
            return f"{repair}   (the lock has {package}; recreating restores {what})"
        nvcc = self.obs.nvcc
        minor = nvcc.minor if nvcc and nvcc.minor else None
        pin = f" cuda-version={minor}" if minor else ""
        if self.obs.mode == "prefix":
            return f"add the conda-forge package {package}{pin} to {q(self.obs.prefix)}"
        apt = (
            f" (NVIDIA apt repo: {package}-{minor.replace('.', '-')})" if minor and package != "cudnn" else ""
        )
        return (
            f"install {package}{pin} (conda-forge){apt}, or let envlock build a matched env: {self.resolve()}"
        )

    def group(self, group: str, package: str, hidden: bool = True) -> str:
        """How to get a `--with` group (several: "a --with b"): re-plan with it for an envlock env, else the
        conda-forge package. `hidden`: its headers are there, only where nvcc looks (activating the env shows
        them to the host compiler); False: they are absent, and activating would change nothing."""
        obs, meta = self.obs, self.obs.meta or {}
        torch = obs.anchor.get("torch")
        if meta.get("env_name") and meta.get("lock_path") and obs.prefix is not None:
            # the spec keeps its other `with:` entries: add this one there and re-lock (a fresh resolve would drop them)
            lock = PurePath(meta["lock_path"])
            spec, relock = f"environments/{meta['env_name']}.yml", "envlock lock"
            if lock.is_absolute() and lock.parts[-3:-1] == ("locks", meta["env_name"]):
                project = lock.parents[2]  # the project the env was created from: say it, wherever doctor runs
                spec, relock = q(project / spec), f"envlock lock --project-dir {q(project)}"
            return (
                f"add {', '.join(group.split(' --with '))} to `with:` in {spec}, then: {relock} && "
                f"envlock create --lock {q(lock)} -p {q(obs.prefix)}  (adds {package})"
            )
        if obs.meta is not None and torch:
            return f"envlock resolve --torch {torch} --with {group} && envlock create  (adds {package})"
        if obs.prefix is not None:
            return f"add the conda-forge package {package} to {q(obs.prefix)}" + (
                f", or activate it: {self.activation()}" if hidden and not obs.active else ""
            )
        again = self.installed("--with", group) if obs.torch.get("cuda") else (
            f"envlock resolve --torch {self.torch()[0]} --with {group}  ({self.torch()[1]}; or the torch you will use)")
        return f"install {package} (conda-forge, or the CUDA toolkit's component), or: {again}"

    def nvcc_for(self, bound: str) -> str:
        """A project refuses this nvcc: the env's nvcc follows torch's CUDA, so a torch built for another CUDA."""
        return (f"the env's nvcc follows torch's CUDA: use a torch built for a CUDA the project accepts, then "
                f"re-plan: {self.installed()} && envlock create")  # fmt: skip

    def gpu(self, cc: tuple[int, int], arches: Mapping[str, Mapping[str, Any]]) -> str:
        """A torch (and toolkit) that can build for and run on this GPU."""
        row = arches.get(f"{cc[0]}.{cc[1]}") or {}
        first, last = row.get("first"), row.get("last")
        target = f"CUDA ≤ {last}" if last else f"CUDA ≥ {first}" if first else "a newer CUDA"
        if self.obs.meta is not None or self.obs.mode == "prefix":
            return f"use a torch built for {target}, then re-plan this env: {self.installed()} && envlock create"
        return f"install a torch built for {target} and a matching toolkit ({self.installed()} && envlock create)"

    def compile(self, log: str) -> str:
        """The fix for a failed probe build: the header's package (or CPATH when only nvcc's dirs have it),
        a file missing from the toolkit, or the other findings."""
        obs = self.obs
        missing = re.search(r"([\w./+-]+): No such file or directory", log)
        if missing and missing.group(1).endswith(".h"):
            name = missing.group(1).rsplit("/", 1)[-1]
            hidden = next((d for d in obs.nvcc_dirs if obs.has_file(d, name)), None)
            if (
                hidden is not None
            ):  # the conda-forge trap: in targets/<arch>/include, not on the host compiler's path
                return (
                    (self.activation() + " — it puts targets/<arch>/include on CPATH")
                    if obs.prefix
                    else f'export CPATH={q(hidden)}"${{CPATH:+:$CPATH}}"'
                )
            return self.package(HEADERS.get(name, "the package that ships it"), name)
        if missing and obs.root is not None and missing.group(1).startswith(str(obs.root)):
            return self.package("cuda-nvcc", f"{missing.group(1)} (the toolkit is incomplete)")
        return (
            "see the findings above (host_compiler.*, header.*); rerun the build verbosely for the full log"
        )
