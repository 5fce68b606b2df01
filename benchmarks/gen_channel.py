"""Generate a conda-forge-scale channel (records only) with the real CUDA toolchain embedded.

The channel holds every record of the real snapshot in ../shared/channels/conda-forge (linux-64,
linux-aarch64, win-64, noarch), older "history" records for those real names (so the shards a CUDA
solve touches are as large as on conda-forge, where python alone has hundreds of builds), and
synthetic filler packages (C libraries, python extensions, R packages, noarch python) whose shape
follows the snapshot: depends counts, run_exports-style `>=x.y.z,<x.y+1.0a0` pins, python_abi,
__glibc, libgcc. Filler names never collide with real names, so the envlock request solves exactly as
it does against the snapshot.

Each subdir is written as plain `repodata.json` + `repodata.json.zst` and as CEP-16 shards
(`repodata_shards.msgpack.zst` + `shards/<sha256>.msgpack.zst`) in the layout rattler's Gateway reads.
`rattler.index` cannot do this here: it drops every record whose package file is absent, so the
generator writes both layouts itself, in the byte format rattler.index writes (checked by tests).

    python benchmarks/gen_channel.py --cache-dir ~/.cache/envlock-bench [--small] [--seed 42]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GEN_VERSION = 1  # bump when the output format or the generation rules change (invalidates caches)
SUBDIRS = ("linux-64", "linux-aarch64", "win-64", "noarch")
CREATED_AT = "2026-01-01T00:00:00Z"  # fixed: the shard index is reproducible byte for byte
T_START_MS = 1_451_606_400_000  # 2016-01-01: the oldest synthetic build
T_END_MS = 1_767_225_600_000  # 2026-01-01
DAY_MS = 86_400_000

# Real conda-forge record counts per name are far above the snapshot's (harvested from lockfiles):
# the names a CUDA toolchain solve touches get history so their shards weigh what they do upstream.
# Rough linux-64 counts (conda-forge, 2025); other subdirs get a third.
HEAVY_NAMES = {
    "python": 700, "numpy": 900, "openssl": 250, "libgcc-ng": 120, "libstdcxx-ng": 120, "libgcc": 60,
    "libstdcxx": 60, "libzlib": 60, "sqlite": 150, "libsqlite": 60, "ncurses": 60, "readline": 30,
    "tk": 40, "xz": 40, "bzip2": 20, "libffi": 30, "ca-certificates": 80, "tzdata": 60, "pip": 200,
    "setuptools": 300, "wheel": 80, "gcc_impl_linux-64": 120, "gxx_impl_linux-64": 120,
    "gcc_linux-64": 200, "gxx_linux-64": 200, "binutils_impl_linux-64": 60, "sysroot_linux-64": 60,
    "kernel-headers_linux-64": 40, "cuda-nvcc": 60, "cuda-version": 40, "libcublas": 40,
    "cudnn": 80, "libzlib-wapi": 20, "vc14_runtime": 40, "ucrt": 10, "libexpat": 40, "libuuid": 20,
    "libnsl": 10, "libxcrypt": 20, "liblzma": 40, "libmpdec": 10, "python_abi": 40,
}
LICENSES = ("MIT", "BSD-3-Clause", "Apache-2.0", "GPL-3.0-or-later", "LGPL-2.1-or-later", "BSD-2-Clause",
            "MPL-2.0", "GPL-2.0-or-later", "ISC", "Zlib", "PSF-2.0", "LicenseRef-Proprietary")
LICENSE_FAMILY = {"MIT": "MIT", "BSD-3-Clause": "BSD", "BSD-2-Clause": "BSD", "Apache-2.0": "APACHE",
                  "GPL-3.0-or-later": "GPL3", "LGPL-2.1-or-later": "LGPL", "GPL-2.0-or-later": "GPL2",
                  "MPL-2.0": "MOZILLA", "PSF-2.0": "PSF"}
SYLLABLES = ("ab", "ar", "ba", "bel", "cor", "da", "del", "ex", "fa", "fin", "gal", "geo", "har", "io",
             "jet", "ka", "kel", "lum", "ma", "mer", "nex", "no", "om", "pa", "pix", "qu", "ra", "rin",
             "sa", "sol", "ta", "ter", "ul", "va", "vor", "wi", "xen", "yo", "za", "zen", "tron", "plo")
PYTHONS = ("2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
R_VERSIONS = ("3.6", "4.0", "4.1", "4.2", "4.3", "4.4")


@dataclass(frozen=True)
class GenConfig:
    """What to generate; every field is part of the cache key."""

    seed: int = 42
    linux64_records: int = 450_000
    noarch_records: int = 120_000
    other_records: int = 100_000  # linux-aarch64 and win-64 each (conda-forge's are ~half of linux-64)
    history: bool = True  # older records for real names (realistic shard sizes for the touched names)
    zstd_level: int = 16  # repodata.json.zst (conda-forge serves a well compressed file)
    shard_zstd_level: int = 3  # what rattler.index uses for shards

    @classmethod
    def small(cls, seed: int = 42) -> GenConfig:
        """A few thousand records per subdir: the CI mode."""
        return cls(seed=seed, linux64_records=4_000, noarch_records=1_500, other_records=1_500,
                   history=False, zstd_level=3)

    def key(self) -> str:
        raw = json.dumps({**asdict(self), "v": GEN_VERSION}, sort_keys=True)
        return f"cf-{self.linux64_records}-s{self.seed}-{hashlib.sha256(raw.encode()).hexdigest()[:10]}"


@dataclass
class ChannelInfo:
    """Where a generated channel lives and what is in it."""

    root: Path  # holds conda-forge/<subdir>/...
    config: dict[str, Any]
    records: dict[str, int] = field(default_factory=dict)
    names: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, dict[str, int]] = field(default_factory=dict)  # subdir -> {json, zst, shard_index, shards}
    patched: list[str] = field(default_factory=list)
    gen_seconds: float = 0.0
    disk_bytes: int = 0

    @property
    def channel_dir(self) -> Path:
        return self.root / "conda-forge"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["root"] = str(self.root)
        return d


# ---------------------------------------------------------------------------------------------------
# Real records (the snapshot) and the few patches the 3-platform request needs
# ---------------------------------------------------------------------------------------------------


def default_snapshot() -> Path:
    """../shared/channels/conda-forge next to the checkout (or $ENVLOCK_SHARED_DIR/channels/conda-forge)."""
    env = os.environ.get("ENVLOCK_SHARED_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"
    return base / "channels" / "conda-forge"


def load_real(snapshot: Path, subdir: str) -> dict[str, dict[str, Any]]:
    """filename -> record of one snapshot subdir."""
    doc = json.loads((snapshot / subdir / "repodata.json").read_text())
    return {**doc.get("packages", {}), **doc.get("packages.conda", {})}


# The linux-64 CUDA 12.6 toolchain exactly as envlock solves torch 2.7.1 against the snapshot. The
# snapshot (harvested from public lockfiles) holds these only on linux-64; conda-forge builds them for
# linux-aarch64 and win-64 too, so the generator ports them there (see `port_cuda_records`).
CUDA_126_LINUX64 = (
    "cuda-cccl_linux-64-12.6.77-ha770c72_0", "cuda-crt-dev_linux-64-12.6.85-ha770c72_0",
    "cuda-crt-tools-12.6.85-ha770c72_0", "cuda-cudart_linux-64-12.6.77-h3f2d84a_0",
    "cuda-cudart-12.6.77-h5888daf_0", "cuda-cudart-static_linux-64-12.6.77-h3f2d84a_0",
    "cuda-cudart-dev_linux-64-12.6.77-h3f2d84a_0", "cuda-cudart-static-12.6.77-h5888daf_0",
    "cuda-cudart-dev-12.6.77-h5888daf_0", "cuda-driver-dev_linux-64-12.6.77-h3f2d84a_0",
    "cuda-nvvm-dev_linux-64-12.6.85-ha770c72_0", "cuda-nvcc-dev_linux-64-12.6.85-he91c749_0",
    "cuda-nvvm-tools-12.6.85-he02047a_0", "cuda-nvcc-tools-12.6.85-he02047a_0",
    "cuda-nvvm-impl-12.6.85-he02047a_0", "cuda-nvcc-impl-12.6.85-h85509e4_0",
    "cuda-nvcc_linux-64-12.6.85-h04802cd_0", "cuda-nvcc-12.6.85-hcdd1206_0", "cuda-nvrtc-12.6.85-hbd13f7d_0",
    "libcublas-12.6.4.1-h5888daf_1", "libcublas-dev-12.6.4.1-h5888daf_1", "libcusparse-12.5.4.2-hbd13f7d_0",
    "libcusparse-dev-12.5.4.2-h5888daf_0", "libcusolver-11.7.1.2-h5888daf_1",
    "libcusolver-dev-11.7.1.2-h5888daf_1", "libcurand-10.3.7.77-hbd13f7d_0", "libcurand-dev-10.3.7.77-h5888daf_0",
    "cudnn-9.7.1.26-h969bcc4_0",
)
# Depends that exist only on Linux (dropped when porting to win-64) and the per-platform extras that
# the target's own records carry (kept from the target's template record).
LINUX_ONLY = re.compile(r"^(__glibc|__linux|libgcc|libstdcxx|libgcc-ng|libstdcxx-ng|libzlib|sysroot_|gcc_|gxx_|binutils)")
PLATFORM_EXTRAS = re.compile(r"^(arm-variant|ucrt|vc|vc14_runtime|vs20\d\d_win-64)$")


def _dep_name(dep: str) -> str:
    return dep.split(" ", 1)[0]


def port_cuda_records(real: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The CUDA 12.6 toolchain for linux-aarch64 and win-64, ported from the snapshot's linux-64 records.

    For each missing (name, version) the port keeps the linux-64 record's depends/constrains (renamed
    `_linux-64` -> `_<subdir>`; Linux-only ones dropped on win-64), adds the platform extras its own
    nearest record carries (`arm-variant * sbsa`, `ucrt`/`vc`/`vs2019_win-64`), gets a new build hash,
    and re-points exact build pins at the ported siblings. A name the platform never has is skipped.
    """
    linux = {**real["linux-64"], **real["noarch"]}
    sources = [linux[f + ".conda"] for f in CUDA_126_LINUX64 if f + ".conda" in linux]
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for target in ("linux-aarch64", "win-64"):
        pool = [*real[target].values(), *real["noarch"].values()]
        by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in pool:
            by_name[rec["name"]].append(rec)
        plan: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {}  # name -> (source, template, build)
        for src in sources:
            name = src["name"].replace("linux-64", target)
            have = by_name.get(name, [])
            if not have or any(r["version"] == src["version"] for r in have):
                continue
            template = max(have, key=lambda r: (r["version"].startswith("12."), r.get("build_number", 0),
                                               r.get("timestamp", 0)))
            digest = hashlib.sha256(f"{name}-{src['version']}-{target}".encode()).hexdigest()
            plan[name] = (src, template, f"h{digest[:7]}_{src['build_number']}")
        for name, (src, template, build) in sorted(plan.items()):
            deps = _port_deps(src["depends"], target, template, plan, by_name)
            cons = [c.replace("linux-64", target) for c in src.get("constrains", [])
                    if not (target == "win-64" and LINUX_ONLY.match(_dep_name(c)))]
            rec = {**src, "name": name, "build": build, "depends": deps, "constrains": cons,
                   "subdir": template["subdir"],
                   "md5": _hex(f"md5 {name} {build} {target}", 16), "sha256": _hex(f"sha {name} {build} {target}", 32)}
            rec.pop("noarch", None)
            if "noarch" in template:
                rec["noarch"] = template["noarch"]
            out[template["subdir"]][f"{name}-{src['version']}-{build}.conda"] = rec
    return dict(out)


