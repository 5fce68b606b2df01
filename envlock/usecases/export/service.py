"""`envlock export dockerfile`: find and check a lock's platform and files, pick the bases, write the outputs.

The build context is the project directory: the Dockerfile COPYs the @EXPLICIT file (and the PyPI part)
from there, so both must lie inside it. Nothing is written until everything is checked; each output is
written atomically (an interrupted run leaves no half-written file), and an existing one is replaced only
with `force`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from envlock import __version__
from envlock.errors import LockfileError, Retry, SpecError, UsageError, again, either
from envlock.usecases.export import context
from envlock.usecases.export.dockerfile import ARCHES, DockerfileSpec, devcontainer, render
from envlock.formats import LockFile, read_lock
from envlock.formats.slots import shell_word
from envlock.seams.fs import write_atomic
from envlock.core.tables import docker_table, split_ref
from envlock.models import CUDNN_NAMES
from envlock.names import printable

#: The platforms an image is built for (the Dockerfile knows ppc64le's names, but no CUDA toolchain is locked there).
IMAGE_PLATFORMS = ("linux-64", "linux-aarch64")
STDOUT = Path("-")
_HASH = re.compile(r"--hash[= ]sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class ExportRequest:
    """Options of `envlock export dockerfile`."""

    project_dir: Path
    name: str | None = None
    lock: Path | None = None
    platform: str | None = None
    output: Path | None = None  # None: <project>/Dockerfile; STDOUT: print it
    force: bool = False
    base: str | None = None
    runtime_base: str | None = None
    devcontainer: bool = False


@dataclass(frozen=True)
class ExportResult:
    """What was generated and where it went."""

    text: str
    platform: str
    lock: Path
    explicit: Path
    requirements: Path | None
    written: tuple[Path, ...]
    build_command: str
    warnings: tuple[str, ...] = field(default_factory=tuple)


def export_dockerfile(req: ExportRequest) -> ExportResult:
    """Check everything, render, then write (or return the text for stdout)."""
    from envlock.usecases.create import find_lock
    from envlock.project.derived import refuse_disagreeing

    if req.lock is not None and req.name:
        raise UsageError("give either a lock NAME or --lock NAME|FILE, not both",
                         hint=("the NAME alone: ", again(args=(req.name,), drop=("--lock",))))
    project = req.project_dir.resolve()
    lock_path = (req.lock if req.lock is not None else find_lock(req.project_dir, req.name)).resolve()
    lock = read_lock(lock_path)
    platform = _platform(lock, lock_path, req.platform)
    refuse_disagreeing(lock, lock_path, platform)  # the image installs the files beside conda-lock.yml: they must be its
    explicit_path, explicit = _explicit(lock, lock_path, platform)
    packages = explicit.packages_for(platform)
    names = frozenset(p.name for p in packages)
    requirements = explicit_path.parent / f"requirements-{platform}.txt"
    requirements_path = requirements if requirements.is_file() else None
    if requirements_path is not None:
        _check_requirements(requirements_path, names)
    warnings = [f"{p.filename} has no sha256 in the lock: the build checks only its md5"
                for p in packages if not p.sha256]
    tables = docker_table()
    build_base, runtime_base = req.base or tables.build_base, req.runtime_base or tables.runtime_base
    for option, ref in (("--base", build_base), ("--runtime-base", runtime_base)):
        if split_ref(ref)[1] is None:
            warnings.append(f"{option} {ref} is not pinned by a digest: the image can change under the same tag "
                            f"(pin it as {ref}@sha256:…)")

    output = req.output if req.output is not None else project / "Dockerfile"
    to_stdout = output == STDOUT
    if to_stdout and req.devcontainer:
        raise UsageError("--devcontainer needs the Dockerfile in a file", hint="pass -o FILE (not -o -)")
    output = output if to_stdout else output.parent.resolve() / output.name  # a link in its place: replaced, never followed
    dc_path = None if to_stdout else output.parent / ".devcontainer" / "devcontainer.json"
    # envlock's wheel and its pinned dependencies, beside the Dockerfile (envlock/usecases/export/context.py)
    folder = (output.parent if not to_stdout else project) / context.FOLDER
    extra = {} if to_stdout else {folder / n: b for n, b in context.context_files().items()}
    targets = [] if to_stdout else [output, *extra] + ([dc_path] if req.devcontainer and dc_path else [])
    for target in targets:
        if target in extra and target.is_file() and target.read_bytes() == extra[target]:
            continue  # the same envlock writes the same folder: another Dockerfile beside it shares it
        if target.exists() and not req.force:
            raise SpecError(f"{target} exists", hint=("replace it: ", again("--force"), ", or -o another file"))
        if target.is_dir():
            raise SpecError(f"{target} is a directory", hint="-o takes a file path")

    anchor = lock.envlock_meta().get("anchor") or {}
    name = lock.env_name()
    docker_platform = ARCHES[platform][1]
    # The file's own header is relative to the project (the build context); what is printed, to the cwd.
    in_project = _shown(output, project) if not to_stdout else "Dockerfile"
    build_command = f"docker build --platform {docker_platform} -f {_shown(output, Path.cwd())} " \
                    f"{_shown(project, Path.cwd())}" if not to_stdout else ""
    regenerate = _regenerate(req, lock_path, project, platform, in_project if not to_stdout else "-")
    spec = DockerfileSpec(
        env_name=str(name),
        platform=platform,
        lock=_inside(lock_path, project, "the lock"),
        explicit=_inside(explicit_path, project, "the @EXPLICIT file"),
        requirements=_inside(requirements_path, project, "the PyPI part") if requirements_path else None,
        content_hash=lock.content_hash.get(platform, "") or "unknown",
        packages=names,
        torch_source=str(anchor.get("torch_source") or "pip"),
        has_cudnn=bool(names & CUDNN_NAMES),
        build_base=build_base,
        runtime_base=runtime_base,
        regenerate=regenerate,
        build_command=f"docker build --platform {docker_platform} -f {shell_word(in_project, 'the Dockerfile path')} ."
                      "   (in the project directory)",
        envlock_version=__version__,
        context=_inside(folder, project, "the folder of envlock's wheel"),
    )
    text = render(spec)
    written: list[Path] = []
    if not to_stdout:
        outputs: list[tuple[Path, str | bytes]] = [*extra.items(), (output, text)]
        if req.devcontainer and dc_path is not None:
            rel = os.path.relpath
            outputs.append((dc_path, devcontainer(f"{name} ({platform})", rel(output, dc_path.parent),
                                                  rel(project, dc_path.parent), platform)))
        try:
            for path, content in outputs:
                write_atomic(path, content, root=output.parent)  # never through a link out of the folder
                written.append(path)
        except OSError as exc:
            for path in written:
                path.unlink(missing_ok=True)
            raise SpecError(f"cannot write {exc.filename or output}: {exc.strerror or exc}",
                            hint="check the path and its permissions") from None
    return ExportResult(text, platform, lock_path, explicit_path, requirements_path, tuple(written),
                        build_command, tuple(warnings))


def _platform(lock: LockFile, path: Path, wanted: str | None) -> str:
    """The platform to build: `wanted`, else the lock's only linux one, else the host's when locked."""
    linux = [p for p in lock.platforms if p in IMAGE_PLATFORMS]
    has = ", ".join(lock.platforms) or "none"
    if wanted is not None:
        if wanted not in IMAGE_PLATFORMS:
            raise UsageError(f"--platform {wanted}: images are built for {', '.join(IMAGE_PLATFORMS)}",
                             hint=f"{path} has: {has}")
        if wanted not in lock.platforms:
            fix: tuple[str | Retry, ...] = ("re-lock with that platform added to the spec's platforms",)
            if linux:
                fix = ("build one it has: ", again("--platform", linux[0]), ", or ", *fix)
            raise LockfileError(f"{path} has no {wanted} platform; it has: {has}", hint=fix)
        return wanted
    if not linux:
        raise LockfileError(f"{path} has no linux platform to build an image for; it has: {has}",
                            hint="re-lock with `envlock resolve --platform linux-64 ...`")
    if len(linux) == 1:
        return linux[0]
    from envlock.models import host_platform

    if host_platform() in linux:
        return host_platform()
    raise SpecError(f"{path} has several linux platforms ({', '.join(linux)})",
                    hint=("pick one: ", *either(again("--platform", p) for p in linux)))


def _explicit(lock: LockFile, path: Path, platform: str) -> tuple[Path, LockFile]:
    """The @EXPLICIT file of `platform`, checked against the conda-lock.yml it sits beside."""
    if lock.kind == "explicit":
        return path, lock
    explicit_path = path.parent / f"conda-{platform}.lock"
    if not explicit_path.is_file():
        raise LockfileError(f"no @EXPLICIT file for {platform} beside {path} ({explicit_path.name} is missing)",
                            hint="re-write the lock's files with `envlock lock`, or pass --lock conda-<platform>.lock")
    explicit = read_lock(explicit_path)

    def entries(lf: LockFile) -> set[tuple[str, str, str | None]]:
        return {(p.url, p.md5, p.sha256) for p in lf.packages_for(platform)}

    differ = entries(lock) ^ entries(explicit)
    if explicit.platforms != (platform,) or differ:
        raise LockfileError(
            f"{explicit_path} does not match {path.name} for {platform} "
            f"({len(differ)} package entries differ)",
            hint="re-write the lock's files with `envlock lock` (both are generated together)",
        )
    return explicit_path, explicit


def _check_requirements(path: Path, names: frozenset[str]) -> None:
    """The PyPI part must pin every requirement by hash, and needs a python in the conda part."""
    if "python" not in names:
        raise LockfileError(f"{path} is a PyPI part, but the lock's conda part has no python to install it into",
                            hint="re-lock with python, or remove the stale requirements file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LockfileError(f"cannot read {path}: {exc}", hint="check the path and its permissions") from None
    joined = re.sub(r"\\\r?\n", " ", text)
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        if not _HASH.search(line):
            raise LockfileError(f"{path}: {line.split()[0]} has no --hash=sha256:…",
                                hint="the PyPI part must be in pip's --require-hashes form; re-lock it")


def _inside(path: Path, project: Path, what: str) -> str:
    try:
        return path.resolve().relative_to(project).as_posix()
    except ValueError:
        raise SpecError(f"{what} {path} is outside the build context {project}",
                        hint="pass --project-dir DIR (the build context) that contains it") from None


def _shown(path: Path, base: Path) -> str:
    """A path as the user would type it from `base` (relative when inside)."""
    try:
        rel = path.relative_to(base)
    except ValueError:
        return str(path)
    return rel.as_posix() or "."


def _regenerate(req: ExportRequest, lock_path: Path, project: Path, platform: str, output: str) -> str:
    """The command that writes the file again, every word quoted for sh (the Dockerfile's hint echoes it)."""
    parts = ["envlock", "export", "dockerfile"]
    if req.lock is not None:
        parts += ["--lock", _shown(lock_path, project)]
    else:
        parts.append(req.name or lock_path.parent.name)
    parts += ["--platform", platform, "-o", output]
    if req.base:
        parts += ["--base", req.base]
    if req.runtime_base:
        parts += ["--runtime-base", req.runtime_base]
    if req.devcontainer:
        parts.append("--devcontainer")
    return " ".join(shell_word(w, "a word of the re-generate command") for w in [*parts, "--force"])


def warn(lines: tuple[str, ...]) -> None:
    """Print warnings on stderr (folded to its width)."""
    from envlock.wrapping import say

    for line in lines:
        say("envlock: warning", printable(line))
