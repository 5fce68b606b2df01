"""Content-hash stability, `envlock lock` (rewrites nothing when fresh) and `envlock update PKG…`."""

from __future__ import annotations

import envlock.models as records
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envlock.formats import read_lock
from envlock.project import content_hashes
from envlock.usecases.resolve import Tables, of_spec, plan_for, shipped_tables, spec_anchor
from envlock.formats.spec import EnvSpec, parse_spec, read_spec
from tests.output import unfolded
from tests.channelbuilder import PackageSpec
from tests.lockproject import (
    NAME,
    cli,
    cli_json,
    copy_project,
    edit,
    lock_file,
    make_project,
    package_blocks,
    snapshot,
    spec_file,
)

REPO = Path(__file__).resolve().parent.parent
CF = "https://conda.anaconda.org/conda-forge"  # locks record canonical channel URLs, never the mirror


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(
        tmp_path_factory.mktemp("lifecycle-template"), test_channel, platforms=("linux-64", "win-64")
    )


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    return copy_project(template, tmp_path / "project")


@pytest.fixture
def cf(test_channel: Path) -> str:
    return f"conda-forge={test_channel.as_uri()}"


def hashes(spec: EnvSpec, tables: Tables | None = None) -> dict[str, str]:
    tables = tables or shipped_tables()
    anchor = spec_anchor(of_spec(spec), None, tables, None)  # offline, from envlock's own data
    assert anchor is not None
    return content_hashes(spec, plan_for(spec, anchor, tables))


# --------------------------------------------------------------------------- content hash

HASH_PROBE = """
import json, sys
from pathlib import Path
from envlock.formats.spec import read_spec
from envlock.project import content_hashes
from envlock.usecases.resolve import of_spec, plan_for, shipped_tables, spec_anchor
spec = read_spec(Path("environments") / (sys.argv[1] + ".yml"))
anchor = spec_anchor(of_spec(spec), None, shipped_tables(), None)
print(json.dumps(content_hashes(spec, plan_for(spec, anchor, shipped_tables()))))
"""


