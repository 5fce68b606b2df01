"""The PyPI part of a full environment, and --toolchain-only (issue 16), against real uv and real wheels.

The default index is tests/wheelindex.py on 127.0.0.1 (tests/fixtures/pypi.py points pip at it for every
test); the conda part comes from the real test channel. conda-lock's own parser reads every lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.output import logical_lines, unfolded

from envlock.cli import run
from envlock.formats import custom_value, read_lock
from tests.channelbuilder import PackageSpec
from tests.lockproject import snapshot
from tests.wheelindex import WheelIndex

ENVLOCK = [sys.executable, "-m", "envlock"]
NAME = "torch2.7.1-cu126"


def _resolve(project: Path, cf: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    project.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([*ENVLOCK, "resolve", "--mirror", f"conda-forge={cf}", *args, "--project-dir", str(project),
                          "--json"], capture_output=True, text=True, timeout=300, env=env)
    doc = json.loads(out.stdout) if out.stdout.strip() else {"stderr": out.stderr}
    return out.returncode, doc


def _conda_lock(path: Path):  # conda-lock's own parser
    from conda_lock.lockfile import parse_conda_lock_file

    return parse_conda_lock_file(path)


@pytest.fixture(scope="session")
def full_project(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str) -> Path:
    """torch 2.7.1 (CUDA 12.6), linux-64, full environment."""
    root = tmp_path_factory.mktemp("full")
    code, doc = _resolve(root, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64")
    assert code == 0, doc
    return root


def test_full_lock_holds_torch_its_cuda_wheels_ninja_and_the_toolchain(full_project: Path) -> None:
    lock_path = full_project / "locks" / NAME / "conda-lock.yml"
    lf = _conda_lock(lock_path)
    pip = {p.name: p for p in lf.package if p.manager == "pip"}
    conda = {p.name for p in lf.package if p.manager == "conda"}
    assert pip["torch"].version == "2.7.1" and pip["torch"].hash.sha256
    assert pip["nvidia-cuda-runtime-cu12"].version.startswith("12.6.")
    assert pip["nvidia-cudnn-cu12"].version.startswith("9.5.")
    assert "ninja" in pip and {"cuda-nvcc", "python", "libcusparse-dev"} <= conda
    assert pip["sympy"].version == "1.13.3"  # 1.99.0 was uploaded after the cutoff
    assert set(pip["torch"].dependencies) >= {"filelock", "sympy", "nvidia-cuda-runtime-cu12"}
    assert all(p.url.startswith("http://127.0.0.1:") and p.platform == "linux-64" for p in pip.values())
    ours = read_lock(lock_path)
    req = (full_project / "locks" / NAME / "requirements-linux-64.txt").read_text()
    assert f"# content_hash: {ours.content_hash['linux-64']}" in req
    for w in ours.pypi_for("linux-64"):
        assert f"{w.name}=={w.version} \\\n    --hash=sha256:{w.sha256}\n" in req
    spec = (full_project / "environments" / f"{NAME}.yml").read_text()
    assert "  - pip:\n    - torch==2.7.1\n    - ninja\n" in spec and "exclude_newer: '" in spec


def test_full_lock_twice_gives_identical_bytes_and_check_is_fresh(full_project: Path, test_channel_url: str,
                                                                    tmp_path: Path) -> None:
    import shutil

    project = shutil.copytree(full_project, tmp_path / "p")
    before = snapshot(project)
    code, doc = _resolve(project, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64")
    assert code == 0, doc
    assert snapshot(project) == before  # bytes and mtimes: the spec's cutoff was reused
    done = subprocess.run([*ENVLOCK, "check", "--project-dir", str(project)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_active_virtualenv_does_not_reach_the_pypi_lock(full_project: Path, test_channel_url: str,
                                                                 tmp_path: Path) -> None:
    """uv finds an interpreter of its own unless told which: an active VIRTUAL_ENV whose python is gone (a
    pyenv or brew upgrade) failed the resolve ("Broken symlink at …/bin/python") with a hint about `- pip:`
    requirements. The lock is the same bytes as without it."""
    import shutil

    venv = tmp_path / "stale-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3")
    (venv / "pyvenv.cfg").write_text(f"home = {tmp_path / 'gone'}\n")
    project = tmp_path / "p"
    shutil.copytree(full_project, project)
    shutil.rmtree(project / "locks")
    code, doc = _resolve(project, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64",
                         env={**os.environ, "VIRTUAL_ENV": str(venv)})
    assert code == 0, doc
    lock = Path("locks") / NAME / "conda-lock.yml"
    assert (project / lock).read_bytes() == (full_project / lock).read_bytes()


def test_check_sees_an_edited_pip_list_and_a_hand_edited_wheel(full_project: Path, tmp_path: Path, capsys) -> None:
    import shutil

    project = shutil.copytree(full_project, tmp_path / "p")
    spec = project / "environments" / f"{NAME}.yml"
    spec.write_text(spec.read_text().replace("    - ninja\n", "    - ninja\n    - einops\n"))
    assert run(["check", "--project-dir", str(project)]) == 1
    assert "spec `- pip:` requirements: +einops" in capsys.readouterr().out
    spec.write_text(spec.read_text().replace("    - einops\n", ""))
    assert run(["check", "--project-dir", str(project)]) == 0
    lock = project / "locks" / NAME / "conda-lock.yml"
    torch = next(w for w in read_lock(lock).pypi if w.name == "torch")
    lock.write_text(lock.read_text().replace(torch.sha256, "a" * 64))
    capsys.readouterr()
    assert run(["check", "--project-dir", str(project)]) == 1
    assert "PyPI packages were edited by hand" in capsys.readouterr().out


def test_toolchain_only_has_no_python_and_no_pypi_part(tmp_path: Path, test_channel_url: str) -> None:
    code, doc = _resolve(tmp_path, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64",
                         "--platform", "win-64", "--toolchain-only")
    assert code == 0, doc
    lf = _conda_lock(tmp_path / "locks" / NAME / "conda-lock.yml")
    names = {p.name for p in lf.package}
    assert "python" not in names and "cuda-nvcc" in names
    assert not [p for p in lf.package if p.manager == "pip"]
    assert not list((tmp_path / "locks" / NAME).glob("requirements-*.txt"))
    assert "ninja" not in names  # the test channel has no ninja: it is left out, not an error
    spec = (tmp_path / "environments" / f"{NAME}.yml").read_text()
    assert "toolchain_only: true" in spec and "pip:" not in spec and "python" not in spec.split("envlock:")[0]


def test_relocking_a_full_env_toolchain_only_removes_its_requirements_file(full_project: Path, test_channel_url: str,
                                                                           tmp_path: Path) -> None:
    """The old requirements-<platform>.txt would go on being packed, exported and pip-installed."""
    import shutil

    project = shutil.copytree(full_project, tmp_path / "p")
    ldir = project / "locks" / NAME
    assert (ldir / "requirements-linux-64.txt").is_file()
    done = _cli(project, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--toolchain-only")
    assert done.returncode == 0, done.stderr
    assert not (ldir / "requirements-linux-64.txt").exists()
    assert f"removed locks/{NAME}/requirements-linux-64.txt (not in the new lock)" in " ".join(done.stdout.split())
    assert {p.name for p in ldir.iterdir()} == {"conda-lock.yml", "conda-linux-64.lock", "activate.sh", "deactivate.sh",
                                                "environment-linux-64.yml"}
    check = subprocess.run([*ENVLOCK, "check", "--project-dir", str(project)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_toolchain_only_takes_ninja_where_the_channel_has_it_before_the_cutoff(make_channel, tmp_path: Path) -> None:
    """ninja 1.13 is newer than the cutoff: rattler's exclude_newer (indexed timestamp) keeps 1.11."""
    newer = 4_070_908_800_000  # 2099-01-01
    channel = make_channel(cuda_minors=["12.6"], subdirs=("linux-64",), with_cuda11=False, with_pytorch=False,
                           extra=[PackageSpec("ninja", "1.11.1", subdir="linux-64"),
                                  PackageSpec("ninja", "1.13.2", subdir="linux-64", timestamp=newer)])
    code, doc = _resolve(tmp_path, channel.as_uri(), "--torch", "2.7.1", "--platform", "linux-64", "--toolchain-only")
    assert code == 0, doc
    ninja = [p for p in read_lock(tmp_path / "locks" / NAME / "conda-lock.yml").packages if p.name == "ninja"]
    assert [p.version for p in ninja] == ["1.11.1"]


