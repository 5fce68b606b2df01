"""Denial of service through a spec, a lock or a config file (issue 22, Why 10 first half; Build 9 limits).

A 1 KB spec with nine levels of YAML aliases under `- pip:` made `check` grow to 2.7 GB and `lock` end in
`internal error: MemoryError`. Every YAML/JSON/TOML document envlock reads from untrusted input goes through
one checked loader (envlock.formats.untrusted): no YAML aliases, a size cap, bounded nesting, and one `error:` line
for each. Each command runs as its own process under a memory cap (tests/security/inputs.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.output import flat
from tests.security.inputs import FULL, TOOLCHAIN, assert_one_error, copy, envlock, full_template, toolchain_template

__all__ = ["full_template", "toolchain_template"]  # fixtures used here


def _levels(depth: int, fan: int, leaf: str, *, mapping: bool = False) -> str:
    """YAML anchors a0…a<depth> each holding `fan` aliases of the one below: fan**depth leaves."""
    lines = [f"x0: &a0 {leaf}"]
    for i in range(1, depth + 1):
        if mapping:
            body = ", ".join(f"k{j}: *a{i - 1}" for j in range(fan))
            lines.append(f"x{i}: &a{i} {{{body}}}")
        else:
            lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def _spec(project: Path, name: str) -> Path:
    return project / "environments" / f"{name}.yml"


def _lock(project: Path, name: str) -> Path:
    return project / "locks" / name / "conda-lock.yml"


# How a spec can carry aliases: the nine levels under `- pip:` (block and flow style), a bomb of
# mappings under `with:`, a recursive alias, a merge key, one harmless scalar alias (refused all the same:
# envlock writes none, and "harmless" is not a judgement the loader should make), odd anchor names behind a BOM.
SPEC_ALIASES = {
    "pip-nine-levels": (_levels(9, 10, '["einops"]'), ("  - cudnn", "  - pip: *a8\n  - cudnn")),
    "pip-flow-style": (_levels(9, 10, "[einops]"), ("  - cudnn", "  - {pip: *a8}\n  - cudnn")),
    "with-mappings": (_levels(8, 10, "{a: deepspeed}", mapping=True), ("  torch: ", "  with: *a7\n  torch: ")),
    "recursive": ("x0: &r [einops, *r]\n", ("  - cudnn", "  - pip: *r\n  - cudnn")),
    "merge-key": ("base: &b {torch: 2.7.1, toolchain_only: false}\n", ("envlock:\n", "envlock:\n  <<: *b\n")),
    "scalar": ("x0: &s einops\n", ("  - cudnn", "  - pip: [*s]\n  - cudnn")),
    "odd-names-and-bom": ("\ufeffx0: &a-0_Z [[einops]]\n" + "x1: &9 [*a-0_Z, *a-0_Z, *a-0_Z]\n",
                          ("  - cudnn", "  - pip: *9\n  - cudnn")),
}


@pytest.mark.parametrize("command", ["check", "lock"])
@pytest.mark.parametrize("case", sorted(SPEC_ALIASES))
def test_yaml_aliases_in_a_spec_are_refused(case: str, command: str, full_template: Path, tmp_path: Path,
                                            test_channel_url: str) -> None:
    project = copy(full_template, tmp_path / "p")
    spec = _spec(project, FULL)
    prelude, (old, new) = SPEC_ALIASES[case]
    text = spec.read_text()
    assert old in text
    spec.write_text(prelude + text.replace(old, new, 1))
    assert len(spec.read_bytes()) < 2048  # the "1 KB spec"
    before = _lock(project, FULL).read_bytes()
    # A spec that got past the loader would be solved: against the test channel, never the network.
    done = envlock(command, "--project-dir", str(project), env={"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}"},
                   timeout=60)
    if command == "check":  # check lists the environment as not fresh, then one error for the run
        row = flat(done.stdout)  # the row is folded to 80 columns: a long temp path is cut after a '/'
        assert f"environments/{FULL}.yml uses a YAML alias" in row, done.stdout + done.stderr
        assert_one_error(done, "not fresh")
    else:
        assert_one_error(done, "YAML alias", f"{FULL}.yml")
    assert _lock(project, FULL).read_bytes() == before  # nothing written


# Aliases in a lock: in the header (custom metadata, which `check` reads) and in the package list (which
# `check` parses when the list's digest changed, and create, diff and export read).
LOCK_ALIASES = {
    "metadata": ("envlock.anchor: ", "envlock.anchor: *a8\n    envlock.zz: "),
    "package-dependencies": ("  dependencies:\n", "  dependencies: *a8\n  dependenciez:\n"),
}


@pytest.mark.parametrize("case", sorted(LOCK_ALIASES))
@pytest.mark.parametrize("command", ["check", "create", "diff", "export"])
def test_yaml_aliases_in_a_lock_are_refused(case: str, command: str, toolchain_template: Path,
                                            tmp_path: Path) -> None:
    project = copy(toolchain_template, tmp_path / "p")
    lock = _lock(project, TOOLCHAIN)
    old, new = LOCK_ALIASES[case]
    text = lock.read_text()
    assert old in text
    bomb = _levels(9, 10, "[x]", mapping=case == "package-dependencies")
    # The anchors go first, as top-level keys a reader ignores (the header comment stays on top).
    lock.write_text(bomb + text.replace(old, new, 1))
    args = {
        "check": ["check", "--project-dir", str(project)],
        "create": ["create", "--lock", str(lock), "-p", str(tmp_path / "env"), "--frozen"],
        "diff": ["diff", str(lock), str(_lock(toolchain_template, TOOLCHAIN))],
        "export": ["export", "dockerfile", TOOLCHAIN, "--project-dir", str(project), "-o", str(tmp_path / "Dockerfile")],
    }[command]
    done = envlock(*args, timeout=60)
    if command == "check":
        assert "YAML alias" in flat(done.stdout), done.stdout + done.stderr
        assert_one_error(done, "not fresh")
    else:
        assert_one_error(done, "YAML alias")
    assert not (tmp_path / "env").exists() and not (tmp_path / "Dockerfile").exists()


def test_deep_nesting_in_a_lock_is_one_error(toolchain_template: Path, tmp_path: Path) -> None:
    """JSON inside a lock's metadata nested 100,000 deep (RecursionError: internal error), and YAML nested past
    libyaml's own limit."""
    project = copy(toolchain_template, tmp_path / "p")
    lock = _lock(project, TOOLCHAIN)
    text = lock.read_text()
    deep = "[" * 100_000 + "]" * 100_000
    lock.write_text(re.sub(r"envlock\.anchor: '.*'", lambda _: f"envlock.anchor: '{deep}'", text, count=1))
    done = envlock("check", "--project-dir", str(project), timeout=60)
    assert "nested" in done.stdout, done.stdout + done.stderr
    assert_one_error(done, "not fresh")
    lock.write_text(text.replace("envlock.anchor: ", "envlock.zz: " + "[" * 2000 + "]" * 2000 + "\n    envlock.anchor: ", 1))
    done = envlock("check", "--project-dir", str(project), timeout=60)
    assert "nested" in done.stdout, done.stdout + done.stderr
    assert_one_error(done, "not fresh")


