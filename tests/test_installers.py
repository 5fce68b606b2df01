"""Every tool that installs the lock gets envlock's activation (issue 23, "Who can install this lock").

With the real conda 26.7.1 (../shared/tools/conda, offline, packages from a cache seeded with the test channel's
files under their canonical URLs, as tests/test_conda.py sets it up) and the real conda-lock:

  * `conda create --file locks/<name>/conda-linux-64.lock`, `conda-lock install`: an env with the toolchain but
    no envlock activation. `envlock doctor -p` says so and names the one command that adds it; after
    `envlock hook -p PREFIX`, `conda activate` (bash, zsh, fish) gives exactly what `envlock run` gives, and
    doctor is green on the test channel's toolchain.
  * without envlock at all: the lock's own activate.sh / deactivate.sh, copied into the env's activate.d /
    deactivate.d, are conda hooks (conda sources them with its own arguments; they take $CONDA_PREFIX).
"""

from __future__ import annotations

import json

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.output import error_and_hint, flat

from tests.test_activation import snapshots
from tests.test_conda import ENVLOCK, _hook, _shell, _view, conda_env, conda_venv  # noqa: F401 - fixtures
from tests.test_create import lock_of, project  # noqa: F401 - session fixture

OLD_CUDA = "/usr/local/cuda-11.8"  # what the user's shell had: conda activate must not leave it