def test_variant_label_locks_from_the_variant_index_and_records_its_canonical_url(
    tmp_path: Path, test_channel_url: str, wheel_index: WheelIndex
) -> None:
    canonical = "https://download.pytorch.org/whl/cu126"
    code, doc = _resolve(tmp_path, test_channel_url, "--torch", "2.7.1+cu126", "--platform", "linux-64",
                         "--platform", "win-64", "--mirror", f"{canonical}={wheel_index.variant_url('cu126')}")
    assert code == 0, doc
    lock = read_lock(tmp_path / "locks" / NAME / "conda-lock.yml")
    torch = {w.platform: w for w in lock.pypi if w.name == "torch"}
    assert torch["linux-64"].version == torch["win-64"].version == "2.7.1+cu126"
    assert torch["linux-64"].url.startswith(canonical + "/torch-2.7.1")  # the mirror is never written
    head = (tmp_path / "locks" / NAME / "conda-lock.yml").read_text().split("\npackage:")[0]
    assert wheel_index.variant_url("cu126").rstrip("/") not in head  # the mirror is never written
    # what the header names is where the locked files are served (envlock.pypi_sources): the index's, not the mirror's
    assert custom_value(lock.custom_metadata, "pypi_sources") == sorted({w.url.split("/", 3)[0] + "//" + w.url.split("/", 3)[2] + "/"
                                                        for w in lock.pypi})
    req = (tmp_path / "locks" / NAME / "requirements-win-64.txt").read_text()
    assert f"--extra-index-url {canonical}\n" in req


