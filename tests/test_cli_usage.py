"""Usage errors (exit 2, one `error:` + one `hint:` line), every --help listing its options, and Ctrl-C.

All through real processes: the console script next to this interpreter (what users run) and
`python -m envlock`; Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from envlock.cli import app
from tests.output import logical_lines

ENVLOCK = [sys.executable, "-m", "envlock"]
SCRIPT = Path(sys.executable).with_name("envlock")
INTERRUPTED = ["error: interrupted", "hint: nothing was started; run the command again"]


def envlock(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _commands() -> Iterator[tuple[tuple[str, ...], object]]:
    """(path, click command) of every leaf command of the app (export dockerfile included)."""
    root = typer.main.get_command(app)
    ctx = root.make_context("envlock", [], resilient_parsing=True)

    def walk(cmd: object, path: tuple[str, ...], ctx: object) -> Iterator[tuple[tuple[str, ...], object]]:
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):  # type: ignore[attr-defined]
                sub = cmd.get_command(ctx, name)  # type: ignore[attr-defined]
                yield from walk(sub, (*path, name), sub.make_context(name, [], parent=ctx, resilient_parsing=True))
        else:
            yield path, cmd

    yield from walk(root, (), ctx)


COMMANDS = dict(_commands())


def test_the_command_list_is_what_the_readme_documents() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"resolve", "create", "run", "shell-hook", "doctor", "check", "lock", "update", "diff",
            "export dockerfile"} <= names


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_help_lists_each_of_its_options(path: tuple[str, ...]) -> None:
    options = [o for p in COMMANDS[path].params if type(p).__name__ == "TyperOption" or hasattr(p, "opts")
               for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]  # type: ignore[attr-defined]
    assert options, path
    proc = envlock(*path, "--help", env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr
    missing = [o for o in options if o not in proc.stdout]
    assert missing == [], proc.stdout


def _one_usage_error(proc: subprocess.CompletedProcess[str], needle: str, command: str | None) -> None:
    """Exit 2, one error line, one hint line; a parser error's hint names the command's --help."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert max(len(ln) for ln in proc.stderr.splitlines()) <= 80, proc.stderr
    lines = logical_lines(proc.stderr.strip())
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert lines[1].startswith("hint: ") and len(lines[1]) > 20, proc.stderr
    if command is not None:
        assert f"`{command} --help`" in lines[1], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_an_unknown_option_is_a_usage_error_for_every_command(path: tuple[str, ...]) -> None:
    proc = envlock(*path, "--bogus", *(["--", "true"] if path == ("run",) else []))
    _one_usage_error(proc, "no such option: --bogus", "envlock " + " ".join(path))


