"""`envlock check`: fresh/stale for each kind of change, bad inputs, --json, no network or solver imports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envlock.errors import LockfileError
from envlock.usecases.resolve import assert_fresh, check, shipped_tables
from tests.lockproject import (
    NAME,
    cli,
    cli_json,
    copy_project,
    edit,
    lock_file,
    make_project,
    snapshot,
    spec_file,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """torch 2.3.0 on linux-64, linux-aarch64 and win-64, resolved once for the module."""
    return make_project(tmp_path_factory.mktemp("check-template"), test_channel)


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    return copy_project(template, tmp_path / "project")


def stale_changes(capsys: pytest.CaptureFixture[str], project: Path) -> list[dict]:
    """Run `check --json`, assert it failed, and return the changes of the one environment."""
    code, doc = cli_json(capsys, "check", "--project-dir", str(project))
    assert code == 1 and doc["fresh"] is False, doc
    assert doc["error"] and doc["hint"]
    (env,) = doc["environments"]
    assert env["name"] == NAME and env["fresh"] is False
    return env["changes"]


def test_fresh_project_exits_0_and_lists_every_environment(project, capsys) -> None:
    before = snapshot(project)
    code, out, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 0, err
    assert re.search(rf"^fresh\s+{re.escape(NAME)}\s+linux-64,linux-aarch64,win-64\s+matches its spec$", out, re.M), out
    assert err == ""
    assert snapshot(project) == before  # check writes nothing


def test_check_runs_from_the_project_dir_by_default(project, capsys, monkeypatch) -> None:
    monkeypatch.chdir(project)
    assert cli(capsys, "check")[0] == 0
    assert cli(capsys, "check", NAME)[0] == 0


# (edit of the spec text, change kind, what the message must say, platforms it is reported for)
SPEC_EDITS = {
    "toolchain_only": (("  toolchain_only: true\n", ""), "spec", "spec envlock.toolchain_only: True → null", "all"),
    "glibc": (("glibc: '2.28'", "glibc: '2.34'"), "spec", "spec envlock.glibc: 2.28 → 2.34", "all"),
    "cuda": (("cuda: null", "cuda: '12.2'"), "spec", "spec envlock.cuda: null → 12.2", "all"),
    "torch": (("torch: 2.3.0", "torch: 2.4.0"), "spec", "spec envlock.torch: 2.3.0 → 2.4.0", "all"),
    "torch_source": (
        ("torch_source: pip", "torch_source: conda-forge"),
        "spec",
        "spec envlock.torch_source: pip → conda-forge",
        "all",
    ),
    "cudnn": (("cudnn: true", "cudnn: false"), "spec", "spec envlock.cudnn: True → False", "all"),
    "channels": (
        ("channels:\n  - conda-forge\n", "channels:\n  - conda-forge\n  - nvidia\n"),
        "spec",
        "spec channels: [conda-forge] → [conda-forge, nvidia]",
        "all",
    ),
    "extra dependency": (
        ("platforms:\n", "  - ninja >=1.11\nplatforms:\n"),
        "spec",
        "spec dependencies: +ninja >=1.11",
        "all",
    ),
    "platform removed": (
        ("  - win-64\n", ""),
        "spec",
        "the lock has platform win-64, which the spec no longer lists",
        "win-64",
    ),
}


@pytest.mark.parametrize("field", list(SPEC_EDITS))
def test_each_spec_field_makes_the_lock_stale_and_is_named(project, capsys, field) -> None:
    (old, new), kind, message, where = SPEC_EDITS[field]
    edit(spec_file(project), old, new)
    changes = stale_changes(capsys, project)
    hits = [c for c in changes if c["kind"] == kind and message in c["message"]]
    assert hits, changes
    platforms = {c["platform"] for c in hits}
    assert platforms == ({"linux-64", "linux-aarch64", "win-64"} if where == "all" else {where}), changes
    code, out, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1 and message in " ".join(out.split())  # a row wider than 80 columns is folded
    assert max(len(ln) for ln in out.splitlines()) <= 80
    assert err.startswith(
        "error: 1 of 1 environment(s) not fresh: torch2.3.0-cu121\nhint: run `envlock lock`"
    ), err


def test_a_spec_the_rules_cannot_plan_is_named(project, capsys) -> None:
    edit(spec_file(project), "cuda: null", "cuda: '12.7'")
    (change,) = stale_changes(capsys, project)
    assert change["kind"] == "spec" and "CUDA 12.7 was never released" in change["message"], change


def test_a_platform_added_to_the_spec_is_named(tmp_path, capsys, test_channel) -> None:
    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",))
    edit(spec_file(project), "platforms:\n  - linux-64\n", "platforms:\n  - linux-64\n  - win-64\n")
    changes = stale_changes(capsys, project)
    assert {
        "kind": "spec",
        "platform": "win-64",
        "message": "platform win-64 is in the spec but not in the lock",
    } in changes


def test_layout_only_edits_of_the_spec_keep_it_fresh(project, capsys) -> None:
    spec = spec_file(project)
    text = spec.read_text()
    doc = yaml.safe_load(text)
    # The dependency lines keep their conda-lock selectors (`# [win64]`: a flow-style list could not carry
    # them, and without them the spec would ask every platform for the Windows compilers).
    block = text.split("dependencies:\n", 1)[1].split("\nplatforms:", 1)[0]
    deps = [ln for ln in block.splitlines() if ln.startswith("  - ")]
    del doc["dependencies"]
    # Flow style, other key order, comments and quoting: the same inputs.
    lines = ["# a comment", "envlock: " + json.dumps(doc.pop("envlock"))]
    lines += [f"{key}: {json.dumps(value)}  # {key}" for key, value in reversed(doc.items())]
    lines += ["dependencies:  # reordered", *reversed(deps)]
    spec.write_text("\n".join(lines) + "\n\n# trailing comment\n")
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_a_spec_that_loses_its_selectors_is_stale(project, capsys) -> None:
    """Flow style drops the `# [win64]` selectors: every platform would ask for vs2019_win-64 now."""
    spec = spec_file(project)
    doc = yaml.safe_load(spec.read_text())
    spec.write_text("\n".join(f"{key}: {json.dumps(value)}" for key, value in doc.items()) + "\n")
    changes = stale_changes(capsys, project)
    assert any(c["kind"] == "spec" and "the spec asks for" in c["message"]
               and "vs2022_win-64" in c["message"] and c["platform"] == "linux-64"
               for c in changes), changes


def test_missing_lock_is_named(project, capsys) -> None:
    for f in lock_file(project).parent.iterdir():
        f.unlink()
    lock_file(project).parent.rmdir()
    (change,) = stale_changes(capsys, project)
    assert change["kind"] == "missing-lock" and "has no lock" in change["message"]


def test_lock_without_spec_is_named(project, capsys) -> None:
    spec_file(project).unlink()
    code, doc = cli_json(capsys, "check", "--project-dir", str(project))
    assert code == 1
    (env,) = doc["environments"]
    assert env["spec"] is None and env["changes"][0]["kind"] == "missing-spec"
    assert doc["hint"].startswith("restore the missing spec from git")


def test_hand_edited_package_version_is_caught_per_platform(project, capsys) -> None:
    lock = lock_file(project)
    text = lock.read_text()
    # Bump the first win-64 package's version by hand.
    block = text[text.index("  platform: win-64") - 200 :]
    version = re.search(r"\n  version: '?([^'\n]+)'?\n  manager: conda\n  platform: win-64", block)
    assert version
    edit(lock, version.group(0), version.group(0).replace(version.group(1), version.group(1) + "1"))
    changes = stale_changes(capsys, project)
    assert [(c["kind"], c["platform"]) for c in changes] == [("hand-edited", "win-64")], changes


def test_hand_edited_content_hash_is_caught(project, capsys) -> None:
    lock = lock_file(project)
    old = re.search(r"linux-64: ([0-9a-f]{64})", lock.read_text())
    assert old
    edit(lock, old.group(1), "0" * 64)
    changes = stale_changes(capsys, project)
    assert any(c["kind"] == "hand-edited" and c["platform"] == "linux-64" for c in changes), changes


def test_reformatted_lock_is_still_fresh(project, capsys) -> None:
    """CRLF checkouts, trailing blanks and added comments change no package: not a hand edit."""
    lock = lock_file(project)
    text = lock.read_text().replace("\n  category: main\n", "\n  category: main   \n# note\n")
    lock.write_bytes(text.replace("\n", "\r\n").encode())
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0
    # A semantic reformat (different YAML layout of the same packages) is fresh too, via the slow path.
    doc = yaml.safe_load(lock.read_text())
    head = lock.read_text().split("\npackage:")[0]
    lock.write_text(
        head + "\n" + yaml.safe_dump({"package": doc["package"]}, default_flow_style=None, width=70)
    )
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_explicit_file_out_of_step_or_missing_is_named(project, capsys) -> None:
    ldir = lock_file(project).parent
    edit(ldir / "conda-linux-64.lock", "# content_hash: ", "# content_hash: 0")
    (ldir / "conda-win-64.lock").unlink()
    changes = stale_changes(capsys, project)
    # Every file beside conda-lock.yml is rendered again from it and compared (envlock.project.derived).
    assert any(c["kind"] == "derived" and c["platform"] == "linux-64" and c["message"].startswith(
        "conda-linux-64.lock differs from what conda-lock.yml renders, at line 4: `# content_hash: 0") for c in changes), changes
    assert {
        "kind": "derived",
        "platform": "win-64",
        "message": "conda-win-64.lock is missing",
    } in changes


def test_lock_from_a_newer_envlock_says_upgrade(project, capsys) -> None:
    edit(lock_file(project), "envlock.lock_format: '1'", "envlock.lock_format: '2'")
    (change,) = stale_changes(capsys, project)
    assert change["kind"] == "newer-envlock"
    code, out, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1 and "hint: upgrade envlock" in err


def test_spec_that_is_not_yaml_is_one_error(project, capsys) -> None:
    spec_file(project).write_text("name: x\ndependencies: [a, b\n")
    (change,) = stale_changes(capsys, project)
    assert change["kind"] == "invalid-spec" and "not valid YAML at line" in change["message"]
    code, out, err = cli(capsys, "check", "--project-dir", str(project))
    assert code == 1 and err.count("error:") == 1 and err.count("hint:") == 1 and "Traceback" not in err


def test_rules_change_that_changes_the_plan_is_named(tmp_path, capsys, test_channel) -> None:
    """A lock made under other rules (gcc cap of CUDA 12.1 lowered to 11) is stale under the shipped ones."""
    import envlock.models as records

    real = shipped_tables()
    older = records.replace(
        real.cuda,
        rules_version="2020.1.1",
        minors={**real.cuda.minors, "12.1": records.replace(real.cuda.minors["12.1"], gcc_max=11)},
    )
    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64", "win-64"),
                           tables=records.replace(real, cuda=older))
    code, doc = cli_json(capsys, "check", "--project-dir", str(project))
    assert code == 1
    changes = doc["environments"][0]["changes"]
    linux = [c for c in changes if c["platform"] == "linux-64"]
    assert linux and all(c["kind"] == "rules" for c in linux), changes
    assert "rules 2020.1.1 → " in linux[0]["message"] and "+gcc_linux-64 <13" in linux[0]["message"], linux
    # win-64 has no gcc: the same rules change leaves its plan (and hash) alone.
    assert not [c for c in changes if c["platform"] == "win-64"], changes


def test_rules_change_that_does_not_change_the_plan_keeps_it_fresh(tmp_path, capsys, test_channel) -> None:
    import envlock.models as records

    real = shipped_tables()
    other = records.replace(
        real.cuda,
        rules_version="2099.1.1",
        minors={
            **real.cuda.minors,
            "13.2": records.replace(real.cuda.minors["13.2"], note="a note on another minor"),
        },
    )
    project = make_project(tmp_path / "p", test_channel, platforms=("linux-64",),
                           tables=records.replace(real, cuda=other))
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_json_report_shape(project, capsys) -> None:
    code, doc = cli_json(capsys, "check", "--project-dir", str(project))
    assert code == 0
    assert doc == {
        "envlock_result_version": 1,
        "fresh": True,
        "error": None,
        "hint": None,
        "environments": [
            {
                "name": NAME,
                "spec": f"environments/{NAME}.yml",
                "lock": f"locks/{NAME}/conda-lock.yml",
                "platforms": ["linux-64", "linux-aarch64", "win-64"],
                "fresh": True,
                "changes": [],
            }
        ],
    }


def test_several_environments_only_the_stale_one_is_listed(project, capsys, test_channel) -> None:
    make_project(project, test_channel, torch="2.4.0", platforms=("linux-64",))
    edit(spec_file(project), "glibc: '2.28'", "glibc: '2.17'")
    code, doc = cli_json(capsys, "check", "--project-dir", str(project))
    assert code == 1
    by_name = {e["name"]: e for e in doc["environments"]}
    assert by_name["torch2.4.0-cu121"]["fresh"] is True and by_name[NAME]["fresh"] is False
    assert doc["error"] == f"1 of 2 environment(s) not fresh: {NAME}"


@pytest.mark.parametrize(
    ("args", "needle", "exit_code"),
    [  # usage errors exit 2 (CI must not read them as "stale"), a name that is not there 1
        (["check", "--bogus"], "no such option: --bogus", 2),
        (["check", "nope"], "no lock named nope", 1),
        (["check", "--project-dir"], "option '--project-dir' requires an argument", 2),
    ],
)
def test_bad_arguments_are_one_error(project, capsys, args, needle, exit_code) -> None:
    code, out, err = (
        cli(capsys, *args, "--project-dir", str(project))
        if args[-1] != "--project-dir"
        else cli(capsys, *args)
    )
    assert code == exit_code and needle in err and "hint:" in err, err
    assert err.count("error:") == 1 and err.count("hint:") == 1


def test_empty_project_is_an_error(tmp_path, capsys) -> None:
    code, out, err = cli(capsys, "check", "--project-dir", str(tmp_path))
    assert code == 1 and "no environments in" in err and "hint: lock one there: `envlock resolve --torch" in err


def test_check_imports_no_solver_conda_lock_or_http_client(project) -> None:
    code = (
        "import json, sys\n"
        "from envlock.cli import run\n"
        f"code = run(['check', '--project-dir', {str(project)!r}])\n"
        "heavy = ('rattler', 'conda_lock', 'requests', 'urllib3', 'rich')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "heavy": []}, result


def test_check_writes_nothing_so_it_loads_no_temp_file_machinery(project) -> None:
    """envlock/seams/fs.py imports tempfile (with shutil and random, ~3 ms) where it writes, not at the top."""
    code = ("import sys\nfrom envlock.cli import run\n"
            f"code = run(['check', '--project-dir', {str(project)!r}])\n"
            "print(code, 'envlock.seams.fs' in sys.modules, 'tempfile' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project)
    assert proc.stdout.split()[-3:] == ["0", "True", "False"], proc.stdout


def test_check_makes_its_values_without_dataclasses(project) -> None:
    """check's value classes are envlock.models.record's (no method compiled at import): a check, fresh or stale,
    imports neither dataclasses nor inspect (with ast, dis and tokenize under it), ~40 ms of its start-up before."""
    code = ("import sys\nfrom envlock.cli import run\n"
            f"code = run(['check', '--project-dir', {str(project)!r}])\n"
            "print(code, sorted(m for m in ('dataclasses', 'inspect', 'ast', 'dis', 'tokenize') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stdout
    edit(spec_file(project), "glibc: '2.28'", "glibc: '2.17'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=project)
    assert proc.stdout.splitlines()[-1] == "1 []", proc.stdout


def test_assert_fresh_for_create_locked(project) -> None:
    assert_fresh(project, NAME)  # raises LockfileError when stale
    assert_fresh(project, lock_file(project))  # raises LockfileError when stale
    assert_fresh(
        project, lock_file(project).parent / "conda-linux-64.lock"
    )  # raises LockfileError when stale
    edit(spec_file(project), "glibc: '2.28'", "glibc: '2.17'")
    with pytest.raises(LockfileError) as err:
        assert_fresh(Path("/nonexistent"), lock_file(project))  # the project is found from the lock's path
    assert "stale" in err.value.message and "envlock.glibc: 2.28 → 2.17" in err.value.message
    assert "--frozen" in err.value.hint


def test_check_report_api(project) -> None:
    report = check(project)
    assert report.fresh and [e.name for e in report.envs] == [NAME]


def test_pre_commit_hook_definition() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "envlock-check"]
    assert (
        hook["entry"] == "envlock check" and hook["language"] == "python" and hook["pass_filenames"] is False
    )
    pattern = re.compile(hook["files"])
    assert pattern.search("environments/torch.yml") and pattern.search("locks/torch/conda-lock.yml")
    assert not pattern.search("src/environments.py")


def test_check_as_a_process_same_answer_elsewhere(project, tmp_path) -> None:
    """A fresh process with another HOME and cwd (another user, another checkout path) agrees."""
    other = copy_project(project, tmp_path / "elsewhere" / "checkout")
    home = tmp_path / "other-home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "USER": "someone-else"}
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "check"], cwd=other, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert f"fresh  {NAME}" in proc.stdout


@pytest.mark.slow
def test_bench_check_runs_and_prints_its_table(tmp_path) -> None:
    """The benchmark works (timings are machine-dependent and not asserted; exit codes of check are)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_check.py"),
            "--runs",
            "1",
            "--keep",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: a target missed on this machine; 2: check misbehaved
    assert "envlock check (10 envs × 3 platforms)" in proc.stdout and "envlock --help" in proc.stdout
    assert len(list((tmp_path / "b" / "project" / "locks").glob("*/conda-lock.yml"))) == 10


