"""Locks that live in a repo: freshness (`check`), re-lock (`lock`), `update PKG…` (diff: envlock.lockdiff).

`check` never solves and never reaches the network: it reads the specs and only the metadata part of
each conda-lock.yml (the YAML before `package:`), re-plans with the pure rules and compares content
hashes. Importing this module must not import rattler, conda_lock or requests (a test checks);
`lock` and `update` import the solver inside the functions that solve.

The anchor a freshness check uses (and that `lock` re-plans from):

* the anchor recorded in the lock (`envlock.anchor`) when it came from the package index (`pypi`), an
  `installed` torch or conda-forge's builds and the spec's torch inputs still match it: those cannot be
  re-derived without the network or a process (and an installed torch is not in the spec at all), and
  re-asking would make `check` flaky;
* otherwise re-derived offline from envlock's own data when the spec allows it: a `cuda:` override, a
  `+cuXYZ` label, or a torch version in envlock's torch table, so a changed table makes a lock stale;
* when neither applies, the spec's torch inputs changed, so the lock is stale whatever the anchor is
  (`lock` then asks the network, as `resolve` does).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from envlock import UPGRADE_HINT
from envlock.errors import EnvlockError, LockfileError, SpecError
from envlock.lockfile import (
    META_PREFIX,
    check_lock_header,
    content_hash,
    package_section_digest,
    packages_fingerprint,
    parse_conda_lock,
    pypi_fingerprint,
    read_text,
)
from envlock.models import Anchor, LockedPackage, Plan
from envlock.spec import EnvSpec, read_spec

if TYPE_CHECKING:
    from envlock.lockdiff import Entries, LockDiff

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LOCK_NAME = "conda-lock.yml"
#: Anchor sources that cannot be re-derived offline: the lock's recorded anchor stands for them.
RECORDED_SOURCES = frozenset({"pypi", "installed", "conda-forge"})
RELOCK_HINT = "run `envlock lock` and commit environments/ and locks/"
#: Change kinds `lock` and `update` refuse to write over (a corrupt or edited lock they may replace).
BLOCKING = frozenset({"missing-spec", "newer-envlock", "invalid-spec"})


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Change:
    """One reason a lock is not fresh."""

    # spec | rules | anchor | missing-lock | missing-spec | hand-edited | newer-envlock
    # | invalid-spec | invalid-lock
    kind: str
    message: str
    platform: str | None = None
    hint: str | None = None  # what to do, for the kinds `lock`/`update` refuse

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "platform": self.platform, "message": self.message}


@dataclass(frozen=True)
class EnvStatus:
    """Freshness of one environment (spec + lock)."""

    name: str
    spec_path: Path | None
    lock_path: Path | None
    platforms: tuple[str, ...] = ()
    changes: tuple[Change, ...] = ()

    @property
    def fresh(self) -> bool:
        return not self.changes

    @property
    def relockable(self) -> bool:
        """Whether `envlock lock` may rewrite it: a spec that reads, and no lock of a newer envlock."""
        return self.spec_path is not None and not any(c.kind in BLOCKING for c in self.changes)

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": _rel(self.spec_path, project_dir),
            "lock": _rel(self.lock_path, project_dir),
            "platforms": list(self.platforms),
            "fresh": self.fresh,
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(frozen=True)
class CheckReport:
    project_dir: Path
    envs: tuple[EnvStatus, ...]

    @property
    def fresh(self) -> bool:
        return all(e.fresh for e in self.envs)

    @property
    def stale(self) -> tuple[EnvStatus, ...]:
        return tuple(e for e in self.envs if not e.fresh)

    def error(self) -> LockfileError | None:
        """The one error that summarises the stale environments (None when all are fresh)."""
        stale = self.stale
        if not stale:
            return None
        kinds = {c.kind for e in stale for c in e.changes}
        names = ", ".join(e.name for e in stale)
        what = f"{len(stale)} of {len(self.envs)} environment(s) not fresh: {names}"
        if "newer-envlock" in kinds:
            return LockfileError(what, hint=f"{UPGRADE_HINT} to read these locks")
        if "invalid-spec" in kinds:
            return LockfileError(
                what, hint="fix the spec named above (or restore it from git), then `envlock lock`"
            )
        if "missing-spec" in kinds:  # `envlock lock` refuses an orphaned lock: say what to do first
            return LockfileError(
                what,
                hint="restore the missing spec from git (or delete its locks/<name>/ dir), then `envlock lock`",
            )
        return LockfileError(what, hint=RELOCK_HINT)

    def to_json(self) -> dict[str, Any]:
        err = self.error()
        return {
            "envlock_result_version": 1,
            "fresh": self.fresh,
            "environments": [e.to_json(self.project_dir) for e in self.envs],
            "error": err.message if err else None,
            "hint": err.hint if err else None,
        }


@dataclass(frozen=True)
class LockMeta:
    """The metadata part of a conda-lock.yml (read without parsing its packages)."""

    path: Path
    platforms: tuple[str, ...]
    content_hash: dict[str, str]
    custom_metadata: dict[str, str]
    package_digest: str | None  # digest of the package section as it is on disk
    text: str = field(repr=False, default="")

    def meta(self, key: str) -> str | None:
        return self.custom_metadata.get(META_PREFIX + key)

    def meta_json(self, key: str) -> Any:
        raw = self.meta(key)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None


def _rel(path: Path | None, base: Path) -> str | None:
    if path is None:
        return None
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- reading


def read_lock_meta(path: Path) -> LockMeta:
    """Parse only the part of a conda-lock.yml before `package:`; LockfileError when unreadable or too new."""
    text = read_text(path, missing="no lock", missing_hint="run `envlock lock` to make it")
    cut = text.find("\npackage:")
    head = text if cut < 0 else text[: cut + 1]
    bad = LockfileError(
        f"{path} is not a valid conda-lock v1 file",
        hint="restore it from git (`git checkout -- <file>`) or re-create it with `envlock lock`",
    )
    try:
        doc = yaml.load(head, Loader=_LOADER)  # a safe loader (C or pure)
    except yaml.YAMLError:
        raise bad from None
    if not isinstance(doc, dict):
        raise bad
    meta, custom = check_lock_header(doc, path)
    try:
        platforms = tuple(str(p) for p in meta.get("platforms") or ())
        hashes = {str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()}
    except (TypeError, AttributeError):
        raise bad from None
    return LockMeta(
        path=path,
        platforms=platforms,
        content_hash=hashes,
        custom_metadata=custom,
        package_digest=package_section_digest(text),
        text=text,
    )


def discover(project_dir: Path) -> dict[str, tuple[Path | None, Path | None]]:
    """name → (spec path, lock path) for every spec in environments/ and every lock in locks/."""
    if not project_dir.is_dir():
        raise SpecError(f"project dir {project_dir} does not exist", hint="pass --project-dir DIR")
    found: dict[str, tuple[Path | None, Path | None]] = {}
    env_dir = project_dir / "environments"
    lock_root = project_dir / "locks"
    # Only *.yml: that is what envlock writes (a *.yaml spec would get a .yml twin on `envlock lock`).
    specs = sorted(env_dir.glob("*.yml")) if env_dir.is_dir() else []
    for spec in specs:
        found.setdefault(spec.stem, (spec, None))
    if lock_root.is_dir():
        for lock in sorted(lock_root.glob(f"*/{LOCK_NAME}")):
            name = lock.parent.name
            found[name] = (found.get(name, (None, None))[0], lock)
    for name, (spec, lock) in list(found.items()):
        if lock is None:
            found[name] = (spec, lock_root / name / LOCK_NAME)
    if not found:
        raise SpecError(
            f"no environments in {project_dir} (looked for environments/*.yml and locks/*/{LOCK_NAME})",
            hint="run `envlock resolve --torch VERSION` there, or pass --project-dir DIR",
        )
    return dict(sorted(found.items()))


# --------------------------------------------------------------------------- anchor


def _torch_parts(torch: str) -> tuple[str, str | None]:
    public, _, local = torch.strip().partition("+")
    return public, (local or None)


def recorded_anchor(custom_metadata: Mapping[str, str] | None) -> Anchor | None:
    """The anchor a lock was made from (its custom_metadata `envlock.anchor`), if readable."""
    try:
        data = json.loads((custom_metadata or {}).get(f"{META_PREFIX}anchor") or "null")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return Anchor(
            torch=str(data["torch"]),
            cuda=str(data["cuda"]),
            cudnn=data.get("cudnn"),
            source=str(data.get("source", "")),
            detail=str(data.get("detail", "")),
            torch_source=data.get("torch_source", "pip"),
            local_label=data.get("local_label"),
        )
    except KeyError:
        return None


def reusable_anchor(spec: EnvSpec, recorded: Anchor | None) -> Anchor | None:
    """The recorded anchor when it stands for what the spec asks and cannot be re-derived offline."""
    public, local = _torch_parts(spec.torch)
    if recorded is None or recorded.source not in RECORDED_SOURCES or spec.cuda is not None or local:
        return None
    if recorded.torch != public or recorded.torch_source != spec.torch_source:
        return None
    return recorded


def offline_derivable(spec: EnvSpec) -> bool:
    """Whether envlock's own data gives the anchor: a cuda override, a +cuXYZ label, or the torch table."""
    public, local = _torch_parts(spec.torch)
    if spec.cuda is not None or local:
        return True
    if spec.torch_source != "pip":
        return False
    from envlock.anchor import load_torch_table, parse_torch_version

    try:
        version, _ = parse_torch_version(public)
    except EnvlockError:
        return True  # find_anchor reports the bad version itself
    return load_torch_table().row_for(version) is not None


