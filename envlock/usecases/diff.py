"""`envlock diff`: packages added, removed and changed per platform between two locks, or against git.

Reads every lock through envlock.formats (conda-lock v1/v2 with pip entries, @EXPLICIT, pixi.lock v4–v6);
no solver, no network. `git` runs as a subprocess for `--git REF`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.errors import LockfileError, SpecError
from envlock.formats import LockFile, parse_lock, read_lock
from envlock.names import strip_credentials
from envlock.formats.untrusted import LOCK_CAP, read_capped

LOCK_NAME = "conda-lock.yml"


@dataclass(frozen=True, order=True)
class PkgRef:
    """One package of one platform as a diff sees it."""

    name: str
    version: str
    build: str = ""
    manager: str = "conda"
    channel: str = ""  # the channel URL a conda package comes from (a moved channel is a change too)

    def label(self, with_channel: bool = False) -> str:
        text = f"{self.version} {self.build}".strip()
        return f"{text} [{self.channel}]" if with_channel and self.channel else text

    def key(self) -> tuple[str, str, str]:
        return (self.version, self.build, self.channel)


@dataclass(frozen=True)
class PlatformDiff:
    platform: str
    added: tuple[PkgRef, ...] = ()
    removed: tuple[PkgRef, ...] = ()
    changed: tuple[tuple[PkgRef, PkgRef], ...] = ()
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_json(self) -> dict[str, Any]:
        def one(p: PkgRef) -> dict[str, str]:
            return {
                "name": p.name,
                "version": p.version,
                "build": p.build,
                "manager": p.manager,
                "channel": p.channel,
            }

        return {
            "added": [one(p) for p in self.added],
            "removed": [one(p) for p in self.removed],
            "changed": [
                {"name": a.name, "manager": a.manager,
                 "old": {"version": a.version, "build": a.build, "channel": a.channel},
                 "new": {"version": b.version, "build": b.build, "channel": b.channel}}
                for a, b in self.changed
            ],
            "unchanged": self.unchanged,
        }  # fmt: skip


@dataclass(frozen=True)
class LockDiff:
    old: str  # labels (paths, or REF:path)
    new: str
    platforms: tuple[PlatformDiff, ...]

    @property
    def empty(self) -> bool:
        return all(p.empty for p in self.platforms)

    def to_json(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "platforms": {p.platform: p.to_json() for p in self.platforms},
        }


Entries = dict[str, dict[tuple[str, str], PkgRef]]  # platform → (manager, name) → package


def conda_ref(name: str, version: str, build: str, url: str) -> PkgRef:
    """A conda package; its channel is the URL without subdir and filename, credentials removed."""
    channel = strip_credentials(url).rsplit("/", 2)[0] if url.count("/") >= 3 else ""
    return PkgRef(name, version, build, "conda", channel)


def lock_entries(lock: LockFile) -> Entries:
    """Packages per platform of a lock (any format envlock.formats reads), keyed by (manager, name)."""
    out: Entries = {p: {} for p in lock.platforms}
    pip = "pypi" if lock.kind == "pixi" else "pip"
    for p in lock.packages:
        out.setdefault(p.platform, {})[("conda", p.name)] = conda_ref(p.name, p.version, p.build, p.url)
    for w in lock.pypi:
        out.setdefault(w.platform, {})[(pip, w.name)] = PkgRef(w.name, w.version, "", pip)
    for f in lock.foreign:
        out.setdefault(f.platform, {})[(f.manager, f.name)] = PkgRef(f.name, f.version, "", f.manager)
    return out


def diff_entries(old: Entries, new: Entries, old_label: str, new_label: str) -> LockDiff:
    """Per platform: added, removed, changed (version or build), in name order."""
    platforms: list[PlatformDiff] = []
    for platform in [*old, *(p for p in new if p not in old)]:
        a, b = old.get(platform, {}), new.get(platform, {})
        added = tuple(sorted(b[k] for k in b.keys() - a.keys()))
        removed = tuple(sorted(a[k] for k in a.keys() - b.keys()))
        both = sorted(a.keys() & b.keys(), key=lambda k: (k[1], k[0]))
        changed = tuple((a[k], b[k]) for k in both if a[k].key() != b[k].key())
        platforms.append(PlatformDiff(platform, added, removed, changed, len(both) - len(changed)))
    return LockDiff(old_label, new_label, tuple(platforms))


def _read_text(path: Path) -> str:
    target = path / LOCK_NAME if path.is_dir() else path
    try:
        return read_capped(target, LOCK_CAP, LockfileError)
    except FileNotFoundError:
        raise LockfileError(
            f"no lock at {target}", hint="pass two lock files (conda-lock.yml, .lock or pixi.lock)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockfileError(
            f"cannot read {target}: {exc}", hint="check the path and its permissions"
        ) from None


def diff_files(old: Path, new: Path) -> LockDiff:
    """`envlock diff A B`."""
    return diff_entries(
        lock_entries(read_lock(old, compare=True)), lock_entries(read_lock(new, compare=True)), str(old), str(new)
    )


def _git(cwd: Path, *args: str) -> Any:
    """`git ARGS` in `cwd` (envlock.seams.proc; a completed process): its exit status is the caller's to judge."""
    from envlock.seams import proc

    return proc.run(["git", *args], what="running git", timeout=_GIT_TIMEOUT_S, cwd=cwd,
                    failed=lambda why: SpecError("git is not installed" if why.kind == "missing" else f"git {why}",
                                                 hint="install git, or pass two lock files to `envlock diff`"))