def _port_deps(depends: list[str], target: str, template: dict[str, Any],
               plan: dict[str, tuple[dict[str, Any], dict[str, Any], str]],
               by_name: dict[str, list[dict[str, Any]]]) -> list[str]:
    deps: list[str] = []
    for dep in depends:
        dep = dep.replace("linux-64", target)
        name = _dep_name(dep)
        if target == "win-64" and LINUX_ONLY.match(name):
            continue
        if name not in plan and name not in by_name and not name.startswith("__"):
            continue  # the platform has no such package (e.g. cuda-driver-dev_win-64)
        parts = dep.split(" ")
        if len(parts) == 3 and name in plan:
            parts[2] = plan[name][2]
        elif len(parts) == 3:
            match = [r for r in by_name.get(name, []) if r["version"] == parts[1]]
            parts = [name, parts[1], match[0]["build"]] if match else [name, parts[1]]
        deps.append(" ".join(parts))
    deps += [d for d in template.get("depends", []) if PLATFORM_EXTRAS.match(_dep_name(d))]
    return sorted(set(deps))


def _hex(seed: str, nbytes: int) -> str:
    """A deterministic fake digest of nbytes (16: md5, 32: sha256) as hex."""
    return hashlib.sha256(seed.encode()).hexdigest()[: nbytes * 2]