def test_same_spec_on_two_paths_and_users_gives_the_same_hash(project, tmp_path) -> None:
    other = copy_project(project, tmp_path / "somewhere" / "else" / "checkout")
    seen = []
    for where, user in ((project, "alice"), (other, "bob")):
        home = tmp_path / f"home-{user}"
        home.mkdir()
        env = {
            **os.environ,
            "HOME": str(home),
            "USER": user,
            "LOGNAME": user,
            "ENVLOCK_CACHE_DIR": str(home / "cache"),
        }
        proc = subprocess.run(
            [sys.executable, "-c", HASH_PROBE, NAME], cwd=where, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        seen.append(json.loads(proc.stdout))
    assert seen[0] == seen[1] == read_lock(lock_file(project)).content_hash


def test_layout_order_comments_and_quoting_do_not_change_the_hash(project) -> None:
    base = read_spec(spec_file(project))
    text = spec_file(project).read_text() + "  # trailing\n"
    with_extras = text.replace("platforms:", "  - ninja >=1.11\n  - make\n  - cmake 3.*\nplatforms:")
    reordered = text.replace("platforms:", "  - cmake 3.*\n  - ninja >=1.11\n  - make\nplatforms:")
    restyled = (
        'envlock: {cudnn: true, glibc: "2.28", python: ~, torch: "2.3.0", torch_source: pip, cuda: ~, '
        f'toolchain_only: true, exclude_newer: "{base.exclude_newer}"}}\n'
        "# the same spec, other style\n"
        "platforms: [linux-64, win-64]\n"
        f'name: "{NAME}"\n'
        "dependencies: ['cmake 3.*', \"make\", ninja >=1.11, cuda-nvcc]\n"
        "channels: [conda-forge]\n"
    )
    assert hashes(parse_spec(text)) == hashes(base)
    assert hashes(parse_spec(with_extras)) == hashes(parse_spec(reordered)) == hashes(parse_spec(restyled))
    assert hashes(parse_spec(with_extras)) != hashes(base)


@pytest.mark.parametrize(
    "change",
    [
        {"torch": "2.4.0"},
        {"cuda": "12.2"},
        {"python": "3.12"},
        {"glibc": "2.34"},
        {"channels": ("conda-forge", "nvidia")},
        {"platforms": ("linux-64", "linux-aarch64", "win-64")},
        {"dependencies": ("cmake",)},  # (a bare `ninja` is the optional one the solve takes: tests/test_installers.py)
        {"cudnn": False},
        {"torch_source": "conda-forge", "cuda": "12.1"},
    ],
    ids=lambda c: ",".join(c),
)
def test_every_input_changes_the_hash(project, change) -> None:
    base = read_spec(spec_file(project))
    before = hashes(base)
    after = hashes(records.replace(base, **change))
    for platform in base.platforms:
        assert after[platform] != before[platform], change


def test_a_rules_change_changes_the_hash_only_where_it_changes_the_plan(project) -> None:
    spec = read_spec(spec_file(project))
    before = hashes(spec)
    real = shipped_tables()
    gcc = records.replace(
        real.cuda, minors={**real.cuda.minors, "12.1": records.replace(real.cuda.minors["12.1"], gcc_max=11)}
    )
    after = hashes(spec, records.replace(real, cuda=gcc))
    assert after["linux-64"] != before["linux-64"]  # the gcc cap is in linux-64's plan
    assert after["win-64"] == before["win-64"]  # win-64 uses MSVC: same plan, same hash
    unrelated = records.replace(
        real.cuda, rules_version="2099.1.1", never_released=(*real.cuda.never_released, "14.9")
    )
    assert hashes(spec, records.replace(real, cuda=unrelated)) == before


# --------------------------------------------------------------------------- lock


def test_lock_rewrites_nothing_when_fresh_not_even_mtime(project, capsys, cf) -> None:
    before = snapshot(project)
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    assert out == f"fresh   {NAME}: unchanged\n"
    code, doc = cli_json(capsys, "lock", "--all", "--project-dir", str(project), "--mirror", cf)
    assert (
        code == 0 and doc["environments"][0]["action"] == "locked" and doc["environments"][0]["written"] == []
    )
    assert snapshot(project) == before


def test_lock_relocks_a_stale_spec_and_then_it_is_fresh(project, capsys, cf) -> None:
    edit(spec_file(project), "cuda: null", "cuda: '12.2'")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    assert f"locked {NAME} (spec envlock.cuda: null → 12.2" in " ".join(out.split())  # long lines fold at 80
    assert f"wrote locks/{NAME}/conda-lock.yml" in out
    nvcc = {p.version for p in read_lock(lock_file(project)).packages if p.name == "cuda-nvcc"}
    assert nvcc and all(v.startswith("12.2.") for v in nvcc)
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_lock_touches_only_the_stale_environment(project, capsys, cf, test_channel) -> None:
    make_project(project, test_channel, torch="2.4.0", platforms=("linux-64",))
    other = "torch2.4.0-cu121"
    edit(spec_file(project, other), "glibc: '2.28'", "glibc: '2.17'")
    before = snapshot(project)
    code, doc = cli_json(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0
    actions = {e["name"]: e["action"] for e in doc["environments"]}
    assert actions == {NAME: "fresh", other: "locked"}
    after = snapshot(project)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed and all(other in k for k in changed), changed
    assert f"locks/{other}/conda-lock.yml" in changed


def test_lock_creates_a_missing_lock_and_repairs_a_hand_edited_one(project, capsys, cf) -> None:
    lock = lock_file(project)
    original = lock.read_bytes()
    edit(lock, "md5: ", "md5: 0")
    code, out, err = cli(capsys, "lock", NAME, "--project-dir", str(project), "--mirror", cf)
    assert code == 0 and "hand" in out, (out, err)
    assert lock.read_bytes() == original
    for f in lock.parent.iterdir():
        f.unlink()
    assert cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)[0] == 0
    assert lock.read_bytes() == original


@pytest.mark.parametrize(
    ("damage", "needle", "hint"),
    [
        ("orphan", "has no spec", "restore environments/"),
        ("yaml", "is not valid YAML", "fix the YAML syntax (indentation, colons); nothing was written"),
        ("newer", "newer envlock", "upgrade envlock"),
        ("spec-newer", "spec_version 9", "upgrade envlock"),
    ],
)
def test_lock_refuses_bad_input_and_writes_nothing(
    project, capsys, cf, test_channel, damage, needle, hint
) -> None:
    make_project(project, test_channel, torch="2.4.0", platforms=("linux-64",))
    other = "torch2.4.0-cu121"
    edit(spec_file(project, other), "glibc: '2.28'", "glibc: '2.17'")  # stale: lock would rewrite it
    if damage == "orphan":
        spec_file(project).unlink()
    elif damage == "yaml":
        spec_file(project).write_text("name: [unclosed\n")
    elif damage == "newer":
        edit(lock_file(project), "envlock.lock_format: '1'", "envlock.lock_format: '7'")
    else:
        edit(spec_file(project), "spec_version: 1", "spec_version: 9")
    before = snapshot(project)
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 1
    assert err.count("error:") == 1 and needle in err and f"hint: {hint}" in err, err
    assert snapshot(project) == before


def test_lock_of_an_unknown_name_is_an_error(project, capsys, cf) -> None:
    code, out, err = cli(capsys, "lock", "nope", "--project-dir", str(project), "--mirror", cf)
    assert code == 1 and "no lock named nope" in err and f"hint: pick one: `envlock lock {NAME} " in err


# --------------------------------------------------------------------------- update


def demo(name: str, version: str) -> PackageSpec:
    return PackageSpec(name, version, subdir="noarch", files={f"share/{name}/VERSION": version + "\n"})


@pytest.fixture(scope="module")
def channels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The channel on lock day, and the same channel a week later with newer demo-a and demo-b."""
    from tests.channelbuilder import build_channel

    kw = {
        "cuda_minors": ["12.1"],
        "subdirs": ("linux-64", "win-64"),
        "with_pytorch": False,
        "with_cuda11": False,
    }
    old = build_channel(
        tmp_path_factory.mktemp("day1"), extra=[demo("demo-a", "1.0"), demo("demo-b", "1.0")], **kw
    )
    new = build_channel(
        tmp_path_factory.mktemp("day8"),
        extra=[demo("demo-a", "1.0"), demo("demo-b", "1.0"), demo("demo-a", "1.1"), demo("demo-b", "1.1")],
        **kw,
    )
    return old, new


@pytest.fixture
def locked_with_demos(tmp_path: Path, channels: tuple[Path, Path], capsys) -> Path:
    """A project whose spec adds demo-a and demo-b, locked against day 1's channel."""
    old, _ = channels
    project = make_project(tmp_path / "p", old, platforms=("linux-64", "win-64"))
    edit(spec_file(project), "platforms:", "  - demo-a\n  - demo-b\nplatforms:")
    assert (
        cli(capsys, "lock", "--project-dir", str(project), "--mirror", f"conda-forge={old.as_uri()}")[0] == 0
    )
    versions = {(p.platform, p.name): p.version for p in read_lock(lock_file(project)).packages}
    assert versions[("linux-64", "demo-a")] == versions[("win-64", "demo-b")] == "1.0"
    return project


def test_update_moves_only_the_named_package(locked_with_demos, channels, capsys) -> None:
    project = locked_with_demos
    new_cf = f"conda-forge={channels[1].as_uri()}"
    old_blocks = package_blocks(lock_file(project).read_text())
    code, doc = cli_json(capsys, "update", "demo-a", "--project-dir", str(project), "--mirror", new_cf)
    assert code == 0, doc
    (env,) = doc["environments"]
    for platform in ("linux-64", "win-64"):
        moved = env["platforms"][platform]
        assert moved["changed"] == [
            {
                "name": "demo-a",
                "manager": "conda",
                "old": {"version": "1.0", "build": moved["changed"][0]["old"]["build"], "channel": CF},
                "new": {"version": "1.1", "build": moved["changed"][0]["new"]["build"], "channel": CF},
            }
        ]
        assert moved["added"] == [] and moved["removed"] == []
    new_blocks = package_blocks(lock_file(project).read_text())
    # Every other entry is byte-identical; only the two demo-a entries (one per platform) differ.
    assert sorted(b for b in old_blocks if "name: demo-a\n" not in b) == sorted(
        b for b in new_blocks if "name: demo-a\n" not in b
    )
    assert len([b for b in new_blocks if "name: demo-a\n" in b and "version: '1.1'" in b]) == 2
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0
    # Control: a full re-lock against the same channel moves demo-b too, so holding is what kept it.
    assert cli(capsys, "lock", "--all", "--project-dir", str(project), "--mirror", new_cf)[0] == 0
    assert {p.version for p in read_lock(lock_file(project)).packages if p.name == "demo-b"} == {"1.1"}


def test_update_dry_run_shows_the_move_and_writes_nothing(locked_with_demos, channels, capsys) -> None:
    project = locked_with_demos
    before = snapshot(project)
    code, out, err = cli(
        capsys, "update", "demo-b", "--dry-run", "--lock", NAME, "--project-dir", str(project),
        "--mirror", f"conda-forge={channels[1].as_uri()}",
    )  # fmt: skip
    assert code == 0, err
    assert "linux-64: 1 changed, 0 added, 0 removed" in out and "win-64: 1 changed" in out
    assert "~  demo-b" in out and "1.0 " in out and "→  1.1 " in out
    assert out.rstrip().endswith("dry run: nothing written")
    assert snapshot(project) == before


def test_update_with_no_package_moves_every_package_within_the_rules(locked_with_demos, channels, capsys) -> None:
    """`envlock update` alone was a usage error; like pixi's, cargo's and poetry's `update` it moves everything
    (`--dry-run` first shows what would move and writes nothing)."""
    project = locked_with_demos
    new_cf = f"conda-forge={channels[1].as_uri()}"
    before = snapshot(project)
    code, out, err = cli(capsys, "update", "--dry-run", "--project-dir", str(project), "--mirror", new_cf)
    assert code == 0, err
    assert "~  demo-a" in out and "~  demo-b" in out and out.rstrip().endswith("dry run: nothing written")
    assert snapshot(project) == before
    code, out, err = cli(capsys, "update", "--project-dir", str(project), "--mirror", new_cf)
    assert code == 0, err
    versions = {(p.platform, p.name): p.version for p in read_lock(lock_file(project)).packages}
    assert {versions[(pl, n)] for pl in ("linux-64", "win-64") for n in ("demo-a", "demo-b")} == {"1.1"}
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_update_with_nothing_newer_moves_nothing(locked_with_demos, channels, capsys) -> None:
    project = locked_with_demos
    before = snapshot(project)
    time.sleep(1.1)  # a later second: a cutoff moved to "now" would change the spec's bytes (the churn)
    code, out, err = cli(
        capsys,
        "update",
        "demo-a",
        "--project-dir",
        str(project),
        "--mirror",
        f"conda-forge={channels[0].as_uri()}",
    )
    assert code == 0, err
    assert "nothing moved" in out and "nothing written" in out and "wrote" not in out
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("args", "damage", "needle", "hint"),
    [
        (
            ["not-in-the-lock"],
            None,
            "not-in-the-lock is not in any lock",
            "update moves packages a lock already has",
        ),
        (["demo-a", "--lock", "nope"], None, "no lock named nope", "pick one: `envlock update demo-a --lock"),
        (["demo-a"], "edited", "edited by hand", "restore locks/"),
        (["demo-a"], "newer", "newer envlock", "upgrade envlock"),
    ],
)
def test_update_bad_input_is_one_error_and_writes_nothing(
    locked_with_demos, channels, capsys, args, damage, needle, hint
) -> None:
    project = locked_with_demos
    if damage == "edited":
        edit(lock_file(project), "version: '1.0'", "version: '0.9'")
    elif damage == "newer":
        edit(lock_file(project), "envlock.lock_format: '1'", "envlock.lock_format: '2'")
    before = snapshot(project)
    code, out, err = cli(
        capsys,
        "update",
        *args,
        "--project-dir",
        str(project),
        "--mirror",
        f"conda-forge={channels[1].as_uri()}",
    )
    assert code == 1 and needle in unfolded(err) and f"hint: {hint}" in unfolded(err), err
    assert snapshot(project) == before


