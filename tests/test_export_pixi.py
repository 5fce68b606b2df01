"""`envlock export pixi` (issue 36): a pixi workspace of a lock, checked by the readers pixi itself uses.

No pixi binary can be had on this machine (the index's `pixi` is a Pixiv downloader, the npm registry's a 2D
renderer, and pixi's own releases are downloads from its repository), so pixi's parts stand in:
* the pixi.lock: rattler_lock (py-rattler's `LockFile.from_path`, the crate pixi reads its lock with), and
  rattler's installer (pixi's) links the lock's records into `.pixi/envs/default`, fetched by URL through a
  `MirrorMiddleware` (what pixi's `[mirrors]` configuration is) and checked by sha256;
* the manifest: tomllib, and pixi's own manifest JSON schema (pixi's `schema/model.py` output, as published
  in the pinned `validate-pyproject-schema-store` test dependency: "Generated from pixi v0.81.0");
* the activation: rattler_shell's order in a real bash (PATH, CONDA_PREFIX, the packages' activate.d
  scripts, then the manifest's scripts and its env table, either way round: pixi up to 0.6x applied the env
  table before the scripts, rattler_shell now after).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from envlock.core.tables import variant_index_url
from envlock.formats import read_lock
from tests.output import error_and_hint

ENVLOCK = [sys.executable, "-m", "envlock"]
NAME = "torch2.7.1-cu126"
CANONICAL_CF = "https://conda.anaconda.org/conda-forge"


def envlock(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def iso(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of the module's fixtures' envlock runs: envlock's cache and config of the test session
    (tests/conftest.py's _isolated_cache sets them for each test, after module fixtures are made)."""
    base = tmp_path_factory.getbasetemp()
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(base / "envlock-cache"),
           "ENVLOCK_CONFIG_DIR": str(base / "envlock-user-config")}
    env.pop("ENVLOCK_MIRRORS", None)
    return env


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, test_channel_url: str, wheel_index: Any, iso: dict[str, str]) -> Path:
    """A full lock (conda + PyPI) for linux-64 and win-64, torch from its CUDA variant's index."""
    root = tmp_path_factory.mktemp("pixi-full")
    done = envlock("resolve", "--torch", "2.7.1+cu126", "--platform", "linux-64", "--platform", "win-64",
                   "--mirror", f"conda-forge={test_channel_url}",
                   "--mirror", f"{variant_index_url('cu126')}={wheel_index.variant_url('cu126')}",
                   "--project-dir", str(root), env=iso)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def exported(full: Path, tmp_path_factory: pytest.TempPathFactory, iso: dict[str, str]) -> Path:
    out = tmp_path_factory.mktemp("pixi-out") / "ws"
    done = envlock("export", "pixi", "--project-dir", str(full), "-o", str(out), env=iso)
    assert done.returncode == 0, done.stderr
    return out


def _lock(project: Path) -> Any:
    return read_lock(project / "locks" / NAME / "conda-lock.yml")


def test_help_names_the_commands_a_pixi_user_runs() -> None:
    done = envlock("export", "pixi", "--help")
    assert done.returncode == 0, done.stderr
    assert "pixi install" in done.stdout and "--frozen" in done.stdout and "--feature" in done.stdout


# --------------------------------------------------------------------------- pixi.lock, read by rattler


def test_rattler_reads_exactly_the_locks_packages_per_platform(full: Path, exported: Path) -> None:
    from rattler import LockFile

    lock = _lock(full)
    lf = LockFile.from_path(exported / "pixi.lock")
    assert [name for name, _ in lf.environments()] == ["default"]
    env = lf.default_environment()
    assert [str(c) for c in env.channels()] == [f"{CANONICAL_CF}/"]
    assert sorted(str(p) for p in env.platforms()) == ["linux-64", "win-64"]
    for platform in lf.platforms():
        records = env.conda_repodata_records_for_platform(platform)
        got = sorted((r.name.normalized, str(r.version), str(r.build), r.sha256.hex(), r.md5.hex(), r.url,
                      tuple(r.depends), r.subdir) for r in records)
        want = sorted((p.name, p.version, p.build, p.sha256, p.md5, p.url, tuple(p.depends), p.subdir)
                      for p in lock.packages_for(platform.name))
        assert got == want and len(want) > 10
        wheels = sorted((str(w.name), str(w.version), w.location, w.hashes.sha256.hex())
                        for w in env.pypi_packages()[platform.name])
        assert wheels == sorted((w.name, w.version, w.url, w.sha256) for w in lock.pypi_for(platform.name))
        assert any(w[0] == "torch" and w[1] == "2.7.1+cu126" for w in wheels)