USAGE = [
    (["check", "--project-dir"], "option '--project-dir' requires an argument", "envlock check"),
    (["resolve"], "missing option '--torch'", "envlock resolve"),
    (["resolve", "--torch"], "option '--torch' requires an argument", "envlock resolve"),
    (["resolve", "--torch", "2.7.1", "--torch-source", "conda"], "'conda' is not a torch source", None),
    (["resolve", "--torch", "2.7.1", "--toolchain-only", "--python", "3.11"], "--toolchain-only locks no python",
     None),
    (["update", "--lock"], "option '--lock' requires an argument", "envlock update"),  # `update` alone moves all
    (["create", "NAME", "--lock", "x.yml"], "either a lock NAME or --lock NAME|FILE", None),
    (["create", "--locked", "--frozen"], "contradict", None),
    (["diff", "one.yml"], "needs two locks", None),
    (["export", "dockerfile", "--platform"], "option '--platform' requires an argument", "envlock export dockerfile"),
    (["nonsense"], "no such command 'nonsense'", "envlock"),
    # Issue 24: an invalid choice or a value of the wrong form exits 2 in every command, like an unknown option.
    (["resolve", "--torch", "2.7.1", "--platform", "linux64"], "--platform 'linux64' is not a platform", None),
    (["resolve", "--torch", "2.7.1", "--platform", "osx-arm64"], "torch on macOS has no CUDA", None),
    (["create", "--platform", "linux64"], "--platform 'linux64' is not a platform", None),
    (["pack", "-o", "x.tar", "--platform", "linux64"], "--platform 'linux64' is not a platform", None),
    (["mirror", "--platform", "linux64", "DIR"], "--platform 'linux64' is not a platform", None),
    (["export", "dockerfile", "--platform", "win-64"], "--platform 'win-64' is not a platform", None),
    (["resolve", "--torch", "2.7.1", "--with", "bogus"], "--with 'bogus' is not a group", None),
    (["resolve", "--torch", "2.7.1", "--cuda", "abc"], "--cuda 'abc' is not a CUDA version", None),
    (["resolve", "--torch", "2.7.1", "--python", "abc"], "--python 'abc' is not a Python version", None),
    (["resolve", "--torch", "2.7.1", "--exclude-newer", "yesterday"], "--exclude-newer 'yesterday' is not an ISO", None),
    (["resolve", "--torch", "2.7.1", "--mirror", "conda-forge"], "--mirror 'conda-forge' is not NAME=URL", None),
    (["resolve", "--torch", "2.7.1", "--channel", ""], "--channel '' names no channel", None),
    (["resolve", "--torch", "2.7.1", "--lock", "../x"], "invalid lock name '../x'", None),
    # a lock is named by its NAME argument; -n/--name names an environment (docs/reference.md: one rule for names)
    (["lock", "--name", "x"], "`lock` takes the lock's NAME as its argument", None),
    (["check", "--name=x"], "`check` takes the lock's NAME as its argument", None),
    (["export", "explicit", "--platform", "osx-64"], "torch on macOS has no CUDA", None),
    (["shell-hook", "--shell", "tcsh", "-p", "."], "--shell 'tcsh' is not a shell", None),
    (["mirror"], "`envlock mirror` needs the DIR", None),
]


