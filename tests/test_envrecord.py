"""The env record conda-meta/envlock has one owner (envlock/seams/envrecord.py): one name, a version written by every
writer and checked by every reader; a newer version is one clear error at every door (hook, run, shell-hook,
doctor, create)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.seams import envrecord
from envlock.errors import NewerFormatError
from tests.output import logical_lines

ENVLOCK = [sys.executable, "-m", "envlock"]
PACKAGE = Path(__file__).resolve().parents[1] / "envlock"


def _env(tmp_path: Path) -> Path:
    """A conda env as another tool leaves it: conda-meta/ with one package record, no envlock record."""
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "zlib-1.3.1-h4ab18f5_1.json").write_text(json.dumps(
        {"name": "zlib", "version": "1.3.1", "build": "h4ab18f5_1", "subdir": "linux-64", "files": []}))
    return prefix


def _envlock(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LC_ALL": "C.UTF-8",
           "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([*ENVLOCK, *args], env=env, capture_output=True, text=True, timeout=120)


def test_hook_writes_the_current_version_and_every_reader_reads_it(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    done = _envlock("hook", "-p", str(prefix), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    raw = json.loads((prefix / envrecord.REL).read_text())
    assert raw[envrecord.VERSION_KEY] == envrecord.VERSION == 1 and raw["envlock_version"]
    assert envrecord.read(prefix)["activation"] == {"torch_source": "pip", "has_cudnn": False}
    run = _envlock("run", "-p", str(prefix), "--", "sh", "-c", "echo $CUDA_HOME", tmp_path=tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == str(prefix), run.stderr


def test_a_newer_record_is_one_clear_error_at_every_door(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    assert _envlock("hook", "-p", str(prefix), tmp_path=tmp_path).returncode == 0
    doc = json.loads((prefix / envrecord.REL).read_text())
    (prefix / envrecord.REL).write_text(json.dumps({**doc, envrecord.VERSION_KEY: 2, "envlock_version": "9.0"}))
    with pytest.raises(NewerFormatError, match="newer envlock"):
        envrecord.read(prefix)
    for args in (("hook", "-p", str(prefix)), ("run", "-p", str(prefix), "--", "true"),
                 ("shell-hook", "-p", str(prefix), "--shell", "bash"), ("doctor", "-p", str(prefix))):
        done = _envlock(*args, tmp_path=tmp_path)
        lines = logical_lines(done.stderr.strip())  # error and hint lines are folded to 80 columns
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert lines[0] == (f"error: {prefix / envrecord.REL} was written by a newer envlock (9.0, record version 2;"
                            " this envlock reads version 1)"), (args, done.stderr)
        assert lines[1].startswith("hint: upgrade envlock (`pip install -U envlock-cuda`)"), (args, done.stderr)
    assert json.loads((prefix / envrecord.REL).read_text())[envrecord.VERSION_KEY] == 2  # hook left it alone


@pytest.mark.parametrize(("text", "doc", "why"), [
    (None, None, None),
    ('{"platform": "linux-64"}', {"platform": "linux-64"}, None),  # no version: the first one
    ('{"envlock_json_version": 1, "state": "complete"}', {"envlock_json_version": 1, "state": "complete"}, None),
    ("[1, 2]", None, "is not valid JSON"),
    ("{", None, "is not valid JSON"),
    ('{"envlock_json_version": "2"}', None, "has no valid envlock_json_version ('2')"),
    ('{"envlock_json_version": true}', None, "has no valid envlock_json_version (True)"),
    ('{"envlock_json_version": 0}', None, "has no valid envlock_json_version (0)"),
])
def test_load_reads_or_says_why_not(tmp_path: Path, text: str | None, doc: object, why: str | None) -> None:
    prefix = _env(tmp_path)
    if text is not None:
        (prefix / envrecord.REL).write_text(text)
    got, reason = envrecord.load(prefix)
    assert got == doc
    assert (reason is None) if why is None else (reason == f"its record {prefix / envrecord.REL} {why}")
    assert envrecord.read(prefix) == (doc or {})


def test_document_stamps_this_envlock_s_versions_over_the_callers() -> None:
    from envlock import __version__

    doc = envrecord.document({"envlock_json_version": 7, "envlock_version": "x", "state": "complete"})
    assert doc == {"envlock_json_version": 1, "envlock_version": __version__, "state": "complete"}
    assert list(doc)[:2] == ["envlock_json_version", "envlock_version"]


def test_no_module_but_envrecord_spells_the_record() -> None:
    """The record's path and version key are named in envlock/seams/envrecord.py only (strings in code, not prose)."""
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "envrecord.py" and path.parent == PACKAGE / "seams":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("conda-meta/envlock", envrecord.VERSION_KEY):
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
                    and node.right.value == "envlock" and "conda-meta" in ast.unparse(node.left)):
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert spelled == []