def spec_anchor(
    spec: EnvSpec, recorded: Anchor | None, *, offline: bool = True, lookup: Any = None
) -> Anchor:
    """The anchor `check` compares against and `lock` re-plans from (see the module docstring)."""
    reuse = reusable_anchor(spec, recorded)
    if reuse is not None:
        return reuse
    from envlock.resolve import find_anchor

    try:
        return find_anchor(
            spec.torch,
            cuda=spec.cuda,
            torch_source=spec.torch_source,
            python_exe=None,
            offline=offline,
            lookup=lookup,
        )
    except EnvlockError as exc:
        # The anchor's hints speak resolve's options; here the spec is what the user edits.
        err = type(exc)(exc.message, hint=in_spec_terms(exc.hint, spec.name))
        raise err from None


#: resolve's options that set a key of the spec's `envlock:` block (what `lock` and `update` read instead).
_SPEC_KEYS = (("--cuda X.Y", "cuda: X.Y"), ("--torch-source pip", "torch_source: pip"),
              ("--torch-source conda-forge", "torch_source: conda-forge"))


def in_spec_terms(hint: str, name: str) -> str:
    """A hint that names resolve's --cuda/--torch-source, worded for a spec: `cuda: X.Y` in its envlock block."""
    out = hint.replace("pass --cuda X.Y", "set --cuda X.Y")
    for option, key in _SPEC_KEYS:
        out = out.replace(option, f"`{key}` in environments/{name}.yml's envlock block")
    return out


