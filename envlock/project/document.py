"""The lock document: what a content hash covers, what envlock records beside it, and every file a solve
writes (conda-lock.yml, conda-<platform>.lock, requirements-<platform>.txt, activation scripts, the spec).

Pure: values in, (path, text) pairs out; writing is envlock.project.layout's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envlock import __version__
from envlock.errors import EnvlockError
from envlock.formats import LOCK_FORMAT, META_PREFIX, custom_value, render_conda_lock, render_package_section
from envlock.formats.head import package_section_digest
from envlock.formats.spec import EnvSpec, pip_requirements, render_platform_env, render_spec
from envlock.models import Anchor, Candidate, LockedPackage, Plan, PlanOptions, PlatformResult, PypiPackage
from envlock.names import match_spec_name, strip_credentials
from envlock.project.derived import Derived
from envlock.project.derived import render as render_derived
from envlock.project.layout import LOCK_NAME, lock_dir, spec_path
from envlock.core.rules import torch_skew
from envlock.core.tables import ExtrasTables

HASH_VERSION = 1
#: Packages the plan itself asks for; any other dependency in a spec is the user's extra.
PLAN_NAMES = frozenset(
    {
        "cuda-version", "cuda-nvcc", "cuda-cudart-dev", "cuda-cccl", "libcusparse-dev", "libcublas-dev",
        "libcusolver-dev", "libcurand-dev", "cudatoolkit-dev", "cudnn", "python", "pytorch", "gcc_linux-64", "gxx_linux-64",
        "gcc_linux-aarch64", "gxx_linux-aarch64", "vs2019_win-64", "vs2022_win-64",
    }
)  # fmt: skip
#: Taken by the solve where the channel has them (ninja for a toolchain, pip beside a full env's python) and
#: then written into the spec as bare names, so plain conda installs them too (`EnvSpec.optional`: which one a
#: spec takes). A bare line of that one is that; any other line is the user's (a full env's `- ninja`, a
#: toolchain's `- pip`, `ninja >=1.11` anywhere).
OPTIONAL_NAMES = frozenset({"ninja", "pip"})


# --------------------------------------------------------------------------- what the plan is asked


def plan_names(spec: EnvSpec, extras: ExtrasTables) -> frozenset[str]:
    """Package names the plan makes for this spec: the toolchain's and those of its `with:` extras."""
    if not spec.with_extras:
        return PLAN_NAMES
    try:
        return PLAN_NAMES | extras.package_names(spec.with_extras)
    except EnvlockError:
        return PLAN_NAMES  # make_plan reports the unknown name


def plan_options(spec: EnvSpec, extras: ExtrasTables) -> tuple[PlanOptions, tuple[str, ...]]:
    """What the rules plan for a spec, and the user's extra dependencies (those the plan does not make)."""
    names = plan_names(spec, extras)
    user = tuple(d for d in spec.dependencies if match_spec_name(d) not in names and d.strip() != spec.optional)
    options = PlanOptions(
        platforms=spec.platforms,
        python=None if spec.toolchain_only else spec.python,
        channels=spec.channels,
        glibc=spec.glibc,
        with_cudnn=spec.cudnn,
        extra_specs=user,
        with_extras=spec.with_extras,
        toolchain_only=spec.toolchain_only,
    )
    return options, user


