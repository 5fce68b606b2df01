"""Slow tier: the Dockerfile of `envlock export dockerfile`, built for real with buildah and run.

No daemon, no registry, no conda channel: the bases are images this test commits from local root
filesystems (tests/imagebuild.py), pinned by their digests; the lock is `envlock resolve`d against a
file:// channel of real CUDA 13.0 packages (nvcc 13.0.88 and cusparse.h from NVIDIA's wheels); envlock
and the PyPI part's wheel come from a file:// package index. The build runs every RUN step of the file
(envlock create, pip --require-hashes, the activation check, the toolchain check as the non-root user);
then the image runs: nvcc is /opt/env's, CUDA_HOME is set, a .cu including cusparse.h preprocesses.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import imagebuild

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc/g++"),
]
NAME = "nv"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def _envlock(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=900)


@pytest.fixture(scope="module")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[imagebuild.Buildah]:
    tmp = tmp_path_factory.mktemp("buildah")
    problem = imagebuild.buildah_problem(tmp)
    if problem:
        pytest.skip(problem)
    b = imagebuild.Buildah(tmp / "store")
    yield b
    b.cleanup()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, buildah: imagebuild.Buildah) -> dict[str, Path | str]:
    """The channel, the index, the two bases (NAME@sha256:…) and a project with the lock and its PyPI part."""
    tmp = tmp_path_factory.mktemp("inputs")
    try:
        channel = imagebuild.docker_channel(tmp / "channel")
    except RuntimeError as exc:  # the wheels cannot be downloaded
        pytest.skip(f"NVIDIA wheels unavailable: {exc}")
    from tests.suitecache import suite_cache

    cache = suite_cache() / "docker-wheels"
    try:
        index = imagebuild.package_index(tmp / "index", cache)
    except RuntimeError as exc:
        pytest.skip(f"envlock's dependency wheels unavailable: {exc}")
    imagebuild.python_rootfs(tmp / "python-rootfs")
    imagebuild.runtime_rootfs(tmp / "runtime-rootfs")
    python_base = buildah.image_from_rootfs(tmp / "python-rootfs", "localhost/envlock-test-python",
                                            env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    runtime_base = buildah.image_from_rootfs(tmp / "runtime-rootfs", "localhost/envlock-test-runtime",
                                             env={"PATH": "/usr/bin:/bin"})
    shutil.rmtree(tmp / "python-rootfs")
    shutil.rmtree(tmp / "runtime-rootfs")
    project = tmp / "project"
    project.mkdir()
    r = _envlock("resolve", "--torch", "2.14.1", "--channel", "conda-forge", "--mirror",
                 f"conda-forge={channel.as_uri()}", "--platform", "linux-64", "--python", imagebuild.PY,
                 "--project-dir", str(project), "--lock", NAME)
    assert r.returncode == 0, r.stdout + r.stderr
    _probe_as_pypi_part(project / "locks" / NAME, next((index / "wheels").glob("envlock_probe-*.whl")))
    return {"channel": channel, "index": index, "python": python_base, "runtime": runtime_base, "project": project}


def _probe_as_pypi_part(lock_dir: Path, probe: Path) -> None:
    """Make the probe wheel the lock's whole PyPI part (torch's CUDA wheels are gigabytes): conda-lock.yml is
    written again with it, as envlock writes a lock (package section, its digest), and the files derived from it
    rendered again by envlock's own renderer — the image installs them, and export refuses any that disagree."""
    from envlock.formats import LOCK_NAME, read_lock, render_conda_lock, render_package_section
    from envlock.formats.head import package_section_digest
    from envlock.formats.model import META_PREFIX
    from envlock.models import PypiPackage
    from envlock.project.derived import of_lock, render

    path = lock_dir / LOCK_NAME
    lock = read_lock(path)
    name, version = imagebuild.PROBE
    wheel = PypiPackage(name=name, version=version, platform="linux-64", url=f"file:///index/wheels/{probe.name}",
                        sha256=hashlib.sha256(probe.read_bytes()).hexdigest())
    section = render_package_section(lock.packages, lock.platforms, [wheel])
    meta = {**lock.custom_metadata, f"{META_PREFIX}packages_digest": package_section_digest(section) or ""}
    path.write_text(render_conda_lock(packages=lock.packages, platforms=lock.platforms, channels=lock.channels,
                                      content_hashes=lock.content_hash, sources=lock.sources, custom_metadata=meta,
                                      package_section=section))
    for file_name, text in render(of_lock(read_lock(path))).items():
        (lock_dir / file_name).write_text(text)
    assert [w.name for w in read_lock(path).pypi_for("linux-64")] == [name]


def _build(buildah: imagebuild.Buildah, inputs: dict[str, Path | str], tag: str,
           dockerfile: str = "Dockerfile") -> tuple[subprocess.CompletedProcess[str], float]:
    project = Path(inputs["project"])
    start = time.monotonic()
    proc = buildah(
        "bud", "--isolation", "chroot", "--pull=false",
        "--volume", f"{inputs['channel']}:/channel:ro", "--volume", f"{inputs['index']}:/index:ro",
        "--build-arg", "PIP_INDEX_URL=file:///index/simple", "--build-arg", "ENVLOCK_MIRRORS=conda-forge=file:///channel",
        "-f", str(project / dockerfile), "-t", tag, str(project), check=False, timeout=1800,
    )
    return proc, time.monotonic() - start


