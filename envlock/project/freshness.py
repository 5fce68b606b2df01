"""Is a lock fresh? Its recorded hash inputs against what its spec gives today, and its own integrity.

Pure comparison: the caller (envlock.usecases.resolve.status) reads the spec and the lock's header and works out
what the spec gives today (`Current`: the anchor, the plan, the hash inputs), offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envlock.models import field, record
from envlock import UPGRADE_HINT
from envlock.errors import LockfileError
from envlock.formats import LockHead
from envlock.formats.spec import EnvSpec
from envlock.names import match_spec_name, printable
from envlock.project.document import content_hash, packages_fingerprint, pypi_fingerprint
from envlock.project.layout import rel
from envlock.formats.untrusted import json_value

RELOCK_HINT = "run `envlock lock` and commit environments/ and locks/"
#: Change kinds `lock` and `update` refuse to write over (a corrupt or edited lock they may replace).
BLOCKING = frozenset({"missing-spec", "newer-envlock", "invalid-spec", "invalid-name", "foreign-file"})


@record
class Change:
    """One reason a lock is not fresh."""

    # spec | rules | anchor | missing-lock | missing-spec | hand-edited | newer-envlock
    # | invalid-spec | invalid-lock | invalid-name (not a name envlock.envname accepts)
    # | derived (a file beside conda-lock.yml is not its rendering, or is not one it renders)
    # | foreign-file (a file in the lock folder that envlock does not write: the user removes it)
    kind: str
    message: str
    platform: str | None = None
    hint: str | None = None  # what to do, for the kinds `lock`/`update` refuse
    parts: tuple[Any, ...] = ()  # the same hint as errors.HintPart values (its commands keep the command line's options)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "platform": self.platform, "message": self.message}


@record
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

    def for_platform(self, platform: str | None) -> list[Change]:
        """The changes that concern one platform (and those of the whole environment)."""
        return [c for c in self.changes if platform is None or c.platform in (None, platform)]

    def to_json(self, project_dir: Path) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": rel(self.spec_path, project_dir) if self.spec_path else None,
            "lock": rel(self.lock_path, project_dir) if self.lock_path else None,
            "platforms": list(self.platforms),
            "fresh": self.fresh,
            "changes": [c.to_json() for c in self.changes],
        }


@record
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
        if "invalid-name" in kinds:  # a folder under locks/ or a spec file named outside the name rule
            return LockfileError(what, hint="rename or remove the lock folder or spec file named above "
                                            "(names are letters, digits, '.', '_', '+' and '-')")
        if "invalid-spec" in kinds:
            return LockfileError(
                what, hint="fix the spec named above (or restore it from git), then `envlock lock`"
            )
        if kinds == {"derived"}:  # conda-lock.yml is fresh: the files beside it are rendered again, no solve
            return LockfileError(what, hint=rerender_hint(" ".join(e.name for e in stale)))
        if "foreign-file" in kinds:  # `envlock lock` does not remove a file it did not write: the user does
            first = next(c for e in stale for c in e.changes if c.kind == "foreign-file")
            return LockfileError(what, hint=f"{first.hint}; then `envlock check` again")
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


@record
class Current:
    """What a spec gives today, worked out offline by the caller; or why it cannot be.

    `inputs` None and no error: only the network (or a python) could anchor the spec, whose torch inputs
    changed since the lock: stale by the inputs alone.
    """

    inputs: Mapping[str, dict[str, Any]] | None = None  # platform -> hash inputs
    rules_version: str = "?"
    anchor_error: str | None = None
    plan_error: str | None = None
    plan_names: frozenset[str] = field(default_factory=frozenset)  # the toolchain's package names


# --------------------------------------------------------------------------- naming the changes


def _fmt(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _moved(before: Any, after: Any) -> str:
    a, b = set(before or ()), set(after or ())
    return ", ".join([f"+{d}" for d in sorted(b - a)] + [f"-{d}" for d in sorted(a - b)])


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
        out.append(Change("spec", "spec dependencies: " + _moved(old.get("extras"), new.get("extras")), platform))
    if old.get("pip") != new.get("pip"):
        out.append(Change("spec", "spec `- pip:` requirements: " + _moved(old.get("pip"), new.get("pip")), platform))
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
            Change("rules", _rules_change(old.get("candidates") or [], new.get("candidates") or [], rules), platform)
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
                detail = _moved(sa, sb) or "channel order changed"
            else:
                detail = f"{a.get(key)} → {b.get(key)}"
            return f"envlock rules{version}: CUDA {a.get('cuda')} {key}: {detail}"
    return "the lock was made by an envlock that hashed its inputs differently; re-lock it once"


# --------------------------------------------------------------------------- the lock's own integrity


def integrity_changes(lock: LockHead) -> list[Change]:
    """A hand-edited lock: hashes that no longer match what envlock recorded next to them."""
    out: list[Change] = []
    for platform in lock.platforms:
        recorded = lock.meta(f"inputs.{platform}")
        have = lock.content_hash.get(platform)
        if recorded is not None:
            inputs = json_value(recorded)
            expect = content_hash(inputs) if isinstance(inputs, dict) else None
            if expect != have:
                out.append(
                    Change("hand-edited", "content_hash or envlock metadata was edited by hand", platform)
                )
    digest = lock.meta("packages_digest")
    if digest and digest != lock.package_digest:
        out.extend(_package_edits(lock))
    return out + source_changes(lock)


def source_changes(lock: LockHead) -> list[Change]:
    """Where each package's bytes come from: every conda package URL under a channel its platform was solved from,
    every wheel URL under a PyPI source the lock records.

    The fingerprints beside the package list (`envlock.packages.*`) are plain hashes anyone can recompute after an
    edit: they catch an accidental edit, not a deliberate one. What makes a deliberate one harmless is this rule: a
    conda package must lie under a channel of its platform's recorded inputs, which the content hash binds to the
    reviewed spec, so a forged sha256 can at worst make an install fail (the channel serves its own bytes), never
    install other bytes; a wheel must lie under one of `envlock.pypi_sources`, the origins the PyPI part was
    locked from, one short line a reviewer reads."""
    from envlock.seams.conda.channels import canonical_channel_url  # noqa: PLC0415 - no rattler there
    from envlock.seams.mirror_urls import channel_of  # noqa: PLC0415

    try:
        full = lock.packages_read()
    except LockfileError:
        return []  # said by the package-list checks
    out: list[Change] = []
    for platform in lock.platforms:
        allowed = {canonical_channel_url(c) for c in _solved_channels(lock, platform) or full.channels}
        bad = next((p for p in full.packages_for(platform) if channel_of(p.url) not in allowed), None)
        if bad is not None:
            out.append(Change("hand-edited", f"{bad.name}'s URL {_shown_url(bad.url)} is not under a channel the lock "
                              f"was solved from ({', '.join(sorted(allowed))})", platform))
    wheels = [w for p in lock.platforms for w in full.pypi_for(p)]
    if not wheels:
        return out
    sources = lock.meta_json("pypi_sources")
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.endswith("/") for s in sources):
        return out + [Change("hand-edited", "the lock does not record where its PyPI part comes from "
                                            "(envlock.pypi_sources): an older envlock wrote it, or it was edited")]
    bad_wheel = next((w for w in wheels if not any(w.url.startswith(s) for s in sources)), None)
    if bad_wheel is not None:
        out.append(Change("hand-edited", f"{bad_wheel.name}'s URL {_shown_url(bad_wheel.url)} is not under a PyPI "
                          f"source the lock records ({', '.join(sources)})", bad_wheel.platform))
    return out


def _solved_channels(lock: LockHead, platform: str) -> set[str]:
    """The channels of a platform's recorded inputs (the spec's, and each candidate's): bound to the spec by the
    content hash (`integrity_changes`)."""
    inputs = lock.meta_json(f"inputs.{platform}")
    if not isinstance(inputs, dict):
        return set()
    lists = [inputs.get("channels"), *(c.get("channels") for c in inputs.get("candidates") or () if isinstance(c, dict))]
    return {str(c) for cs in lists if isinstance(cs, list) for c in cs}


def _shown_url(url: str) -> str:
    from envlock.names import strip_credentials  # noqa: PLC0415

    return printable(strip_credentials(url))[:160]


def _package_edits(lock: LockHead) -> list[Change]:
    """The text of the package list changed: parse it and compare what installs (reformatting is fine)."""
    try:
        full = lock.packages_read()
    except LockfileError as exc:
        return [Change("hand-edited", f"the package list was edited by hand and no longer reads ({exc.message})")]
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


def derived_changes(lock: LockHead, spec: EnvSpec) -> list[Change]:
    """Each file derived from conda-lock.yml (the @EXPLICIT files, requirements-*.txt, the activation scripts,
    environment-<platform>.yml) against its rendering from conda-lock.yml, byte for byte (envlock.project.derived)."""
    from envlock.project.derived import (OWN_KINDS, disagreements, exported, of_lock, platform_envs, platform_of,
                                         render, strangers)

    try:
        full = lock.packages_read()
        expected = {**render(of_lock(full)), **platform_envs(full, spec)}
    except LockfileError as exc:
        return [Change("hand-edited", f"the package list was edited by hand and no longer reads ({exc.message})")]
    from envlock.project import pixiexport

    folder = lock.path.parent
    pixi_hint = f"`envlock export pixi {printable(folder.name)} -o locks/{printable(folder.name)} --force` writes it again"
    out = [Change("derived", f"{name} {what}", platform_of(name), hint=rerender_hint(folder.name))
           for name, what in disagreements(folder, expected, present_only=False)] + [
        Change("derived", f"{file} (envlock export pixi) {what}", None, hint=pixi_hint)
        for file, what in pixiexport.disagreements(folder)]
    # The folder holds nothing else: a file there for a platform the lock lacks is what `create --lock FILE` or a
    # user's conda would install from. One of envlock's kinds `envlock lock NAME` removes; any other is the user's.
    has = ", ".join(full.platforms) or "no platform"
    for name in strangers(folder, [*expected, *exported(folder, full)]):
        if OWN_KINDS.fullmatch(name):
            out.append(Change("derived", f"{name} is not a file conda-lock.yml renders (the lock has {has})",
                              platform_of(name), hint=rerender_hint(folder.name)))
        else:
            out.append(Change("foreign-file", f"{name} is not a file envlock renders from conda-lock.yml",
                              hint=f"remove locks/{folder.name}/{name}: the folder holds conda-lock.yml and what is "
                                   "rendered from it, nothing else"))
    return out


def rerender_hint(name: str) -> str:
    return (f"`envlock lock {printable(name)}` renders the files beside conda-lock.yml again (no solve), "
            "or restore them from git")


# --------------------------------------------------------------------------- spec against lock


def compare(spec: EnvSpec, lock: LockHead, current: Current) -> list[Change]:
    """Every reason the lock does not match the spec (empty when fresh)."""
    if not lock.meta("version"):
        return [Change("invalid-lock", f"{lock.path} was not written by envlock (no envlock.* metadata)")]
    changes = list(dict.fromkeys(integrity_changes(lock) + derived_changes(lock, spec)))  # a parse error comes once
    for p in spec.platforms:
        if p not in lock.platforms:
            changes.append(Change("spec", f"platform {p} is in the spec but not in the lock", p))
    for p in lock.platforms:
        if p not in spec.platforms:
            changes.append(Change("spec", f"the lock has platform {p}, which the spec no longer lists", p))
    if current.anchor_error is not None:
        return changes + [Change("spec", f"the spec's anchor cannot be derived: {current.anchor_error}")]
    if current.plan_error is not None:
        # Almost always an edit (a --cuda minor with no toolchain …); the message says what to change.
        return changes + [Change("spec", f"the spec cannot be planned: {current.plan_error}")]
    if current.inputs is None:
        # The torch inputs changed to something only the network can anchor: stale by the inputs alone.
        old = lock.meta_json(f"inputs.{lock.platforms[0]}") if lock.platforms else None
        new_inputs = spec.inputs()
        old_inputs = (old or {}).get("inputs") or {}
        diffs = [k for k in sorted(new_inputs) if old_inputs.get(k) != new_inputs.get(k)]
        what = ", ".join(f"envlock.{k}: {_fmt(old_inputs.get(k))} → {_fmt(new_inputs.get(k))}" for k in diffs)
        both = [p for p in spec.platforms if p in lock.platforms]
        return changes + [Change("spec", f"spec {what or 'torch inputs changed'}", p) for p in both]
    rules = (lock.meta("rules_version") or "?", current.rules_version)
    for platform in spec.platforms:
        if platform not in lock.platforms:
            continue
        new = current.inputs[platform]
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
    return changes + solved_spec_changes(spec, lock, current.plan_names)


def solved_spec_changes(spec: EnvSpec, lock: LockHead, names: frozenset[str]) -> list[Change]:
    """The spec's toolchain lines against what the lock solved (a spec must ask for what its lock holds)."""
    out = []
    for platform in spec.platforms:
        plan = lock.meta_json(f"plan.{platform}")
        if platform not in spec.selected or not isinstance(plan, dict) or not isinstance(plan.get("specs"), list):
            continue
        wrote = sorted(d for d in spec.selected[platform] if match_spec_name(d) in names)
        solved = sorted(str(d) for d in plan["specs"] if match_spec_name(str(d)) in names)
        if wrote != solved:
            extra, missing = sorted(set(wrote) - set(solved)), sorted(set(solved) - set(wrote))
            what = "; ".join(x for x in (f"the spec asks for {', '.join(extra)}" if extra else "",
                                         f"the lock solved {', '.join(missing)}" if missing else "") if x)
            out.append(Change("spec", f"the spec's toolchain lines are not what the lock solved: {what}", platform))
    return out
