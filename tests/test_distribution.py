"""The distribution's own name (`envlock-cuda`): the index name `envlock` is an unrelated project.

Every place a user copies an install command from (README, CI snippet, pre-commit hook, the hints
envlock prints) must name envlock-cuda, or `pip install` fetches someone else's `envlock` tool.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

import envlock
from tests.lockproject import cli, copy_project, edit, lock_file, make_project

REPO = Path(__file__).resolve().parent.parent
# `pip install envlock` / `pip install -U envlock` / `"envlock==1.0"` without the -cuda suffix.
BARE = re.compile(r"pip install(?: -[-\w]+)* ['\"]?envlock(?![-\w])|['\"]envlock==")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib


def test_the_distribution_name_is_the_one_pyproject_builds() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == envlock.DISTRIBUTION == "envlock-cuda"
    assert project["scripts"] == {"envlock": "envlock.cli:main"}  # the command keeps its name


def test_no_install_line_names_the_other_projects_distribution() -> None:
    files = [REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *(REPO / "docs").rglob("*.md"),
             *(REPO / "envlock").rglob("*.py"), *(REPO / ".ci").iterdir()]
    bad = [f"{f.relative_to(REPO)}:{n}: {line.strip()}" for f in files if f.is_file()
           for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if BARE.search(line)]
    assert bad == []
    # The check above finds what it looks for (a pattern that matches nothing proves nothing).
    assert BARE.search("run `pip install -U envlock` now") and BARE.search('pip install "envlock==0.1.0"')
    assert not BARE.search("pip install -U envlock-cuda") and not BARE.search("pip install -e '.[test]'")


def _yaml_blocks(text: str) -> list[object]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_readme_ci_snippet_and_pre_commit_hook_install_envlock_cuda() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = _yaml_blocks(readme)
    ci = next(b for b in blocks if isinstance(b, dict) and "jobs" in b)
    runs = [s["run"] for s in ci["jobs"]["envlock-check"]["steps"] if "run" in s]
    assert runs[0].split("#")[0].split() == ["pip", "install", envlock.DISTRIBUTION]
    assert runs[1].split("#")[0].strip() == "envlock check"
    local = next(b["repos"][0]["hooks"][0] for b in blocks
                 if isinstance(b, dict) and b.get("repos", [{}])[0].get("repo") == "local")
    assert local["additional_dependencies"] == [f"{envlock.DISTRIBUTION}=={envlock.__version__}"]
    # The local hook runs what the shipped hook runs.
    (shipped,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert {k: local[k] for k in ("id", "entry", "language", "pass_filenames", "files")} == {
        k: shipped[k] for k in ("id", "entry", "language", "pass_filenames", "files")
    }
    assert f"pip install {envlock.DISTRIBUTION} " in readme  # the everyday install line


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("dist"), test_channel, platforms=("linux-64",))


def test_a_lock_from_a_newer_envlock_names_envlock_cuda_in_the_hint(template, tmp_path, capsys) -> None:
    project = copy_project(template, tmp_path / "p")
    edit(lock_file(project), "envlock.lock_format: '1'", "envlock.lock_format: '2'")
    code, out, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1
    (hint,) = [line for line in err.splitlines() if line.startswith("hint:")]
    assert "pip install -U envlock-cuda" in hint, err