# --------------------------------------------------------------------------- create --locked / --frozen


def test_create_locked_refuses_a_stale_lock_frozen_installs_it(project, capsys, cf, tmp_path) -> None:
    edit(spec_file(project), "glibc: '2.28'", "glibc: '2.17'")
    base = ["create", NAME, "--project-dir", str(project), "--mirror", cf, "--platform", "linux-64"]
    refused = tmp_path / "refused"
    code, out, err = cli(capsys, *base, "-p", str(refused), "--locked")
    assert code == 1 and not refused.exists()
    assert f"error: the lock of {NAME} is stale: spec envlock.glibc: 2.28 → 2.17 [linux-64]" in err
    assert "hint: run `envlock lock`" in err and "--frozen" in err
    frozen = tmp_path / "frozen"
    code, out, err = cli(capsys, *base, "-p", str(frozen), "--frozen", "-q")
    assert code == 0 and (frozen / "bin" / "nvcc").is_file() and "stale" not in err
    default = tmp_path / "default"
    code, out, err = cli(capsys, *base, "-p", str(default), "-q")
    assert code == 0 and (default / "bin" / "nvcc").is_file()
    assert f"warning: the lock of {NAME} is stale (spec envlock.glibc: 2.28 → 2.17)" in err
    code, out, err = cli(capsys, *base, "-p", str(tmp_path / "both"), "--locked", "--frozen")
    assert code == 2 and "contradict" in err  # a usage error