# --------------------------------------------------------------------------- freshness


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "null" if value is None else str(value)


def describe_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], platform: str, rules: tuple[str, str]
) -> list[Change]:
    """Name what differs between the recorded and the current hash inputs of one platform."""
    out: list[Change] = []
    old_in, new_in = old.get("inputs") or {}, new.get("inputs") or {}
    for key in sorted(set(old_in) | set(new_in)):
        if old_in.get(key) != new_in.get(key):
            out.append(
                Change(
                    "spec", f"spec envlock.{key}: {_fmt(old_in.get(key))} → {_fmt(new_in.get(key))}", platform
                )
            )
    for key in ("channels", "platforms"):
        if old.get(key) != new.get(key):
            out.append(Change("spec", f"spec {key}: {_fmt(old.get(key))} → {_fmt(new.get(key))}", platform))
    if old.get("extras") != new.get("extras"):
        before, after = set(old.get("extras") or ()), set(new.get("extras") or ())
        moved = [f"+{d}" for d in sorted(after - before)] + [f"-{d}" for d in sorted(before - after)]
        out.append(Change("spec", "spec dependencies: " + ", ".join(moved), platform))
    if old.get("pip") != new.get("pip"):
        before, after = set(old.get("pip") or ()), set(new.get("pip") or ())
        moved = [f"+{d}" for d in sorted(after - before)] + [f"-{d}" for d in sorted(before - after)]
        out.append(Change("spec", "spec `- pip:` requirements: " + ", ".join(moved), platform))
    if old.get("anchor") != new.get("anchor"):
        a, b = old.get("anchor") or {}, new.get("anchor") or {}
        why = "" if any(c.kind == "spec" for c in out) else " (envlock's torch table changed)"
        out.append(
            Change(
                "anchor",
                f"anchor: torch {a.get('torch')} CUDA {a.get('cuda')} cuDNN {a.get('cudnn')} → "
                f"torch {b.get('torch')} CUDA {b.get('cuda')} cuDNN {b.get('cudnn')}{why}",
                platform,
            )
        )
    if not out and old.get("candidates") != new.get("candidates"):
        out.append(
            Change(
                "rules",
                _rules_change(old.get("candidates") or [], new.get("candidates") or [], rules),
                platform,
            )
        )
    if not out and old != new:
        out.append(
            Change("rules", "envlock's hash inputs changed (lock made by another envlock version)", platform)
        )
    return out


def _rules_change(old: list[dict[str, Any]], new: list[dict[str, Any]], rules: tuple[str, str]) -> str:
    """One sentence on how envlock's rules changed the plan (the candidates)."""
    version = f" (rules {rules[0]} → {rules[1]})" if rules[0] != rules[1] else ""
    old_minors = [c.get("cuda") for c in old]
    new_minors = [c.get("cuda") for c in new]
    if old_minors != new_minors:
        before, after = " → ".join(map(str, old_minors)), " → ".join(map(str, new_minors))
        return f"envlock rules{version}: CUDA candidates {before} became {after}"
    for a, b in zip(old, new, strict=False):
        for key in ("specs", "virtual_packages", "channels", "skew"):
            if a.get(key) == b.get(key):
                continue
            if isinstance(a.get(key), list):
                sa, sb = set(a.get(key) or ()), set(b.get(key) or ())
                if sa == sb and key != "channels":  # only the order, which the hash no longer sees
                    continue
                moved = [f"+{x}" for x in sorted(sb - sa)] + [f"-{x}" for x in sorted(sa - sb)]
                detail = ", ".join(moved) or "channel order changed"
            else:
                detail = f"{a.get(key)} → {b.get(key)}"
            return f"envlock rules{version}: CUDA {a.get('cuda')} {key}: {detail}"
    return "the lock was made by an envlock that hashed its inputs differently; re-lock it once"


