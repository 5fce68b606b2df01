"""Where a project keeps its files (environments/<name>.yml, locks/<name>/…) and how they are written."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from envlock.envname import arg_name, validate_name
from envlock.errors import SpecError, again
from envlock.seams.filelocks import FileLock
from envlock.seams.fs import remove_stale_temps, write_all_atomic

LOCK_NAME = "conda-lock.yml"
CANNOT_WRITE_HINT = "check that environments/ and locks/ are writable directories, or pass --project-dir DIR"


def spec_path(project_dir: Path, name: str) -> Path:
    return project_dir / "environments" / f"{name}.yml"


def lock_dir(project_dir: Path, name: str) -> Path:
    return project_dir / "locks" / name


def lock_path(project_dir: Path, name: str) -> Path:
    return lock_dir(project_dir, name) / LOCK_NAME


def rel(path: Path, base: Path) -> str:
    """`path` relative to `base` in POSIX form (itself when it is elsewhere)."""
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def example_torch() -> str:
    from envlock.core.tables import example_torch as newest

    return newest()


def discover(project_dir: Path) -> dict[str, tuple[Path | None, Path]]:
    """name -> (spec path or None, lock path) for every spec in environments/ and every lock in locks/."""
    if not project_dir.is_dir():
        raise SpecError(f"project dir {project_dir} does not exist",
                        hint=("check the path, or start a project there: ",
                              again("--torch", example_torch(), "--project-dir", str(project_dir), command="resolve")))
    found: dict[str, tuple[Path | None, Path | None]] = {}
    env_dir = project_dir / "environments"
    lock_root = project_dir / "locks"
    # Only *.yml: that is what envlock writes (a *.yaml spec would get a .yml twin on `envlock lock`).
    for spec in sorted(env_dir.glob("*.yml")) if env_dir.is_dir() else []:
        found.setdefault(spec.stem, (spec, None))
    if lock_root.is_dir():
        for lock in sorted(lock_root.glob(f"*/{LOCK_NAME}")):
            found[lock.parent.name] = (found.get(lock.parent.name, (None, None))[0], lock)
    if not found:
        raise SpecError(
            f"no environments in {project_dir} (looked for environments/*.yml and locks/*/{LOCK_NAME})",
            hint=("lock one there: ", again("--torch", example_torch(), "--project-dir", str(project_dir),
                                            command="resolve"), ", or pass the --project-dir that has them"),
        )
    return {n: (s, lk or lock_path(project_dir, n)) for n, (s, lk) in sorted(found.items())}


def locate(project_dir: Path, name_or_lock_path: str | Path) -> tuple[Path, str]:
    """(project dir, environment name) of a name, a lock dir or a lock file (conda-lock.yml or .lock).

    A lock path carries its project: locks/<name>/conda-lock.yml belongs to the project two levels up.
    """
    target = Path(name_or_lock_path)
    folder: Path | None = None
    if target.is_file() or target.suffix in (".yml", ".yaml", ".lock"):
        folder = target.parent
    elif target.is_dir() and (target / LOCK_NAME).is_file():
        folder = target
    if folder is None:
        return project_dir, arg_name(str(name_or_lock_path))
    name = validate_name(folder.name, "lock folder name", hint="a lock's folder is its name: rename the folder")
    return (folder.parent.parent if folder.parent.name == "locks" else project_dir), name


def writable_project(project_dir: Path) -> Path:
    """The project dir, created when it does not exist yet; SpecError when environments/ or locks/ cannot
    be written there."""
    if not project_dir.exists():
        try:
            project_dir.mkdir(parents=True)  # a new project: environments/ and locks/ go there
        except OSError as exc:
            raise SpecError(f"cannot create the project dir {project_dir}: {exc.strerror or exc}",
                            hint="pass --project-dir with a directory you can write") from None
    if not project_dir.is_dir():
        raise SpecError(f"project dir {project_dir} is not a directory", hint="pass --project-dir DIR")
    for sub in ("environments", "locks"):
        d = project_dir / sub
        target = d if d.exists() else project_dir
        if not os.access(target, os.W_OK | os.X_OK):
            raise SpecError(f"cannot write to {target}", hint="check its permissions, or pass --project-dir DIR")
    return project_dir


class ProjectLock:
    """An advisory file lock per environment: two writers of the same lock are serialised.

    The second waits, and after a second names the holder (envlock.seams.filelocks). The lock file lives in
    `locks_dir` (envlock's cache), not in locks/: nothing envlock does should dirty the user's repo.
    """

    def __init__(self, project_dir: Path, name: str, locks_dir: Path) -> None:
        key = hashlib.sha256(str(lock_dir(project_dir, name).resolve()).encode()).hexdigest()[:24]
        self.path = locks_dir / f"{name}-{key}.lock"
        self._lock = FileLock(self.path, f"the lock of {name} ({lock_dir(project_dir, name)})", root=locks_dir.parent)
        # write_all_atomic's temp names: .<file>.<random>.tmp
        self._dirs = [(lock_dir(project_dir, name), ".*.tmp"), (project_dir / "environments", f".{name}.yml.*.tmp")]

    def __enter__(self) -> ProjectLock:
        self._lock.__enter__()
        # Temp files of a run killed mid-write (SIGKILL skips its cleanup); nobody else writes here now.
        remove_stale_temps(self._dirs)
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


def write_files(project_dir: Path, name: str, files: Sequence[tuple[Path, str]],
                locks_dir: Path) -> tuple[list[Path], list[Path]]:
    """Write one environment's files atomically under its file lock (the conda-lock.yml last). Returns the
    paths whose bytes changed, and the files of an earlier lock that this one no longer has, which are
    removed (a platform dropped, a full env re-locked toolchain-only). SpecError when they cannot be written."""
    try:
        with ProjectLock(project_dir, name, locks_dir):
            written = write_all_atomic(files, root=project_dir)
            return written, _remove_stale(lock_dir(project_dir, name), {p for p, _ in files})
    except OSError as exc:
        raise SpecError(f"cannot write {exc.filename or project_dir}: {exc.strerror or exc}",
                        hint=CANNOT_WRITE_HINT) from None


def _remove_stale(ldir: Path, keep: set[Path]) -> list[Path]:
    """Remove the lock folder's own-kind files that are not in `keep` (after the new conda-lock.yml is in
    place): pack, export and a user's pip would otherwise read a requirements file the lock no longer has."""
    from envlock.project.derived import OWN_KINDS  # the one list of what the folder holds

    names = {p.name for p in keep if p.parent == ldir}
    stale = sorted(p for p in ldir.iterdir() if OWN_KINDS.fullmatch(p.name) and p.name not in names and p.is_file())
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