_GIT_TIMEOUT_S = 300.0


def diff_git(project_dir: Path, ref: str, path: Path | None = None) -> list[LockDiff]:
    """`envlock diff --git REF [PATH]`: each lock at REF against the working tree."""
    top = _git(project_dir, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise SpecError(
            f"{project_dir} is not inside a git repository", hint="pass two lock files instead of --git"
        )
    root = Path(top.stdout.strip())
    if (
        ref.startswith("-")
        or _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0
    ):
        raise SpecError(
            f"git ref {ref!r} does not exist", hint="use a branch, tag or commit, e.g. --git HEAD~1"
        )
    if path is not None:
        target = path if path.is_absolute() else Path.cwd() / path
        target = target / LOCK_NAME if target.is_dir() else target
        rels = [_rel_to(target, root)]
    else:
        base = _rel_to(project_dir.resolve() / "locks", root)
        listed = _git(root, "ls-tree", "-r", "--name-only", ref, "--", base).stdout.split()
        at_ref = {p for p in listed if p.endswith("/" + LOCK_NAME)}
        here = {_rel_to(p.resolve(), root) for p in (project_dir / "locks").glob(f"*/{LOCK_NAME}")}
        rels = sorted(at_ref | here)
        if not rels:
            raise LockfileError(
                f"no locks under {base} here or at {ref}",
                hint="pass the lock path: envlock diff --git REF PATH",
            )
    out: list[LockDiff] = []
    for rel in rels:
        shown = _git(root, "show", f"{ref}:{rel}")
        old_text = shown.stdout if shown.returncode == 0 else None
        new_path = root / rel
        new_text = _read_text(new_path) if new_path.is_file() else None
        if old_text is None and new_text is None:
            raise LockfileError(
                f"{rel} exists neither at {ref} nor in the working tree", hint="check the path"
            )
        old = lock_entries(parse_lock(old_text, Path(f"{ref}:{rel}"), compare=True)) if old_text is not None else {}
        new = lock_entries(parse_lock(new_text, Path(rel), compare=True)) if new_text is not None else {}
        out.append(diff_entries(old, new, f"{ref}:{rel}", rel))
    return out


def _rel_to(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise SpecError(
            f"{path} is outside the git repository {root}", hint="pass a path inside the repository"
        ) from None