def integrity_changes(lock: LockMeta) -> list[Change]:
    """A hand-edited lock: hashes that no longer match what envlock recorded next to them."""
    out: list[Change] = []
    for platform in lock.platforms:
        recorded = lock.meta(f"inputs.{platform}")
        have = lock.content_hash.get(platform)
        if recorded is not None:
            try:
                expect = content_hash(json.loads(recorded))
            except ValueError:
                expect = None
            if expect != have:
                out.append(
                    Change("hand-edited", "content_hash or envlock metadata was edited by hand", platform)
                )
    digest = lock.meta("packages_digest")
    if digest and digest != lock.package_digest:
        out.extend(_package_edits(lock))
    return out


def _package_edits(lock: LockMeta) -> list[Change]:
    """The text of the package list changed: parse it and compare what installs (reformatting is fine)."""
    try:
        full = parse_conda_lock(lock.text, lock.path)
    except LockfileError as exc:
        return [Change("hand-edited", f"the package list no longer parses ({exc.message})")]
    out: list[Change] = []
    for platform in lock.platforms:
        want = lock.meta(f"packages.{platform}")
        if want is None:
            out.append(Change("hand-edited", "the package list differs from what envlock wrote", platform))
        elif packages_fingerprint(full.packages_for(platform)) != want:
            out.append(
                Change("hand-edited", "packages were edited by hand (versions, URLs or hashes)", platform)
            )
        elif pypi_fingerprint(full.pypi_for(platform)) != (lock.meta(f"pypi.{platform}") or pypi_fingerprint(())):
            out.append(
                Change("hand-edited", "PyPI packages were edited by hand (versions, URLs or hashes)", platform)
            )
    return out


def _explicit_changes(lock_path: Path, lock: LockMeta) -> list[Change]:
    """Each conda-<platform>.lock (and requirements-<platform>.txt of a full env) must carry the content
    hash of its platform (first lines only)."""
    out: list[Change] = []
    names = [(p, f"conda-{p}.lock") for p in lock.platforms]
    names += [(p, f"requirements-{p}.txt") for p in lock.platforms if lock.meta(f"pypi.{p}") is not None]
    for platform, name in names:
        path = lock_path.parent / name
        found = None
        try:
            with path.open(encoding="utf-8") as fh:
                for _ in range(8):
                    line = fh.readline()
                    if line.startswith("# content_hash:"):
                        found = line.split(":", 1)[1].strip()
                        break
        except FileNotFoundError:
            out.append(Change("missing-lock", f"{path.name} is missing", platform))
            continue
        except OSError as exc:
            out.append(Change("invalid-lock", f"cannot read {path.name}: {exc}", platform))
            continue
        if found != lock.content_hash.get(platform):
            out.append(Change("hand-edited", f"{path.name} is out of step with {LOCK_NAME}", platform))
    return out


def current_inputs(spec: EnvSpec, anchor: Anchor) -> tuple[Plan, dict[str, dict[str, Any]]]:
    """The plan for a spec and the hash inputs of each of its platforms."""
    from envlock.resolve import hash_inputs, plan_for

    plan, extras = plan_for(spec, anchor)
    return plan, {p: hash_inputs(spec, plan, p, extras) for p in spec.platforms}


def env_status(project_dir: Path, name: str, spec_path: Path | None, lock_path: Path | None) -> EnvStatus:
    """Freshness of one environment: no network, no solve."""
    lock_path = lock_path or project_dir / "locks" / name / LOCK_NAME
    if spec_path is None:
        msg = f"locks/{name}/{LOCK_NAME} has no spec environments/{name}.yml"
        return EnvStatus(name, None, lock_path, (), (Change("missing-spec", msg),))
    try:
        spec = read_spec(spec_path)
    except EnvlockError as exc:
        kind = "newer-envlock" if "upgrade envlock" in exc.hint else "invalid-spec"
        return EnvStatus(name, spec_path, lock_path, (), (Change(kind, exc.message, hint=exc.hint),))
    if spec.name != name:
        msg = (
            f"{spec_path.name} says `name: {spec.name}`; envlock expects the file to be named {spec.name}.yml"
        )
        return EnvStatus(name, spec_path, lock_path, spec.platforms, (Change("invalid-spec", msg),))
    if not lock_path.is_file():
        msg = f"environments/{name}.yml has no lock (locks/{name}/{LOCK_NAME})"
        return EnvStatus(name, spec_path, None, spec.platforms, (Change("missing-lock", msg),))
    try:
        lock = read_lock_meta(lock_path)
    except LockfileError as exc:
        kind = "newer-envlock" if "upgrade envlock" in exc.hint else "invalid-lock"
        return EnvStatus(
            name, spec_path, lock_path, spec.platforms, (Change(kind, exc.message, hint=exc.hint),)
        )
    return EnvStatus(name, spec_path, lock_path, spec.platforms, tuple(compare(spec, lock)))