def test_an_oversized_spec_and_lock_are_refused_before_they_are_parsed(toolchain_template: Path,
                                                                       tmp_path: Path) -> None:
    """A spec over 1 MiB and a lock over 32 MiB (comment padding: valid YAML that parses, only big)."""
    project = copy(toolchain_template, tmp_path / "p")
    spec = _spec(project, TOOLCHAIN)
    good = spec.read_text()
    spec.write_text(good + ("# " + "x" * 1022 + "\n") * 1024)
    for command in ("check", "lock"):
        done = envlock(command, "--project-dir", str(project), timeout=60)
        text = done.stdout + done.stderr
        assert "1 MiB" in text and "spec" in text, text
        assert_one_error(done)
    spec.write_text(good)
    lock = _lock(project, TOOLCHAIN)
    lock.write_text(lock.read_text() + ("# " + "y" * 1022 + "\n") * (33 * 1024))
    for args in (["check", "--project-dir", str(project)], ["diff", str(lock), str(lock)],
                 ["create", "--lock", str(lock), "-p", str(tmp_path / "env"), "--frozen"]):
        done = envlock(*args, timeout=60)
        text = done.stdout + done.stderr
        assert "32 MiB" in text, text
        assert_one_error(done)
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("body", [
    "x = " + "[" * 100_000 + "]" * 100_000 + "\n",  # nesting: RecursionError in tomllib
    "[mirrors]\n" + "# pad\n" * 200_000 + "conda-forge = 'file:///nowhere'\n",  # over the cap (1.2 MB)
], ids=["deep", "oversized"])
def test_a_hostile_project_envlock_toml_is_one_error(body: str, toolchain_template: Path, tmp_path: Path) -> None:
    """A project's envlock.toml comes with the repository (a pull request can change it)."""
    project = copy(toolchain_template, tmp_path / "p")
    (project / "envlock.toml").write_text(body)
    done = envlock("config", cwd=project, timeout=60)
    assert_one_error(done, "envlock.toml")
