"""Names are shown, never interpreted (issue 22, smaller items).

Spec and lock names reached the terminal raw: a directory `locks/<ESC>]0;…/`, a spec value or a package name
with terminal escape sequences passed through `check`, `lock` and `diff` (a title rewritten, the screen
cleared, a fake `fresh` line after a carriage return or newline). Now every name from a spec, a lock or an
archive is printed with its control characters escaped (`\\x1b`, `\\u202e`), in human output; `--json`
escapes them as JSON does. `doctor` on a prefix whose path holds a newline ended in an internal error.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.security.inputs import FULL, TOOLCHAIN, assert_one_error, copy, envlock, full_template, toolchain_template
from tests.output import flat

__all__ = ["full_template", "toolchain_template"]  # fixtures used here

# The escapes: CSI (clear screen, colour), OSC (window title) ended by BEL, the C1 CSI byte, a carriage
# return that overwrites the line, a newline that forges a line, DEL, and a right-to-left override.
ESCAPES = {
    "csi": "\x1b[2J\x1b[31m",
    "osc-title": "\x1b]0;pwned\x07",
    "c1-csi": "\x9b31m",
    "carriage-return": "\rfresh  ",
    "newline": "\nfresh  forged  -  linux-64",
    "del": "\x7f",
    "bidi": "\u202egnp.exe",
}
#: What must never reach a terminal raw: C0 (but newline), DEL, C1, and Unicode format characters (bidi).
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _assert_shown(text: str, payload: str) -> None:
    assert not RAW.search(text), repr(text)
    if "\n" in payload:  # a forged line: never a line of its own
        assert not any(ln.startswith("fresh  forged") for ln in text.splitlines()), text


def _json_ok(text: str) -> None:
    json.loads(text)  # one document: escapes stay inside its strings
    assert not RAW.search(text), repr(text)


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_check_and_lock_show_hostile_environment_names_escaped(kind: str, toolchain_template: Path,
                                                              tmp_path: Path, test_channel_url: str) -> None:
    """Names from the file system (a lock folder, a spec file) and from inside a spec."""
    payload = ESCAPES[kind]
    project = copy(toolchain_template, tmp_path / "p")
    # A lock folder without a spec, named by the attacker; a spec file whose name is not its `name:`.
    shutil.copytree(project / "locks" / TOOLCHAIN, project / "locks" / f"evil{payload}")
    spec = (project / "environments" / f"{TOOLCHAIN}.yml").read_text()
    (project / "environments" / f"spec{payload}.yml").write_text(spec)
    # Values inside a spec: the torch version and a dependency (YAML's double-quoted escapes).
    quoted = json.dumps(payload)[1:-1]
    edited = spec.replace("torch: 2.3.0", f'torch: "2.3.0{quoted}"').replace("  - cudnn", f'  - "cudnn{quoted}"\n  - cudnn')
    (project / "environments" / f"{TOOLCHAIN}.yml").write_text(edited)
    env = {"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}"}
    done = envlock("check", "--project-dir", str(project), env=env, timeout=60)
    assert done.returncode == 1
    _assert_shown(done.stdout + done.stderr, payload)
    assert "evil" in done.stdout and "spec" in done.stdout
    done = envlock("check", "--project-dir", str(project), "--json", env=env, timeout=60)
    _json_ok(done.stdout)
    assert any(e["name"] == f"evil{payload}" for e in json.loads(done.stdout)["environments"])
    done = envlock("lock", "--project-dir", str(project), env=env, timeout=120)
    _assert_shown(done.stdout + done.stderr, payload)
    assert_one_error(done)


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_diff_shows_hostile_package_names_escaped(kind: str, toolchain_template: Path, tmp_path: Path) -> None:
    """Two locks whose package names, versions and builds carry escapes (diff reads foreign locks too)."""
    payload = json.dumps(ESCAPES[kind])[1:-1]
    lock = toolchain_template / "locks" / TOOLCHAIN / "conda-lock.yml"
    text = lock.read_text()
    assert "- name: cuda-nvcc\n" in text
    other = tmp_path / "other.yml"
    other.write_text(text.replace("- name: cuda-nvcc\n  version: ", f'- name: "cuda-nvcc{payload}"\n  version: "9{payload}"\n  versio: ', 1))
    for fmt in ([], ["--json"]):
        done = envlock("diff", str(lock), str(other), *fmt, timeout=60)
        assert done.returncode == 0, done.stderr
        if fmt:
            _json_ok(done.stdout)
            (diff,) = json.loads(done.stdout)["diffs"]
            assert any(e["name"] == f"cuda-nvcc{ESCAPES[kind]}" for e in diff["platforms"]["linux-64"]["added"])
        else:
            _assert_shown(done.stdout + done.stderr, ESCAPES[kind])
            assert "cuda-nvcc" in done.stdout


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_a_lock_whose_package_fields_hold_control_characters_is_refused(kind: str, toolchain_template: Path,
                                                                        tmp_path: Path) -> None:
    """create, check and export read a lock's names and URLs into files other programs read (an @EXPLICIT
    line per URL, a requirements line per version): a newline there would add a line of the attacker's. A lock
    whose package fields hold a control character is refused, the field named and escaped."""
    payload = json.dumps(ESCAPES[kind])[1:-1]
    project = copy(toolchain_template, tmp_path / "p")
    lock = project / "locks" / TOOLCHAIN / "conda-lock.yml"
    text = lock.read_text()
    url = re.search(r"  url: (\S+cuda-nvcc\S+)\n", text)
    assert url is not None
    lock.write_text(text.replace(url.group(0), f'  url: "{url.group(1)}#0{payload}https://127.0.0.1:9/evil.conda"\n', 1))
    for args in (["create", TOOLCHAIN, "--project-dir", str(project), "-p", str(tmp_path / "env"), "--frozen"],
                 ["export", "dockerfile", TOOLCHAIN, "--project-dir", str(project), "-o", str(tmp_path / "Dockerfile")]):
        done = envlock(*args, timeout=60)
        line = assert_one_error(done, "url")
        _assert_shown(done.stdout + done.stderr, ESCAPES[kind])
        assert "conda-lock.yml" in line
    assert not (tmp_path / "env").exists() and not (tmp_path / "Dockerfile").exists()


@pytest.mark.parametrize("name", ["env\nwith-newline", "env\x1b[2Jcleared", "env\rreturn", "tab\tand space"])
def test_doctor_on_a_prefix_with_control_characters_in_its_path(name: str, tmp_path: Path) -> None:
    """One `error:` line naming the prefix escaped (it is not an environment), or a report; never an
    internal error, never a raw control character in the output."""
    prefix = tmp_path / name
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    for args in (["doctor", "-p", str(prefix)], ["doctor", "-p", str(prefix), "--json"]):
        done = envlock(*args, timeout=120)
        text = done.stdout + done.stderr
        assert "internal error" not in text and "Traceback" not in text, text
        assert not RAW.search(text), repr(text)
        if "--json" in args:
            json.loads(done.stdout)
        else:  # the path is shown on its lines, never split into a line of its own (folded where it is long)
            assert name not in text and str(tmp_path) in flat(text), text


def test_doctor_on_a_created_full_env_whose_path_holds_a_newline(full_template: Path, tmp_path: Path,
                                                                 test_channel_url: str) -> None:
    """The issue's case: a full environment (python, torch) where the path holds a newline. create refuses such a
    path since issue 34 (nvcc cannot read it in NVCC_PREPEND_FLAGS: tests/test_prefix_path.py), saying so with the
    path escaped; an env made elsewhere and moved there is what doctor then reads."""
    prefix = tmp_path / "env\nwith-newline"
    mirrors = {"ENVLOCK_MIRRORS": f"conda-forge={test_channel_url}"}
    done = envlock("create", FULL, "--project-dir", str(full_template), "-p", str(prefix), "--frozen", env=mirrors,
                   timeout=300)
    assert done.returncode == 1 and "a line break" in done.stderr and not prefix.exists(), done.stderr
    assert not RAW.search(done.stdout + done.stderr) and str(prefix) not in done.stderr, repr(done.stderr)
    made = tmp_path / "made"
    done = envlock("create", FULL, "--project-dir", str(full_template), "-p", str(made), "--frozen", env=mirrors,
                   timeout=300)
    assert done.returncode == 0, done.stderr
    made.rename(prefix)
    for args in (["doctor", "-p", str(prefix)], ["doctor", "-p", str(prefix), "--json"]):
        done = envlock(*args, timeout=300)
        text = done.stdout + done.stderr
        assert "internal error" not in text and "Traceback" not in text, text
        assert not RAW.search(text), repr(text)
        if "--json" in args:
            assert json.loads(done.stdout)["findings"]
        else:
            assert str(prefix) not in text and "env\\x0awith-newline" in text, text
