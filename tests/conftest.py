"""Shared test set-up. Fixture modules live in tests/fixtures/ (one per concern)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = [
    "tests.fixtures.channel",  # real tiny conda packages in real indexed channels (file:// and http)
    "tests.fixtures.pypi",  # a PEP 691 / PEP 658 index served from 127.0.0.1
    "tests.cputime",  # --cputime-out=FILE: per-test wall and CPU seconds (off by default)
]

REPO = Path(__file__).resolve().parent.parent

# Every hypothesis test draws fixed cases (a CI verdict must not hang on the draw) and keeps no example
# database; ENVLOCK_FUZZ_RANDOM=1 draws new cases each run (docs/reliability.md, section 3).
settings.register_profile("envlock", derandomize=os.environ.get("ENVLOCK_FUZZ_RANDOM") != "1", database=None)
settings.load_profile("envlock")
SHARED = REPO.parent / "shared"

# The Ctrl-C tests send SIGINT to the envlock they start, as a terminal does. A test run started where SIGINT is
# ignored (`nohup … &` in a script without job control) would hand that on to every child: Python then never
# raises KeyboardInterrupt and envlock rightly keeps running. Give the children the terminal's disposition.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts two workers per core: most of a test's time is spent waiting (for the envlock processes,
    shells, conda and uv it starts, and for its 127.0.0.1 servers), and a second worker runs while one waits. On
    this 2-core machine, from one compiled tree, nothing else running: the default tier took 291 s with 2 workers,
    243 s with 3 and 235 s with 4 (benchmarks/README.md, "The default tier, session 4"). PYTEST_XDIST_AUTO_NUM_WORKERS
    still decides where it is set (xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout; tests that need it skip with the reason when it is absent."""
    if not (SHARED / "channels" / "conda-forge" / "linux-64" / "repodata.json").is_file():
        pytest.skip(f"../shared data is absent (looked for {SHARED}/channels); it is provided beside the checkout in CI")
    return SHARED


def _isolate(base: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setenv("ENVLOCK_CACHE_DIR", str(base / "envlock-cache"))
    mp.setenv("ENVLOCK_CONFIG_DIR", str(base / "envlock-user-config"))
    mp.delenv("ENVLOCK_MIRRORS", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache_for_wider_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for session- and module-scoped fixtures, which pytest sets up before any function-scoped autouse
    fixture: without it their envlock processes read and wrote the user's real ~/.cache/envlock (seen: its
    file-locks/ and pypi-graphs/ touched by a test run)."""
    with pytest.MonkeyPatch.context() as mp:
        _isolate(tmp_path_factory.getbasetemp(), mp)
        yield


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the user's real envlock cache, config or mirrors from tests."""
    _isolate(tmp_path_factory.getbasetemp(), monkeypatch)