# ---------------------------------------------------------------------------------------------------
# History for real names: older versions that the solver ranks below every real record
# ---------------------------------------------------------------------------------------------------


def older_versions(version: str, limit: int) -> Iterator[str]:
    """Versions below `version` walking down its numeric prefix (3.11.8 -> 3.11.7 ... 3.10.9 ...)."""
    parts: list[int] = []
    for seg in version.split("."):
        if not seg.isdigit():
            break
        parts.append(int(seg))
    if not parts:
        return
    if len(parts) == 1:
        parts.append(0)
    produced = 0
    cur = list(parts)
    while produced < limit:
        i = len(cur) - 1
        while i >= 0 and cur[i] == 0:
            cur[i] = 9
            i -= 1
        if i < 0:
            return
        cur[i] -= 1
        produced += 1
        yield ".".join(str(p) for p in cur)


def history_records(name: str, recs: list[dict[str, Any]], target: int, rng: random.Random,
                    subdir: str) -> dict[str, dict[str, Any]]:
    """Up to `target - len(recs)` older records of a real name, each a copy of its oldest real record."""
    from rattler import Version  # only for the conda version order (a wrong order would change solves)

    want = target - len(recs)
    if want <= 0:
        return {}
    oldest = min(recs, key=lambda r: Version(r["version"]))
    floor = Version(oldest["version"])
    prefix_m = re.match(r"^((?:py|r|np)\d+)", oldest["build"])
    prefix = prefix_m.group(1) if prefix_m else ""
    ext = ".conda"
    out: dict[str, dict[str, Any]] = {}
    ts = int(oldest.get("timestamp") or T_END_MS)
    builds_per_version = 3 if prefix.startswith("py") else 1
    for v in older_versions(oldest["version"], max(1, want // builds_per_version) + 1):
        if Version(v) >= floor:
            continue
        for b in range(builds_per_version):
            if len(out) >= want:
                return out
            ts -= rng.randrange(3, 40) * DAY_MS
            build = f"{prefix}h{rng.getrandbits(28):07x}_{b}"
            if ts < 1_640_995_200_000:  # before 2022 conda-forge uploaded .tar.bz2
                ext = ".tar.bz2"
            rec = {**oldest, "version": v, "build": build, "build_number": b, "timestamp": max(ts, T_START_MS),
                   "md5": f"{rng.getrandbits(128):032x}", "sha256": f"{rng.getrandbits(256):064x}",
                   "size": rng.randrange(5_000, 40_000_000), "subdir": subdir}
            out[f"{name}-{v}-{build}{ext}"] = rec
    return out


# ---------------------------------------------------------------------------------------------------
# Synthetic filler
# ---------------------------------------------------------------------------------------------------


class NamePool:
    """Unique, readable package names that never collide with real ones."""

    def __init__(self, rng: random.Random, taken: Iterable[str]) -> None:
        self.rng = rng
        self.taken = set(taken)

    def new(self, kind: str) -> str:
        while True:
            stem = "".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.choice((2, 2, 3, 3, 4))))
            if self.rng.random() < 0.15:
                stem += f"-{self.rng.choice(SYLLABLES)}{self.rng.choice(SYLLABLES)}"
            name = {"clib": f"lib{stem}", "r": f"r-{stem}", "pyext": stem, "tool": stem, "noarch": f"py{stem}"
                    if self.rng.random() < 0.3 else stem}[kind]
            if name not in self.taken:
                self.taken.add(name)
                return name