def test_same_lock_same_bytes_and_a_second_export_rewrites_nothing(full: Path, exported: Path,
                                                                   tmp_path: Path) -> None:
    copy = shutil.copytree(full, tmp_path / "elsewhere" / "project")
    out = tmp_path / "ws"
    assert envlock("export", "pixi", NAME, "--project-dir", str(copy), "-o", str(out)).returncode == 0
    names = sorted(p.name for p in exported.iterdir())
    assert names == sorted(p.name for p in out.iterdir()) == ["envlock-activate.bat", "envlock-activate.sh",
                                                             "pixi.lock", "pixi.toml"]
    assert all((out / n).read_bytes() == (exported / n).read_bytes() for n in names)
    mtimes = {n: (out / n).stat().st_mtime_ns for n in names}
    again = envlock("export", "pixi", NAME, "--project-dir", str(copy), "-o", str(out))
    assert again.returncode == 0 and "unchanged" in again.stderr
    assert {n: (out / n).stat().st_mtime_ns for n in names} == mtimes


# --------------------------------------------------------------------------- pixi.toml, against pixi's schema


def pixi_schema(*, pyproject: bool = False) -> dict[str, Any]:
    """pixi's manifest schema. The store ships pixi's `[tool.pixi]` schema (schema/pyproject/partial-pixi.json of
    pixi's repository); pixi's pixi.toml schema (schema/schema.json) is the same model with `$schema` allowed, no
    other top-level key, and one of package/project/workspace required (pixi's model.py: ANY_OF_TOP_LEVEL)."""
    text = resources.files("validate_pyproject_schema_store").joinpath("resources", "pixi.schema.json").read_text()
    schema = json.loads(text)
    assert "Generated from `pixi` v" in schema["$comment"]
    if pyproject:
        return schema
    return {**schema, "properties": {**schema["properties"], "$schema": {"type": "string"}},
            "additionalProperties": False, "anyOf": [{"required": [k]} for k in ("package", "project", "workspace")]}


def schema_errors(doc: dict[str, Any], *, pyproject: bool = False) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(pixi_schema(pyproject=pyproject))
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_manifest_validates_against_pixis_schema_and_pins_what_is_locked(full: Path, exported: Path) -> None:
    doc = tomllib.loads((exported / "pixi.toml").read_text())
    assert schema_errors(doc) == []
    broken = json.loads(json.dumps(doc))
    broken["target"]["linux-64"]["activation"]["script"] = ["x.sh"]  # a typo pixi refuses: so does the check
    broken["workspace"]["channels"] = "conda-forge"
    assert len(schema_errors(broken)) == 2
    lock = _lock(full)
    assert doc["workspace"]["channels"] == ["conda-forge"] and doc["workspace"]["platforms"] == ["linux-64", "win-64"]
    assert doc["system-requirements"] == {"cuda": "12.6"}
    for platform in ("linux-64", "win-64"):
        locked = {p.name: p.version for p in lock.packages_for(platform)}
        pins = {**doc.get("dependencies", {}), **doc["target"][platform].get("dependencies", {})}
        assert {"cuda-nvcc", "cuda-version", "python"} <= set(pins)
        assert all(spec == f"=={locked[name]}" for name, spec in pins.items())
        wheels = {w.name: w.version for w in lock.pypi_for(platform)}
        pypi = {**doc.get("pypi-dependencies", {}), **doc["target"][platform].get("pypi-dependencies", {})}
        assert pypi["torch"] == {"version": f"=={wheels['torch']}", "index": variant_index_url("cu126")}
        assert pypi["ninja"] == f"=={wheels['ninja']}"
    linux = doc["target"]["linux-64"]["activation"]
    assert linux["scripts"] == ["envlock-activate.sh"]
    assert linux["env"]["CUDA_HOME"] == "$CONDA_PREFIX"
    assert linux["env"]["CUDA_INC_PATH"] == "$CONDA_PREFIX/targets/x86_64-linux/include"
    assert doc["target"]["win-64"]["activation"]["env"]["CUDA_HOME"] == "%CONDA_PREFIX%\\Library"