@pytest.mark.parametrize(("args", "needle", "command"), USAGE, ids=[" ".join(a) for a, _, _ in USAGE])
def test_usage_errors_exit_2_in_the_one_line_form(args: list[str], needle: str, command: str | None, tmp_path: Path) -> None:
    proc = subprocess.run([*ENVLOCK, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    _one_usage_error(proc, needle, command)
    assert list(tmp_path.iterdir()) == []


ENV_SETTINGS = [
    ("ENVLOCK_HTTP_TIMEOUT", "abc"), ("ENVLOCK_HTTP_TIMEOUT", "0"), ("ENVLOCK_HTTP_TIMEOUT", "-1"),
    ("ENVLOCK_HTTP_TIMEOUT", "nan"), ("ENVLOCK_HTTP_RETRIES", "1.5"), ("ENVLOCK_HTTP_RETRIES", "-1"),
    ("ENVLOCK_UV_TIMEOUT", "ten"), ("ENVLOCK_CACHE_DIR", "/dev/null/x"), ("ENVLOCK_MIRRORS", "conda-forge"),
]


@pytest.mark.parametrize(("name", "value"), ENV_SETTINGS, ids=[f"{n}={v}" for n, v in ENV_SETTINGS])
def test_a_bad_environment_setting_is_a_usage_error_naming_it(name: str, value: str, tmp_path: Path) -> None:
    """Issue 24: ENVLOCK_HTTP_TIMEOUT=abc was taken as the default in silence. `check` reads no network
    setting, yet a bad one is refused there too: one rule, before any command starts."""
    if name == "ENVLOCK_CACHE_DIR":
        value = str(tmp_path / "a-file")
        Path(value).write_text("x")
    proc = subprocess.run([*ENVLOCK, "check", "--project-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, name: value})
    _one_usage_error(proc, name, None)


def test_good_environment_settings_pass(tmp_path: Path) -> None:
    """Control: well-formed values (a fraction of a second, no retries) are taken."""
    env = {**os.environ, "ENVLOCK_HTTP_TIMEOUT": "0.5", "ENVLOCK_HTTP_RETRIES": "0", "ENVLOCK_UV_TIMEOUT": "30"}
    proc = subprocess.run([*ENVLOCK, "check", "--project-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode != 2, proc.stderr


def test_platform_help_lists_the_choices_and_the_default() -> None:
    """Issue 24: `resolve --help` gave neither; export's list named linux-ppc64le, which nothing supports."""
    for path, choices in ((("resolve",), "[linux-64|linux-aarch64|win-64]"),
                          (("export", "dockerfile"), "[linux-64|linux-aarch64]")):
        proc = envlock(*path, "--help", env={"COLUMNS": "200", "NO_COLOR": "1"})
        text = " ".join(proc.stdout.split())
        assert f"--platform {choices}" in text and "default:" in text.split("--platform", 1)[1][:300], text
        assert "ppc64le" not in text


def test_mirror_help_does_not_read_as_if_it_writes_the_config() -> None:
    for path in (("resolve",), ("create",), ("lock",), ("update",), ("pack",), ("mirror",), ("config",),
                 ("export", "explicit")):
        proc = envlock(*path, "--help", env={"COLUMNS": "200", "NO_COLOR": "1"})
        text = " ".join(proc.stdout.split())
        assert "Adds to ENVLOCK_MIRRORS" not in text and "Comes before ENVLOCK_MIRRORS and envlock.toml" in text, path


def test_a_usage_error_with_json_is_the_json_object_on_stdout() -> None:
    proc = envlock("lock", "--json", "--bogus")
    assert proc.returncode == 2 and proc.stderr == ""
    doc = json.loads(proc.stdout)
    # click may add its guess ("(Possible options: --verbose)"): kept, it is the `did you mean`.
    assert doc["exit_code"] == 2 and doc["error"].startswith("no such option: --bogus") and "envlock lock --help" in doc["hint"]


def test_check_bogus_is_not_read_as_stale_by_ci() -> None:
    """The issue's case: `check --bogus` exited 1, which CI reads as 'stale'."""
    proc = envlock("check", "--bogus")
    assert proc.returncode == 2


# --------------------------------------------------------------------------- Ctrl-C


#: tests/startup_probe/sitecustomize.py, which `site` runs in the envlock process: it watches the interpreter's
#: audit events and says when SIGINT's handler is no longer Python's own (envlock's start-up handler is in place).
PROBE = Path(__file__).resolve().parent / "startup_probe"
ANNOUNCED = "envlock-probe: start-up\n"


def _probed(env: dict[str, str], mode: str) -> dict[str, str]:
    """`env` with the start-up probe on: `1` announces, `pause` announces and holds start-up 10 s."""
    path = os.pathsep.join(p for p in (str(PROBE), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, "ENVLOCK_PROBE_STARTUP": mode}


def _interrupt_after_startup(cmd: list[str], tmp_path: Path) -> tuple[int, list[str], str]:
    """Start cmd, wait until the probe sees envlock's start-up handler in place (it then holds start-up: a
    start-up without typer is over a few ms later, before a signal from a busy machine arrives), send SIGINT."""
    env = _probed({**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}, "pause")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first == ANNOUNCED, first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, err.strip().splitlines(), out


@pytest.mark.parametrize("how", ["console-script", "python -m"])
def test_ctrl_c_during_start_up_is_one_interrupted_line_and_exit_130(how: str, tmp_path: Path) -> None:
    if how == "console-script" and not SCRIPT.is_file():
        pytest.skip(f"no console script at {SCRIPT} (envlock not installed into this interpreter's environment)")
    cmd = [str(SCRIPT)] if how == "console-script" else list(ENVLOCK)
    code, lines, out = _interrupt_after_startup([*cmd, "check", "--project-dir", str(tmp_path)], tmp_path)
    assert code == 130, lines
    assert lines == INTERRUPTED and out == ""


def test_ctrl_c_during_start_up_with_json_is_the_json_object(tmp_path: Path) -> None:
    code, lines, out = _interrupt_after_startup([*ENVLOCK, "check", "--json"], tmp_path)
    assert code == 130 and lines == []
    assert json.loads(out) == {"error": "interrupted", "hint": INTERRUPTED[1].removeprefix("hint: "),
                               "exit_code": 130}


def test_ctrl_c_at_any_moment_of_start_up_never_prints_a_traceback_from_envlock(tmp_path: Path) -> None:
    """SIGINT 0–120 ms after the console script starts, and 0–5.5 ms after envlock's own start-up handler is in
    place: `interrupted` + 130 once envlock's code runs.

    Before the script's first line Python itself is starting (site, .pth files): a KeyboardInterrupt
    there is the interpreter's, with no envlock frame in it (or only `envlock/__init__.py", line 0`: the
    import entering the module, before its first line); that is the one other outcome allowed. How much of
    the first sweep lands there depends on the machine's load (Python's start-up took ~100 ms of a shared
    2-core machine); the second sweep starts when the probe sees envlock's handler in place, so it lands in envlock's code.
    """
    if not SCRIPT.is_file():
        pytest.skip(f"no console script at {SCRIPT}")
    package = str(Path(__file__).resolve().parent.parent / "envlock") + os.sep
    outcomes: list[str] = []
    anchored: list[str] = []
    for i in range(36):
        after_startup = i >= 24  # the second sweep: from envlock's own start-up handler (the probe), i-24 times 0.5 ms
        env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path)}
        if after_startup:
            env = _probed(env, "1")
        proc = subprocess.Popen([str(SCRIPT), "check", "--project-dir", str(tmp_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        if after_startup:
            assert proc.stderr is not None and proc.stderr.readline() == ANNOUNCED
            time.sleep((i - 24) * 0.0005)
        else:
            time.sleep(i * 0.005)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        lines = err.strip().splitlines()
        if proc.returncode == 130:
            assert lines[-2:] == ["error: interrupted", lines[-1]] and lines[-1].startswith("hint: "), err
            assert "Traceback" not in err
            outcome = "interrupted"
        elif proc.returncode == 1 and lines[:1] and lines[0].startswith(f"error: no environments in {tmp_path}"):
            outcome = "finished"  # the command ran to its end before the signal
        else:
            # interrupted inside Python's own start-up, not in envlock; `envlock/__init__.py", line 0` is the
            # import machinery entering the module before its first line runs (CI saw it once): nothing of
            # envlock's has run there to catch the signal.
            assert not after_startup, err
            entered = re.sub(r'  File "[^"]*envlock/__init__\.py", line 0, in <module>\n', "", err)
            assert package not in entered, err
            outcome = "python start-up"
        (anchored if after_startup else outcomes).append(outcome)
    assert anchored.count("interrupted") >= 6, anchored  # the sweeps reach envlock's code, whatever the load


@pytest.fixture
def stalled_channel(make_channel_server, channel_root: Path):  # type: ignore[no-untyped-def]
    """The test channel over http, its shard index answering only after 30 s."""
    return make_channel_server(channel_root, faults={"*repodata_shards*": "stall:30"})


def test_ctrl_c_during_a_resolve_stalled_on_a_channel(stalled_channel, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    cmd = [*ENVLOCK, "resolve", "--torch", "2.3.0", "--toolchain-only", "--platform", "linux-64",
           "--channel", stalled_channel.channel_url("conda-forge"), "--project-dir", str(project)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")})
    deadline = time.monotonic() + 60
    while not stalled_channel.faults[0].hits:  # the stalled request has arrived (it is logged when answered)
        assert time.monotonic() < deadline and proc.poll() is None, "the resolve never asked for the shard index"
        time.sleep(0.02)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10  # not after the 30 s stall
    assert err.strip().splitlines() == ["error: interrupted", "hint: nothing was left half-written; run the command again"]
    assert out == "" and list(project.iterdir()) == []