@pytest.fixture(scope="module")
def image(buildah: imagebuild.Buildah, inputs: dict[str, Path | str]) -> str:
    project = Path(inputs["project"])
    r = _envlock("export", "dockerfile", NAME, "--platform", "linux-64", "--base", str(inputs["python"]),
                 "--runtime-base", str(inputs["runtime"]), "--project-dir", str(project), cwd=project)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr  # both bases are pinned by digest
    lint = subprocess.run([HADOLINT, "--no-color", str(project / "Dockerfile")], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    # Built from the repo alone: envlock's wheel is in the context, the index has none, no `# syntax=` pull.
    assert not (Path(inputs["index"]) / "simple" / "envlock-cuda").exists()
    assert (project / "envlock-image" / "requirements.txt").is_file()
    assert "# syntax=" not in (project / "Dockerfile").read_text()
    tag = "localhost/envlock-dev:test"
    proc, seconds = _build(buildah, inputs, tag)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    size = buildah.size(tag)
    print(f"\nimage build: {seconds:.1f} s; image size: {size}")
    return tag


def _run(buildah: imagebuild.Buildah, image: str, script: str) -> subprocess.CompletedProcess[str]:
    container = buildah("from", "--pull=false", image).stdout.strip()
    try:
        return buildah("run", "--isolation", "chroot", container, "--", "sh", "-c", script, check=False)
    finally:
        buildah("rm", container, check=False)


def test_image_has_the_env_s_nvcc_cuda_home_and_preprocesses_cusparse(buildah: imagebuild.Buildah, image: str) -> None:
    r = _run(buildah, image, 'id -u; command -v nvcc; echo "CUDA_HOME=$CUDA_HOME"; echo "CXX=$CXX"; cd /tmp && '
                             "printf '#include <cusparse.h>\\n' > t.cu && nvcc -E t.cu -o t.ii && grep -c cusparseCreate t.ii")
    assert r.returncode == 0, r.stdout + r.stderr
    uid, nvcc, cuda_home, cxx, hits = r.stdout.split()
    assert uid != "0"  # the image runs as its non-root user
    assert nvcc == "/opt/env/bin/nvcc" and cuda_home == "CUDA_HOME=/opt/env"
    assert cxx == f"CXX=/opt/env/bin/{imagebuild.TRIPLET}-c++"
    assert int(hits) >= 1  # cusparse.h's declarations went through the preprocessor


def test_image_holds_the_env_and_its_pypi_part_and_no_cache(buildah: imagebuild.Buildah, image: str) -> None:
    mod = imagebuild.PROBE[0].replace("-", "_")
    r = _run(buildah, image, "ls /opt; ls /opt/env/conda-meta | grep -c json; "
                             f"cat /opt/env/lib/python{imagebuild.PY}/site-packages/{mod}-*.dist-info/INSTALLER; "
                             f"test -f /opt/env/lib/python{imagebuild.PY}/site-packages/{mod}/__init__.py && echo probe; "
                             "find / -xdev \\( -name '*.conda' -o -name '*.tar.bz2' -o -name '*.whl' -o -path '*/.cache/pip' "
                             "-o -path /opt/envlock -o -path /tmp/envlock \\) -print 2>/dev/null; echo end")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "env" and lines[1] != "env"  # /opt holds the env only (no /opt/envlock)
    assert int(lines[1]) > 10 and lines[2] == "pip" and lines[3] == "probe"
    assert lines[4:] == ["end"]  # no package archive, wheel, pip cache or build leftovers anywhere


def test_a_tampered_pypi_hash_fails_the_build(buildah: imagebuild.Buildah, inputs: dict[str, Path | str],
                                              image: str) -> None:
    project = Path(inputs["project"])
    req = project / "locks" / NAME / "requirements-linux-64.txt"
    good = req.read_text()
    req.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, good))
    try:
        proc, _ = _build(buildah, inputs, "localhost/envlock-dev:tampered")
    finally:
        req.write_text(good)
    assert proc.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr


def test_a_runtime_base_without_a_host_compiler_fails_at_the_check(
        buildah: imagebuild.Buildah, inputs: dict[str, Path | str], image: str, tmp_path: Path) -> None:
    """The same lock onto busybox + glibc, no compiler: nvcc runs but cannot preprocess, so no image is made."""
    rootfs = tmp_path / "bare"
    imagebuild.glibc_rootfs(rootfs)
    bare = buildah.image_from_rootfs(rootfs, "localhost/envlock-test-bare", env={"PATH": "/usr/bin:/bin"})
    project = Path(inputs["project"])
    r = _envlock("export", "dockerfile", NAME, "--platform", "linux-64", "--base", str(inputs["python"]),
                 "--runtime-base", bare, "-o", "Dockerfile.bare", "--project-dir", str(project), cwd=project)
    assert r.returncode == 0, r.stderr
    proc, _ = _build(buildah, inputs, "localhost/envlock-dev:bare", "Dockerfile.bare")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Cuda compilation tools, release 13.0" in out, out[-3000:]  # nvcc ran, from /opt/env
    assert "error: the CUDA toolchain in this image cannot preprocess a .cu including cuda_runtime.h, cusparse.h" in out
    assert buildah("images", "--format", "{{.Name}}:{{.Tag}}").stdout.count("envlock-dev:bare") == 0