# --------------------------------------------------------------------------- the other way: installed as pixi does


def install_as_pixi(workspace: Path, channel_server: Any, wheel_index: Any) -> Path:
    """What `pixi install --frozen` does: the conda part's records, linked by rattler's installer into
    .pixi/envs/default, every archive fetched by its URL through the mirror (pixi's `[mirrors]`) and checked by
    sha256; then the PyPI part, each wheel by the pixi.lock's URL and sha256, with uv (pixi's installer of it;
    here through envlock's own uv call, as `envlock create` makes it); and pixi's marker conda-meta/pixi
    (pixi_core's EnvironmentFile, which pixi writes after an install)."""
    import asyncio

    from rattler import Client, LockFile, Subdir, install
    from rattler.networking import MirrorMiddleware

    from envlock.models import PypiPackage
    from envlock.seams.pypi.wheels import fetch_wheels, install_wheels

    env = LockFile.from_path(workspace / "pixi.lock").default_environment()
    linux = next(p for p in env.platforms() if p.name == "linux-64")
    records = env.conda_repodata_records_for_platform(linux)
    prefix = workspace / ".pixi" / "envs" / "default"
    client = Client([MirrorMiddleware({f"{CANONICAL_CF}/": [channel_server.channel_url("conda-forge")]})])
    asyncio.run(install(records, target_prefix=prefix, cache_dir=workspace / "pkgs", platform=Subdir("linux-64"),
                        client=client, show_progress=False, execute_link_scripts=False))
    wheels = [PypiPackage(str(w.name), str(w.version), "linux-64", w.location, w.hashes.sha256.hex())
              for w in env.pypi_packages()["linux-64"]]
    paths, _ = fetch_wheels(wheels, workspace / "wheels", offline=False,
                            mirrors={variant_index_url("cu126"): wheel_index.variant_url("cu126")})
    python = next(str(r.version) for r in records if r.name.normalized == "python")
    install_wheels(prefix, paths, platform="linux-64", python=".".join(python.split(".")[:2]), glibc="2.28",
                   cache=workspace / "wheels")
    (prefix / "conda-meta" / "pixi").write_text(json.dumps({
        "manifest_path": str(workspace / "pixi.toml"), "environment_name": "default", "pixi_version": "0.81.0",
        "environment_lock_file_hash": "0" * 16}, indent=2))
    return prefix


#: What uv writes beside a wheel's files about the install itself (the wheel's path then, a cache key, and RECORD's
#: hashes of those): they differ between any two installs of the same wheel.
INSTALLER_NOTES = ("direct_url.json", "uv_cache.json", "RECORD")


def tree(prefix: Path) -> dict[str, Any]:
    """Every file and link of an env (bytes, mode, link target), less conda-meta/ and envlock's own hook files."""
    out: dict[str, Any] = {}
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        if rel.split("/")[0] == "conda-meta" or "/envlock-cuda." in rel or rel == "CACHEDIR.TAG":
            continue
        if rel.rsplit("/", 1)[-1] in INSTALLER_NOTES and ".dist-info/" in rel:
            out[rel] = "installer's note"  # uv's: the path it installed the wheel from, and their hashes
            continue
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out


