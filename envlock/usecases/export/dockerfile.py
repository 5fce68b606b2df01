"""The dev image of one platform of a lock, as a multi-stage Dockerfile. PURE: values in, text out.

build    A Python base runs envlock (its own wheel from the folder beside the Dockerfile, its dependencies
         pinned by hash: envlock/usecases/export/context.py) to install the lock's @EXPLICIT file into /opt/env. envlock checks every archive's sha256 against the
         file's `# sha256:` lines before anything is linked (conda and micromamba read an @EXPLICIT file too,
         but check only the md5 after `#`) and refuses archives that would write outside the prefix. The
         PyPI part (requirements-<platform>.txt beside the lock), where there is one, goes in with pip's
         --no-deps --require-hashes (the lock is the whole set). No `# syntax=` line: BuildKit would pull an
         unpinned frontend image for it; nothing here needs one. `envlock run` then applies the env's own activation (conda's order, the packages'
         activate.d scripts) and must give exactly the values the final stage bakes.
runtime  A small base gets /opt/env and nothing else from the build (no envlock, no package or pip cache),
         the activation as ENV lines rendered from `env_ops` (the operations activate.sh is rendered from)
         plus the compilers' variables, a non-root user, and a check run as that user: nvcc is the env's,
         and a .cu including the headers torch's ATen/cuda headers include preprocesses through nvcc and the
         env's host compiler. A broken toolchain fails the build instead of a user's first JIT compile.

Docker's `${VAR:+word}` is POSIX sh's: a prepend renders as `new${VAR:+:${VAR}}`, an append as
`${VAR:+${VAR}:}new`, so an unset base variable leaves no empty entry (an empty PATH entry is the cwd).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass


from envlock.envname import validate_name
from envlock.errors import UnsafeNameError
from envlock.formats.slots import docker_word, line
from envlock.models import TORCH_SOURCES
from envlock.seams.activation.model import TARGETS, TARGETS_TOKEN, env_ops, join
from envlock.usecases.export.context import IN_IMAGE, REQUIREMENTS
from envlock.core.tables import docker_table, split_ref

PREFIX = "/opt/env"
USER = "envlock"
#: conda subdir -> (`uname -m`, Docker's --platform).
ARCHES: dict[str, tuple[str, str]] = {
    "linux-64": ("x86_64", "linux/amd64"),
    "linux-aarch64": ("aarch64", "linux/arm64"),
    "linux-ppc64le": ("ppc64le", "linux/ppc64le"),
}
#: Always in the check: cusparse.h is the header the seed's JIT build died on.
CHECK_ALWAYS = ("cuda_runtime.h", "cusparse.h")
_VAR = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class DockerfileSpec:
    """Everything the Dockerfile depends on (paths are POSIX paths inside the build context)."""

    env_name: str
    platform: str
    lock: str  # the lock it was generated from (for the header and the labels)
    explicit: str  # the @EXPLICIT file the build stage installs
    requirements: str | None  # the PyPI part (pip --require-hashes form), or None
    content_hash: str
    packages: frozenset[str]  # names of the platform's conda packages
    torch_source: str
    has_cudnn: bool
    build_base: str
    runtime_base: str
    regenerate: str  # the envlock command that writes this file again
    build_command: str  # how to build it
    envlock_version: str
    context: str = "envlock-image"  # the folder beside the Dockerfile: envlock's wheel and pinned requirements

    def __post_init__(self) -> None:
        """Every value the Dockerfile holds is checked here, so a spec that exists renders only data: names by
        the one name rule, paths and hashes as plain Dockerfile words, the rest as single lines (each shell use
        is quoted in `render`), the bases as image references (tests/security/test_hostile_names.py)."""
        validate_name(self.env_name, "environment name")
        if self.platform not in ARCHES:
            raise UnsafeNameError(f"no image is built for platform {self.platform!r}", hint=f"use one of {', '.join(ARCHES)}")
        if self.torch_source not in TORCH_SOURCES:
            raise UnsafeNameError(f"torch source {self.torch_source!r} is not pip or conda-forge",
                                  hint="re-create the lock with `envlock lock`")
        for what, value in (("the lock path", self.lock), ("the @EXPLICIT path", self.explicit),
                            ("the PyPI part's path", self.requirements), ("the content hash", self.content_hash),
                            ("the folder of envlock's wheel", self.context), ("envlock's version", self.envlock_version)):
            if value is not None:
                docker_word(value, what)
        line(self.regenerate, "the re-generate command")
        line(self.build_command, "the build command")
        split_ref(self.build_base)
        split_ref(self.runtime_base)


# --------------------------------------------------------------------------- environment


def env_values(platform: str, torch_source: str, has_cudnn: bool, prefix: str = PREFIX) -> list[tuple[str, str]]:
    """(VAR, Dockerfile ENV value) for CONDA_PREFIX and every variable `env_ops` changes, in first-use order.

    Folds each variable's operations as `activate_environ` applies them onto a base environment that does
    not have them yet (a fresh image): a set is the value; prepends go in front of the base value, appends
    after it.
    """
    targets = TARGETS[platform]
    order = ["CONDA_PREFIX"]  # conda sets it before it runs activate.d (activation/conda.py)
    sets = {"CONDA_PREFIX": prefix}
    front: dict[str, list[str]] = {}
    back: dict[str, list[str]] = {}
    for op in env_ops(platform, torch_source, has_cudnn):
        value = join(prefix, op.rel.replace(TARGETS_TOKEN, targets), False)
        if op.var not in order:
            order.append(op.var)
        if op.action == "set":
            sets[op.var] = value
        elif op.action == "prepend":
            front.setdefault(op.var, []).insert(0, value)  # each prepend goes before the ones already done
        else:
            back.setdefault(op.var, []).append(value)
    out = []
    for var in order:
        if var in sets:
            out.append((var, sets[var]))
            continue
        pre, post = ":".join(front.get(var, [])), ":".join(back.get(var, []))
        if pre and post:
            out.append((var, f"{pre}${{{var}:+:${{{var}}}}}:{post}"))
        elif pre:
            out.append((var, f"{pre}${{{var}:+:${{{var}}}}}"))
        else:
            out.append((var, f"${{{var}:+${{{var}}}:}}{post}"))
    return out


def compiler_values(platform: str, packages: Collection[str], prefix: str = PREFIX) -> dict[str, str]:
    """What the locked compiler packages' activation scripts export (data/docker.yaml), in script order."""
    tables = docker_table()
    chost = tables.triplets.get(platform)
    if chost is None:
        return {}
    scope = {"CONDA_PREFIX": prefix, "CHOST": chost}
    out: dict[str, str] = {}
    for pattern, exports in tables.compiler_exports.items():
        if pattern.format(platform=platform) not in packages:
            continue
        for var, template in exports.items():
            needed = tables.requires.get(var)
            if needed and needed not in scope:
                continue
            scope[var] = out[var] = _VAR.sub(lambda m: scope.get(m.group(1), ""), template)
    return out