def ignored_toolchain_lines(spec: EnvSpec, plan: Plan, extras: ExtrasTables,
                            written: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The user's spec dependencies on toolchain names that the plan replaces (hand edits envlock overrides);
    `written`: the lines envlock itself wrote for the earlier lock (envlock.project.lines_written), never warned
    about: after an edit of `torch:` they are simply replaced."""
    generated = {s.strip() for pp in plan.platforms for c in pp.candidates for s in c.specs} | written
    names = plan_names(spec, extras)
    return tuple(d for d in spec.dependencies if match_spec_name(d) in names and d.strip() not in generated)


def lines_written(custom: Mapping[str, str], platforms: Iterable[str]) -> frozenset[str]:
    """The spec lines envlock wrote for a lock (from its custom metadata): each platform's chosen specs and the
    `- pip:` list it locked. A toolchain line among them is envlock's own, not the user's."""
    out: set[str] = set()
    for p in platforms:
        plan = custom_value(dict(custom), f"plan.{p}", {})
        inputs = custom_value(dict(custom), f"inputs.{p}", {})
        for key, doc in (("specs", plan), ("pip", inputs)):
            values = doc.get(key) if isinstance(doc, dict) else None
            out.update(str(s).strip() for s in values or () if isinstance(s, (str, int, float)))
    return frozenset(out)


def pip_lines(spec: EnvSpec) -> tuple[str, ...]:
    """The `- pip:` list a full environment locks (toolchain-only: none)."""
    return () if spec.toolchain_only else pip_requirements(spec.pip, spec.torch, spec.torch_source)[0]


# --------------------------------------------------------------------------- hashing


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the normal form that gets hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def content_hash(inputs: Mapping[str, Any]) -> str:
    """sha256 of the normalised inputs of one platform."""
    return hashlib.sha256(canonical_json({"hash_version": HASH_VERSION, **inputs}).encode()).hexdigest()


def packages_fingerprint(packages: Iterable[LockedPackage]) -> str:
    """sha256 of what installs (name, version, url, md5, sha256) of one platform's packages, order-free.

    Recorded per platform so `envlock check` can tell a hand-edited package list from a reformatted one.
    """
    rows = sorted([p.name, p.version, strip_credentials(p.url), p.md5, p.sha256 or ""] for p in packages)
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()


def pypi_fingerprint(packages: Iterable[PypiPackage]) -> str:
    """sha256 of what installs (name, version, url, sha256) of one platform's PyPI part, order-free."""
    rows = sorted([p.name, p.version, strip_credentials(p.url), p.sha256] for p in packages)
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()


def candidate_json(c: Candidate) -> dict[str, Any]:
    return {
        "cuda": c.cuda,
        "skew": c.skew,
        # Sorted: a solve does not depend on the order of its specs, so neither does the hash
        # (reordering the spec's extra dependencies must not make a lock stale).
        "specs": sorted(c.specs),
        "channels": [strip_credentials(x) for x in c.channels],
        "virtual_packages": [str(v) for v in c.virtual_packages],
    }


def hash_inputs(spec: EnvSpec, plan: Plan, platform: str) -> dict[str, Any]:
    """Normalised inputs of one platform: what a lock's content_hash covers.

    The plan's candidates stand for the rule tables: a rules change that changes a plan changes the
    hash, one that does not, does not. Paths, the machine, mirrors and YAML layout never enter. The
    torch value is in twice, as the spec asks for it (`inputs`) and as the anchor read it (`anchor`):
    hash version 1 covers both, so every existing lock keeps its hash.
    """
    pp = next(p for p in plan.platforms if p.platform == platform)
    return {
        "pip": sorted(pip_lines(spec)),
        "platform": platform,
        "inputs": spec.inputs(),
        "channels": [strip_credentials(c) for c in spec.channels],
        "platforms": sorted(spec.platforms),
        "extras": sorted(plan.options.extra_specs),
        "anchor": {"torch": plan.anchor.torch, "cuda": plan.anchor.cuda, "cudnn": plan.anchor.cudnn},
        "candidates": [candidate_json(c) for c in pp.candidates],
    }


def content_hashes(spec: EnvSpec, plan: Plan) -> dict[str, str]:
    return {p: content_hash(hash_inputs(spec, plan, p)) for p in spec.platforms}


# --------------------------------------------------------------------------- custom metadata


def anchor_json(anchor: Anchor) -> dict[str, Any]:
    """The anchor as a lock records it and --json reports it (the table's facts are not part of it). `torch_cuda`,
    the CUDA of torch's own build, only where an override set the toolchain's elsewhere: every other lock keeps
    its bytes."""
    return {
        "torch": anchor.torch,
        "cuda": anchor.cuda,
        "cudnn": anchor.cudnn,
        "source": anchor.source,
        "detail": anchor.detail,
        "torch_source": anchor.torch_source,
        "local_label": anchor.local_label,
        **({"torch_cuda": anchor.torch_cuda} if anchor.torch_cuda else {}),
    }


def custom_metadata(
    spec: EnvSpec, plan: Plan, results: Sequence[PlatformResult], pypi: Mapping[str, Sequence[PypiPackage]]
) -> dict[str, str]:
    meta = {
        f"{META_PREFIX}version": __version__,
        f"{META_PREFIX}lock_format": str(LOCK_FORMAT),
        f"{META_PREFIX}rules_version": plan.rules_version,
        f"{META_PREFIX}env_name": spec.name,
        f"{META_PREFIX}spec": f"environments/{spec.name}.yml",
        f"{META_PREFIX}anchor": json.dumps(anchor_json(plan.anchor), sort_keys=True),
    }
    for res in results:
        c = res.chosen
        meta[f"{META_PREFIX}plan.{res.platform}"] = json.dumps(
            {
                "cuda": c.cuda,
                "skew": c.skew,
                # how far from torch's own CUDA, where that is not the anchor's (an override): see torch_skew
                **({"torch_skew": torch_skew(plan.anchor.own_cuda, c.cuda)} if plan.anchor.torch_cuda else {}),
                "nvcc": res.nvcc,
                "gcc_max": c.gcc_max,
                "cudnn": res.version_of("cudnn"),
                "specs": list(c.specs),
                "virtual_packages": [str(v) for v in c.virtual_packages],
                "channels": [strip_credentials(x) for x in c.channels],
                "attempts": [{"cuda": a, "error": e} for a, e in res.attempts],
                "notes": list(c.notes),
                "complaints": list(c.complaints),
                **({"extras": [[label, spec] for label, spec in c.extras]} if c.extras else {}),
                "packages": len(res.packages),
            },
            sort_keys=True,
        )
        # What the content hash covered and what was installed: `envlock check` names what changed
        # from these and spots a hand-edited package list (envlock.project.freshness).
        meta[f"{META_PREFIX}inputs.{res.platform}"] = canonical_json(hash_inputs(spec, plan, res.platform))
        meta[f"{META_PREFIX}packages.{res.platform}"] = packages_fingerprint(res.packages)
        if res.platform in pypi:
            meta[f"{META_PREFIX}pypi.{res.platform}"] = pypi_fingerprint(pypi[res.platform])
    sources = pypi_sources(w for ws in pypi.values() for w in ws)
    if sources:  # where the PyPI part's files are served: `check` keeps every wheel URL under one of them
        meta[f"{META_PREFIX}pypi_sources"] = json.dumps(sources)
    return meta


def pypi_sources(wheels: Iterable[PypiPackage]) -> list[str]:
    """The origins the wheels' URLs lie under (`https://host[:port]/`; a file:// wheel's own folder), sorted."""
    from urllib.parse import urlsplit

    out = set()
    for w in wheels:
        url = strip_credentials(w.url)
        if url.startswith("file:"):
            out.add(url.rsplit("/", 1)[0] + "/")
        else:
            parts = urlsplit(url)
            out.add(f"{parts.scheme}://{parts.netloc}/")
    return sorted(out)


# --------------------------------------------------------------------------- the files


def render_files(
    project_dir: Path,
    spec: EnvSpec,
    plan: Plan,
    results: Sequence[PlatformResult],
    *,
    timestamp: str | None = None,
    pypi: Mapping[str, Sequence[PypiPackage]] | None = None,
) -> list[tuple[Path, str]]:
    """Every file a solve writes, as (path, text): the files derived from conda-lock.yml (rendered from what it
    records, as every check renders them again: envlock.project.derived), conda-lock.yml, then the spec, last."""
    pypi = pypi or {}
    extras = plan.options.extra_specs
    hashes = content_hashes(spec, plan)
    packages: list[LockedPackage] = [p for r in results for p in r.packages]
    ldir = lock_dir(project_dir, spec.name)
    rendered = render_derived(Derived(env_name=spec.name, platforms=spec.platforms, content_hash=hashes, packages=packages,
                                      pypi=pypi, torch_source=plan.anchor.torch_source))
    files: list[tuple[Path, str]] = [(ldir / name, text) for name, text in rendered.items()]
    meta = custom_metadata(spec, plan, results, pypi)
    # The package section does not depend on the metadata: render it once, digest it, record the digest.
    wheels = [w for r in results for w in pypi.get(r.platform, ())]
    section = render_package_section(packages, spec.platforms, wheels)
    meta[f"{META_PREFIX}packages_digest"] = package_section_digest(section) or ""
    lock_text = render_conda_lock(
        packages=packages,
        platforms=spec.platforms,
        channels=_lock_channels(results, spec),
        content_hashes=hashes,
        # Relative to the lock file's folder, as conda-lock writes it (its install finds the spec from there).
        sources=[f"../../environments/{spec.name}.yml"],
        custom_metadata=meta,
        timestamp=timestamp,
        package_section=section,
    )
    files.append((ldir / LOCK_NAME, lock_text))
    # The spec written is the spec solved: each platform's chosen candidate (a widened or dropped cuDNN,
    # a moved CUDA minor) and the optional packages it took, so conda and conda-lock ask for what the lock
    # holds; per platform also as plain conda reads it (no selectors, no envlock keys).
    toolchain = {r.platform: [*(s for s in r.chosen.specs if s not in extras), *optional_taken(spec, r)]
                 for r in results}
    files += [(ldir / f"environment-{r.platform}.yml",
               render_platform_env(spec, r.platform, toolchain[r.platform], extras, pip_lines(spec), r.chosen.channels))
              for r in results]
    files.append((spec_path(project_dir, spec.name),
                  render_spec(spec, toolchain, extras, solved_notes(plan, results), pip_lines(spec))))
    return files


def optional_taken(spec: EnvSpec, result: PlatformResult) -> list[str]:
    """The optional packages the solve took on one platform (ninja with a toolchain, pip with a full env)."""
    return [spec.optional] if result.version_of(spec.optional) else []


def solved_notes(plan: Plan, results: Sequence[PlatformResult]) -> list[str]:
    """Why a platform's spec lines differ from the plan's first choice (comments in the spec)."""
    first = {pp.platform: pp.candidates[0] for pp in plan.platforms}
    out = []
    for res in results:
        planned, chosen = first[res.platform], res.chosen
        if chosen.specs == planned.specs:
            continue
        why = [n for n in chosen.notes if n not in planned.notes]
        if chosen.cuda != planned.cuda:
            why.insert(0, f"CUDA {planned.cuda} did not solve (the lock's plan says why), CUDA {chosen.cuda} "
                          f"({chosen.skew}) did")
        out.append(f"{res.platform}: written as solved, not as first planned: " + "; ".join(why or ["see the lock"]))
    return out


def _lock_channels(results: Sequence[PlatformResult], spec: EnvSpec) -> list[str]:
    out: list[str] = []
    for res in results:
        for c in res.chosen.channels:
            if c not in out:
                out.append(c)
    return out or list(spec.channels)