def doctor(prefix: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """code -> severity of each finding of `envlock doctor -p PREFIX --json`."""
    done = envlock("doctor", "-p", str(prefix), "--json", env=env)
    return {f["code"]: f["severity"] for f in json.loads(done.stdout)["findings"]}


@pytest.fixture(scope="module")
def envs(exported: Path, full: Path, channel_server: Any, wheel_index: Any, test_channel_url: str,
         tmp_path_factory: pytest.TempPathFactory, iso: dict[str, str]) -> dict[str, Any]:
    """`envlock create`'s env, observed, then removed, and the same prefix installed as pixi does (prefix paths
    are in files: both are made at .pixi/envs/default of one workspace, whose path has shell characters; not a
    space, which create refuses since nvcc cannot read it in NVCC_PREPEND_FLAGS: tests/test_prefix_path.py)."""
    ws = shutil.copytree(exported, tmp_path_factory.mktemp("pixi(ws)&") / "ws")
    prefix = ws / ".pixi" / "envs" / "default"
    done = envlock("create", "--project-dir", str(full), "-p", str(prefix), "--platform", "linux-64",
                   "--mirror", f"conda-forge={test_channel_url}",
                   "--mirror", f"{variant_index_url('cu126')}={wheel_index.variant_url('cu126')}", env=iso)
    assert done.returncode == 0, done.stderr
    created = {"tree": tree(prefix), "records": sorted(p.name for p in (prefix / "conda-meta").glob("*.json")),
               "doctor": doctor(prefix, iso)}
    shutil.rmtree(prefix)
    install_as_pixi(ws, channel_server, wheel_index)
    return {"prefix": prefix, "created": created}


@pytest.fixture(scope="module")
def pixi_env(envs: dict[str, Any]) -> Path:
    return envs["prefix"]


def test_rattler_installs_the_export_with_the_files_envlock_create_installs(envs: dict[str, Any]) -> None:
    have, want = tree(envs["prefix"]), envs["created"]["tree"]
    assert have.keys() == want.keys() and len(want) > 50
    assert have == want
    assert sorted(p.name for p in (envs["prefix"] / "conda-meta").glob("*.json")) == envs["created"]["records"]
    assert any(k.startswith("lib/python3.11/site-packages/torch/") for k in have)  # the PyPI part too


# --------------------------------------------------------------------------- activation, as pixi applies it


def _pixi_activation(prefix: Path, manifest: dict[str, Any], workspace: Path, *, env_first: bool,
                     base: dict[str, str]) -> dict[str, str]:
    """rattler_shell's activation script for bash (Activator::activation), run in a real bash: PATH, CONDA_SHLVL,
    CONDA_PREFIX, the packages' activate.d scripts, the manifest's scripts, the manifest's env table (`export K="V"`
    where V holds a `$`, as rattler_shell's Bash::set_env_var writes it) before or after the scripts."""
    import shlex

    act = manifest["target"]["linux-64"]["activation"]
    env_lines = [f'export {k}="{v}"' for k, v in act["env"].items()]
    scripts = [f". {shlex.quote(str(p))}" for p in sorted((prefix / "etc/conda/activate.d").glob("*.sh"))]
    scripts += [f". {shlex.quote(str(workspace / s))}" for s in act["scripts"]]
    body = [f"export PATH={shlex.quote(str(prefix / 'bin'))}:\"$PATH\"", "export CONDA_SHLVL=1",
            f"export CONDA_PREFIX={shlex.quote(str(prefix))}"]
    body += env_lines + scripts if env_first else scripts + env_lines
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", "\n".join([*body, "env -0"])],
                          capture_output=True, text=True, env=base, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def _envlock_run(prefix: Path, base: dict[str, str]) -> dict[str, str]:
    done = subprocess.run([*ENVLOCK, "run", "-p", str(prefix), "--", sys.executable, "-c",
                           "import json, os; print(json.dumps(dict(os.environ)))"],
                          capture_output=True, text=True, env=base, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


#: What pixi's activation sets of its own, and envlock's records of what it changed (for its deactivation).
PIXIS_OWN = {"CONDA_SHLVL", "CONDA_DEFAULT_ENV", "CONDA_PROMPT_MODIFIER", "_", "SHLVL", "PWD", "OLDPWD"}


def _changes(env: dict[str, str], base: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if base.get(k) != v and k not in PIXIS_OWN
            and not (k.startswith("_ENVLOCK_") and k != "_ENVLOCK_PREFIX")}


@pytest.mark.parametrize("env_first", [True, False], ids=["env-then-scripts", "scripts-then-env"])
def test_the_activation_applied_as_pixi_applies_it_gives_what_envlock_run_gives(
        exported: Path, pixi_env: Path, env_first: bool) -> None:
    manifest = tomllib.loads((exported / "pixi.toml").read_text())
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
            "LD_LIBRARY_PATH": "/opt/x/lib",
            "ENVLOCK_PREFIX": "/somewhere/else"}  # a stray ENVLOCK_PREFIX must not move pixi's activation
    ws = pixi_env.parent.parent.parent
    pixi = _changes(_pixi_activation(pixi_env, manifest, ws, env_first=env_first, base=base), base)
    run = _changes(_envlock_run(pixi_env, base), base)
    assert pixi == run
    targets = f"{pixi_env}/targets/x86_64-linux"
    assert pixi["CUDA_HOME"] == str(pixi_env) and pixi["CPATH"] == f"{targets}/include"
    assert pixi["LD_LIBRARY_PATH"] == f"/opt/x/lib:{pixi_env}/lib"  # appended: torch comes from pip
    assert {"CC", "CXX", "NVCC_PREPEND_FLAGS"} <= set(pixi)  # the packages' own activation (pixi runs it too)


def test_doctor_on_the_env_pixi_installed_is_as_green_as_on_createds(envs: dict[str, Any]) -> None:
    have, want = doctor(envs["prefix"]), envs["created"]["doctor"]
    assert have == want
    assert "error" not in have.values() and have["env.target"] == "ok"


# --------------------------------------------------------------------------- check covers an export in locks/<name>/


def test_check_covers_an_export_written_beside_the_lock(full: Path, tmp_path: Path) -> None:
    project = shutil.copytree(full, tmp_path / "p")
    folder = project / "locks" / NAME
    assert envlock("check", "--project-dir", str(project)).returncode == 0  # no export there: nothing to check
    assert envlock("export", "pixi", NAME, "--project-dir", str(project), "-o", str(folder)).returncode == 0
    assert envlock("check", "--project-dir", str(project)).returncode == 0
    pristine = {n: (folder / n).read_bytes() for n in ("pixi.toml", "pixi.lock", "envlock-activate.sh")}
    edits = {
        "pixi.toml": lambda t: t.replace('cuda = "12.6"', 'cuda = "12.8"'),
        "pixi.lock": lambda t: t.replace(t.split("sha256: ")[1][:64], "0" * 64, 1),
        "envlock-activate.sh": lambda t: t.replace("CUDA_HOME", "CUDA_HOMX", 1),
    }
    for name, edit in edits.items():
        text = pristine[name].decode()
        (folder / name).write_text(edit(text))
        assert (folder / name).read_text() != text
        done = envlock("check", "--project-dir", str(project))
        assert done.returncode == 1 and f"{name} (envlock export pixi)" in done.stdout, done.stdout
        assert "envlock export pixi" in done.stdout
        (folder / name).write_bytes(pristine[name])
    assert envlock("check", "--project-dir", str(project)).returncode == 0


# --------------------------------------------------------------------------- a feature of an existing manifest


PIXI_TOML = """\
# my project (comments, spacing and key order are mine)
[workspace]
name    = "mine"
channels = ["conda-forge"]
platforms = [ "linux-64", "win-64", "osx-arm64" ]

[dependencies]
python = ">=3.11"   # keep

[tasks]
hello = "echo hi"
"""

PYPROJECT = """\
[project]
name = "mine"
version = "0.1"

[tool.pixi.workspace]
channels = ["conda-forge"]
platforms = ["linux-64", "win-64"]

[tool.pixi.dependencies]
python = "3.11.*"

[tool.ruff]
line-length = 99
"""


@pytest.mark.parametrize("name, text", [("pixi.toml", PIXI_TOML), ("pyproject.toml", PYPROJECT)])
def test_a_feature_goes_into_an_existing_manifest_and_nothing_else_changes(full: Path, tmp_path: Path,
                                                                            name: str, text: str) -> None:
    manifest = tmp_path / "ws" / name
    manifest.parent.mkdir()
    manifest.write_text(text)
    args = ("export", "pixi", NAME, "--project-dir", str(full), "--feature", "cuda", "--manifest", str(manifest))
    done = envlock(*args)
    assert done.returncode == 0, done.stderr
    assert "pixi install --frozen -e cuda" in done.stderr
    new = manifest.read_text()
    assert new.startswith(text) and "# >>> envlock export pixi: feature cuda" in new  # every byte of theirs kept
    doc = tomllib.loads(new)
    pixi = doc["tool"]["pixi"] if name == "pyproject.toml" else doc
    assert pixi["environments"]["cuda"] == {"features": ["cuda"], "no-default-feature": True}
    feature = pixi["feature"]["cuda"]
    assert feature["system-requirements"] == {"cuda": "12.6"}
    assert feature["target"]["linux-64"]["activation"]["scripts"] == ["envlock-activate-cuda.sh"]
    if name == "pyproject.toml":  # the real validator users run, with the schema store's [tool.pixi] schema
        check = subprocess.run([sys.executable, "-m", "validate_pyproject", str(manifest)], capture_output=True,
                               text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        assert schema_errors(pixi, pyproject=True) == []
    else:
        assert schema_errors(doc) == []
    from rattler import LockFile

    lf = LockFile.from_path(manifest.parent / "pixi.lock")
    assert [e for e, _ in lf.environments()] == ["cuda"]
    assert (manifest.parent / "envlock-activate-cuda.sh").is_file()
    before = {p.name: p.read_bytes() for p in manifest.parent.iterdir()}
    assert envlock(*args).returncode == 0  # again: the block is replaced by the same bytes
    assert {p.name: p.read_bytes() for p in manifest.parent.iterdir()} == before
    assert "run `envlock export pixi" in new and "in the project folder, FILE being this file" in new  # outside it


def regenerate_command(manifest_text: str) -> list[str]:
    """The command a generated manifest says writes it again, to run as written in the project folder."""
    import shlex

    (line,) = [ln for ln in manifest_text.splitlines() if "Re-generate: in the project folder: " in ln]
    return shlex.split(line.split("Re-generate: in the project folder: ", 1)[1])


@pytest.mark.parametrize("where", ["locks/" + NAME, ".", "tools/pixi ws"])
def test_an_export_inside_the_project_names_the_command_that_writes_it_again(full: Path, tmp_path: Path,
                                                                              iso: dict[str, str], where: str) -> None:
    """The manifest's header said `-o <this folder>`: inside the project it names the very command (run there, it
    writes the same bytes), and a moved copy of the project still says the same."""
    project = shutil.copytree(full, tmp_path / "project")
    out = project / where
    assert envlock("export", "pixi", NAME, "--project-dir", str(project), "-o", str(out), "--force", env=iso).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith(("pixi.", "envlock-activate"))}
    command = regenerate_command((out / "pixi.toml").read_text())
    assert command[:4] == ["envlock", "export", "pixi", NAME] and "<" not in " ".join(command), command
    done = envlock(*command[1:], cwd=project, env=iso)
    assert done.returncode == 0, done.stderr
    assert {n: (out / n).read_bytes() for n in before} == before
    moved = shutil.move(project, tmp_path / "moved")
    assert envlock(*command[1:], cwd=moved, env=iso).returncode == 0
    assert {n: (Path(moved) / where / n).read_bytes() for n in before} == before


def test_a_feature_is_refused_where_it_would_change_what_the_manifest_says(full: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    base = ("export", "pixi", NAME, "--project-dir", str(full), "--feature", "cuda", "--manifest")
    cases = {
        "theirs": PIXI_TOML + '\n[feature.cuda.dependencies]\nnumpy = "*"\n',
        "platform": PIXI_TOML.replace('"win-64", ', ""),
        "not pixi": '[project]\nname = "x"\n',
    }
    for why, text in cases.items():
        manifest = ws / ("pyproject.toml" if why == "not pixi" else "pixi.toml")
        manifest.write_text(text)
        done = envlock(*base, str(manifest))
        assert done.returncode != 0 and done.stderr.startswith("error:") and "hint:" in done.stderr, (why, done.stderr)
        assert manifest.read_text() == text and not (ws / "pixi.lock").exists(), why
        manifest.unlink()
    manifest = ws / "pixi.toml"
    manifest.write_text(PIXI_TOML)
    (ws / "pixi.lock").write_text("version: 7\nplatforms: []\nenvironments:\n  default: {}\npackages: []\n")
    done = envlock(*base, str(manifest))  # pixi's lock of the other environments is not dropped silently
    error, hint = error_and_hint(done.stderr)  # folded to 80 columns: a long temp path is cut after a '/'
    assert done.returncode == 1 and f"{ws}/pixi.lock holds other environments (default)" in error, done.stderr
    assert "--force" in hint
    assert manifest.read_text() == PIXI_TOML
    assert envlock(*base, str(manifest), "--force").returncode == 0


def test_toml_strings_read_back_as_given() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from envlock.formats.pixitoml import toml_key, toml_string

    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.text(min_size=1))
    def read_back(value: str, key: str) -> None:
        assert tomllib.loads(f"{toml_key(key)} = {toml_string(value)}\n") == {key: value}

    read_back()