def compiler_vars() -> tuple[str, ...]:
    """Every variable a compiler package's activation may export (the build checks all of them)."""
    return tuple(dict.fromkeys(v for exports in docker_table().compiler_exports.values() for v in exports))


def check_headers(packages: Collection[str], has_cudnn: bool) -> list[str]:
    """The headers the check preprocesses: torch's ATen/cuda includes whose -dev package is locked."""
    from envlock.doctor import CUDNN_HEADER, HEADERS

    headers = list(CHECK_ALWAYS) + [h for h, pkg in HEADERS.items() if pkg in packages and h not in CHECK_ALWAYS]
    if has_cudnn:
        headers.append(CUDNN_HEADER[0])
    return headers


# --------------------------------------------------------------------------- render


def _env_instruction(pairs: list[tuple[str, str]]) -> list[str]:
    lines = []
    for i, (var, value) in enumerate(pairs):
        text = f'{var}="{value}"' if " " in value else f"{var}={value}"
        lead = "ENV " if i == 0 else "    "
        lines.append(lead + text + (" \\" if i < len(pairs) - 1 else ""))
    return lines


def _run(*commands: str) -> list[str]:
    """A RUN instruction of `&&`-joined commands, one per line."""
    lines = [f"RUN {commands[0]}"]
    lines += [f" && {c}" for c in commands[1:]]
    return [line + " \\" for line in lines[:-1]] + [lines[-1]]