def compare(spec: EnvSpec, lock: LockMeta) -> list[Change]:
    """Every reason the lock does not match the spec (empty when fresh)."""
    if not lock.meta("version"):
        return [Change("invalid-lock", f"{lock.path} was not written by envlock (no envlock.* metadata)")]
    changes = integrity_changes(lock) + _explicit_changes(lock.path, lock)
    for p in spec.platforms:
        if p not in lock.platforms:
            changes.append(Change("spec", f"platform {p} is in the spec but not in the lock", p))
    for p in lock.platforms:
        if p not in spec.platforms:
            changes.append(Change("spec", f"the lock has platform {p}, which the spec no longer lists", p))
    recorded = recorded_anchor(lock.custom_metadata)
    try:
        anchor = _check_anchor(spec, recorded)
    except EnvlockError as exc:
        return changes + [Change("spec", f"the spec's anchor cannot be derived: {exc.message}")]
    rules = (lock.meta("rules_version") or "?", _rules_version())
    if anchor is None:
        # The torch inputs changed to something only the network can anchor: stale by the inputs alone.
        old = lock.meta_json(f"inputs.{lock.platforms[0]}") if lock.platforms else None
        new_inputs = spec.inputs()
        old_inputs = (old or {}).get("inputs") or {}
        diffs = [k for k in sorted(new_inputs) if old_inputs.get(k) != new_inputs.get(k)]
        what = ", ".join(f"envlock.{k}: {_fmt(old_inputs.get(k))} → {_fmt(new_inputs.get(k))}" for k in diffs)
        both = [p for p in spec.platforms if p in lock.platforms]
        return changes + [Change("spec", f"spec {what or 'torch inputs changed'}", p) for p in both]
    try:
        plan, inputs = current_inputs(spec, anchor)
    except EnvlockError as exc:
        # Almost always an edit (a --cuda minor with no toolchain …); the hint says what to change.
        return changes + [Change("spec", f"the spec cannot be planned: {exc.message} ({exc.hint})")]
    for platform in spec.platforms:
        if platform not in lock.platforms:
            continue
        new = inputs[platform]
        if content_hash(new) == lock.content_hash.get(platform):
            continue
        old = lock.meta_json(f"inputs.{platform}")
        if not isinstance(old, dict):
            changes.append(
                Change("spec", "content hash differs (the lock does not record its inputs)", platform)
            )
            continue
        changes.extend(
            describe_changes(old, new, platform, rules) or [Change("rules", "content hash differs", platform)]
        )
    return changes + solved_spec_changes(spec, lock)


def solved_spec_changes(spec: EnvSpec, lock: LockMeta) -> list[Change]:
    """The spec's toolchain lines against what the lock solved (a spec must ask for what its lock holds)."""
    from envlock.resolve import _spec_name, plan_names

    names = plan_names(spec)  # the toolchain's and the `with:` extras' packages
    out = []
    for platform in spec.platforms:
        plan = lock.meta_json(f"plan.{platform}")
        if platform not in spec.selected or not isinstance(plan, dict) or not isinstance(plan.get("specs"), list):
            continue
        wrote = sorted(d for d in spec.selected[platform] if _spec_name(d) in names)
        solved = sorted(str(d) for d in plan["specs"] if _spec_name(str(d)) in names)
        if wrote != solved:
            extra, missing = sorted(set(wrote) - set(solved)), sorted(set(solved) - set(wrote))
            what = "; ".join(x for x in (f"the spec asks for {', '.join(extra)}" if extra else "",
                                         f"the lock solved {', '.join(missing)}" if missing else "") if x)
            out.append(Change("spec", f"the spec's toolchain lines are not what the lock solved: {what}", platform))
    return out


def _check_anchor(spec: EnvSpec, recorded: Anchor | None) -> Anchor | None:
    """Offline anchor for `check`; None when only the network could say (the inputs changed)."""
    reuse = reusable_anchor(spec, recorded)
    if reuse is not None or not offline_derivable(spec):
        return reuse
    from envlock.resolve import find_anchor

    return find_anchor(
        spec.torch, cuda=spec.cuda, torch_source=spec.torch_source, python_exe=None, offline=True, lookup=None
    )


