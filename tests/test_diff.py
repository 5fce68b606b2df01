"""`envlock diff A B` and `envlock diff --git REF`: test-channel locks, real public locks, bad input."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.formats import read_lock
from envlock.usecases.diff import diff_files, lock_entries
from tests.lockproject import NAME, cli, cli_json, copy_project, edit, lock_file, make_project, spec_file


@pytest.fixture(scope="module")
def locks(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> tuple[Path, Path]:
    """torch 2.3.0 with CUDA 12.1 and the same spec moved to CUDA 12.2 (toolchain only: win-64 is locked)."""
    a = make_project(tmp_path_factory.mktemp("diff-a"), test_channel, platforms=("linux-64", "win-64"))
    b = make_project(
        tmp_path_factory.mktemp("diff-b"),
        test_channel,
        platforms=("linux-64", "win-64"),
        cuda="12.2",
        name=NAME,
    )
    return lock_file(a), lock_file(b)


@pytest.fixture
def real_locks(shared_dir: Path) -> Path:
    path = shared_dir / "real-locks"
    if not (path / "01-ai-Yi.conda-lock.yml").is_file():
        pytest.skip(f"real lockfiles are absent ({path}); they are provided beside the checkout in CI")
    return path


def test_diff_two_locks_per_platform_changed_with_old_and_new(locks, capsys) -> None:
    old, new = locks
    code, doc = cli_json(capsys, "diff", str(old), str(new))
    assert code == 0
    (d,) = doc["diffs"]
    assert set(d["platforms"]) == {"linux-64", "win-64"}
    for body in d["platforms"].values():
        changed = {c["name"]: c for c in body["changed"]}
        assert changed["cuda-nvcc"]["old"]["version"].startswith("12.1.")
        assert changed["cuda-nvcc"]["new"]["version"].startswith("12.2.")
        assert all(c["old"]["build"] and c["new"]["build"] for c in body["changed"])
        assert body["unchanged"] >= 0 and "cuda-version" in changed
    code, out, err = cli(capsys, "diff", str(old), str(new))
    assert code == 0 and err == ""
    assert out.startswith(f"--- {old}\n+++ {new}\n")
    assert "linux-64: " in out and "win-64: " in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("~  cuda-nvcc "))
    assert "12.1." in line and "→" in line and "12.2." in line


def test_diff_of_a_lock_with_itself_is_empty(locks, capsys) -> None:
    code, out, err = cli(capsys, "diff", str(locks[0]), str(locks[0].parent))  # a lock dir works too
    assert code == 0 and "no differences (" in out


def test_a_moved_channel_is_a_change_even_at_the_same_version(locks, tmp_path, capsys) -> None:
    """A lock that leaked a mirror URL (file://…) differs from the canonical one, though no version moved."""
    leaked = tmp_path / "leaked.yml"
    leaked.write_text(
        locks[0].read_text().replace("https://conda.anaconda.org/conda-forge/", "file:///mirror/cf/")
    )
    d = diff_files(locks[0], leaked)
    for p in d.platforms:
        assert p.changed and all(a.key()[:2] == b.key()[:2] for a, b in p.changed)
        assert {b.channel for _, b in p.changed} == {"file:///mirror/cf"}
    code, out, err = cli(capsys, "diff", str(locks[0]), str(leaked))
    flat = " ".join(out.split())  # rows wider than 80 columns are folded
    assert code == 0 and "[https://conda.anaconda.org/conda-forge] →" in flat and "[file:///mirror/cf]" in flat


def test_diff_reads_explicit_files(locks, capsys) -> None:
    a = locks[0].parent / "conda-linux-64.lock"
    b = locks[1].parent / "conda-linux-64.lock"
    d = diff_files(a, b)
    assert [p.platform for p in d.platforms] == ["linux-64"]
    assert any(x.name == "cuda-nvcc" for x, _ in d.platforms[0].changed)
    # The same answer as the conda-lock.yml of that platform.
    full = diff_files(*locks)
    assert d.platforms[0] == next(p for p in full.platforms if p.platform == "linux-64")


def test_added_and_removed_packages(locks, tmp_path, capsys) -> None:
    text = locks[0].read_text()
    doc_entries = lock_entries(read_lock(locks[0], compare=True))
    trimmed = tmp_path / "trimmed.yml"
    # Remove the first linux-64 entry by hand: it shows as added in the new lock.
    start = text.index("\npackage:\n") + len("\npackage:\n")
    end = text.index("\n- name:", start) + 1
    removed_name = text[start:end].split("name: ", 1)[1].split("\n", 1)[0]
    trimmed.write_text(text[:start] + text[end:])
    d = diff_files(trimmed, locks[0])
    linux = next(p for p in d.platforms if p.platform == "linux-64")
    assert [p.name for p in linux.added] == [removed_name] and not linux.removed and not linux.changed
    assert linux.unchanged == len(doc_entries["linux-64"]) - 1
    back = diff_files(locks[0], trimmed)
    assert [p.name for p in next(p for p in back.platforms if p.platform == "linux-64").removed] == [
        removed_name
    ]


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(locks, tmp_path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    project = copy_project(locks[0].parent.parent.parent, tmp_path / "repo")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "environments", "locks")
    git(project, "commit", "-q", "-m", "lock")
    return project


def test_diff_git_against_the_committed_lock(repo, locks, capsys) -> None:
    shutil.copy(locks[1], lock_file(repo))  # the working tree moves to CUDA 12.2
    code, doc = cli_json(capsys, "diff", "--git", "HEAD", "--project-dir", str(repo))
    assert code == 0
    (d,) = doc["diffs"]
    assert d["old"] == f"HEAD:locks/{NAME}/conda-lock.yml" and d["new"] == f"locks/{NAME}/conda-lock.yml"
    assert any(c["name"] == "cuda-nvcc" for c in d["platforms"]["linux-64"]["changed"])
    # With an explicit path, from another cwd.
    code, out, err = cli(capsys, "diff", "--git", "HEAD", str(lock_file(repo)), "--project-dir", str(repo))
    assert code == 0 and "~  cuda-nvcc" in out


def test_diff_git_lock_added_since_ref(repo, test_channel, capsys) -> None:
    make_project(repo, test_channel, torch="2.4.0", platforms=("linux-64",))
    code, doc = cli_json(capsys, "diff", "--git", "HEAD", "--project-dir", str(repo))
    assert code == 0
    by_new = {d["new"]: d for d in doc["diffs"]}
    added = by_new["locks/torch2.4.0-cu121/conda-lock.yml"]["platforms"]["linux-64"]
    assert added["added"] and not added["removed"] and added["unchanged"] == 0


@pytest.mark.parametrize(
    ("args", "needle", "hint"),
    [
        (["--git", "no-such-ref"], "git ref 'no-such-ref' does not exist", "use a branch, tag or commit"),
        (["--git", "--upload-pack=x"], "does not exist", "use a branch"),
        (["one.yml"], "needs two locks", "envlock diff A B (lock NAMEs or files)"),
        (["--git", "HEAD", "a", "b"], "at most one lock path", "envlock diff --git"),
    ],
)
def test_diff_bad_input_is_one_error(repo, capsys, args, needle, hint) -> None:
    code, out, err = cli(capsys, "diff", *args, "--project-dir", str(repo))
    assert code != 0 and needle in err and f"hint: {hint}" in err, err


def test_diff_git_outside_a_repository(tmp_path, capsys) -> None:
    code, out, err = cli(capsys, "diff", "--git", "HEAD", "--project-dir", str(tmp_path))
    assert code == 1 and "not inside a git repository" in err and "hint:" in err


def test_diff_refuses_files_that_are_not_locks(tmp_path, locks, capsys) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just: [text\n")
    code, out, err = cli(capsys, "diff", str(notes), str(locks[0]))
    assert code == 1 and "is not valid YAML" in err and "hint: pass a conda-lock.yml" in err
    code, out, err = cli(capsys, "diff", str(tmp_path / "missing.yml"), str(locks[0]))
    assert code == 1 and "no lock at" in err
    newer = tmp_path / "newer.yml"
    newer.write_text(locks[0].read_text().replace("envlock.lock_format: '1'", "envlock.lock_format: '3'"))
    code, out, err = cli(capsys, "diff", str(newer), str(locks[0]))
    assert code == 1 and "newer envlock" in err and "hint: upgrade envlock" in err


def test_diff_real_conda_lock_files(real_locks, capsys) -> None:
    yi = real_locks / "01-ai-Yi.conda-lock.yml"
    clay = real_locks / "Clay-foundation-model.conda-lock.yml"
    code, doc = cli_json(capsys, "diff", str(yi), str(clay))
    assert code == 0
    linux = doc["diffs"][0]["platforms"]["linux-64"]
    total_yi = len(lock_entries(read_lock(yi, compare=True))["linux-64"])
    assert len(linux["changed"]) + len(linux["removed"]) + linux["unchanged"] == total_yi
    assert any(c["name"] == "python" for c in linux["changed"])
    # Yi has pip entries: they are compared as pip packages, not mixed up with conda ones.
    assert any(p["manager"] == "pip" for p in linux["removed"] + [c for c in linux["changed"]])
    code, out, err = cli(capsys, "diff", str(yi), str(yi))
    assert code == 0 and "no differences" in out


def test_diff_real_pixi_lock(real_locks, tmp_path, capsys) -> None:
    pixi = real_locks / "matthewfeickert-pytorch-gpu-pixi-example.pixi.lock"
    entries = lock_entries(read_lock(pixi, compare=True))
    assert "linux-64" in entries and entries["linux-64"][("conda", "cuda-version")].version == "12.9"
    # A pixi.lock against itself with one package line bumped by hand.
    edited = tmp_path / "pixi.lock"
    edited.write_text(pixi.read_text())
    edit(edited, "/cuda-version-12.9-", "/cuda-version-12.8-", count=2)
    d = diff_files(pixi, edited)
    linux = next(p for p in d.platforms if p.platform == "linux-64")
    assert [(a.version, b.version) for a, b in linux.changed] == [("12.9", "12.8")]


def test_diff_unsupported_pixi_version(tmp_path, capsys) -> None:
    lock = tmp_path / "pixi.lock"
    lock.write_text("version: 3\nenvironments: {}\npackages: []\n")
    code, out, err = cli(capsys, "diff", str(lock), str(lock))
    assert code == 1 and "pixi.lock version 3" in err and "hint: envlock diff reads pixi.lock v4-v6" in err


def test_diff_after_update_spec_edit_round_trip(locks, tmp_path, capsys, test_channel) -> None:
    """diff of a lock before and after `envlock lock` of an edited spec shows exactly the cudnn drop."""
    project = copy_project(locks[0].parent.parent.parent, tmp_path / "p")
    before = tmp_path / "before.yml"
    shutil.copy(lock_file(project), before)
    edit(spec_file(project), "cudnn: true", "cudnn: false")
    assert (
        cli(
            capsys, "lock", "--project-dir", str(project), "--mirror", f"conda-forge={test_channel.as_uri()}"
        )[0]
        == 0
    )
    d = diff_files(before, lock_file(project))
    for p in d.platforms:
        names = {a.name for a, _ in p.changed} | {x.name for x in p.removed}
        assert {"cudnn", "cuda-nvcc"} & names == {"cudnn"}