def _one_error(done: subprocess.CompletedProcess) -> str:
    """One `error:` and one `hint:` (each folded to 80 columns); returned unfolded, to look for words in."""
    assert max(len(ln) for ln in done.stderr.splitlines()) <= 80, done.stderr
    lines = logical_lines(done.stderr.strip())
    assert [ln.split(":")[0] for ln in lines] == ["error", "hint"], done.stderr
    assert "Traceback" not in done.stderr
    return "\n".join(lines) + "\n"


def _cli(project: Path, cf: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    project.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*ENVLOCK, "resolve", "--mirror", f"conda-forge={cf}", *args, "--project-dir", str(project)],
                          capture_output=True, text=True, timeout=300, env=env)


def test_a_cpu_only_platform_is_refused_naming_the_variant_index(tmp_path: Path, test_channel_url: str) -> None:
    done = _cli(tmp_path, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--platform", "win-64")
    assert done.returncode == 1
    err = _one_error(done)
    assert "win-64" in err and "CPU build" in err and "--torch 2.7.1+cu126" in err
    assert "https://download.pytorch.org/whl/cu126" in err
    assert not any(tmp_path.rglob("*.yml"))  # nothing written


def test_a_torch_of_another_cuda_is_refused(tmp_path: Path, test_channel_url: str) -> None:
    done = _cli(tmp_path, test_channel_url, "--torch", "2.7.1", "--cuda", "12.8", "--platform", "linux-64")
    assert done.returncode == 1
    assert "is a CUDA 12.6 build, but the anchor is CUDA 12.8" in _one_error(done)
    assert not any(tmp_path.rglob("*.yml"))


def test_a_conflicting_pip_requirement_names_both_sides(tmp_path: Path, test_channel_url: str) -> None:
    done = _cli(tmp_path, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--pip", "sympy==1.12.1")
    assert done.returncode == 3
    err = _one_error(done)
    assert "sympy==1.12.1" in err and "torch==2.7.1" in err and "linux-64" in err
    assert len(err.splitlines()[0]) <= 500 + len("error: ")
    assert not any(tmp_path.rglob("*.yml"))
    code, doc = _resolve(tmp_path, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--pip",
                         "sympy==1.12.1")
    assert code == 3 and doc["detail"][0].startswith("linux-64, PyPI part (uv):")  # uv's own words, in full
    assert "sympy==1.12.1" in doc["detail"][0]


def test_a_requirement_without_a_wheel_for_the_platform_is_named(tmp_path: Path, test_channel_url: str) -> None:
    done = _cli(tmp_path, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--pip", "winonly")
    assert done.returncode == 3
    err = _one_error(done)
    assert "winonly" in err and "linux-64" in err


def test_an_unreachable_index_is_one_line_and_writes_nothing(tmp_path: Path, test_channel_url: str) -> None:
    # One retry, not three: uv takes ENVLOCK_HTTP_RETRIES too (the next test), and its backoff is what this waited for.
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple/", "ENVLOCK_CACHE_DIR": str(tmp_path / "c"),
           "ENVLOCK_HTTP_RETRIES": "1"}
    done = _cli(tmp_path / "p", test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", env=env)
    assert done.returncode == 4
    assert "cannot reach the package index" in _one_error(done)
    assert not any((tmp_path / "p").rglob("*.*"))


def test_uv_takes_envlocks_retries_and_never_the_users_own(tmp_path: Path, monkeypatch) -> None:
    """ENVLOCK_HTTP_RETRIES is every request's setting: uv's too (it used to retry 3 times whatever it said)."""
    from envlock.seams.pypi.uv import uv_environ

    monkeypatch.setenv("UV_HTTP_RETRIES", "9")  # the user's own UV_* settings never reach uv
    monkeypatch.delenv("ENVLOCK_HTTP_RETRIES", raising=False)
    assert uv_environ(tmp_path)["UV_HTTP_RETRIES"] == "3"
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    assert uv_environ(tmp_path)["UV_HTTP_RETRIES"] == "0"


# --------------------------------------------------------------------------- lifecycle


def test_lock_refresh_and_update_move_the_cutoff_and_say_so(full_project: Path, tmp_path: Path, capsys,
                                                              test_channel_url: str) -> None:
    import shutil

    project = shutil.copytree(full_project, tmp_path / "p")
    spec = project / "environments" / f"{NAME}.yml"
    spec.write_text(spec.read_text().replace("exclude_newer: '", "exclude_newer: '2025-01-01T00:00:00Z' #'", 1))
    cf = f"conda-forge={test_channel_url}"
    assert run(["lock", "--refresh", "--mirror", cf, "--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    assert "resolution cutoff moved: 2025-01-01T00:00:00Z → 20" in out
    assert "2025-01-01" not in spec.read_text()
    assert run(["check", "--project-dir", str(project)]) == 0
    text = spec.read_text()
    assert run(["update", "sympy", "--mirror", cf, "--project-dir", str(project)]) == 0
    out = capsys.readouterr().out  # sympy is at the newest already: nothing moves, so neither does the cutoff
    assert "nothing written" in out and "resolution cutoff moved:" not in out and spec.read_text() == text
    assert run(["check", "--project-dir", str(project)]) == 0


# --------------------------------------------------------------------------- create


def _site_listing() -> dict[str, list[str]]:
    """What the real interpreters' site-packages hold (the shim python execs /usr/bin/python3)."""
    dirs = {sysconfig.get_paths()["purelib"]}
    real = subprocess.run(["/usr/bin/python3", "-c", "import site,sysconfig;print('\\n'.join(site.getsitepackages()+[sysconfig.get_paths()['purelib']]))"],
                          capture_output=True, text=True)
    dirs.update(d for d in real.stdout.split() if d)
    return {d: sorted(os.listdir(d)) if os.path.isdir(d) else [] for d in dirs}


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    return cache


def test_create_installs_the_pypi_part_into_the_prefix_only(full_project: Path, tmp_path: Path, own_cache: Path,
                                                            wheel_index: WheelIndex, capsys, test_channel_url: str) -> None:
    before = _site_listing()
    prefix = tmp_path / "env"
    lock = full_project / "locks" / NAME / "conda-lock.yml"
    cf = f"conda-forge={test_channel_url}"
    assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen", "--json",
                "--mirror", cf]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["wheels"] == len(read_lock(lock).pypi_for("linux-64")) and doc["wheels"] > 5
    site = prefix / "lib" / "python3.11" / "site-packages"
    assert "cuda = '12.6'" in (site / "torch" / "version.py").read_text()
    assert (site / "torch-2.7.1.dist-info" / "RECORD").read_text().count("../../../bin/torchrun") == 1
    python = f"{prefix}/bin/python3.11"
    script = (prefix / "bin" / "torchrun").read_text().splitlines()
    if script[0] != "#!/bin/sh":  # the env's python as the shebang, where the kernel takes the line (< 128 bytes)
        assert script[0] == f"#!{python}" and len(f"{script[0]}\n") <= 127, script[:3]
    else:  # else pip's sh trampoline, read back as sh reads it (uv quotes the path its own way: '…' or "…")
        assert script[0] == "#!/bin/sh" and script[1].startswith("'''exec' "), script[:3]
        assert shlex.split(script[1]) == ["exec", python, "$0", "$@"] and script[2] == "' '''", script[:3]
    assert subprocess.run([str(prefix / "bin" / "ninja")], capture_output=True, text=True).stdout.startswith("1.13.2")
    assert not (site / ".lock").exists() and not (site / "bin").exists()
    assert _site_listing() == before  # nothing landed in a real interpreter's site-packages
    # The env's python is the test channel's stand-in (it execs the machine's python): point it at the
    # prefix's site-packages to show torch imports and reports the anchor's CUDA.
    done = subprocess.run([*ENVLOCK, "run", "-p", str(prefix), "--", "python", "-c",
                           "import torch; print(torch.version.cuda)"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.stdout.strip() == "12.6", done.stderr
    # A re-create after removing the env: offline, every wheel from envlock's cache.
    import shutil

    shutil.rmtree(prefix)
    downloads = len(wheel_index.downloads())
    assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen",
                "--offline", "-q", "--mirror", cf]) == 0
    assert len(wheel_index.downloads()) == downloads and (site / "torch" / "version.py").is_file()


def test_create_refuses_a_wheel_whose_sha256_differs(full_project: Path, tmp_path: Path, own_cache: Path,
                                                     wheel_index: WheelIndex, capsys, test_channel_url: str) -> None:
    lock = full_project / "locks" / NAME / "conda-lock.yml"
    torch = next(w for w in read_lock(lock).pypi if w.name == "torch")
    wheel_index.corrupt(torch.filename)
    try:
        prefix = tmp_path / "env"
        assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen",
                    "--mirror", f"conda-forge={test_channel_url}"]) == 1
    finally:
        wheel_index.corrupted.discard(torch.filename)
    err = unfolded(capsys.readouterr().err)
    assert "does not match the sha256 the lock records" in err and torch.filename in err
    assert not prefix.exists()  # nothing was installed: the conda part waits for every wheel


def test_a_failed_pypi_install_rolls_back_with_the_conda_part(tmp_path: Path, test_channel_url: str,
                                                              own_cache: Path, capsys) -> None:
    code, doc = _resolve(tmp_path / "p", test_channel_url, "--torch", "2.7.1", "--platform", "linux-64",
                         "--pip", "brokenwheel")
    assert code == 0, doc
    prefix = tmp_path / "env"
    lock = tmp_path / "p" / "locks" / NAME / "conda-lock.yml"
    assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen",
                "--mirror", f"conda-forge={test_channel_url}"]) == 1
    err = capsys.readouterr().err
    assert "installing the PyPI part" in err and "error:" in err and "Traceback" not in err
    assert not prefix.exists()


