"""`envlock export dockerfile`: the generated file, read back by the real hadolint and dockerfile-parse.

Locks come from real `envlock resolve` runs against the test channel. The build itself runs under buildah
in tests/test_export_buildah.py (slow tier); here the generated shell steps that do not need a container
run against a real env made by `envlock create` (the prefix path swapped in for /opt/env), so the checks
the image runs at build time are shown to pass on a good env and to fail on a broken one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from envlock.seams.activation import activate_environ
from envlock.cli import run
from envlock.usecases.export.dockerfile import PREFIX, compiler_values, env_values
from envlock.formats import read_lock
from tests.test_create import assert_one_error, cli
from tests.output import flat

NAME = "torch2.3.0-cu121"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """A project with locks/torch2.3.0-cu121 for linux-64, linux-aarch64 and win-64."""
    root = tmp_path_factory.mktemp("export-project")
    code = run(["resolve", "--torch", "2.3.0", "--toolchain-only", "--mirror", f"conda-forge={test_channel_url}", "--platform",
                "linux-64", "--platform", "linux-aarch64", "--platform", "win-64", "--project-dir", str(root),
                "--json"])
    assert code == 0
    return root


FULL = "torch2.7.1-cu126"


@pytest.fixture(scope="module")
def full_project(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """A full environment for linux-64: the conda part plus a real PyPI part (torch and its CUDA wheels from
    the session's loopback index) with requirements-linux-64.txt beside the @EXPLICIT file."""
    root = tmp_path_factory.mktemp("export-full")
    code = run(["resolve", "--torch", "2.7.1", "--mirror", f"conda-forge={test_channel_url}", "--platform", "linux-64",
                "--project-dir", str(root), "--json"])
    assert code == 0
    assert (root / "locks" / FULL / "requirements-linux-64.txt").is_file()
    return root


@pytest.fixture
def proj(project: Path, tmp_path: Path) -> Path:
    """A copy of the project each test may change."""
    return Path(shutil.copytree(project, tmp_path / "proj", symlinks=True))


def export(proj: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("export", "dockerfile", *args, "--project-dir", str(proj), cwd=proj)


def parse(path: Path) -> DockerfileParser:
    work = path.parent / ".parse"
    work.mkdir(exist_ok=True)
    shutil.copy(path, work / "Dockerfile")
    return DockerfileParser(path=str(work), env_replace=False)


def stages(df: DockerfileParser) -> list[list[dict[str, str]]]:
    """Instructions per stage (comments dropped)."""
    out: list[list[dict[str, str]]] = []
    for ins in df.structure:
        if ins["instruction"] == "FROM":
            out.append([])
        if ins["instruction"] != "COMMENT" and out:
            out[-1].append(ins)
    return out


def env_pairs(value: str) -> list[tuple[str, str]]:
    """KEY=VALUE pairs of an ENV instruction (values without spaces, or double-quoted)."""
    return [(k, v.strip('"')) for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', value)]


def sh_eval(value: str, base: dict[str, str]) -> str:
    """What Docker's ENV substitution gives for `value` ( ${VAR:+word} is POSIX sh's)."""
    proc = subprocess.run(["sh", "-c", f'printf %s "{value}"'], env=base, capture_output=True, text=True, check=True)
    return proc.stdout


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------- the file


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_export_is_hadolint_clean_pinned_and_installs_the_lock(proj: Path, platform: str) -> None:
    r = export(proj, NAME, "--platform", platform)
    assert r.returncode == 0, r.stderr
    path = proj / "Dockerfile"
    assert f"wrote {path}" in flat(r.stderr) and "docker build --platform" in r.stderr
    lint = hadolint(path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    df = parse(path)
    assert len(df.parent_images) == 2 and all(re.search(r"@sha256:[0-9a-f]{64}$", i) for i in df.parent_images)
    build, final = stages(df)
    copies = [i["value"] for i in build if i["instruction"] == "COPY"]
    assert copies == ["envlock-image/ /tmp/envlock-image/",
                      f"locks/{NAME}/conda-{platform}.lock /tmp/envlock/seams/conda-{platform}.lock"]
    assert (proj / copies[1].split()[0]).is_file()  # it COPYs files of the build context
    assert sorted(p.name for p in (proj / "envlock-image").iterdir()) == [
        "envlock_cuda-0.1.0-py3-none-any.whl", "requirements.txt"]
    install = next(i["value"] for i in build if "envlock create" in i["value"])
    assert f"--lock /tmp/envlock/seams/conda-{platform}.lock --prefix /opt/env --platform {platform} --frozen" in install
    assert "rm -rf /tmp/envlock/cache" in install  # the package cache goes in the layer that made it
    envlock = next(i["value"] for i in build if "/opt/envlock/bin/python -m pip install" in i["value"])
    assert "--no-deps --require-hashes -r /tmp/envlock-image/requirements.txt" in envlock  # no published envlock
    assert "envlock-cuda==" not in path.read_text() and "# syntax=" not in path.read_text()  # no unpinned pull
    # the final stage takes /opt/env and nothing else from the build
    assert [i["value"] for i in final if i["instruction"] == "COPY"] == ["--from=build /opt/env /opt/env"]
    env = dict(env_pairs(next(i["value"] for i in final if i["instruction"] == "ENV")))
    assert env["CUDA_HOME"] == env["CUDA_PATH"] == PREFIX
    target = {"linux-64": "x86_64-linux", "linux-aarch64": "sbsa-linux"}[platform]
    assert env["CUDA_INC_PATH"] == f"/opt/env/targets/{target}/include"
    triplet = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}[platform] + "-conda-linux-gnu"
    assert env["CC"] == f"/opt/env/bin/{triplet}-cc" and env["CXX"] == f"/opt/env/bin/{triplet}-c++"
    assert env["NVCC_PREPEND_FLAGS"] == f" -ccbin=/opt/env/bin/{triplet}-c++"
    user = [i["value"] for i in final if i["instruction"] == "USER"]
    assert user == ['"${ENVLOCK_UID}:${ENVLOCK_GID}"'] and "ARG ENVLOCK_UID=1000" in path.read_text()
    assert final[-1]["instruction"] == "RUN" and "nvcc -E" in final[-1]["value"]
    assert "'#include <cusparse.h>'" in final[-1]["value"] and "'#include <cuda_runtime.h>'" in final[-1]["value"]
    labels = df.labels
    assert labels["envlock.platform"] == platform
    assert labels["envlock.content-hash"] == read_lock(proj / "locks" / NAME / "conda-lock.yml").content_hash[platform]


def test_the_same_inputs_give_the_same_bytes(proj: Path) -> None:
    a = export(proj, NAME, "--platform", "linux-64", "-o", "-")
    b = export(proj, NAME, "--platform", "linux-64", "-o", "-")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and a.stdout.startswith("# Generated by envlock")
    assert not (proj / "Dockerfile").exists()  # -o - writes nothing


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
@pytest.mark.parametrize("torch_source", ["pip", "conda-forge"])
@pytest.mark.parametrize("cudnn", [False, True])
@pytest.mark.parametrize("base", [{"PATH": "/usr/bin:/bin"}, {"PATH": "/bin", "LD_LIBRARY_PATH": "/x/lib",
                                                                 "LIBRARY_PATH": "/y", "CPATH": "/z/include"}])
def test_env_lines_give_what_the_activation_gives(platform: str, torch_source: str, cudnn: bool,
                                                   base: dict[str, str]) -> None:
    ours = {var: sh_eval(value, base) for var, value in env_values(platform, torch_source, cudnn)}
    conda = {**base, "CONDA_PREFIX": PREFIX, "PATH": f"{PREFIX}/bin:{base['PATH']}"}  # what conda does first
    theirs = activate_environ(conda, PREFIX, platform, torch_source=torch_source, has_cudnn=cudnn)
    assert ours == {var: theirs[var] for var in ours}
    assert all("::" not in v and not v.endswith(":") and not v.startswith(":") for v in ours.values())
    assert (ours["LD_LIBRARY_PATH"].startswith(PREFIX) == (torch_source == "conda-forge")) or "LD_LIBRARY_PATH" not in base


# --------------------------------------------------------------------------- the build's own checks, run here


def _step(dockerfile: str, needle: str, prefix: Path) -> str:
    """The shell of the RUN step containing `needle`, for `prefix` instead of /opt/env, envlock from here."""
    df = parse(Path(dockerfile))
    text = next(i["value"] for i in df.structure if i["instruction"] == "RUN" and needle in i["value"])
    envlock = f"{sys.executable} -m envlock"
    return text.replace("/opt/envlock/bin/envlock", envlock).replace(PREFIX, str(prefix))


@pytest.fixture(scope="module")
def created(project: Path, tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """An env made by `envlock create` from the project's @EXPLICIT linux-64 file, as the build stage does."""
    prefix = tmp_path_factory.mktemp("created") / "env"
    r = cli("create", "--lock", str(project / "locks" / NAME / "conda-linux-64.lock"), "-p", str(prefix), "--frozen",
            "--platform", "linux-64", "--mirror", f"conda-forge={test_channel_url}", "-q")
    assert r.returncode == 0, r.stderr
    return prefix


def test_activation_step_compares_the_env_s_own_activation_with_the_env_lines(
        proj: Path, created: Path, tmp_path: Path) -> None:
    """The build stage's `envlock run` step, run on an env made from the test channel.

    The test channel's gcc/gxx stand-ins export CC=<prefix>/bin/<triplet>-cc and CXX=…-c++, as conda-forge's
    activate-gcc.sh does (facts §6, what the Dockerfile bakes): the step passes. A compiler package whose
    activation exports other values (here …-gcc and …-g++, the drift the stand-ins once had) fails it.
    """
    r = export(proj, NAME, "--platform", "linux-64")
    assert r.returncode == 0, r.stderr
    prefix = created  # its hooks name its own path: edited below, restored after
    (tmp_path / "envlock").mkdir()
    step = _step(str(proj / "Dockerfile"), "envlock run", prefix).replace("/tmp/envlock/", f"{tmp_path}/envlock/")
    ok = subprocess.run(["sh", "-c", step], capture_output=True, text=True, timeout=120)
    scripts = {prefix / "etc/conda/activate.d" / f"activate-{n}_linux-64.sh": (old, new)
               for n, old, new in (("gcc", "-cc\"", "-gcc\""), ("gxx", "-c++\"", "-g++\""))}
    saved = {script: script.read_text() for script in scripts}
    try:
        for script, (old, new) in scripts.items():
            assert old in saved[script]
            script.write_text(saved[script].replace(old, new))  # a compiler activation that drifted
        drift = subprocess.run(["sh", "-c", step], capture_output=True, text=True, timeout=120)
    finally:
        for script, text in saved.items():
            script.write_text(text)
    assert drift.returncode == 1, drift.stderr
    assert "error: the activation of" in drift.stderr
    assert f"CC={prefix}/bin/x86_64-conda-linux-gnu-gcc" in drift.stderr  # what the drifted activation sets
    assert "hint: re-generate the Dockerfile with: envlock export dockerfile" in drift.stderr
    assert ok.returncode == 0, ok.stderr
    names = {p.name for p in read_lock(proj / "locks" / NAME / "conda-lock.yml").packages_for("linux-64")}
    assert compiler_values("linux-64", names, prefix=str(prefix)) == {
        "CC": f"{prefix}/bin/x86_64-conda-linux-gnu-cc",
        "CXX": f"{prefix}/bin/x86_64-conda-linux-gnu-c++",
        "NVCC_PREPEND_FLAGS": f" -ccbin={prefix}/bin/x86_64-conda-linux-gnu-c++",
    }


def test_final_check_fails_on_a_toolchain_that_cannot_preprocess(proj: Path, created: Path) -> None:
    """The test channel's nvcc answers --version but compiles nothing: the image's last step must fail."""
    r = export(proj, NAME, "--platform", "linux-64")
    assert r.returncode == 0
    df = parse(proj / "Dockerfile")
    env = {"HOME": str(proj), "PATH": "/usr/bin:/bin"}
    for var, value in env_pairs(next(i["value"] for i in stages(df)[1] if i["instruction"] == "ENV")):
        env[var] = sh_eval(value.replace(PREFIX, str(created)), env)
    step = _step(str(proj / "Dockerfile"), "nvcc -E", created).replace("/tmp/envlock-check.cu", f"{proj}/check.cu")
    proc = subprocess.run(["sh", "-c", step], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Cuda compilation tools, release 12.1" in proc.stdout  # nvcc --version ran, from the env
    assert "cannot compile" in proc.stderr  # the stand-in's refusal ...
    assert "error: the CUDA toolchain in this image cannot preprocess a .cu including" in proc.stderr  # ... is fatal


# --------------------------------------------------------------------------- options and bad input


def test_devcontainer_points_at_the_dockerfile(proj: Path) -> None:
    r = export(proj, NAME, "--platform", "linux-64", "-o", "docker/dev.Dockerfile", "--devcontainer")
    assert r.returncode == 0, r.stderr
    dc = proj / "docker" / ".devcontainer" / "devcontainer.json"
    doc = json.loads(dc.read_text())
    assert (dc.parent / doc["build"]["dockerfile"]).resolve() == proj / "docker" / "dev.Dockerfile"
    assert (dc.parent / doc["build"]["context"]).resolve() == proj
    assert doc["build"]["options"] == ["--platform=linux/amd64"] and doc["remoteUser"] == "envlock"
    assert "-f docker/dev.Dockerfile ." in (proj / "docker" / "dev.Dockerfile").read_text()


def test_bases_can_be_overridden_and_a_tag_without_digest_is_warned(proj: Path) -> None:
    digest = "sha256:" + "ab" * 32
    r = export(proj, NAME, "--platform", "linux-64", "--base", f"registry.local:5000/py:3.12@{digest}",
               "--runtime-base", "ubuntu:24.04", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\nFROM ") == 2
    assert f"FROM registry.local:5000/py:3.12@{digest} AS build" in r.stdout and "\nFROM ubuntu:24.04\n" in r.stdout
    warnings = [line for line in r.stderr.splitlines() if line.startswith("envlock: warning:")]
    assert len(warnings) == 1 and "--runtime-base ubuntu:24.04 is not pinned by a digest" in warnings[0]


def test_pypi_part_is_installed_with_hashes(full_project: Path, tmp_path: Path) -> None:
    proj = Path(shutil.copytree(full_project, tmp_path / "proj", symlinks=True))
    r = export(proj, FULL, "--platform", "linux-64")
    assert r.returncode == 0 and "with its PyPI part" in r.stderr, r.stderr
    path = proj / "Dockerfile"
    assert hadolint(path).returncode == 0
    build = stages(parse(path))[0]
    copies = [i["value"] for i in build if i["instruction"] == "COPY"]
    assert copies[2] == f"locks/{FULL}/requirements-linux-64.txt /tmp/envlock-pypi/requirements-linux-64.txt"
    pip = next(i["value"] for i in build if "pip --python /opt/env/bin/python install" in i["value"])
    assert "--no-deps --require-hashes -r /tmp/envlock-pypi/requirements-linux-64.txt" in pip


def test_toolchain_only_lock_has_no_pip_step(proj: Path) -> None:
    r = export(proj, NAME, "--platform", "linux-aarch64", "-o", "-")
    assert r.returncode == 0 and "/tmp/envlock-pypi" not in r.stdout and "requirements-" not in r.stdout


def test_explicit_file_given_directly(proj: Path) -> None:
    r = export(proj, "--lock", f"locks/{NAME}/conda-linux-aarch64.lock", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert f"COPY locks/{NAME}/conda-linux-aarch64.lock /tmp/envlock/seams/conda-linux-aarch64.lock" in r.stdout
    assert "test \"$(uname -m)\" = aarch64" in r.stdout


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # an image's platform is one of two choices (ppc64le was listed though nothing locks it): exit 2
        (("--platform", "linux-ppc64le"), "--platform 'linux-ppc64le' is not a platform this command takes"),
        (("--platform", "win-64"), "--platform 'win-64' is not a platform this command takes"),
        (("--platform", "osx-arm64"), "torch on macOS has no CUDA"),
        (("--base", "python:3.12@sha256:nothex"), "is not an image reference"),
        (("--runtime-base", "bad image"), "is not an image reference"),
        (("-o", "-", "--devcontainer"), "--devcontainer needs the Dockerfile in a file"),
    ],
)
def test_bad_input_is_one_error_and_writes_nothing(proj: Path, args: tuple[str, ...], needle: str) -> None:
    before = _files(proj)
    usage = "--devcontainer" in args or "--platform" in args  # impossible options, an invalid choice: usage errors
    assert_one_error(export(proj, NAME, *args), 2 if usage else 1, needle)
    assert _files(proj) == before


def test_several_linux_platforms_need_one(proj: Path) -> None:
    r = export(proj, NAME)
    if os.uname().machine in ("x86_64", "aarch64"):  # the host's platform is locked: it is the default
        assert r.returncode == 0 and (proj / "Dockerfile").is_file()
    else:
        assert_one_error(r, 1, "several linux platforms")


def test_existing_output_is_refused_without_force(proj: Path) -> None:
    (proj / "Dockerfile").write_text("FROM scratch\n")
    dc = proj / ".devcontainer" / "devcontainer.json"
    dc.parent.mkdir()
    dc.write_text("{}\n")
    assert_one_error(export(proj, NAME, "--platform", "linux-64"), 1, "Dockerfile exists")
    assert (proj / "Dockerfile").read_text() == "FROM scratch\n"
    (proj / "Dockerfile").unlink()
    assert_one_error(export(proj, NAME, "--platform", "linux-64", "--devcontainer"), 1, "devcontainer.json exists")
    assert not (proj / "Dockerfile").exists() and dc.read_text() == "{}\n"  # nothing half-done
    r = export(proj, NAME, "--platform", "linux-64", "--devcontainer", "--force")
    assert r.returncode == 0 and (proj / "Dockerfile").read_text().startswith("# Generated by envlock")
    assert json.loads(dc.read_text())["build"]["dockerfile"] == "../Dockerfile"


def test_a_stale_explicit_file_is_refused(proj: Path) -> None:
    explicit = proj / "locks" / NAME / "conda-linux-64.lock"
    lines = explicit.read_text().splitlines(keepends=True)
    explicit.write_text("".join(line for line in lines if "/libcusparse-dev-" not in line))
    # Every file beside conda-lock.yml is its rendering (envlock.project.derived), byte for byte.
    assert_one_error(export(proj, NAME, "--platform", "linux-64"), 1,
                     "conda-linux-64.lock differs from what conda-lock.yml renders")
    explicit.unlink()
    assert_one_error(export(proj, NAME, "--platform", "linux-64"), 1, "conda-linux-64.lock is missing")
    assert not (proj / "Dockerfile").exists()


def test_pypi_part_without_hashes_is_refused(full_project: Path, tmp_path: Path) -> None:
    proj = Path(shutil.copytree(full_project, tmp_path / "proj", symlinks=True))
    req = proj / "locks" / FULL / "requirements-linux-64.txt"
    req.write_text("# pinned, but not hashed\ntinywheel==1.0\n")
    assert_one_error(export(proj, FULL, "--platform", "linux-64"), 1,
                     "requirements-linux-64.txt differs from what conda-lock.yml renders")
    assert not (proj / "Dockerfile").exists()


def test_pypi_part_without_python_is_refused(proj: Path) -> None:
    """A requirements file beside a toolchain-only lock (no python to install into) is refused."""
    req = proj / "locks" / NAME / "requirements-linux-64.txt"
    req.write_text("tinywheel==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    assert_one_error(export(proj, NAME, "--platform", "linux-64"), 1, "has no python to install it into")
    assert not (proj / "Dockerfile").exists()


def test_lock_outside_the_build_context_is_refused(proj: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    shutil.copytree(proj / "locks", outside)
    assert_one_error(export(proj, "--lock", str(outside / NAME / "conda-lock.yml"), "--platform", "linux-64"), 1,
                     "is outside the build context")


def test_help_stays_light() -> None:
    """`envlock --help` must not import the exporter (or yaml tables it loads)."""
    code = "import sys; from envlock import cli; print('envlock.usecases.export.dockerfile' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


# --------------------------------------------------------------------------- envlock itself, from the context


def test_the_context_holds_envlock_s_own_wheel_and_every_dependency_pinned_by_hash(proj: Path, tmp_path: Path) -> None:
    """No published envlock: its wheel is made from the running envlock (the same bytes every time) and
    installs with the real pip, offline, --no-deps --require-hashes; every dependency of pyproject.toml is
    pinned (within its range) with hashes (envlock/data/image-requirements.txt, tools/image_requirements.py)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from packaging.requirements import Requirement

    assert export(proj, NAME, "--platform", "linux-64").returncode == 0
    folder = proj / "envlock-image"
    wheel = folder / "envlock_cuda-0.1.0-py3-none-any.whl"
    first = wheel.read_bytes()
    assert export(proj, NAME, "--platform", "linux-64", "-o", "Dockerfile.again").returncode == 0  # shares the folder
    assert wheel.read_bytes() == first
    text = (folder / "requirements.txt").read_text()
    own = f"envlock-cuda @ file:///tmp/envlock-image/{wheel.name} \\\n    --hash=sha256:{hashlib.sha256(first).hexdigest()}\n"
    assert text.endswith(own)
    entries = [e for e in re.sub(r"\\\n\s*", " ", text).splitlines() if e and not e.startswith("#")]
    assert all("--hash=sha256:" in e for e in entries) and "://" not in text.replace(f"file:///tmp/envlock-image/{wheel.name}", "")
    pins: dict[str, list[str]] = {}
    for e in entries[:-1]:
        name, version = e.split(" ", 1)[0].split("==")
        pins.setdefault(name, []).append(version)
    deps = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in map(Requirement, deps):
        assert dep.name in pins, dep
        assert all(dep.specifier.contains(v) for v in pins[dep.name]), (dep, pins[dep.name])
    # The real pip installs the wheel offline from the file, hash-checked (the path as the image has it).
    local = tmp_path / "own.txt"
    local.write_text(own.replace("file:///tmp/envlock-image/", folder.as_uri() + "/"))
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--require-hashes",
                           "--target", str(target), "-r", str(local)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert done.returncode == 0, done.stderr
    version = subprocess.run([sys.executable, "-m", "envlock", "--version"], capture_output=True, text=True,
                             cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)})
    assert version.stdout.strip() == "envlock 0.1.0", version.stderr
    assert (target / "envlock" / "data" / "image-requirements.txt").is_file()
    tampered = own.replace(hashlib.sha256(first).hexdigest(), "0" * 64)
    local.write_text(tampered.replace("file:///tmp/envlock-image/", folder.as_uri() + "/"))
    bad = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--require-hashes",
                          "--target", str(tmp_path / "bad"), "-r", str(local)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert bad.returncode != 0 and "HASHES" in bad.stderr
