"""No secret leaves the process that needs it (issue 22, Why 6 / Build 5).

`uv` ran with `--index-url http://user:TOKEN@…` on its command line, which every user of the machine reads
with `ps`; `envlock config` and `config --json` printed mirror URLs with their userinfo and `/t/<token>/`.
Now index credentials reach uv through its environment (readable by its own user only), and every URL envlock
prints is scrubbed. A second user (uid 65534, tests/second_user.py) watches /proc/<pid>/cmdline — and
/proc/<pid>/environ where it may read it — of every process while a credentialed resolve runs.

Credential shapes: `user:password@`, a token alone as userinfo, conda's `/t/<token>/` path segment, and
percent-encoded userinfo (`%40`, `%3A`, `%2F` in the name and password).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.second_user import open_dir, second_user
from tests.security.inputs import FULL, assert_one_error, envlock
from tests.wheelindex import WheelIndex, build_wheel

# Secrets: each distinct, each recognisable in any output or file.
USER, PASSWORD = "alice-SECRETUSER", "pw-SECRETPASS-91"
TOKEN = "tk-SECRETTOKEN-77"
PCT_USER, PCT_PASSWORD = "bob@corp-SECRETPCT", "p:w/SECRETPCT-2"


# The second user's watcher: scans every process's argv (and environ where readable) until told to stop.
WATCHER = r"""
import json, os, sys, time
cfg = json.load(open(sys.argv[1]))
needles = [n.encode() for n in cfg["needles"]]
me = os.getpid()
argvs, leaks, environs = set(), [], 0
while not os.path.exists(cfg["stop"]):
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        for kind in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{kind}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if kind == "cmdline":
                argvs.add(data.replace(b"\0", b" ").decode(errors="replace")[:300])
            else:
                environs += 1
            leaks += [f"{kind} of {pid}: {n.decode()}" for n in needles if n in data]
    time.sleep(0.001)
