"""`python -m tests.paused_envlock ARGS…`: envlock's CLI with test pauses, so a test can SIGKILL it at a known point.

Production code reads no ENVLOCK_TEST_* and sleeps for no test; this test-only launcher installs the pauses
through envlock's seams, then runs `envlock ARGS…` exactly as `python -m envlock` would (same argv, so file-lock holder lines
read `envlock create …`):

* ENVLOCK_TEST_PAUSE_BEFORE_REPLACE=SECONDS[:FILENAME] wraps `envlock.seams.fs.replace` (every atomic write's rename):
  before each rename it says `envlock-test: pausing before replace of <file>` on stderr, and sleeps before
  FILENAME's (or before every one) — tests/reliability/test_interrupted.py, test_create_faults.py;
* ENVLOCK_TEST_PAUSE_IN_LINK=SECONDS sets `envlock.seams.conda.install.on_linked`: after the first linked package
  it says `envlock-test: pausing while linking` and sleeps (the prefix is half-linked) — test_create_faults.py.
* ENVLOCK_TEST_PAUSE_AFTER_EXTRACT=SECONDS wraps `envlock.usecases.unpack._extract_checked`: once every member is
  extracted and checked it says `envlock-test: pausing after extracting into <folder>` and sleeps (another user
  goes at unpack's work folder then) — tests/security/test_work_folders.py.

* ENVLOCK_TEST_PAUSE_AT=DIR:POINT,POINT… stops at each named point once: it writes `DIR/POINT.reached` and waits
  until the test creates `DIR/POINT.go` (at most 120 s), so a test runs another user's move exactly there
  (tests/security/test_bytes_used_slow.py). The points, each found in this envlock or an older one (a point the
  code lacks is never reached):
  - `after-check`: a conda archive (the kept one, a file:// mirror's) was just read to check it (`hash_file` by
    path in e081238, `copy_hashed` into a private copy now);
  - `before-link`: create read every entry's info/index.json and calls rattler to link (`install.link`);
  - `before-wheel-links`: the wheels were checked in the cache and are about to be given to uv's folder
    (`private_links`);
  - `before-uv`: uv is about to read that folder (`wheels.install_wheels`).

SECONDS may be `until=PATH`: the pause lasts until the test creates PATH (at most 120 s), so a test that needs
the paused process to outlast something (another process reaching the same file lock) waits for that event,
not for a time that a busy machine may overrun.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = [sys.executable, "-m", "tests.paused_envlock"]


def environ(env: dict[str, str], **pauses: str) -> dict[str, str]:
    """`env` plus the pauses (PAUSE_BEFORE_REPLACE=…, PAUSE_IN_LINK=…) and a PYTHONPATH that finds `tests`."""
    out = {**env, **{f"ENVLOCK_TEST_{k}": v for k, v in pauses.items()}}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return out


def _hold(spec: str) -> None:
    """Sleep SECONDS, or until the file named by `until=PATH` exists (at most 120 s)."""
    if not spec.startswith("until="):
        time.sleep(float(spec))
        return
    release, deadline = Path(spec[len("until="):]), time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _say(text: str) -> None:
    sys.stderr.write(f"envlock-test: {text}\n")
    sys.stderr.flush()


def _install() -> None:
    before_replace = os.environ.get("ENVLOCK_TEST_PAUSE_BEFORE_REPLACE")
    if before_replace:
        from envlock.seams import fs

        seconds, _, only = before_replace.partition(":")
        real = fs.replace

        def paused_replace(tmp: str | Path, path: Path, dir_fd: int | None = None) -> None:
            _say(f"pausing before replace of {path.name}")
            if not only or only == path.name:
                _hold(seconds)
            real(tmp, path, dir_fd)

        fs.replace = paused_replace
    in_link = os.environ.get("ENVLOCK_TEST_PAUSE_IN_LINK")
    if in_link:
        from envlock.seams.conda import install

        paused: list[bool] = []

        def pause_once(_name: str) -> None:
            if not paused:
                paused.append(True)
                _say("pausing while linking")
                _hold(in_link)

        install.on_linked = pause_once
    after_extract = os.environ.get("ENVLOCK_TEST_PAUSE_AFTER_EXTRACT")
    if after_extract:
        from envlock.usecases import unpack

        extract = unpack._extract_checked

        def paused_extract(tf: object, manifest: object, work: Path, archive: Path) -> None:
            extract(tf, manifest, work, archive)  # type: ignore[arg-type]
            _say(f"pausing after extracting into {os.path.realpath(work)}")
            _hold(after_extract)

        unpack._extract_checked = paused_extract  # type: ignore[assignment]


def _points() -> None:
    spec = os.environ.get("ENVLOCK_TEST_PAUSE_AT")
    if not spec:
        return
    folder, _, names = spec.rpartition(":")
    wanted = set(names.split(","))

    def stop(point: str) -> None:
        if point in wanted:
            wanted.discard(point)
            (Path(folder) / f"{point}.reached").touch()
            _say(f"paused at {point}")
            _hold(f"until={folder}/{point}.go")

    from envlock.seams.conda import cache, fetch, install
    from envlock.seams.pypi import wheels

    for module in (fetch, cache):
        for name in ("hash_file", "copy_hashed"):
            real = getattr(module, name, None)
            if real is None:
                continue

            def checked(src: Path, *a: object, _real: Any = real, **kw: object) -> Any:
                out = _real(src, *a, **kw)
                if str(src).endswith((".tar.bz2", ".conda")):
                    stop("after-check")
                return out

            setattr(module, name, checked)

    def before(module: Any, name: str, point: str) -> None:
        real = getattr(module, name)

        def paused(*a: object, **kw: object) -> Any:
            stop(point)
            return real(*a, **kw)

        setattr(module, name, paused)

    before(install, "link", "before-link")
    try:  # where private_links lives now; e081238 had it in wheels
        from envlock.seams.pypi import uvlinks as links
    except ImportError:
        links = wheels  # type: ignore[assignment]
    before(links, "private_links", "before-wheel-links")
    before(wheels, "install_wheels", "before-uv")


if __name__ == "__main__":
    _install()
    _points()
    from envlock.cli import main

    main()