def _rules_version() -> str:
    from envlock.tables import cuda_tables

    return cuda_tables().rules_version


def check(project_dir: Path, names: Sequence[str] = ()) -> CheckReport:
    """`envlock check`: the freshness of every environment (or of `names`)."""
    found = discover(project_dir)
    missing = [n for n in names if n not in found]
    if missing:
        raise SpecError(
            f"no environment named {', '.join(missing)} in {project_dir}",
            hint="known: " + ", ".join(found),
        )
    picked = names or list(found)
    return CheckReport(project_dir, tuple(env_status(project_dir, n, *found[n]) for n in picked))


def status_of(project_dir: Path, name_or_lock_path: str | Path) -> EnvStatus:
    """The freshness of the environment a name, a lock dir or a lock file (conda-lock.yml or .lock) names.

    A lock path carries its project: locks/<name>/conda-lock.yml belongs to the project two levels up.
    """
    target = Path(name_or_lock_path)
    lock_dir: Path | None = None
    if target.is_file() or target.suffix in (".yml", ".yaml", ".lock"):
        lock_dir = target.parent
    elif target.is_dir() and (target / LOCK_NAME).is_file():
        lock_dir = target
    if lock_dir is not None:
        name = lock_dir.name
        if lock_dir.parent.name == "locks":
            project_dir = lock_dir.parent.parent
    else:
        name = str(name_or_lock_path)
    spec = project_dir / "environments" / f"{name}.yml"
    return env_status(
        project_dir, name, spec if spec.is_file() else None, project_dir / "locks" / name / LOCK_NAME
    )


def changes_for(status: EnvStatus, platform: str | None) -> list[Change]:
    """The changes that concern one platform (and those of the whole environment)."""
    return [c for c in status.changes if platform is None or c.platform in (None, platform)]


def assert_fresh(project_dir: Path, name_or_lock_path: str | Path, platform: str | None = None) -> None:
    """Raise LockfileError naming what changed unless the lock is fresh (for `create --locked`).

    With `platform`, only that platform's lock (and environment-wide problems) must be fresh.
    """
    status = status_of(project_dir, name_or_lock_path)
    changes = changes_for(status, platform)
    if not changes:
        return
    first = changes[0]
    where = f" [{first.platform}]" if first.platform else ""
    more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
    hint = RELOCK_HINT + ", or pass --frozen to install the lock as it is"
    if first.kind == "newer-envlock":
        hint = UPGRADE_HINT
    elif first.kind == "missing-spec":
        hint = f"--locked compares the lock with environments/{status.name}.yml; restore it, or pass --frozen"
    raise LockfileError(f"the lock of {status.name} is stale: {first.message}{where}{more}", hint=hint)


def stale_warning(
    project_dir: Path, name_or_lock_path: str | Path, platform: str | None = None
) -> str | None:
    """One warning line when the lock is stale (None when fresh, or when there is no spec to compare)."""
    status = status_of(project_dir, name_or_lock_path)
    changes = [c for c in changes_for(status, platform) if c.kind != "missing-spec"]
    if not changes:
        return None
    return (
        f"the lock of {status.name} is stale ({changes[0].message}); "
        "`--locked` would refuse it, `envlock lock` re-locks it"
    )


# --------------------------------------------------------------------------- lock


@dataclass(frozen=True)
class LockOutcome:
    """What `envlock lock` did for one environment."""

    name: str
    action: str  # fresh | locked
    reasons: tuple[Change, ...] = ()
    written: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()
    platforms: dict[str, dict[str, Any]] = field(default_factory=dict)
    cutoff: tuple[str | None, str | None] | None = None  # (old, new) resolution cutoff when it moved
    warnings: tuple[str, ...] = ()  # as resolve's (a spec line the plan replaces, …)

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "warnings": list(self.warnings),
            "cutoff": list(self.cutoff) if self.cutoff else None,
            "reasons": [c.to_json() for c in self.reasons],
            "written": [_rel(p, project_dir) for p in self.written],
            "platforms": self.platforms,
        }


@dataclass(frozen=True)
class SolveSettings:
    """How `lock`/`update` reach channels (the same options as `envlock resolve`)."""

    mirrors: Mapping[str, str] = field(default_factory=dict)
    offline: bool = False
    allow_insecure: bool = False


def _lookup_for(spec: EnvSpec, settings: SolveSettings) -> Any:
    if spec.torch_source != "conda-forge":
        return None
    from envlock.resolve import solve_options
    from envlock.conda.solve import conda_forge_pytorch_lookup

    channel = (spec.channels or ("conda-forge",))[0]
    return conda_forge_pytorch_lookup(
        solve_options(settings.mirrors, settings.offline, settings.allow_insecure), channel
    )


