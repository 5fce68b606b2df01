"""`envlock export pixi`: a pixi workspace (pixi.toml, pixi.lock, envlock's activation script) of one lock, or the
lock as a feature of an existing pixi manifest (pixi.toml or pyproject.toml).

From conda-lock.yml alone: no solve, no network. The manifest's values and scripts: envlock.project.pixiexport;
the pixi.lock: envlock.seams.conda.pixilock (rattler writes it). Everything is rendered and checked before the
first file is written; the files are written together (envlock.seams.fs.write_all_atomic), and a file already
holding those bytes is left alone, so exporting the same lock again changes nothing.

A whole workspace replaces existing files only with `force`. A feature goes into the manifest as a marked block
(envlock.formats.pixitoml.insert_feature: no byte outside it changes), and its environment into the pixi.lock
beside the manifest: a pixi.lock holding other environments is replaced only with `force` (py-rattler 0.28
cannot carry another environment's PyPI hashes over, and pixi.lock is pixi's to re-lock: `pixi lock`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from envlock.errors import LockfileError, SpecError, UsageError
from envlock.formats import LockFile, read_lock
from envlock.names import printable
from envlock.project import pixiexport


@dataclass(frozen=True)
class PixiRequest:
    """Options of `envlock export pixi`."""

    lock: Path
    output: Path | None = None  # the folder of a whole workspace (default: the current one)
    feature: str | None = None
    manifest: Path | None = None  # with feature: pixi.toml or pyproject.toml (default: in `output`)
    force: bool = False


@dataclass(frozen=True)
class PixiResult:
    lock: Path
    manifest: Path
    environment: str  # the pixi environment holding the lock (default, or the feature's)
    written: tuple[Path, ...] = ()
    unchanged: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def export_pixi(req: PixiRequest) -> PixiResult:
    """Render and check every file, then write them all."""
    if req.manifest is not None and req.feature is None:
        raise UsageError("--manifest names the manifest a --feature goes into",
                         hint="add --feature NAME, or leave --manifest out for a whole pixi.toml")
    lock_path = req.lock.resolve()
    lock = read_lock(lock_path)
    if lock.kind != "conda-lock":
        raise LockfileError(f"{lock_path} is not a conda-lock.yml (export pixi reads the lock's depends and PyPI part)",
                            hint="pass the conda-lock.yml beside it: --lock " + printable(str(lock_path.parent)))
    if req.feature is None:
        folder = (req.output or Path(".")).resolve()
        manifest_path, env = folder / pixiexport.MANIFEST, "default"
        outputs = {folder / n: t for n, t in pixiexport.whole(lock, lock_path, folder).items()}
    else:
        manifest_path, env, outputs = _feature(req, lock, lock_path)
    lock_file = manifest_path.parent / pixiexport.LOCK
    from envlock.seams.conda.pixilock import render_pixi_lock

    text = render_pixi_lock(env, pixiexport.lock_channels(lock), {p: lock.packages_for(p) for p in lock.platforms},
                            {p: ws for p in lock.platforms if (ws := lock.pypi_for(p))})
    outputs = {lock_file: text, **outputs}  # the manifest last: what pixi reads first is written last
    if req.feature is None:
        _refuse_existing(outputs, req.force)
    else:
        _refuse_other_envs(lock_file, env, req.force)
    from envlock.seams.fs import write_all_atomic

    unchanged = tuple(p for p, t in outputs.items() if _same(p, t))
    try:
        written = write_all_atomic(outputs.items(), root=manifest_path.parent)  # never through a link out of it
    except OSError as exc:
        raise SpecError(f"cannot write {exc.filename or manifest_path}: {exc.strerror or exc}",
                        hint="check the folder and its permissions") from None
    return PixiResult(lock_path, manifest_path, env, tuple(written), unchanged)


def _same(path: Path, text: str) -> bool:
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def _refuse_existing(outputs: dict[Path, str], force: bool) -> None:
    """A file of a whole workspace that exists with other bytes is replaced only with `force`."""
    for path, text in outputs.items():
        if path.is_dir():
            raise SpecError(f"{path} is a directory", hint="-o takes the folder the pixi workspace goes into")
        if not force and path.exists() and not _same(path, text):
            hint = ("pass --force to replace it, -o another folder, or add the lock to that manifest as a feature: "
                    f"--feature NAME --manifest {printable(str(path))}" if path.name == pixiexport.MANIFEST else
                    "pass --force to replace it, or -o another folder")
            raise SpecError(f"{path} exists", hint=hint)


def _feature(req: PixiRequest, lock: LockFile, lock_path: Path) -> tuple[Path, str, dict[Path, str]]:
    """The manifest with the feature added, and the feature's scripts beside it."""
    from envlock.formats.pixitoml import FEATURE_NAME, feature_block, insert_feature

    feature = str(req.feature)
    if not FEATURE_NAME.match(feature):
        raise UsageError(f"--feature {printable(feature)}: pixi names environments with lower-case letters, digits "
                         "and dashes", hint="pick such a name, e.g. --feature cuda")
    manifest = req.manifest
    if manifest is None:
        folder = (req.output or Path(".")).resolve()
        found = [folder / n for n in ("pixi.toml", "pyproject.toml") if (folder / n).is_file()]
        if not found:
            raise SpecError(f"no pixi.toml or pyproject.toml in {folder} to add feature {feature} to",
                            hint="name it with --manifest FILE, or export a whole workspace (leave --feature out)")
        manifest = found[0]
    manifest = manifest.resolve()
    pyproject = manifest.name == "pyproject.toml"
    if not pyproject and not manifest.name.endswith(".toml"):
        raise UsageError(f"--manifest {printable(str(manifest))}: pixi reads pixi.toml or pyproject.toml",
                         hint="name one of them")
    try:
        text = manifest.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SpecError(f"{manifest} does not exist", hint="run `pixi init` there first, or name another --manifest") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {manifest}: {exc}", hint="check the path and its permissions") from None
    values = pixiexport.manifest(lock, lock_path, feature, manifest.parent, manifest.name)
    nl = "\r\n" if "\r\n" in text else "\n"
    block = feature_block(values, feature, pyproject=pyproject, nl=nl)
    new = insert_feature(text, block, feature, pyproject=pyproject, what=str(manifest), platforms=values.platforms)
    scripts = {manifest.parent / n: t for n, t in pixiexport.scripts(lock, feature).items()}
    return manifest, feature, {**scripts, manifest: new}


def _refuse_other_envs(lock_file: Path, env: str, force: bool) -> None:
    """A pixi.lock beside the manifest that holds environments other than `env` is pixi's: kept unless `force`."""
    if not lock_file.is_file() or force:
        return
    from envlock.formats import read_text
    from envlock.formats.condalock import load_yaml

    try:
        doc = load_yaml(read_text(lock_file, missing="no pixi.lock", missing_hint=""), lock_file, compare=True)
        others = sorted(str(e) for e in (doc.get("environments") or {}) if str(e) != env)
    except LockfileError:
        others = ["(it does not read as a pixi.lock)"]
    if others:
        raise SpecError(f"{lock_file} holds other environments ({printable(', '.join(others))}): envlock writes a "
                        f"pixi.lock of environment {env} alone",
                        hint="pass --force to replace it (then `pixi lock` re-locks the others), or export into "
                             "another folder: envlock export pixi -o DIR")