def test_anchor_of_an_installed_torch_is_kept(tmp_path, capsys, test_channel, monkeypatch) -> None:
    """`--torch installed` found CUDA 12.4 (not the table's 12.1): check and lock keep that anchor.

    The installed torch is a real importable package asked by the real probe (tests/test_anchor.py's)."""
    from tests.test_anchor import fake_torch

    site = fake_torch(tmp_path / "site", version="2.3.0+cu124", cuda="12.4", cudnn=90100)
    monkeypatch.setenv("PYTHONPATH", str(site))
    project = make_project(tmp_path / "p", test_channel, torch="installed", platforms=("linux-64",), name=NAME,
                           python_exe=sys.executable)
    monkeypatch.delenv("PYTHONPATH")  # check and lock never ask that python again
    from envlock.formats import read_lock

    recorded = read_lock(lock_file(project)).envlock_meta()["anchor"]
    assert (recorded["source"], recorded["cuda"], recorded["cudnn"]) == ("installed", "12.4", "9.1.0")
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0
    before = snapshot(project)
    assert (
        cli(
            capsys,
            "lock",
            "--all",
            "--project-dir",
            str(project),
            "--mirror",
            f"conda-forge={test_channel.as_uri()}",
        )[0]
        == 0
    )
    assert snapshot(project) == before  # re-solved from the recorded CUDA 12.4 anchor: the same bytes
    edit(
        spec_file(project), "torch: 2.3.0", "torch: 2.4.0"
    )  # another torch: the recorded anchor no longer applies
    changes = stale_changes(capsys, project)
    assert {c["kind"] for c in changes} >= {"spec", "anchor"}, changes