def test_create_locked_checks_only_the_platform_it_installs(project, capsys, cf, tmp_path) -> None:
    lock = lock_file(project)
    text = lock.read_text()
    win = text.index("  platform: win-64\n")
    md5_at = text.index("    md5: ", win) + len("    md5: ")
    lock.write_text(text[:md5_at] + "0" + text[md5_at + 1 :])  # a win-64 hash edited by hand
    base = ["create", NAME, "--project-dir", str(project), "--mirror", cf, "--locked", "-q"]
    code, out, err = cli(capsys, *base, "--platform", "linux-64", "-p", str(tmp_path / "linux"))
    assert code == 0, err
    code, out, err = cli(capsys, *base, "--platform", "win-64", "-p", str(tmp_path / "win"))
    assert code == 1 and "packages were edited by hand" in err and "[win-64]" in err
    assert not (tmp_path / "win").exists()


def test_update_that_cannot_reach_the_channel_writes_nothing(locked_with_demos, capsys, tmp_path) -> None:
    project = locked_with_demos
    before = snapshot(project)
    gone = (tmp_path / "no-such-channel").as_uri()
    code, out, err = cli(
        capsys, "update", "demo-a", "--project-dir", str(project), "--mirror", f"conda-forge={gone}"
    )
    assert code != 0 and err.count("error:") == 1 and "hint:" in err and "Traceback" not in err, err
    assert snapshot(project) == before