def render(spec: DockerfileSpec) -> str:
    """The Dockerfile text."""
    uname, docker_platform = ARCHES[spec.platform]
    compilers = compiler_values(spec.platform, spec.packages)
    env = env_values(spec.platform, spec.torch_source, spec.has_cudnn)
    explicit_in = f"/tmp/envlock/seams/conda-{spec.platform}.lock"
    activated = "/tmp/envlock/activated.env"
    lines = [
        f"# Generated by envlock {spec.envlock_version} from {spec.lock} ({spec.platform}, content hash "
        f"{spec.content_hash[:12]}): do not edit by hand.",
        f"# Re-generate: {spec.regenerate}",
        f"# Build: {spec.build_command}",
        f"# Needs {spec.context}/ beside it (envlock's wheel, its dependencies pinned by hash): written with it.",
        "# Build arguments: PIP_INDEX_URL (the package index for envlock's pinned dependencies and the PyPI part;",
        "#   default: pip's),",
        "#   ENVLOCK_MIRRORS ('NAME=URL,...': take channel NAME's packages from URL; envlock reads it, see envlock config),",
        "#   ENVLOCK_UID, ENVLOCK_GID (the user's ids; default 1000).",
        "",
        f"FROM {spec.build_base} AS build",
        "ARG PIP_INDEX_URL",
        'ARG ENVLOCK_MIRRORS=""',
        f"# The lock is for {spec.platform}: refuse another architecture before installing anything.",
        f'RUN test "$(uname -m)" = {uname} || {{ echo "error: this image installs the {spec.platform} lock but '
        f'builds on $(uname -m); hint: build with --platform {docker_platform}" >&2; exit 1; }}',
        "# envlock from its own wheel (no published release needed), every dependency pinned by its hash.",
        f"COPY {spec.context}/ {IN_IMAGE}/",
        *_run(
            "python -m venv /opt/envlock",
            "/opt/envlock/bin/python -m pip install --no-cache-dir --disable-pip-version-check "
            f"--root-user-action=ignore --no-deps --require-hashes -r {IN_IMAGE}/{REQUIREMENTS}",
            f"rm -rf {IN_IMAGE}",
        ),
        "# envlock installs the lock: every archive's sha256 is checked against the lock before anything is",
        "# linked, and archives that would write outside /opt/env are refused.",
        f"COPY {spec.explicit} {explicit_in}",
        # envlock reads ENVLOCK_MIRRORS itself (the build argument is in RUN's environment): a site-wide list,
        # so an entry this lock does not use (pypi=, nvidia=) is not an error, as a --mirror would be.
        *_run(
            f"ENVLOCK_CACHE_DIR=/tmp/envlock/cache /opt/envlock/bin/envlock create --lock {explicit_in} "
            f"--prefix {PREFIX} --platform {spec.platform} --frozen --quiet",
            "rm -rf /tmp/envlock/cache",
        ),
    ]
    if spec.requirements:
        req_in = f"/tmp/envlock-pypi/requirements-{spec.platform}.txt"
        lines += [
            "# The PyPI part of the lock: every file pinned by its hash (pip refuses any without one), and no",
            "# dependency resolution (the lock is the whole set).",
            f"COPY {spec.requirements} {req_in}",
            *_run(
                f"/opt/envlock/bin/python -m pip --python {PREFIX}/bin/python install --no-cache-dir "
                "--disable-pip-version-check --root-user-action=ignore --no-warn-script-location "
                f"--no-deps --require-hashes -r {req_in}"
            ),
        ]
    checked = {var: value for var, value in env if "$" not in value}  # the set ones: literal values
    checked |= {var: compilers.get(var, "") for var in compiler_vars()}
    tests = [
        f"grep -qxF {shlex.quote(f'{var}={value}')} {activated}" if value else f"! grep -q '^{var}=' {activated}"
        for var, value in checked.items()
    ]
    names = "|".join(checked)
    lines += [
        "# The env's own activation (its activate.d scripts, in conda's order) must give what the runtime stage",
        "# bakes as ENV: compilers' variables included.",
        f"RUN /opt/envlock/bin/envlock run -p {PREFIX} -- env > {activated} \\",
        f" && if ! {{ {tests[0]} \\",
        *[f"      && {test} \\" for test in tests[1:]],
        "    ; }; then \\",
        f"      echo 'error: the activation of {PREFIX} differs from the ENV lines of this Dockerfile:' >&2 \\",
        f"      && grep -E '^({names})=' {activated} >&2; \\",
        f"      echo {shlex.quote(f'hint: re-generate the Dockerfile with: {spec.regenerate}')} >&2; exit 1; \\",
        "    fi",
        "",
        f"FROM {spec.runtime_base}",
        "ARG ENVLOCK_UID=1000",
        "ARG ENVLOCK_GID=1000",
        _labels(spec),
        "# A non-root user (useradd where the base has it; else the passwd and group entries themselves).",
        "RUN if command -v useradd >/dev/null 2>&1; then \\",
        f'      groupadd --gid "${{ENVLOCK_GID}}" {USER} \\',
        f'      && useradd --no-log-init --uid "${{ENVLOCK_UID}}" --gid "${{ENVLOCK_GID}}" --create-home '
        f"--shell /bin/sh {USER}; \\",
        "    else \\",
        f'      echo "{USER}:x:${{ENVLOCK_UID}}:${{ENVLOCK_GID}}:{USER}:/home/{USER}:/bin/sh" >> /etc/passwd \\',
        f'      && echo "{USER}:x:${{ENVLOCK_GID}}:" >> /etc/group \\',
        f'      && mkdir -p /home/{USER} && chown "${{ENVLOCK_UID}}:${{ENVLOCK_GID}}" /home/{USER}; \\',
        "    fi",
        f"COPY --from=build {PREFIX} {PREFIX}",
        "# The activation, rendered from the operations activate.sh is rendered from, and the compilers' variables",
        "# as the locked compiler packages' activation scripts set them.",
        *_env_instruction(env + list(compilers.items())),
        'USER "${ENVLOCK_UID}:${ENVLOCK_GID}"',
        f"WORKDIR /home/{USER}",
        *_check(spec),
        "",
    ]
    return "\n".join(lines)