def _conda(venv: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([f"{venv}/bin/python", "-m", "conda", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def _envlock(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def conda_made(conda_venv: Path, conda_env: dict[str, str], project: Path,  # noqa: F811
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`conda create --offline -p T --file locks/<name>/conda-linux-64.lock` (conda refuses spaces in T; the
    tests copy it to paths with one)."""
    target = tmp_path_factory.mktemp("conda-made") / "cu121"
    explicit = lock_of(project).parent / "conda-linux-64.lock"
    done = _conda(conda_venv, "create", "--offline", "-p", str(target), "--file", str(explicit), env=conda_env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (target / "bin" / "nvcc").is_file() and not (target / "etc" / "conda" / "activate.d" / "envlock-cuda.sh").exists()
    return target


def _copy_env(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def _doors(venv: Path, env: dict[str, str], prefix: Path, shell: str, tmp: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(what `conda activate PREFIX` leaves in `shell`, what `envlock run -p PREFIX` runs a command in)."""
    exe = _shell(shell)
    (via_conda,) = snapshots(exe, [_hook(shell, venv) + f"; conda activate '{prefix}'"], env, tmp)
    run = " ".join(f"'{a}'" for a in ENVLOCK) + f" run -p '{prefix}' -- /usr/bin/env -0 > '{tmp}/run'"
    snapshots(exe, [run], env, tmp)
    via_run = dict(item.split("=", 1) for item in (tmp / "run").read_bytes().decode().split("\0") if item)
    condabin = f"{venv}/condabin"
    return _view(via_conda, condabin), _view(via_run, condabin)


def test_doctor_names_the_missing_activation_and_envlock_hook_adds_it(conda_venv: Path, conda_env: dict[str, str],  # noqa: F811
                                                                     conda_made: Path, tmp_path: Path) -> None:
    env = {**conda_env, "CUDA_HOME": OLD_CUDA}
    spaced = _copy_env(conda_made, tmp_path / "env copy")
    before = _envlock("doctor", "-p", str(spaced), env=env)
    assert before.returncode == 1
    assert any(ln.startswith("error") and "env.activation" in ln for ln in before.stdout.splitlines())
    # one line per check (cut to 80 columns); the whole message and its fix under "what to do" (folded)
    advice = flat(before.stdout.split("what to do:", 1)[1])  # a long temp path is cut after a "/"
    line = advice.split("env.activation (error): ", 1)[1]
    assert "no envlock activation hook" in line and f"CUDA_HOME={OLD_CUDA}" in line
    assert f"fix: add it once: envlock hook -p '{spaced}'" in advice  # the exact command, quoted
    # (doctor runs the env's CXX as a command line, so a green run needs a path without spaces)
    target = _copy_env(conda_made, tmp_path / "env-copy")
    added = _envlock("hook", "-p", str(target), env=env)
    assert added.returncode == 0, added.stderr
    assert "wrote " + str(target / "etc/conda/activate.d/envlock-cuda.sh") in flat(added.stderr)  # folded at 80
    after = _envlock("doctor", "-p", str(target), env=env)
    assert after.returncode == 0, after.stdout  # green: no error finding
    assert "env.activation" not in after.stdout and after.stdout.splitlines()[-1].startswith("0 error(s)")
    target_line = json.loads(_envlock("doctor", "-p", str(target), "--json", env=env).stdout)["findings"][0]
    assert "conda environment with envlock's activation (envlock hook)" in target_line["message"]  # (cut at 80 above)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_after_envlock_hook_conda_activate_gives_envlock_run_s_variables(
    conda_venv: Path, conda_env: dict[str, str], conda_made: Path, tmp_path: Path, shell: str  # noqa: F811
) -> None:
    target = _copy_env(conda_made, tmp_path / "hooked")
    env = {**conda_env, "CUDA_HOME": OLD_CUDA, "CPATH": "/opt/inc"}
    assert _envlock("hook", "-p", str(target), env=env).returncode == 0
    via_conda, via_run = _doors(conda_venv, env, target, shell, tmp_path)
    assert via_conda == via_run
    assert via_conda["CUDA_HOME"] == via_conda["CUDA_PATH"] == str(target)
    assert via_conda["CPATH"] == f"{target}/targets/x86_64-linux/include:/opt/inc"
    assert via_conda["CXX"] == f"{target}/bin/x86_64-conda-linux-gnu-c++"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_without_envlock_the_locks_own_scripts_are_conda_hooks(conda_venv: Path, conda_env: dict[str, str],  # noqa: F811
                                                               conda_made: Path, project: Path,  # noqa: F811
                                                               tmp_path: Path, shell: str) -> None:
    """The documented step for a machine without envlock: copy locks/<name>/activate.sh and deactivate.sh into
    the env. conda sources them with its own arguments (`activate`): before issue 23 that failed with
    "no conda environment at 'activate'"."""
    target = _copy_env(conda_made, tmp_path / "copied")
    locks = lock_of(project).parent
    for kind in ("activate", "deactivate"):
        folder = target / "etc" / "conda" / f"{kind}.d"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(locks / f"{kind}.sh", folder / "envlock-cuda.sh")
    env = {**conda_env, "CUDA_HOME": OLD_CUDA}
    via_conda, via_run = _doors(conda_venv, env, target, shell, tmp_path)
    assert via_conda == via_run and via_conda["CUDA_HOME"] == str(target)
    assert via_conda["CPATH"].split(":")[0] == f"{target}/targets/x86_64-linux/include"
    exe = _shell(shell)
    start = _hook(shell, conda_venv) + f"; conda activate '{target}'"
    again, after = snapshots(exe, [start + f"; conda activate '{target}'", "conda deactivate"], env, tmp_path)
    assert again["CUDA_HOME"] == str(target)  # conda's reactivation (`reactivate`) keeps it
    assert after["CUDA_HOME"] == OLD_CUDA and f"{target}/bin" not in after["PATH"].split(":")
    assert after.get("CPATH", "") == ""  # conda "unsets" with export X=''


def _finding(doc: dict, code: str) -> dict:
    return next(f for f in doc["findings"] if f["code"] == code)


def test_envlock_hook_records_the_anchor_of_the_lock_the_env_was_installed_from(
    conda_made: Path, conda_env: dict[str, str], project: Path, tmp_path: Path  # noqa: F811
) -> None:
    """Issue 34 item 8: after `envlock hook`, doctor compared nvcc with nothing on an env without torch
    (nvcc.skew and nvcc.deepspeed skipped) though the lock it was installed from names its anchor."""
    env = {**conda_env, "CUDA_HOME": OLD_CUDA}
    target = _copy_env(conda_made, tmp_path / "anchored")
    added = _envlock("hook", "-p", str(target), "--project-dir", str(project), env=env)
    assert added.returncode == 0, added.stderr
    assert "anchor recorded from " + str(lock_of(project)) in flat(added.stderr)
    doc = json.loads(_envlock("doctor", "-p", str(target), "--json", env=env).stdout)
    skew = _finding(doc, "nvcc.skew")
    assert skew["severity"] == "ok", skew
    assert "the lock's anchor (torch 2.3.0)" in skew["message"] and "CUDA 12.1" in skew["message"]
    assert _finding(doc, "nvcc.deepspeed")["severity"] != "skipped"
    # the same env hooked outside any project: the hook says why it recorded no anchor, doctor skips as before
    bare = _copy_env(conda_made, tmp_path / "bare")
    elsewhere = tmp_path / "no-project"
    elsewhere.mkdir()
    plain = _envlock("hook", "-p", str(bare), "--project-dir", str(elsewhere), env=env)
    assert plain.returncode == 0, plain.stderr
    assert "no anchor recorded: " in flat(plain.stderr) and "--lock NAME|FILE" in flat(plain.stderr)
    doc = json.loads(_envlock("doctor", "-p", str(bare), "--json", env=env).stdout)
    assert _finding(doc, "nvcc.skew")["severity"] == "skipped"
    # what that message says to do works: --lock names the lock (from anywhere)
    named = _envlock("hook", "-p", str(bare), "--lock", str(lock_of(project)), "--project-dir", str(elsewhere), env=env)
    assert named.returncode == 0, named.stderr
    doc = json.loads(_envlock("doctor", "-p", str(bare), "--json", env=env).stdout)
    assert _finding(doc, "nvcc.skew")["severity"] == "ok"


def test_envlock_hook_refuses_a_named_lock_whose_packages_are_not_the_env_s(
    conda_made: Path, conda_env: dict[str, str], project: Path, tmp_path: Path  # noqa: F811
) -> None:
    target = _copy_env(conda_made, tmp_path / "other")
    record = next((target / "conda-meta").glob("cuda-nvcc-*.json"))
    record.rename(record.with_name("cuda-nvcc-0.0.1-h0_0.json"))  # the env now holds a package the lock lacks
    done = _envlock("hook", "-p", str(target), "--lock", str(lock_of(project)), env=conda_env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: the env's packages are not") and "1 of the lock's are not installed" in flat(done.stderr)
    assert any(ln.startswith("hint: ") for ln in lines) and "Traceback" not in done.stderr
    assert not (target / "etc" / "conda" / "activate.d" / "envlock-cuda.sh").exists()  # nothing written


def test_the_files_a_conda_user_starts_from_name_the_hook_step(project: Path) -> None:  # noqa: F811
    """Issue 34 item 8: the hook step was only in environment-<platform>.yml's header."""
    folder = lock_of(project).parent
    name = folder.name
    for path in (folder / "conda-lock.yml", folder / "conda-linux-64.lock", folder / "environment-linux-64.yml",
                 project / "environments" / f"{name}.yml"):
        head = "".join(ln for ln in path.read_text().splitlines(keepends=True)[:6] if ln.startswith("#"))
        assert "envlock hook -p PREFIX" in head, path
    assert "conda create -p PREFIX --file conda-linux-64.lock" in (folder / "conda-linux-64.lock").read_text()
    # the copy loop is bash/zsh only, as the docs say: the lock ships no fish script for conda's fish activation
    assert not list(folder.glob("*.fish"))


def test_after_the_copy_loop_doctor_names_envlock_hook_not_chmod(conda_made: Path, conda_env: dict[str, str],
                                                                 project: Path, tmp_path: Path) -> None:  # noqa: F811
    """Issue 34 item 8: the loop writes no record; doctor's fix was `chmod a+r …/conda-meta/*` (no record to read)."""
    target = _copy_env(conda_made, tmp_path / "looped")
    for kind in ("activate", "deactivate"):
        folder = target / "etc" / "conda" / f"{kind}.d"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(lock_of(project).parent / f"{kind}.sh", folder / "envlock-cuda.sh")
    doc = json.loads(_envlock("doctor", "-p", str(target), "--json", env=conda_env).stdout)
    found = _finding(doc, "env.target")
    assert found["severity"] == "warning" and "no record conda-meta/envlock" in found["message"]
    assert found["hint"].startswith(f"record it: envlock hook -p {target}") and "chmod" not in found["hint"]
    done = _envlock("hook", "-p", str(target), "--project-dir", str(project), env=conda_env)  # the fix, as written
    assert done.returncode == 0, done.stderr
    doc = json.loads(_envlock("doctor", "-p", str(target), "--json", env=conda_env).stdout)
    assert _finding(doc, "env.target")["severity"] == "ok" and _finding(doc, "nvcc.skew")["severity"] == "ok"


def test_envlock_hook_refuses_a_hook_folder_that_leads_out_of_the_env(conda_made: Path, conda_env: dict[str, str],
                                                                      tmp_path: Path) -> None:
    """A hostile env: etc/conda/activate.d is a symlink to a folder outside it. Nothing is written there."""
    target = _copy_env(conda_made, tmp_path / "hostile")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(target / "etc" / "conda" / "activate.d")
    (target / "etc" / "conda" / "activate.d").symlink_to(outside)
    done = _envlock("hook", "-p", str(target), env=conda_env)
    assert done.returncode == 1 and done.stderr.count("error: ") == 1 and "hint: " in done.stderr, done.stderr
    error, hint = error_and_hint(done.stderr)  # folded to 80 columns: a long temp path moves words to other lines
    assert f"{target}/etc/conda/activate.d leads out of the environment" in error and "Traceback" not in done.stderr
    assert f"`envlock hook -p {target}` again" in hint
    assert list(outside.iterdir()) == [] and not (target / "etc" / "conda" / "deactivate.d" / "envlock-cuda.sh").exists()


def test_envlock_hook_usage_errors(conda_made: Path, conda_env: dict[str, str], tmp_path: Path) -> None:
    bad = _envlock("hook", "-p", str(conda_made), "--torch-source", "condaforge", env=conda_env)
    assert bad.returncode == 2 and "did you mean --torch-source conda-forge" in bad.stderr
    missing = _envlock("hook", "-p", str(tmp_path / "nothing"), env=conda_env)
    assert missing.returncode == 1 and "is not a conda environment" in " ".join(missing.stderr.split())


def test_conda_lock_install_then_envlock_hook(conda_venv: Path, conda_env: dict[str, str], project: Path,  # noqa: F811
                                              tmp_path: Path) -> None:
    """The real `conda-lock install` (conda-lock's own renderer, then `conda create --file`) offline, with the
    real conda; conda-lock wants a `conda` executable, and a venv's bin/conda is conda's pip-installed stub
    ("Conda has not been initialized"), so a two-line shim runs `python -m conda`."""
    shim = tmp_path / "bin" / "conda"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{conda_venv}/bin/python" -m conda "$@"\n')
    shim.chmod(0o755)
    target = tmp_path / "conda-lock-env"  # conda refuses spaces
    done = subprocess.run([sys.executable, "-m", "conda_lock", "install", "--conda", str(shim), "-p", str(target),
                           str(lock_of(project))], env={**conda_env, "PATH": f"{shim.parent}:{conda_env['PATH']}"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (target / "bin" / "nvcc").is_file()
    env = {**conda_env, "CUDA_HOME": OLD_CUDA}
    assert _envlock("hook", "-p", str(target), env=env).returncode == 0
    via_conda, via_run = _doors(conda_venv, env, target, "bash", tmp_path)
    assert via_conda == via_run and via_conda["CUDA_HOME"] == str(target)
    assert os.path.isfile(via_conda["CUDA_HOME"] + "/targets/x86_64-linux/include/cusparse.h")


def test_a_conda_packed_env_keeps_the_activation_where_it_is_unpacked(conda_made: Path, project: Path,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    """conda-pack of a conda-made env with the lock's own scripts as hooks: they read $CONDA_PREFIX, so after
    the archive is unpacked elsewhere (conda-unpack, then conda-pack's bin/activate) CUDA_HOME is the new
    place with nothing to rewrite (an env of `envlock create`: tests/test_conda_pack.py)."""
    conda_pack = Path(sys.executable).parent / "conda-pack"
    if not conda_pack.is_file():
        pytest.skip("conda-pack is not installed (pip install -e '.[test]')")
    original = _copy_env(conda_made, tmp_path / "built" / "cu121")
    for kind in ("activate", "deactivate"):
        (original / "etc" / "conda" / f"{kind}.d").mkdir(parents=True, exist_ok=True)
        shutil.copy(lock_of(project).parent / f"{kind}.sh", original / "etc" / "conda" / f"{kind}.d" / "envlock-cuda.sh")
    archive = tmp_path / "env.tar.gz"
    done = subprocess.run([str(conda_pack), "-p", str(original), "-o", str(archive)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    original.rename(tmp_path / "built" / "gone")
    moved = tmp_path / "elsewhere" / "train-env"
    moved.mkdir(parents=True)
    import tarfile

    with tarfile.open(archive) as tf:
        tf.extractall(moved, filter="tar")
    done = subprocess.run([sys.executable, str(moved / "bin" / "conda-unpack")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    script = f". '{moved}/bin/activate'; printf '%s\\n' \"$CUDA_HOME\" \"$(command -v nvcc)\" \"$CPATH\""
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CUDA_HOME": OLD_CUDA})
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.splitlines() == [str(moved), f"{moved}/bin/nvcc", f"{moved}/targets/x86_64-linux/include"]


# --------------------------------------------------------------------------- a spec conda itself can use


def _conda_home(channel_root: Path, home: Path, subdirs: tuple[str, ...] = ("linux-64", "noarch")) -> dict[str, str]:
    """What tests/test_conda.py's conda_env sets up, for another channel root."""
    pkgs = home / "pkgs"
    pkgs.mkdir(parents=True)
    urls = []
    for subdir in subdirs:
        for archive in sorted((channel_root / "conda-forge" / subdir).glob("*.tar.bz2")):
            shutil.copy(archive, pkgs / archive.name)
            urls.append(f"https://conda.anaconda.org/conda-forge/{subdir}/{archive.name}\n")
    (pkgs / "urls.txt").write_text("".join(urls))
    condarc = home / ".condarc"
    condarc.write_text(
        f"channel_alias: {channel_root.as_uri()}\nchannels: [conda-forge]\npkgs_dirs: [{pkgs}]\n"
        f"envs_dirs: [{home / 'envs'}]\nadd_pip_as_python_dependency: false\nsolver: classic\n"
        "auto_activate: false\nalways_yes: true\nnotify_outdated_conda: false\n")
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "CONDARC": str(condarc), "LC_ALL": "C.UTF-8",
            "ENVLOCK_CACHE_DIR": str(home / "envlock-cache"), "CONDA_OVERRIDE_CUDA": "12.1"}


@pytest.fixture(scope="module")
def two_platform(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A toolchain-only lock for linux-64 + linux-aarch64 from a test channel that has ninja (as conda-forge
    does), and a conda user's environment for it (packages cached under their canonical URLs)."""
    from tests.channelbuilder import PackageSpec, build_channel

    root = tmp_path_factory.mktemp("ninja-channel")
    build_channel(root, cuda_minors=["12.1"], subdirs=("linux-64", "linux-aarch64"), with_pytorch=False,
                  with_cuda11=False, extra=[PackageSpec("ninja", "1.11.1", subdir=s, files={"bin/ninja": "#!/bin/sh\necho 1.11.1\n"},
                                     executables={"bin/ninja"}) for s in ("linux-64", "linux-aarch64")])
    project = tmp_path_factory.mktemp("two-platform")
    env = _conda_home(root, tmp_path_factory.mktemp("conda-home-2"))
    done = _envlock("resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--platform",
                    "linux-aarch64", "--mirror", f"conda-forge={(root / 'conda-forge').as_uri()}", "--project-dir",
                    str(project), env=env)
    assert done.returncode == 0, done.stderr
    return project, env


def test_the_spec_holds_what_the_lock_needs_and_conda_env_create_reads_each_platform(
    conda_venv: Path, two_platform: tuple[Path, dict[str, str]], tmp_path: Path  # noqa: F811
) -> None:
    project, env = two_platform
    name = "torch2.3.0-cu121"
    spec = (project / "environments" / f"{name}.yml").read_text()
    assert "  - ninja\n" in spec  # in the lock (the channel has it), so in the spec
    # The spec itself names both platforms' compilers behind `# [aarch64]` selectors, which conda does not read:
    both = _conda(conda_venv, "env", "create", "-p", str(tmp_path / "both"), "-f",
                  str(project / "environments" / f"{name}.yml"), env=env)
    assert both.returncode != 0 and "gcc_linux-aarch64" in both.stdout + both.stderr
    # The per-platform file beside the lock: no selectors, no `platforms:` / `envlock:` keys.
    per = project / "locks" / name / "environment-linux-64.yml"
    assert "aarch64" not in per.read_text() and "envlock:" not in per.read_text()
    target = tmp_path / "from-spec"
    done = _conda(conda_venv, "env", "create", "-p", str(target), "-f", str(per), env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "EnvironmentSectionNotValid" not in done.stdout + done.stderr
    names = {p.stem.rsplit("-", 2)[0] for p in (target / "conda-meta").glob("*.json")}
    assert {"ninja", "cuda-nvcc", "gxx_linux-64", "libcusparse-dev", "cudnn"} <= names
    assert (target / "bin" / "ninja").exists()
    assert "linux-aarch64" in (project / "locks" / name / "environment-linux-aarch64.yml").read_text().splitlines()[0]
    assert "gcc_linux-aarch64" in (project / "locks" / name / "environment-linux-aarch64.yml").read_text()
    # ...plus the documented step: conda activate gives the env's CUDA_HOME and its ninja.
    assert _envlock("hook", "-p", str(target), env=env).returncode == 0
    via_conda, via_run = _doors(conda_venv, {**env, "CUDA_HOME": OLD_CUDA}, target, "bash", tmp_path)
    assert via_conda == via_run and via_conda["CUDA_HOME"] == str(target)


# --------------------------------------------------------------------------- conda behind a mirror


def test_conda_installs_the_lock_from_a_file_mirror_offline(conda_venv: Path, project: Path,  # noqa: F811
                                                          test_channel_url: str, tmp_path: Path) -> None:
    """`envlock mirror DIR`, then `envlock export explicit --mirror conda-forge=DIR`: the real conda installs that
    file offline with an empty package cache and no channel configured. The lock's own @EXPLICIT file names
    the canonical URLs, which conda's channel_alias does not redirect: offline it cannot install them."""
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    mirror = tmp_path / "mirror"
    done = _envlock("mirror", "--project-dir", str(project), str(mirror), "--platform", "linux-64",
                    "--mirror", f"conda-forge={test_channel_url}", env=env)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "for-conda"
    done = _envlock("export", "explicit", "--project-dir", str(project), "--mirror", f"conda-forge={mirror}",
                    "--platform", "linux-64", "-o", str(out), env=env)
    assert done.returncode == 0, done.stderr
    text = (out / "conda-linux-64.lock").read_text()
    assert f"{mirror.as_uri()}/conda-forge/linux-64/" in text and "conda.anaconda.org" not in text.split("@EXPLICIT")[1]
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(f"pkgs_dirs: [{home / 'pkgs'}]\nsolver: classic\nalways_yes: true\n"
                                   "add_pip_as_python_dependency: false\nnotify_outdated_conda: false\n")
    conda_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "CONDARC": str(home / ".condarc"),
                 "LC_ALL": "C.UTF-8"}
    canonical = _conda(conda_venv, "create", "--offline", "-p", str(tmp_path / "canonical"), "--file",
                       str(lock_of(project).parent / "conda-linux-64.lock"), env=conda_env)
    assert canonical.returncode != 0 and "conda.anaconda.org" in canonical.stdout + canonical.stderr
    target = tmp_path / "from-mirror"
    done = _conda(conda_venv, "create", "--offline", "-p", str(target), "--file", str(out / "conda-linux-64.lock"),
                  env=conda_env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from envlock.formats import read_lock

    wanted = {p.filename.removesuffix(".tar.bz2").removesuffix(".conda")
              for p in read_lock(lock_of(project)).packages_for("linux-64")}
    assert {p.stem for p in (target / "conda-meta").glob("*.json")} == wanted
    # envlock reads the file too (from the mirror's file:// URLs), and checks each package's sha256 against it
    created = _envlock("create", "--lock", str(out / "conda-linux-64.lock"), "-p", str(tmp_path / "by-envlock"),
                       "-q", env={**env, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache2")})
    assert created.returncode == 0, created.stderr


def test_export_explicit_refuses_what_it_must_not_write(project: Path, tmp_path: Path) -> None:  # noqa: F811
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ENVLOCK_MIRRORS", None)
    base = ["export", "explicit", "--project-dir", str(project)]
    none = _envlock(*base, "-o", str(tmp_path / "a"), env=env)
    assert none.returncode == 2 and "no mirror in force" in none.stderr
    typo = _envlock(*base, "--mirror", "conda-forg=http://127.0.0.1:9/cf", "-o", str(tmp_path / "a"), env=env)
    # a --mirror that names no channel of the lock is the command line's fault: a usage error (issue 24's rule)
    assert typo.returncode == 2 and "names no channel in play" in flat(typo.stderr) and "conda-forge" in typo.stderr
    own = _envlock(*base, "--mirror", "conda-forge=http://127.0.0.1:9/cf", "-o", str(lock_of(project).parent), env=env)
    assert own.returncode == 1 and "the lock's own @EXPLICIT file" in error_and_hint(own.stderr)[0], own.stderr
    several = _envlock(*base, "--mirror", "conda-forge=http://127.0.0.1:9/cf", "-o", "-", env=env)
    assert several.returncode == 2 and "--platform" in several.stderr
    # Credentials in a mirror URL are used by whoever fetches, never written.
    secret = _envlock(*base, "--mirror", "conda-forge=https://envuser:s3cr3t@127.0.0.1:9/cf", "--platform",
                      "linux-64", "-o", "-", env=env)
    assert secret.returncode == 0 and "https://127.0.0.1:9/cf/linux-64/" in secret.stdout
    assert "s3cr3t" not in secret.stdout + secret.stderr and "envuser" not in secret.stdout + secret.stderr
    first = _envlock(*base, "--mirror", "conda-forge=http://127.0.0.1:9/cf", "-o", str(tmp_path / "b"), env=env)
    again = _envlock(*base, "--mirror", "conda-forge=http://127.0.0.1:9/cf", "-o", str(tmp_path / "b"), env=env)
    assert first.returncode == 0 and again.returncode == 1 and "--force" in again.stderr
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "conda-linux-64.lock", "conda-linux-aarch64.lock", "conda-win-64.lock"]


# --------------------------------------------------------------------------- pixi's library


def test_py_rattler_reads_and_installs_the_lock_as_pixi_would(project: Path, test_channel_url: str,  # noqa: F811
                                                              tmp_path: Path) -> None:
    """No pixi or micromamba binary can be had here (not on PyPI, not in Debian, conda-forge unreachable), so the
    library pixi is built on: py-rattler's own LockFile.from_path reads the lock and its own install() links the
    records it gives (packages from a package cache an `envlock create` filled: no channel is reachable). Then
    `envlock hook` gives that env envlock's activation."""
    import asyncio

    import rattler

    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    done = _envlock("create", "--lock", str(lock_of(project)), "-p", str(tmp_path / "filler"), "--platform", "linux-64",
                    "--mirror", f"conda-forge={test_channel_url}", "-q", env=env)
    assert done.returncode == 0, done.stderr
    lock_env = rattler.LockFile.from_path(lock_of(project)).default_environment()
    assert lock_env is not None
    platform = next(p for p in lock_env.platforms() if p.name == "linux-64")
    records = lock_env.conda_repodata_records_for_platform(platform)
    target = tmp_path / "by-rattler"
    # the entries envlock extracted live in the user's own store (issue 33.1), not in the shared pkgs/ folder
    entries = tmp_path / "cache" / "pkgs" / ".envlock-trust" / str(os.geteuid()) / "entries"
    asyncio.run(rattler.install(records, target_prefix=target, cache_dir=entries,
                                show_progress=False, execute_link_scripts=False))
    assert {p.stem for p in (target / "conda-meta").glob("*.json")} == {
        r.url.rsplit("/", 1)[1].removesuffix(".tar.bz2").removesuffix(".conda") for r in records}
    assert _envlock("hook", "-p", str(target), env=env).returncode == 0
    run = _envlock("run", "-p", str(target), "--", "printenv", "CUDA_HOME", "CPATH", env={**env, "CUDA_HOME": OLD_CUDA})
    assert run.stdout.split() == [str(target), f"{target}/targets/x86_64-linux/include"], run.stderr
