"""The habits .ci/run keeps, also in the default tier (so a landing that breaks them fails before main does):
ruff's rule set over envlock/ and mypy --strict on the pure core (pyproject.toml's [tool.ruff.lint] and
[tool.mypy] say what and why). Both come with the `test` extra (`pip install -e '.[test]'`)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool(module: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: `pip install -e '.[test]'` (the test extra has ruff and mypy)")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})


def test_ruff_passes_over_envlock(tmp_path: Path) -> None:
    done = _tool("ruff", "check", "--no-cache", "envlock", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_strict_passes_on_the_pure_core(tmp_path: Path) -> None:
    done = _tool("mypy", "--cache-dir", str(tmp_path / "mypy"), tmp_path=tmp_path)
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Control: the same commands find an unused import and a missing annotation in a strict file."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x):\n    return x\n")
    assert _tool("ruff", "check", "--no-cache", "--isolated", "--select", "F", str(bad), tmp_path=tmp_path).returncode == 1
    done = _tool("mypy", "--strict", "--cache-dir", str(tmp_path / "mypy2"), str(bad), tmp_path=tmp_path)
    assert done.returncode == 1 and "no-untyped-def" in done.stdout


#: A `# type: ignore[...]` / `# noqa: ...` says why on its own line (`# noqa: BLE001 - why`, `# type: ignore[x]  # why`);
#: issue 26 item 10 gave each its reason, so none may be bare now. A bare `# noqa: PLC0415` is not counted: every
#: lazy import has the one reason pyproject.toml gives (start-up cost).
BARE = re.compile(r"#\s*(type:\s*ignore(\[[^\]]*\])?|noqa(:\s*[A-Z0-9, ]+)?)\s*$")
LAZY = re.compile(r"#\s*noqa:\s*PLC0415\s*$")


def test_no_ignore_without_a_reason() -> None:
    bare = [
        f"{path.relative_to(REPO).as_posix()}:{n}"
        for path in sorted((REPO / "envlock").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE.search(line) and not LAZY.search(line)
    ]
    assert bare == [], "say why after the code, e.g. `# " + "noqa: BLE001 - any failure is reported`"
    assert BARE.search("x = 1  # type: ignore[arg-type]") and not BARE.search("x  # " + "noqa: BLE001 - any failure")
    assert not BARE.search("x = 1  # type: ignore[arg-type]  # a str for a Literal")


def test_production_code_reads_no_test_hook() -> None:
    """Tests observe envlock from outside (tests/startup_probe, tests/paused_envlock.py's seams), never through an
    ENVLOCK_TEST_* variable that production code reads (issue 26 item 10)."""
    hooks = [
        f"{path.relative_to(REPO).as_posix()}:{n}"
        for path in sorted((REPO / "envlock").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "ENVLOCK_TEST" in line
    ]
    assert hooks == []


@pytest.fixture(scope="module")
def _cache_seen_by_a_module_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    return os.environ.get("ENVLOCK_CACHE_DIR", ""), tmp_path_factory.getbasetemp()


def test_module_fixtures_get_the_isolated_cache_too(_cache_seen_by_a_module_fixture: tuple[str, Path]) -> None:
    """Module- and session-scoped fixtures run before the function-scoped autouse isolation: they used the user's
    real ~/.cache/envlock (tests/conftest.py's session-scoped isolation gives them the test cache)."""
    seen, base = _cache_seen_by_a_module_fixture
    assert seen and Path(seen).is_relative_to(base), seen