def _refuse(status: EnvStatus) -> EnvlockError:
    """The error for an environment `lock`/`update` must not touch."""
    first = next(c for c in status.changes if c.kind in BLOCKING)
    if first.kind == "missing-spec":
        return LockfileError(
            f"{first.message}: envlock cannot re-lock it",
            hint=f"restore environments/{status.name}.yml from git, or delete locks/{status.name}/",
        )
    if first.kind == "newer-envlock":
        return LockfileError(
            f"{status.name}: {first.message}", hint=UPGRADE_HINT
        )
    hint = first.hint or "fix the spec, or restore it from git"
    return SpecError(f"{status.name}: {first.message}", hint=f"{hint}; nothing was written")


def _select(project_dir: Path, names: Sequence[str]) -> list[EnvStatus]:
    report = check(project_dir, names)
    blocked = [e for e in report.envs if not e.relockable]
    if blocked:
        raise _refuse(blocked[0])
    return list(report.envs)


def lock(
    project_dir: Path,
    names: Sequence[str] = (),
    *,
    all_: bool = False,
    settings: SolveSettings | None = None,
    refresh: bool = False,
) -> list[LockOutcome]:
    """`envlock lock`: re-solve stale environments (every one with all_); fresh files are not touched.

    Every selected environment is checked first, so a bad spec or a too-new lock stops the run
    before anything is written. `refresh` moves each selected spec's resolution cutoff to now and
    re-locks it (fresh or not): what changed on the index and the channels since comes in.
    """
    from dataclasses import replace

    from envlock.resolve import lock_spec, now_cutoff, nvcc_version

    settings = settings or SolveSettings()
    out: list[LockOutcome] = []
    for status in _select(project_dir, names):
        if status.fresh and not (all_ or refresh):
            out.append(LockOutcome(status.name, "fresh"))
            continue
        assert status.spec_path is not None
        spec = read_spec(status.spec_path)
        cutoff = None
        if refresh:
            cutoff = (spec.exclude_newer, now_cutoff())
            spec = replace(spec, exclude_newer=cutoff[1])
        lock_meta = None
        if status.lock_path and status.lock_path.is_file():
            try:
                lock_meta = read_lock_meta(status.lock_path)
            except LockfileError:  # unreadable (a newer envlock's is refused above): re-created from the spec
                lock_meta = None
        anchor = spec_anchor(
            spec,
            recorded_anchor(lock_meta.custom_metadata if lock_meta else None),
            offline=settings.offline,
            lookup=_lookup_for(spec, settings),
        )
        result = lock_spec(
            spec,
            anchor,
            project_dir=project_dir,
            mirrors=settings.mirrors,
            offline=settings.offline,
            allow_insecure=settings.allow_insecure,
        )
        out.append(
            LockOutcome(
                status.name,
                "locked",
                status.changes,
                result.written,
                result.files,
                {
                    r.platform: {"cuda": r.chosen.cuda, "nvcc": nvcc_version(r), "packages": len(r.packages),
                                 "pypi": len(result.pypi.get(r.platform, ()))}
                    for r in result.results
                },
                cutoff,
                result.warnings,
            )
        )
    return out


# --------------------------------------------------------------------------- update


@dataclass(frozen=True)
class UpdateOutcome:
    """What `envlock update` moved in one environment."""

    name: str
    diff: LockDiff
    written: tuple[Path, ...] = ()
    dry_run: bool = False
    cutoff: tuple[str | None, str | None] | None = None  # (old, new): update moves the cutoff to now

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "dry_run": self.dry_run,
            "cutoff": list(self.cutoff) if self.cutoff else None,
            "platforms": self.diff.to_json()["platforms"],
            "written": [_rel(p, project_dir) for p in self.written],
        }


def _entries_of(packages: Iterable[LockedPackage], wheels: Iterable[Any] = ()) -> Entries:
    from envlock.lockdiff import PkgRef, conda_ref

    out: Entries = {}
    for p in packages:
        out.setdefault(p.platform, {})[("conda", p.name)] = conda_ref(p.name, p.version, p.build, p.url)
    for w in wheels:
        out.setdefault(w.platform, {})[("pip", w.name)] = PkgRef(w.name, w.version, "", "pip")
    return out