def test_toolchain_only_beside_an_installed_torch_runs_the_users_python(tmp_path: Path, test_channel_url: str,
                                                                          own_cache: Path) -> None:
    """--torch installed --python-exe PY anchors on that python's torch; the env has no python to shadow it."""
    site = tmp_path / "user-site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('__version__ = "2.7.1+cu126"\nfrom torch import version\n')
    (site / "version.py").write_text('__version__ = "2.7.1+cu126"\ncuda = "12.6"\n')
    user_python = tmp_path / "user-python"
    user_python.write_text(f'#!/bin/sh\nPYTHONPATH={site.parent} exec {sys.executable} "$@"\n')
    user_python.chmod(0o755)
    code, doc = _resolve(tmp_path / "p", test_channel_url, "--torch", "installed", "--python-exe", str(user_python),
                         "--platform", "linux-64", "--toolchain-only")
    assert code == 0, doc
    assert doc["anchor"]["source"] == "installed" and doc["anchor"]["cuda"] == "12.6"
    lock = tmp_path / "p" / "locks" / NAME / "conda-lock.yml"
    prefix = tmp_path / "env"
    assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen", "-q",
                "--mirror", f"conda-forge={test_channel_url}"]) == 0
    assert not (prefix / "bin" / "python").exists() and (prefix / "bin" / "nvcc").exists()
    env = {**os.environ, "PATH": f"{user_python.parent}{os.pathsep}{os.environ['PATH']}"}
    (user_python.parent / "python").symlink_to(user_python)
    done = subprocess.run([*ENVLOCK, "run", "-p", str(prefix), "--", "python", "-c",
                           "import os, torch; print(torch.version.cuda, os.environ['CUDA_HOME'])"],
                          capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["12.6", str(prefix)], done.stderr


def test_update_of_a_variant_label_lock_holds_what_it_does_not_move(tmp_path: Path, test_channel_url: str,
                                                                    wheel_index: WheelIndex, capsys) -> None:
    """A `+cu126` lock's PyPI part comes from the PyTorch wheel index, whose files carry no upload date: update
    failed on it ("nvidia-cuda-runtime-cu12==12.6.77 has no publish time"). A no-op update writes nothing; an
    update moves only what it names."""
    from tests.wheelindex import build_wheel

    wheel_index.add([build_wheel("envlock-upd-probe", "1.0", upload_time="2025-01-01T00:00:00Z"),
                     build_wheel("envlock-upd-probe", "1.1", upload_time="2026-06-01T00:00:00Z")])
    canonical = "https://download.pytorch.org/whl/cu126"
    mirrors = ["--mirror", f"conda-forge={test_channel_url}", "--mirror", f"{canonical}={wheel_index.variant_url('cu126')}"]
    code, doc = _resolve(tmp_path, test_channel_url, "--torch", "2.7.1+cu126", "--platform", "linux-64",
                         "--pip", "envlock-upd-probe", "--exclude-newer", "2026-01-01T00:00:00Z", *mirrors[2:])
    assert code == 0, doc
    lock = tmp_path / "locks" / NAME / "conda-lock.yml"
    before = snapshot(tmp_path)
    pins = {w.name: w.version for w in read_lock(lock).pypi}
    assert pins["envlock-upd-probe"] == "1.0" and pins["torch"] == "2.7.1+cu126"
    assert run(["update", "sympy", *mirrors, "--project-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nothing moved" in out and "nothing written" in out, out
    assert snapshot(tmp_path) == before
    assert run(["update", "envlock-upd-probe", *mirrors, "--project-dir", str(tmp_path)]) == 0
    assert "resolution cutoff moved: 2026-01-01T00:00:00Z → " in capsys.readouterr().out  # a move moves it, and says so
    after = {w.name: w.version for w in read_lock(lock).pypi}
    assert after == {**pins, "envlock-upd-probe": "1.1"}  # only the named one moved; torch+cu126 held
    assert run(["check", "--project-dir", str(tmp_path)]) == 0


@contextlib.contextmanager
def _two_users(prefix: str) -> Iterator[tuple[list[str], dict[str, str], Path, Path]]:
    """The second user's command prefix and environment, and a folder holding a group-shared cache (a setgid group
    folder, umask 002, as the README says) and a sticky `users` folder for what the second user writes."""
    from tests.second_user import GID, open_dir, second_user

    as_other, env = second_user()
    # uv inspects the interpreter it runs under; this machine's python lives under /root (0700), so the second
    # user runs the system python with this venv's packages (the same version: rattler's wheel is abi3).
    system = "/usr/bin/python3"
    same = subprocess.run([system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip(f"{system} is not python {sys.version_info[0]}.{sys.version_info[1]}")
    as_other[-1] = system
    env = {k: v for k, v in env.items() if k not in ("ENVLOCK_MIRRORS", "ENVLOCK_CACHE_DIR")}
    env["PYTHONPATH"] += os.pathsep + sysconfig.get_paths()["purelib"]
    with open_dir(prefix) as base:
        cache, users = base / "cache", base / "users"
        cache.mkdir()
        os.chown(cache, -1, GID)
        cache.chmod(0o2775)
        users.mkdir()
        users.chmod(0o1777)
        env["ENVLOCK_CACHE_DIR"] = str(cache)
        yield as_other, env, base, users


def _umask_002() -> None:
    os.umask(0o002)


def test_a_group_shared_cache_serves_a_second_users_full_env_offline(full_project: Path, wheel_index: WheelIndex,
                                                                     test_channel_url: str) -> None:
    """The PyPI part too (envlock's wheel cache and uv's): a second user creates the full env offline from the
    cache the first filled, shared as the README says (a setgid group folder, umask 002)."""
    with _two_users("envlock-two-users-full-") as (as_other, env, base, users):
        lock = base / "locks" / "conda-lock.yml"
        lock.parent.mkdir()
        lock.write_text((full_project / "locks" / NAME / "conda-lock.yml").read_text())
        create = ["-m", "envlock", "create", "--lock", str(lock), "--platform", "linux-64", "--frozen", "-q", "-p"]
        first = subprocess.run([sys.executable, *create, str(base / "env-first"), "--mirror",
                                f"conda-forge={test_channel_url}"], env=env, capture_output=True, text=True,
                               preexec_fn=_umask_002)
        assert first.returncode == 0, first.stderr
        prefix = users / "env-second"
        second = subprocess.run([*as_other, *create, str(prefix), "--offline"], capture_output=True, text=True,
                                cwd="/", env={**env, "HOME": str(users), "ENVLOCK_CONFIG_DIR": str(users / "config")},
                                preexec_fn=_umask_002)
        assert second.returncode == 0, second.stdout + second.stderr
        site = prefix / "lib" / "python3.11" / "site-packages"
        assert "cuda = '12.6'" in (site / "torch" / "version.py").read_text()
        assert (prefix / "bin" / "ninja").is_file() and (prefix / "bin" / "nvcc").is_file()


def test_a_second_user_resolves_the_full_env_into_a_group_shared_cache_the_first_filled(
        wheel_index: WheelIndex, channel_server) -> None:
    """The resolve side of a shared cache: uv's cache (its compile of the PyPI part) and the repodata cache,
    filled by one user, reused and added to by a second (a setgid group folder, umask 002, as the README says)."""
    cf = channel_server.channel_url("conda-forge")
    with _two_users("envlock-two-users-resolve-") as (as_other, env, base, users):
        resolve = ["-m", "envlock", "resolve", "--torch", "2.7.1", "--platform", "linux-64", "--mirror",
                   f"conda-forge={cf}", "--exclude-newer", "2026-06-01T00:00:00Z", "--json", "--project-dir"]
        first = subprocess.run([sys.executable, *resolve, str(base / "first")], env=env, capture_output=True,
                               text=True, preexec_fn=_umask_002, timeout=300)
        assert first.returncode == 0, first.stderr
        other = {**env, "HOME": str(users), "ENVLOCK_CONFIG_DIR": str(users / "config")}
        second = subprocess.run([*as_other, *resolve, str(users / "second")], capture_output=True, text=True, cwd="/",
                                env=other, preexec_fn=_umask_002, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        again = subprocess.run([*as_other, *resolve[:-1], "--offline", "--project-dir", str(users / "offline")],
                               capture_output=True, text=True, cwd="/", env=other,
                               preexec_fn=_umask_002, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr  # everything it needs is in the shared cache
        locks = [(d / "locks" / NAME / "conda-lock.yml") for d in (base / "first", users / "second", users / "offline")]
        hashes = [read_lock(p).content_hash for p in locks]
        assert hashes[0] == hashes[1] == hashes[2]
        assert {w.name for w in read_lock(locks[1]).pypi} >= {"torch", "ninja", "nvidia-cuda-runtime-cu12"}
        assert (users / "second" / "locks" / NAME / "conda-lock.yml").stat().st_uid == 65534
        for shard in (base / "cache" / "repodata").rglob("*.msgpack"):  # as an envlock before the fix left them
            shard.chmod(0o600)
        refused = subprocess.run([*as_other, *resolve, str(users / "refused")], capture_output=True, text=True,
                                 cwd="/", env=other, preexec_fn=_umask_002, timeout=300)
        doc = json.loads(refused.stdout)
        assert refused.returncode == 4 and "Permission denied" in doc["error"], refused.stdout + refused.stderr
        assert "chmod -R g+rwX" in doc["hint"] and "ENVLOCK_CACHE_DIR" in doc["hint"]
        assert not (users / "refused" / "locks").exists()


def test_a_full_env_holds_the_channels_pip_so_pip_install_lands_in_the_env(make_channel, tmp_path: Path,
                                                                          wheel_index: WheelIndex, own_cache: Path) -> None:
    """conda adds pip to every python; a full env without it left `pip install` to the system's pip. Where the
    channel has pip it is locked with the conda part (the snapshot and the default test channel have none: optional)."""
    pip = PackageSpec("pip", "24.2", subdir="noarch", noarch="python", depends=["python >=3.8"],
                      files={"site-packages/pip/__init__.py": '__version__ = "24.2"\n',
                             "site-packages/pip/__main__.py": 'print("the env\'s pip")\n'})
    channel = make_channel(cuda_minors=["12.6"], subdirs=("linux-64",), with_cuda11=False, with_pytorch=False,
                           extra=[pip])
    code, doc = _resolve(tmp_path / "p", channel.as_uri(), "--torch", "2.7.1", "--platform", "linux-64")
    assert code == 0, doc
    lock = tmp_path / "p" / "locks" / NAME / "conda-lock.yml"
    conda = {p.name: p for p in read_lock(lock).packages}
    assert conda["pip"].version == "24.2" and "python" in conda
    assert "pip" not in {w.name for w in read_lock(lock).pypi}
    prefix = tmp_path / "env"
    assert run(["create", "--lock", str(lock), "-p", str(prefix), "--platform", "linux-64", "--frozen", "-q",
                "--mirror", f"conda-forge={channel.as_uri()}"]) == 0
    site = prefix / "lib" / "python3.11" / "site-packages"
    done = subprocess.run([*ENVLOCK, "run", "-p", str(prefix), "--", "python", "-m", "pip"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(site)})  # the stand-in python: see above
    assert done.stdout.strip() == "the env's pip", done.stderr


def test_only_a_failed_resolution_is_blamed_on_the_pip_requirements() -> None:
    """uv's report on CI (verbatim, the interpreter of an active venv under a 0700 home) has a `cause:` but no
    failed resolution: it was reported as a conflicting `- pip:` requirement (exit 3). A real conflict still is."""
    from envlock.errors import SolveError, SpecError
    from envlock.seams.pypi.compile import CompileRequest, _uv_error
    from envlock.seams.pypi.part import Index

    req = CompileRequest(requirements=("torch==2.7.1", "ninja", "sympy==1.12"), python="3.11", platforms=("linux-64",),
                         glibc="2.28", index=Index("http://127.0.0.1:1/simple", "http://127.0.0.1:1/simple"),
                         users=("sympy==1.12",))  # fmt: skip
    ci = ("error: Failed to inspect Python interpreter from active virtual environment at `/tmp/t/venv/bin/python`\n"
          "  cause: Failed to query Python interpreter\n"
          "  cause: failed to canonicalize path `/tmp/t/venv/bin/python`: Permission denied (os error 13)\n")  # fmt: skip
    err = _uv_error(ci, "linux-64", req)
    assert isinstance(err, SpecError) and not isinstance(err, SolveError)
    assert "Permission denied" in str(err) and "- pip:" not in err.hint and "python" in err.hint
    conflict = ("error: No solution found when resolving dependencies\n"  # uv 0.13 with NO_COLOR, as envlock runs it
                "  cause: Because torch==2.7.1 depends on sympy>=1.13.3 and you require sympy==1.12, we can conclude "
                "that your requirements are unsatisfiable.\n")  # fmt: skip
    err = _uv_error(conflict, "linux-64", req)
    assert isinstance(err, SolveError) and "sympy==1.12" in str(err) and "- pip:" in err.hint
    assert "'sympy==1.12'" in err.hint  # the user's own line, named


def test_index_credentials_are_used_never_written_and_extra_indexes_are_followed(
    tmp_path: Path, test_channel_url: str, wheel_index: WheelIndex
) -> None:
    """pip's PIP_INDEX_URL / PIP_EXTRA_INDEX_URL with user:password: uv gets them (a project only on the extra
    index resolves), while the lock, the spec, the requirements file and the output keep the plain URLs."""
    from tests.wheelindex import build_wheel

    extra = WheelIndex().add([build_wheel("extraonly", "2.0")]).start()
    try:
        def secret(url: str) -> str:
            return url.replace("http://", "http://envuser:s3cr3t-tok@", 1)

        env = {**os.environ, "PIP_INDEX_URL": secret(wheel_index.url), "PIP_EXTRA_INDEX_URL": secret(extra.url),
               "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
        project = tmp_path / "p"
        done = _cli(project, test_channel_url, "--torch", "2.7.1", "--platform", "linux-64", "--pip", "extraonly",
                    env=env)
        assert done.returncode == 0, done.stderr
        lf = _conda_lock(project / "locks" / NAME / "conda-lock.yml")
        pip = {p.name: p for p in lf.package if p.manager == "pip"}
        assert pip["extraonly"].url.startswith(extra.base + "/") and pip["torch"].url.startswith(wheel_index.base)
        assert any(r.endswith("/extraonly/") or "extraonly" in r for r in extra.requests)  # uv asked the extra index
        written = [p for p in project.rglob("*") if p.is_file()]
        assert written and not [p for p in written if b"s3cr3t" in p.read_bytes() or b"envuser" in p.read_bytes()]
        assert "s3cr3t" not in done.stdout + done.stderr
    finally:
        extra.stop()


@pytest.mark.parametrize("head", ["#!/usr/bin/python3\n",
                                  "#!/bin/sh\n'''exec' '/a/deep/venv/of/envlock/bin/python' \"$0\" \"$@\"\n' '''\n",
                                  "#!/bin/sh\n'''exec' \"/a/deep/venv/of/envlock/bin/python\" \"$0\" \"$@\"\n' '''\n"])
def test_a_script_runs_the_envs_python_whatever_line_uv_wrote(head: str) -> None:
    """uv writes pip's sh trampoline instead of `#!python` when the python it ran with (envlock's own) has a path a
    kernel would not take: the moved script kept `exec '<envlock's python>'` (a fresh clone's suite under a 96-character
    TMPDIR, its venv inside it, showed torchrun running the suite's venv python, not the env's)."""
    from envlock.seams.pypi.wheels import _with_shebang

    body = "# -*- coding: utf-8 -*-\nimport sys\nfrom torch.distributed.run import main\n"
    for env_python in ("/opt/env/bin/python3.11", "/opt/" + "d" * 130 + "/bin/python3.11"):
        out = _with_shebang((head + body).encode(), env_python).decode()
        assert out.endswith(body) and "envlock/bin/python" not in out and "/usr/bin/python3" not in out
        assert env_python in out.split("\n", 3)[0] + out.split("\n", 3)[1]
    assert _with_shebang(b"#!/bin/sh\necho hi\n", "/opt/env/bin/python3.11") == b"#!/bin/sh\necho hi\n"