# --------------------------------------------------------------------------- determinism and repair


@pytest.fixture(scope="module")
def moved_channels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Day 1 and day 8 where CUDA 12.1 lacks libcusparse-dev: every lock records a failed attempt (12.1)."""
    from tests.channelbuilder import build_channel

    kw = {"cuda_minors": ["12.0", "12.1"], "subdirs": ("linux-64",), "with_pytorch": False, "with_cuda11": False,
          "drop": {("libcusparse-dev", "12.1")}}
    old = build_channel(tmp_path_factory.mktemp("m1"), extra=[demo("demo-a", "1.0")], **kw)
    new = build_channel(tmp_path_factory.mktemp("m8"), extra=[demo("demo-a", "1.0"), demo("demo-a", "1.1")], **kw)
    return old, new


def test_recorded_attempt_reasons_do_not_depend_on_update_or_lock(tmp_path, moved_channels, capsys) -> None:
    """update (packages held) and lock --all (none held) record the same failed-attempt reasons: after an
    update, a lock --all of the same channel writes nothing; a no-op update writes nothing either."""
    old, new = moved_channels
    project = make_project(tmp_path / "p", old, platforms=("linux-64",))
    edit(spec_file(project), "platforms:", "  - demo-a\nplatforms:")
    assert cli(capsys, "lock", "--project-dir", str(project), "--mirror", f"conda-forge={old.as_uri()}")[0] == 0
    attempts = json.loads(read_lock(lock_file(project)).custom_metadata["envlock.plan.linux-64"])["attempts"]
    assert [a["cuda"] for a in attempts] == ["12.1"] * 3  # the failed candidate and its cuDNN fallbacks
    assert all("libcusparse-dev has no build for CUDA 12.1" in a["error"] for a in attempts)
    mirror = f"conda-forge={new.as_uri()}"
    time.sleep(1.1)
    before = snapshot(project)
    code, out, err = cli(capsys, "update", "cuda-nvcc", "--project-dir", str(project), "--mirror", mirror)
    assert code == 0 and "nothing written" in out, (out, err)
    assert snapshot(project) == before  # no-op update: bytes and mtime
    code, out, err = cli(capsys, "update", "demo-a", "--project-dir", str(project), "--mirror", mirror)
    assert code == 0 and "wrote" in out, (out, err)
    after_update = snapshot(project)
    assert json.loads(read_lock(lock_file(project)).custom_metadata["envlock.plan.linux-64"])["attempts"] == attempts
    code, doc = cli_json(capsys, "lock", "--all", "--project-dir", str(project), "--mirror", mirror)
    assert code == 0 and doc["environments"][0]["written"] == [], doc
    assert snapshot(project) == after_update


@pytest.mark.parametrize("how", [["lock"], ["lock", "--all"], ["lock", NAME]])
def test_lock_recreates_an_unreadable_lock_from_its_spec_and_says_so(project, capsys, cf, how) -> None:
    lock = lock_file(project)
    original = lock.read_bytes()
    lock.write_text("version: 1\nmetadata: [this is: not, a lock\n")
    code, out, err = cli(capsys, *how, "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
    flat = " ".join(out.split())  # long lines fold at 80 columns
    assert f"the lock was not usable (above): re-created from environments/{NAME}.yml" in flat
    assert "is not a valid conda-lock v1 file" in flat.replace("/ ", "/")
    assert lock.read_bytes() == original  # the same inputs and cutoff: the same lock again
    assert cli(capsys, "check", "--project-dir", str(project))[0] == 0


def test_lock_hints_name_the_spec_key_not_resolves_option(project, capsys, cf) -> None:
    """`lock` has no --cuda: an anchor it cannot derive says `cuda: X.Y` in the spec instead."""
    edit(spec_file(project), "torch: 2.3.0", "torch: 2.99.0")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf, "--offline")
    assert code == 1 and "torch 2.99.0 is not in envlock's table" in err, err
    (hint,) = [ln for ln in err.splitlines() if ln.startswith("hint:")]
    assert "--cuda" not in hint and f"as `cuda: X.Y` in environments/{NAME}.yml's envlock block" in hint


def test_a_lock_hint_is_an_edit_of_the_spec_that_lock_then_accepts(project, capsys, cf) -> None:
    """The anchor's hint is data (a Retry of resolve's options): for `lock` it is said as the spec's keys, and
    what it says works. (The hint said `--torch 2.3.0+cu121`, an option `lock` does not take.)"""
    edit(spec_file(project), "torch: 2.3.0", "torch: 2.3.0+cu999")
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 1 and "torch 2.3.0 was never built as +cu999" in unfolded(err), err
    (hint,) = [ln for ln in unfolded(err).splitlines() if ln.startswith("hint:")]
    assert hint.startswith(f"hint: a build it has: set `torch: 2.3.0+cu121` in environments/{NAME}.yml's envlock "
                           "block, or "), hint
    assert "--torch" not in hint and "--cuda" not in hint
    edit(spec_file(project), "torch: 2.3.0+cu999", "torch: 2.3.0+cu121")  # what the hint says
    code, out, err = cli(capsys, "lock", "--project-dir", str(project), "--mirror", cf)
    assert code == 0, err
