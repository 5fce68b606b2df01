"""A project's envlock.toml does not decide where a lock's hashes come from (issue 33, Why 5 / Build 5).

On e081238: a pull request adding `envlock.toml` `[mirrors] conda-forge = "vendor/cf"` and a vendored channel
was enough: the maintainer's next `envlock resolve`/`lock` solved from vendor/cf and wrote its packages' md5 and
sha256 under the canonical conda-forge URLs, `check` said fresh, and `create --locked` installed them.

Decided (docs/security.md): resolve, lock and update never solve from a mirror that only the project's file
names. The user's own setting for that key is used (their envlock.toml, ENVLOCK_MIRRORS, --mirror); without one
the solve is refused before anything is read, naming the mirror and the command that confirms it. Fetching
(create, mirror, pack, export) still uses the project's mirror: there the lock's hashes check every byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.output import error_and_hint
from tests.security.inputs import TOOLCHAIN, assert_one_error, copy, envlock, toolchain_template

__all__ = ["toolchain_template"]  # fixtures used here
RESOLVE = ["resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64", "--lock", "t"]


def _project(tmp_path: Path, test_channel: Path) -> tuple[Path, Path]:
    """A project whose envlock.toml names its own vendored conda-forge (what the pull request adds)."""
    project = tmp_path / "p"
    vendored = project / "vendor" / "cf"
    vendored.parent.mkdir(parents=True)
    shutil.copytree(test_channel, vendored, symlinks=True)
    (project / "envlock.toml").write_text('[mirrors]\nconda-forge = "vendor/cf"\n')
    return project, vendored


def _env(tmp_path: Path, user_toml: str | None = None) -> dict[str, str]:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    if user_toml is not None:
        (config / "envlock.toml").write_text(user_toml)
    return {"ENVLOCK_CONFIG_DIR": str(config), "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_MIRRORS": "",
            "ENVLOCK_HTTP_RETRIES": "0"}


@pytest.mark.parametrize("command", ["resolve", "lock", "update"])
def test_a_solve_refuses_a_mirror_only_the_project_names(command: str, tmp_path: Path, test_channel: Path) -> None:
    project, vendored = _project(tmp_path, test_channel)
    env = _env(tmp_path)
    if command != "resolve":  # a lock made before the pull request, with the user's own mirror
        done = envlock(*RESOLVE, "--project-dir", str(project), "--mirror", f"conda-forge={test_channel.as_uri()}",
                       env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    before = {p: p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file() and "vendor" not in p.parts}
    args = {"resolve": RESOLVE, "lock": ["lock", "t", "--refresh"], "update": ["update", "cuda-nvcc", "--lock", "t"]}
    done = envlock(*args[command], "--project-dir", str(project), env=env, timeout=300)
    error = assert_one_error(done, "envlock.toml names the mirror conda-forge", "does not decide")  # e081238: exit 0
    _, hint = error_and_hint(done.stderr)  # folded to 80 columns: a long path or URL is cut after a '/'
    assert f"({project / 'envlock.toml'})" in error
    assert f"--mirror conda-forge={vendored.resolve().as_uri()}`" in hint, hint  # the command that confirms it
    after = {p: p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file() and "vendor" not in p.parts}
    assert after == before  # nothing written


@pytest.mark.parametrize("how", ["--mirror", "ENVLOCK_MIRRORS", "the user's envlock.toml"])
def test_the_user_confirms_a_project_mirror(how: str, tmp_path: Path, test_channel: Path) -> None:
    project, vendored = _project(tmp_path, test_channel)
    entry = f"conda-forge={vendored.resolve().as_uri()}"
    env = _env(tmp_path, f'[mirrors]\nconda-forge = "{vendored.resolve().as_uri()}"\n' if "toml" in how else None)
    if how == "ENVLOCK_MIRRORS":
        env["ENVLOCK_MIRRORS"] = entry
    extra = ["--mirror", entry] if how == "--mirror" else []
    done = envlock(*RESOLVE, "--project-dir", str(project), *extra, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "locks" / "t" / "conda-lock.yml").is_file()


def test_the_users_own_mirror_is_solved_from_whatever_the_project_says(tmp_path: Path, test_channel: Path) -> None:
    """The user's envlock.toml names conda-forge too, elsewhere: the solve reads the user's (the project's file would
    have overridden it on e081238), and says nothing of the project's."""
    project, _ = _project(tmp_path, test_channel)
    shutil.rmtree(project / "vendor")  # the project's mirror is not even there: reading it would fail
    (project / "vendor" / "cf").mkdir(parents=True)
    env = _env(tmp_path, f'[mirrors]\nconda-forge = "{test_channel.as_uri()}"\n')
    done = envlock(*RESOLVE, "--project-dir", str(project), env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_project_mirror_not_in_play_is_not_in_the_way(tmp_path: Path, test_channel: Path) -> None:
    """A project's `pypi =` mirror and a toolchain-only lock: nothing reads it, nothing is refused."""
    project = tmp_path / "p"
    (project / "pypi").mkdir(parents=True)
    (project / "envlock.toml").write_text('[mirrors]\npypi = "pypi"\n')
    done = envlock(*RESOLVE, "--project-dir", str(project), "--mirror", f"conda-forge={test_channel.as_uri()}",
                   env=_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_create_still_fetches_through_a_project_mirror(toolchain_template: Path, tmp_path: Path,
                                                       test_channel: Path) -> None:
    """Availability only: the lock's hashes check what the project's mirror serves."""
    project = copy(toolchain_template, tmp_path / "p")
    (project / "envlock.toml").write_text(f'[mirrors]\nconda-forge = "{test_channel.as_uri()}"\n')
    done = envlock("create", TOOLCHAIN, "--platform", "linux-64", "--project-dir", str(project), "-p",
                   str(tmp_path / "env"), env=_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "env" / "conda-meta" / "envlock").is_file()
