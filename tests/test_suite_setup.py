"""The suite runs wherever a checkout does (issue 34.9): its cache follows XDG_CACHE_HOME, the second user's folders
are reachable under a 0700 or long TMPDIR, and no test depends on where a temporary path folds at 80 columns."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.second_user import open_dir, second_user
from tests.suitecache import suite_cache

TESTS = Path(__file__).resolve().parent


def test_the_suite_cache_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ENVLOCK_TEST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert suite_cache() == tmp_path / "xdg" / "envlock-tests"
    monkeypatch.setenv("ENVLOCK_TEST_CACHE", str(tmp_path / "mine"))
    assert suite_cache() == tmp_path / "mine"


def test_no_test_keeps_a_cache_of_its_own_under_the_home_folder() -> None:
    """tests/test_conda.py kept the real conda in ~/.cache/envlock-tests whatever XDG_CACHE_HOME said: every cache
    across runs goes through tests/suitecache.py."""
    found = [path.relative_to(TESTS).as_posix() for path in sorted(TESTS.rglob("*.py"))
             if path.name != "test_suite_setup.py"
             and any(s in path.read_text(encoding="utf-8") for s in ('home() / ".cache"', '".cache" / "envlock-tests"',
                                                                     'user_cache_dir("envlock-tests")',
                                                                     'user_cache_path("envlock-tests")'))
             and path.name != "suitecache.py"]
    assert found == [], found


def test_the_second_users_folder_is_reachable_under_a_private_tmpdir(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """With TMPDIR a 0700 folder (mktemp -d, a user's private tmp, a long path under a 0700 home) the second user
    could not reach the folders its tests share, and the two-user tests failed."""
    as_other, env = second_user()
    private = tmp_path / ("private-" + "x" * 100)
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    with open_dir("envlock-reach-") as shared:
        (shared / "f").write_text("seen\n")
        (shared / "f").chmod(0o644)
        seen = subprocess.run([*as_other, "-c", f"print(open({str(shared / 'f')!r}).read(), end='')"],
                              capture_output=True, text=True, cwd="/", env=env)
    assert seen.returncode == 0 and seen.stdout == "seen\n", seen.stderr
    assert not str(shared).startswith(str(private))
    assert os.stat(private).st_mode & 0o777 == 0o700


@settings(max_examples=200, deadline=None)
@given(segments=st.lists(st.builds(str.__mul__, st.sampled_from("ab0._-"), st.integers(1, 44)), min_size=1,
                         max_size=8),
       before=st.sampled_from(["", "lock one there: `envlock resolve --torch 2.15.0 --project-dir", "no nvcc at",
                               "ENVLOCK_CACHE_DIR='"]),
       after=st.sampled_from(["", "` or pass another", "(looked for environments/*.yml)", "' is not a directory"]),
       label=st.sampled_from(["error", "hint", "warning"]), width=st.integers(60, 120))
def test_a_folded_path_reads_back_whole_whatever_its_length(segments: list[str], before: str, after: str, label: str,
                                                           width: int) -> None:
    """A temporary path of any length (a long $TMPDIR) folds so that tests/output.py reads it back: the folding
    function cuts a path wider than a line after a '/', and logical_lines joins what it cut. Tests compare what
    envlock prints with this pair, never with where a line happens to break."""
    from envlock.wrapping import wrap
    from tests.output import flat, logical_lines

    path = "/" + "/".join(segments) + "/x"
    glue = "" if before.endswith("'") else " "
    text = f"{before}{glue}{path}{'' if after.startswith(chr(39)) else ' '}{after}".strip()
    lines = wrap(label, text, width)
    assert all(len(ln) <= width for ln in lines), lines
    (whole,) = logical_lines("\n".join(lines))
    assert path in whole.replace(" \\ ", " ") and path in flat("\n".join(lines)), lines


def test_a_client_that_hangs_up_leaves_no_traceback_for_the_next_test(capfd: pytest.CaptureFixture[str]) -> None:
    """CI failed test_check's test_missing_lock_is_named on a BrokenPipeError traceback printed by an earlier test's
    fake index thread (socketserver prints a handler's error to stderr). Every loopback server is one class that
    takes a hang-up as no error; the test servers must not build their own from ThreadingHTTPServer."""
    import socket
    import threading
    import time
    from http.server import BaseHTTPRequestHandler

    from tests.loopserver import LoopbackServer

    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.end_headers()
            try:
                time.sleep(0.2)  # the client has gone by now
                for _ in range(64):
                    self.wfile.write(b"x" * 65536)
            finally:
                done.set()

        def log_message(self, *args: object) -> None:
            pass

    server = LoopbackServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        with socket.create_connection(server.server_address[:2]) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(1)  # the answer has begun: hang up
        assert done.wait(10)
        time.sleep(0.1)
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err
    others = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
              if p.name != "loopserver.py" and "ThreadingHTTPServer(" in p.read_text()
              and p.name != "test_suite_setup.py"]
    assert others == [], f"servers built without tests/loopserver.py: {others}"