def update(
    project_dir: Path,
    packages: Sequence[str],
    *,
    name: str | None = None,
    dry_run: bool = False,
    settings: SolveSettings | None = None,
) -> list[UpdateOutcome]:
    """`envlock update PKG…`: re-solve with every other package held at its locked version (per platform).

    The spec's resolution cutoff moves to now (what lets the named packages move at all).
    """
    from dataclasses import replace

    from envlock.lockdiff import diff_entries
    from envlock.lockfile import read_lock
    from envlock.resolve import check_mirrors, now_cutoff, plan_for, render_files, solve_options
    from envlock.conda.solve import RattlerSolver

    settings = settings or SolveSettings()
    wanted = {p.strip().lower() for p in packages if p.strip()}
    if not wanted:
        raise SpecError("name at least one package to update", hint="e.g. envlock update cuda-nvcc cudnn")
    statuses = _select(project_dir, [name] if name else [])
    from envlock.config import ensure_writable
    from envlock.config import cache_dir as _cache

    ensure_writable(_cache())
    jobs = []
    for status in statuses:
        if status.lock_path is None or not status.lock_path.is_file():
            if name:
                raise LockfileError(f"{status.name} has no lock to update", hint="run `envlock lock` first")
            continue
        edited = [c for c in status.changes if c.kind == "hand-edited"]
        if edited:
            where = f" [{edited[0].platform}]" if edited[0].platform else ""
            raise LockfileError(
                f"{status.name}: {edited[0].message}{where}; "
                "update holds locked versions, so it refuses an edited lock",
                hint=f"restore locks/{status.name}/ from git, or re-lock it with `envlock lock {status.name}`",
            )
        old = read_lock(status.lock_path)
        if wanted & ({p.name for p in old.packages} | {w.name for w in old.pypi}):
            jobs.append((status, old))
    names_in = {p.name for _, old in jobs for p in old.packages} | {w.name for _, old in jobs for w in old.pypi}
    unknown = sorted(wanted - names_in)
    if unknown or not jobs:
        where = name or "any lock"
        raise SpecError(
            f"{', '.join(unknown or sorted(wanted))} is not in {where}",
            hint="update moves packages a lock already has; "
            "add new ones to the spec's dependencies and run `envlock lock`",
        )
    solved: list[tuple[EnvSpec, LockDiff, list[tuple[Path, str]], tuple[str | None, str | None]]] = []
    for status, old in jobs:
        assert status.spec_path is not None
        spec = read_spec(status.spec_path)
        cutoff = (spec.exclude_newer, now_cutoff())
        spec = replace(spec, exclude_newer=cutoff[1])
        anchor = spec_anchor(
            spec,
            recorded_anchor(old.custom_metadata),
            offline=settings.offline,
            lookup=_lookup_for(spec, settings),
        )
        plan, extras = plan_for(spec, anchor)
        check_mirrors(settings.mirrors, sorted({c for pp in plan.platforms for cand in pp.candidates for c in cand.channels}),
                      torch=spec.torch, torch_source=spec.torch_source, toolchain_only=spec.toolchain_only)
        keep = {p: [q for q in old.packages_for(p) if q.name not in wanted] for p in spec.platforms}
        solver = RattlerSolver(
            solve_options(settings.mirrors, settings.offline, settings.allow_insecure, spec.exclude_newer)
        )
        pypi: dict[str, Any] = {}
        extra_indexes: tuple[str, ...] = ()
        if spec.toolchain_only:
            results = solver.solve(plan, locked=keep, optional=("ninja",))
        else:
            from envlock.pypi_lock import lock_pypi_part

            pypi_keep = {p: [w for w in old.pypi_for(p) if w.name not in wanted] for p in spec.platforms}
            results, part = lock_pypi_part(
                spec, anchor, solver, plan, mirrors=settings.mirrors, offline=settings.offline, locked=keep,
                pypi_locked=pypi_keep, upgrade=sorted(wanted & {w.name for w in old.pypi}),
            )  # fmt: skip
            pypi, extra_indexes = part.packages, part.extra_indexes
        diff = diff_entries(
            _entries_of(old.packages, old.pypi),
            _entries_of((p for r in results for p in r.packages), (w for ws in pypi.values() for w in ws)),
            str(status.lock_path), "updated",
        )  # fmt: skip
        files = render_files(project_dir, spec, plan, extras, results, pypi=pypi, extra_indexes=extra_indexes)
        if diff.empty and status.fresh:
            # Nothing moved: the lock stays as it is, bytes and mtime (the cutoff moves only with a package).
            files, cutoff = [], None
        solved.append((spec, diff, files, cutoff))
    # Every environment is solved before the first write: a failed solve leaves every lock as it was.
    out: list[UpdateOutcome] = []
    for spec, diff, files, cutoff in solved:
        written = () if dry_run or not files else write_files(project_dir, spec.name, files)
        out.append(UpdateOutcome(spec.name, diff, tuple(written), dry_run, cutoff))
    return out


def write_files(project_dir: Path, name: str, files: Sequence[tuple[Path, str]]) -> list[Path]:
    """Write one environment's files atomically under its file lock; SpecError when it cannot."""
    from envlock.fs import write_all_atomic
    from envlock.resolve import project_lock

    try:
        with project_lock(project_dir, name):
            return write_all_atomic(files)
    except OSError as exc:
        raise SpecError(
            f"cannot write {exc.filename or project_dir}: {exc.strerror or exc}",
            hint="check that environments/ and locks/ are writable directories, or pass --project-dir DIR",
        ) from None