json.dump({"argvs": sorted(argvs), "leaks": sorted(set(leaks)), "environs": environs}, open(cfg["out"], "w"))
"""


def _needles(*secrets: str) -> list[str]:
    """Each secret as written and percent-encoded (what a URL or a header could carry)."""
    return sorted({form for s in secrets for form in (s, quote(s, safe=""))})


def _index(template: WheelIndex, *, extra: bool, **auth: object) -> WheelIndex:
    """A copy of the session's index (same wheels, no rebuild) that demands credentials; the extra index alone
    has `extraonly` (so a lock holding it shows the extra index was read)."""
    idx = WheelIndex(trees={k: dict(v) for k, v in template.trees.items()}, **auth)  # type: ignore[arg-type]
    return (idx.add([build_wheel("extraonly", "2.0")]) if extra else idx).start()


# Two resolves cover the four shapes: the default index and an extra index each carry one.
SHAPES = {
    "userinfo+conda-token": (
        lambda i: i.url.replace("http://", f"http://{USER}:{PASSWORD}@", 1), {"login": (USER, PASSWORD)},
        lambda i: f"{i.base}/t/{TOKEN}/simple/", {"token": TOKEN},
    ),
    "token-userinfo+percent-encoded": (
        lambda i: i.url.replace("http://", f"http://{TOKEN}@", 1), {"login": (TOKEN, "")},
        lambda i: i.url.replace("http://", f"http://{quote(PCT_USER, safe='')}:{quote(PCT_PASSWORD, safe='')}@", 1),
        {"login": (PCT_USER, PCT_PASSWORD)},
    ),
}


@pytest.mark.parametrize("shapes", sorted(SHAPES))
def test_a_credentialed_resolve_shows_no_secret_to_another_user_nor_in_any_file(
    shapes: str, wheel_index: WheelIndex, test_channel_url: str, tmp_path: Path
) -> None:
    as_other, _ = second_user()
    main_url, main_auth, extra_url, extra_auth = SHAPES[shapes]
    main, extra = _index(wheel_index, extra=False, **main_auth), _index(wheel_index, extra=True, **extra_auth)
    needles = _needles(USER, PASSWORD, TOKEN, PCT_USER, PCT_PASSWORD)
    try:
        with open_dir("envlock-watch-", 0o777) as watch, open_dir("envlock-cache-", 0o755) as cache:
            cfg = {"needles": needles, "stop": str(watch / "stop"), "out": str(watch / "out.json")}
            (watch / "cfg.json").write_text(json.dumps(cfg))
            (watch / "cfg.json").chmod(0o644)
            watcher = subprocess.Popen([*as_other, "-c", WATCHER, str(watch / "cfg.json")], cwd="/")
            time.sleep(0.3)  # its first sweep
            env = {"PIP_INDEX_URL": main_url(main), "PIP_EXTRA_INDEX_URL": extra_url(extra), "PIP_CONFIG_FILE": os.devnull,
                   "ENVLOCK_CACHE_DIR": str(cache)}
            project = tmp_path / "p"
            outputs = []
            for args in (["--json"], ["-v"]):
                done = envlock("resolve", "--torch", "2.7.1", "--platform", "linux-64", "--mirror",
                               f"conda-forge={test_channel_url}", "--pip", "extraonly", "--project-dir", str(project),
                               *args, env=env, timeout=300)
                assert done.returncode == 0, done.stdout + done.stderr
                outputs.append(done.stdout + done.stderr)
            (watch / "stop").touch()
            assert watcher.wait(timeout=30) == 0
            seen = json.loads((watch / "out.json").read_text())
            # A file holding a secret (uv's record of a URL with a token in its path) is this user's alone:
            # the second user cannot read it. The project holds none at all.
            hits = sorted({str(p) for p in cache.rglob("*") if p.is_file() for n in needles if n.encode() in p.read_bytes()})
            readable = _readable_by_second_user(as_other, hits)
    finally:
        main.stop()
        extra.stop()
    # The watcher saw uv at work (so it could have seen a secret there), and no secret anywhere.
    assert any(" pip compile " in a for a in seen["argvs"]), seen["argvs"]
    assert seen["leaks"] == [], seen["leaks"]
    # The credentials were used: each index answers only requests that carry them, and both were read.
    lock = (project / "locks" / FULL / "conda-lock.yml").read_text()
    assert "name: extraonly" in lock and "name: torch" in lock
    for text in outputs:
        assert not [n for n in needles if n in text], text
    assert readable == [], readable
    assert all("/private-" in h for h in hits), hits
    written = [p for p in project.rglob("*") if p.is_file()]
    assert written and [(p, n) for p in written for n in needles if n.encode() in p.read_bytes()] == []


def _readable_by_second_user(as_other: list[str], paths: list[str]) -> list[str]:
    """The paths uid 65534 can open for reading."""
    probe = ("import json, sys\nok = []\nfor p in json.load(sys.stdin):\n    try:\n        open(p, 'rb').close()\n"
             "        ok.append(p)\n    except OSError:\n        pass\nprint(json.dumps(ok))")
    done = subprocess.run([*as_other, "-c", probe], input=json.dumps(paths), capture_output=True, text=True, cwd="/",
                          check=True)
    return json.loads(done.stdout)


# --------------------------------------------------------------------------- printed URLs

MIRROR_SHAPES = {
    "userinfo": f"http://{USER}:{PASSWORD}@127.0.0.1:9/conda-forge",
    "token-userinfo": f"http://{TOKEN}@127.0.0.1:9/conda-forge",
    "conda-token": f"http://127.0.0.1:9/t/{TOKEN}/conda-forge",
    "conda-token-uppercase-scheme": f"HTTP://127.0.0.1:9/t/{TOKEN}/conda-forge",
    "percent-encoded": f"http://{quote(PCT_USER, safe='')}:{quote(PCT_PASSWORD, safe='')}@127.0.0.1:9/conda-forge",
    "percent-encoded-token-segment": f"http://127.0.0.1:9/%74/{TOKEN}/conda-forge",
    "all-at-once": f"https://{USER}:{PASSWORD}@127.0.0.1:9/t/{TOKEN}/conda-forge",
}
SECRETS = _needles(USER, PASSWORD, TOKEN, PCT_USER, PCT_PASSWORD)


@pytest.mark.parametrize("shape", sorted(MIRROR_SHAPES))
def test_config_shows_mirrors_without_their_credentials(shape: str, tmp_path: Path) -> None:
    """From every source: --mirror, ENVLOCK_MIRRORS, the project's and the user's envlock.toml, and as a key
    (`--mirror https://…=…`, the form for a PyTorch wheel index)."""
    url = MIRROR_SHAPES[shape]
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    (user_dir / "envlock.toml").write_text(f'[mirrors]\nnvidia = "{url}"\n')
    (tmp_path / "envlock.toml").write_text(f'[mirrors]\n"{url.replace("conda-forge", "pytorch")}" = "{url}"\n')
    env = {"ENVLOCK_CONFIG_DIR": str(user_dir), "ENVLOCK_MIRRORS": f"pypi={url.replace('conda-forge', 'simple')}"}
    for fmt in ([], ["--json"]):
        done = envlock("config", "--mirror", f"conda-forge={url}", *fmt, env=env, cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        text = done.stdout + done.stderr
        assert "127.0.0.1:9" in text, text  # the mirrors are shown
        assert not [s for s in SECRETS if s in text], text


@pytest.mark.parametrize("shape", sorted(MIRROR_SHAPES))
def test_errors_name_credentialed_urls_without_their_credentials(shape: str, tmp_path: Path,
                                                                 toolchain_template_copy: Path) -> None:
    """A mirror that cannot be reached (nothing listens on 127.0.0.1:9), for each command that fetches,
    in human form, with -v and with --json."""
    url = MIRROR_SHAPES[shape]
    env = {"ENVLOCK_MIRRORS": f"conda-forge={url}", "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"),
           "ENVLOCK_HTTP_RETRIES": "0"}
    project = toolchain_template_copy
    runs = {
        "resolve": ["resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only",
                    "--project-dir", str(project / "r")],
        "create": ["create", "--project-dir", str(project), "-p", str(tmp_path / "env")],
        "pack": ["pack", "--project-dir", str(project), "-o", str(tmp_path / "env.tar")],
        "mirror": ["mirror", "--project-dir", str(project), str(tmp_path / "mirror")],
    }
    for name, args in runs.items():
        for fmt in ([], ["-v"], ["--json"]):
            if fmt == ["-v"] and name != "resolve":
                continue  # only resolve has --verbose
            done = envlock(*args, *fmt, env=env, timeout=120)
            text = done.stdout + done.stderr
            assert done.returncode != 0, f"{name}: {text}"
            assert not [s for s in SECRETS if s in text], f"{name} {fmt}: {text}"
            if fmt != ["--json"]:
                assert_one_error(done, code=done.returncode)


@pytest.fixture
def toolchain_template_copy(toolchain_template: Path, tmp_path: Path) -> Path:
    from tests.security.inputs import copy

    return copy(toolchain_template, tmp_path / "project")


from tests.security.inputs import toolchain_template  # noqa: E402, F401 - a fixture


def test_a_credentialed_channel_leaves_no_readable_secret_in_a_shared_cache(channel_root: Path, tmp_path: Path) -> None:
    """rattler keeps each channel URL whole in its repodata cache (shards): with credentials in the URL that
    cache is this user's private one, so a group sharing ENVLOCK_CACHE_DIR cannot read them."""
    from tests.channelbuilder import ChannelServer

    as_other, _ = second_user()
    server = ChannelServer(channel_root).start()
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/t/{TOKEN}/conda-forge"
    needles = _needles(USER, PASSWORD, TOKEN)
    try:
        with open_dir("envlock-cache-", 0o2775) as cache:
            done = envlock("resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--channel", url,
                           "--project-dir", str(tmp_path / "p"), env={"ENVLOCK_CACHE_DIR": str(cache)}, timeout=300)
            assert done.returncode == 0, done.stderr
            assert any(r.token == TOKEN for r in server.requests)  # the token was used
            hits = sorted({str(p) for p in cache.rglob("*") if p.is_file() for n in needles if n.encode() in p.read_bytes()})
            readable = _readable_by_second_user(as_other, hits)
    finally:
        server.stop()
    assert hits and readable == [], (hits, readable)
    assert not [s for s in needles if s in done.stdout + done.stderr]