def _versions(rng: random.Random, n: int) -> list[str]:
    """n increasing versions: x.y.z with realistic steps (some calver)."""
    if rng.random() < 0.08:
        year, out = rng.randrange(2016, 2024), []
        for i in range(n):
            out.append(f"{year + i // 4}.{(i % 4) * 3 + 1}.{rng.randrange(0, 3)}")
        return out
    a, b, c = rng.choice((0, 0, 1, 1, 2, 3, 5)), rng.randrange(0, 12), rng.randrange(0, 5)
    out = []
    for _ in range(n):
        out.append(f"{a}.{b}.{c}")
        r = rng.random()
        if r < 0.6:
            c += 1
        elif r < 0.95:
            b, c = b + 1, 0
        else:
            a, b, c = a + 1, 0, 0
    return out


def _n_versions(rng: random.Random, mean: float) -> int:
    """Heavy-tailed versions-per-name (most names have few, some have hundreds)."""
    return max(1, min(400, int(rng.lognormvariate(0, 1.1) * mean / 1.8)))


def _pick(rng: random.Random, pool: list[str]) -> str:
    """A dependency target, biased to early (popular) names: preferential attachment."""
    return pool[int(len(pool) * rng.random() ** 2.5)]


def _pin(rng: random.Random, name: str) -> str:
    """A run_exports-style pin or a looser constraint, as conda-forge writes them."""
    r = rng.random()
    a, b, c = rng.randrange(0, 6), rng.randrange(0, 20), rng.randrange(0, 10)
    if r < 0.55:
        return f"{name} >={a}.{b}.{c},<{a}.{b + 1}.0a0"
    if r < 0.7:
        return f"{name} >={a}.{b},<{a + 1}.0a0"
    if r < 0.9:
        return f"{name} >={a}.{b}"
    return name