def _labels(spec: DockerfileSpec) -> str:
    labels = {
        "org.opencontainers.image.title": f"{spec.env_name} ({spec.platform})",
        "org.opencontainers.image.description": "CUDA development toolchain (nvcc, headers, host compilers) "
        f"of the envlock lock {spec.lock}",
        "envlock.lock": spec.lock,
        "envlock.platform": spec.platform,
        "envlock.content-hash": spec.content_hash,
        "envlock.version": spec.envlock_version,
    }
    return "LABEL " + " \\\n      ".join(f"{k}={json.dumps(v)}" for k, v in labels.items())


def _check(spec: DockerfileSpec) -> list[str]:
    headers = check_headers(spec.packages, spec.has_cudnn)
    includes = " ".join(shlex.quote(f"#include <{h}>") for h in headers)
    extra = f" -I{PREFIX}/include" if spec.has_cudnn else ""  # cudnn.h is in <prefix>/include (torch: $CUDNN_HOME)
    cu = "/tmp/envlock-check.cu"
    return [
        "# Build-time check, as the user: nvcc is the env's, and the headers torch's ATen/cuda headers include",
        f"# ({', '.join(headers)}) preprocess through nvcc and the env's host compiler.",
        f'RUN {{ test "$(command -v nvcc)" = {PREFIX}/bin/nvcc \\',
        "      && nvcc --version \\",
        f"      && printf '%s\\n' {includes} 'int main(void) {{ return 0; }}' > {cu} \\",
        f"      && nvcc -E{extra} {cu} -o /dev/null \\",
        f"      && rm -f {cu}; }} \\",
        " || { echo 'error: the CUDA toolchain in this image cannot preprocess a .cu including "
        f"{', '.join(CHECK_ALWAYS)} (see above)' >&2; "
        f"echo {shlex.quote(f'hint: check the lock ({spec.lock}) with envlock doctor on an env made from it')} >&2; "
        "exit 1; }",
    ]


def devcontainer(name: str, dockerfile: str, context: str, platform: str) -> str:
    """.devcontainer/devcontainer.json pointing at the Dockerfile (paths relative to .devcontainer/)."""
    doc: Mapping[str, object] = {
        "name": name,
        "build": {"dockerfile": dockerfile, "context": context, "options": [f"--platform={ARCHES[platform][1]}"]},
        "remoteUser": USER,
        "updateRemoteUserUID": True,
    }
    return json.dumps(doc, indent=2) + "\n"