def _n_deps(rng: random.Random, mean: float) -> int:
    """Extra depends beyond the platform basics (snapshot: median 4, tail to 50)."""
    return min(48, int(rng.expovariate(1 / mean)))


@dataclass
class Synth:
    """State for generating one subdir's synthetic records."""

    rng: random.Random
    subdir: str
    names: NamePool
    clibs: list[str] = field(default_factory=list)
    pys: list[str] = field(default_factory=list)
    rs: list[str] = field(default_factory=list)

    def platform_deps(self, gcc: int) -> list[str]:
        if self.subdir == "win-64":
            return ["ucrt >=10.0.20348.0", "vc >=14.2,<15", "vc14_runtime >=14.29.30139"]
        deps = [f"libgcc >={gcc}"]
        if self.rng.random() < 0.85:
            deps.append("__glibc >=2.17,<3.0.a0")
        if self.rng.random() < 0.5:
            deps.append(f"libstdcxx >={gcc}")
        return deps

    def record(self, name: str, version: str, build: str, bn: int, ts: int, depends: list[str],
               noarch: str | None = None) -> dict[str, Any]:
        rng = self.rng
        lic = rng.choice(LICENSES)
        rec: dict[str, Any] = {
            "build": build, "build_number": bn, "depends": sorted(set(depends)), "md5": f"{rng.getrandbits(128):032x}",
            "name": name, "sha256": f"{rng.getrandbits(256):064x}", "size": int(rng.lognormvariate(11.5, 1.6)),
            "subdir": self.subdir, "timestamp": ts, "version": version, "license": lic,
        }
        rec["constrains"] = [_pin(rng, _pick(rng, self.clibs))] if self.clibs and rng.random() < 0.2 else []
        if lic in LICENSE_FAMILY and rng.random() < 0.7:
            rec["license_family"] = LICENSE_FAMILY[lic]
        if noarch:
            rec["noarch"] = noarch
        return rec

    def package(self, kind: str, mean_versions: float) -> dict[str, dict[str, Any]]:
        """All records of one new synthetic name."""
        rng = self.rng
        name = self.names.new(kind)
        versions = _versions(rng, _n_versions(rng, mean_versions))
        t0 = rng.randrange(T_START_MS, T_END_MS - 30 * DAY_MS)
        step = max(DAY_MS, (T_END_MS - t0) // (len(versions) + 1))
        out: dict[str, dict[str, Any]] = {}
        extra_mean = {"clib": 2.5, "pyext": 2.0, "r": 4.0, "tool": 3.0, "noarch": 2.5}[kind]
        for i, version in enumerate(versions):
            ts = t0 + i * step
            year = 2016 + (ts - T_START_MS) // (365 * DAY_MS)
            gcc = 7 if year < 2019 else 9 if year < 2021 else 12 if year < 2023 else 13 if year < 2025 else 14
            for bn, variant in self._variants(kind, year):
                deps = self._depends(kind, variant, gcc, extra_mean)
                h = f"h{rng.getrandbits(28):07x}"
                build = {"pyext": f"py{variant.replace('.', '')}{h}_{bn}", "r": f"r{variant.replace('.', '')}{h}_{bn}",
                         "noarch": f"pyh{rng.getrandbits(28):07x}_{bn}"}.get(kind, f"{h}_{bn}")
                rec = self.record(name, version, build, bn, ts + bn * DAY_MS, deps,
                                  noarch="python" if kind == "noarch" else None)
                ext = ".tar.bz2" if ts < 1_640_995_200_000 and rng.random() < 0.8 else ".conda"
                out[f"{name}-{version}-{build}{ext}"] = rec
        {"clib": self.clibs, "tool": self.clibs, "pyext": self.pys, "noarch": self.pys, "r": self.rs}[kind].append(name)
        return out

    def _variants(self, kind: str, year: int) -> list[tuple[int, str]]:
        """(build_number, python/R version) per build of one version."""
        rng = self.rng
        bns = [0] if rng.random() < 0.7 else [0, 1] if rng.random() < 0.8 else [0, 1, 2]
        if kind == "pyext":
            hi = min(len(PYTHONS), 4 + max(0, year - 2018) // 1)
            pys = PYTHONS[max(0, hi - 4): hi]
            return [(bn, py) for bn in bns[:2] for py in pys]
        if kind == "r":
            hi = min(len(R_VERSIONS), 1 + max(0, year - 2018) // 2)
            return [(bn, r) for bn in bns[:2] for r in R_VERSIONS[max(0, hi - 2): hi]]
        return [(bn, "") for bn in bns]

    def _depends(self, kind: str, variant: str, gcc: int, extra_mean: float) -> list[str]:
        rng = self.rng
        deps: list[str] = [] if kind == "noarch" else self.platform_deps(gcc)
        if kind == "pyext":
            major, minor = variant.split(".")
            deps += [f"python >={variant},<{major}.{int(minor) + 1}.0a0", f"python_abi {variant}.* *_cp{major}{minor}"]
            if rng.random() < 0.3:
                deps.append("numpy >=1.23.5,<2.0a0" if rng.random() < 0.5 else "numpy >=1.21,<3")
        elif kind == "r":
            major, minor = variant.split(".")
            deps.append(f"r-base >={variant},<{major}.{int(minor) + 1}.0a0")
        elif kind == "noarch":
            deps.append(f"python >={rng.choice(('3.6', '3.7', '3.8', '3.9'))}")
        for _ in range(_n_deps(rng, extra_mean)):
            if kind in ("pyext", "noarch") and self.pys and rng.random() < 0.6:
                deps.append(_pin(rng, _pick(rng, self.pys)).split(",")[0])
            elif kind == "r" and self.rs and rng.random() < 0.8:
                deps.append(_pick(rng, self.rs))
            elif self.clibs:
                deps.append(_pin(rng, _pick(rng, self.clibs)))
        return deps


def synth_subdir(subdir: str, target: int, rng: random.Random, names: NamePool,
                 shared_pys: list[str]) -> dict[str, dict[str, Any]]:
    """Synthetic records for one subdir until `target` records exist."""
    s = Synth(rng, subdir, names, pys=list(shared_pys))
    out: dict[str, dict[str, Any]] = {}
    kinds = ("noarch",) if subdir == "noarch" else ("clib",) * 35 + ("pyext",) * 40 + ("r",) * 20 + ("tool",) * 5
    mean = {"noarch": 7.0}.get(subdir, 8.0)
    while len(out) < target:
        kind = rng.choice(kinds)
        out.update(s.package(kind, mean))
    if subdir == "noarch":
        shared_pys.extend(s.pys)
    return out


# ---------------------------------------------------------------------------------------------------
# Writing: plain repodata.json (+ .zst) and CEP-16 shards
# ---------------------------------------------------------------------------------------------------


def write_plain(subdir_dir: Path, subdir: str, records: dict[str, dict[str, Any]], level: int) -> tuple[int, int]:
    """repodata.json + repodata.json.zst; return their sizes."""
    import zstandard

    doc = {
        "info": {"subdir": subdir},
        "packages": {fn: r for fn, r in sorted(records.items()) if fn.endswith(".tar.bz2")},
        "packages.conda": {fn: r for fn, r in sorted(records.items()) if fn.endswith(".conda")},
        "removed": [],
        "repodata_version": 1,
    }
    raw = json.dumps(doc, sort_keys=True).encode()
    (subdir_dir / "repodata.json").write_bytes(raw)
    cctx = zstandard.ZstdCompressor(level=level, threads=-1)
    comp = cctx.compress(raw)
    (subdir_dir / "repodata.json.zst").write_bytes(comp)
    return len(raw), len(comp)


def _shard_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A record as rattler.index puts it in a shard: md5/sha256 as raw bytes."""
    out = dict(rec)
    for key in ("md5", "sha256"):
        if isinstance(out.get(key), str):
            out[key] = bytes.fromhex(out[key])
    return out


def write_shards(subdir_dir: Path, subdir: str, records: dict[str, dict[str, Any]], level: int) -> tuple[int, int]:
    """CEP-16: shards/<sha256>.msgpack.zst per name + repodata_shards.msgpack.zst; return their sizes."""
    import msgpack
    import zstandard

    by_name: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: {"packages": {}, "packages.conda": {}})
    for fn, rec in records.items():
        by_name[rec["name"]]["packages" if fn.endswith(".tar.bz2") else "packages.conda"][fn] = _shard_record(rec)
    shard_dir = subdir_dir / "shards"
    shard_dir.mkdir(exist_ok=True)
    cctx = zstandard.ZstdCompressor(level=level)
    index: dict[str, bytes] = {}
    total = 0
    for name in sorted(by_name):
        shard = by_name[name]
        body = msgpack.packb({"packages": dict(sorted(shard["packages"].items())),
                              "packages.conda": dict(sorted(shard["packages.conda"].items())), "removed": []},
                             use_bin_type=True)
        comp = cctx.compress(body)
        digest = hashlib.sha256(comp).digest()  # the index names each shard by the hash of its file
        (shard_dir / f"{digest.hex()}.msgpack.zst").write_bytes(comp)
        index[name] = digest
        total += len(comp)
    idx = msgpack.packb({"info": {"subdir": subdir, "base_url": "", "shards_base_url": "./shards/",
                                  "created_at": CREATED_AT}, "shards": index}, use_bin_type=True)
    idx_comp = zstandard.ZstdCompressor(level=level).compress(idx)
    (subdir_dir / "repodata_shards.msgpack.zst").write_bytes(idx_comp)
    return len(idx_comp), total


# ---------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------


def _targets(config: GenConfig) -> dict[str, int]:
    return {"linux-64": config.linux64_records, "noarch": config.noarch_records,
            "linux-aarch64": config.other_records, "win-64": config.other_records}


def build_records(config: GenConfig, snapshot: Path) -> tuple[dict[str, dict[str, dict[str, Any]]], list[str]]:
    """subdir -> filename -> record, and the filenames of patched (non-snapshot) records."""
    rng = random.Random(config.seed)
    real = {s: load_real(snapshot, s) for s in SUBDIRS}
    patches = port_cuda_records(real)
    all_real_names = {r["name"] for recs in real.values() for r in recs.values()}
    names = NamePool(rng, all_real_names)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    patched: list[str] = []
    shared_pys: list[str] = []
    for subdir in ("noarch", "linux-64", "linux-aarch64", "win-64"):  # noarch first: others depend on it
        recs = dict(real[subdir])
        for fn, rec in patches.get(subdir, {}).items():
            recs[fn] = rec
            patched.append(f"{subdir}/{fn}")
        if config.history:
            scale = 1.0 if subdir in ("linux-64", "noarch") else 1 / 3
            grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for rec in recs.values():
                grouped[rec["name"]].append(rec)
            for name in sorted(grouped):
                target = int(HEAVY_NAMES.get(name, 12 + rng.randrange(0, 30)) * scale)
                recs.update(history_records(name, grouped[name], target, rng, subdir))
        synth_target = max(0, _targets(config)[subdir] - len(recs))
        recs.update(synth_subdir(subdir, synth_target, rng, names, shared_pys))
        out[subdir] = recs
    return out, patched


def generate(cache_dir: Path, config: GenConfig | None = None, *, snapshot: Path | None = None,
             force: bool = False, log: Any = None) -> ChannelInfo:
    """Generate (or reuse) the channel for `config` under cache_dir; return its ChannelInfo."""
    config = config or GenConfig()
    snapshot = snapshot or default_snapshot()
    if not (snapshot / "linux-64" / "repodata.json").is_file():
        raise FileNotFoundError(f"the conda-forge snapshot is missing: {snapshot}")
    root = Path(cache_dir) / config.key()
    marker = root / "channel-info.json"
    if marker.is_file() and not force:
        data = json.loads(marker.read_text())
        return ChannelInfo(**{**data, "root": Path(data["root"])})
    if root.exists():
        shutil.rmtree(root)
    t0 = time.perf_counter()
    say = log or (lambda msg: None)
    say(f"generating {config.key()} ...")
    records, patched = build_records(config, snapshot)
    info = ChannelInfo(root=root, config=asdict(config), patched=patched)
    for subdir, recs in records.items():
        sdir = info.channel_dir / subdir
        sdir.mkdir(parents=True, exist_ok=True)
        js, zs = write_plain(sdir, subdir, recs, config.zstd_level)
        ix, sh = write_shards(sdir, subdir, recs, config.shard_zstd_level)
        info.records[subdir] = len(recs)
        info.names[subdir] = len({r["name"] for r in recs.values()})
        info.bytes[subdir] = {"json": js, "zst": zs, "shard_index": ix, "shards": sh}
        say(f"  {subdir}: {len(recs)} records, {info.names[subdir]} names, json {js / 1e6:.1f} MB, "
            f"zst {zs / 1e6:.1f} MB, shard index {ix / 1e6:.2f} MB")
    records.clear()
    info.gen_seconds = round(time.perf_counter() - t0, 1)
    info.disk_bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    marker.write_text(json.dumps(info.to_json(), indent=1, sort_keys=True))
    return info


def default_cache_dir() -> Path:
    """$ENVLOCK_BENCH_CACHE, else the user's cache dir / envlock-bench."""
    env = os.environ.get("ENVLOCK_BENCH_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("envlock-bench"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--small", action="store_true", help="a few thousand records per subdir (CI)")
    parser.add_argument("--records", type=int, default=None, help="linux-64 records (default 450000)")
    parser.add_argument("--snapshot", type=Path, default=None)
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    args = parser.parse_args(argv)
    config = GenConfig.small(args.seed) if args.small else GenConfig(seed=args.seed)
    if args.records:
        config = GenConfig(**{**asdict(config), "linux64_records": args.records})
    info = generate(args.cache_dir or default_cache_dir(), config, snapshot=args.snapshot, force=args.force,
                    log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(info.to_json(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # rattler (imported for version order) can segfault at interpreter exit
