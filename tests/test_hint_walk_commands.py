"""Every hint runs as written, for every command (issue 34.5; resolve's refusals: tests/test_hint_walk.py).

From a set of failing setups — a lock, env, output or mirror that is not there or is in the way, a prefix nvcc
cannot use, an env without its record, a torch outside the table under --dry-run — the walk takes every
command a hint (or doctor's `fix:` line) names, checks it carries values rather than placeholders (`X.Y`,
`NAME`, `URL`, `VERSION`, …), runs it as written, and requires it to be accepted (no usage error) and to
succeed or stop at a different, later error: never the same one again (a loop). Real runs of the CLI
(in-process: the `run()` the console script calls), a real project locked against the test channel, real
creates, packs and mirrors of it, doctor on a real env.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from envlock.cli import run
from tests.output import error_and_hint, hint_commands

#: The commands the walk must cover (issue 34.5's list).
COMMANDS = ("resolve", "lock", "update", "create", "doctor", "export", "mirror", "pack")
#: A placeholder where a value belongs (`<your build command>` is the one word only the user knows: see _fix_commands).
PLACEHOLDER = re.compile(r"(?<![\w-])(X\.Y|NAME|URL|VERSION|GROUP|PREFIX|DIR|FILE|PACKAGE|PATH)(?![\w-])|<[^>]*>")

#: (what, the command that fails, the project it runs in). {P}: the project, {T}: a folder of the test's own,
#: {CF}: the test channel's mirror entry. `empty`: a project without locks.
SETUPS: list[tuple[str, list[str], str]] = [
    ("lock: no lock of that name", ["lock", "nope", "--project-dir", "{P}"], "one"),
    ("lock: a spec without its envlock block", ["lock", "first", "--project-dir", "{P}"], "no-block"),
    ("update: no lock of that name", ["update", "cuda-nvcc", "--lock", "nope", "--project-dir", "{P}"], "one"),
    ("update: a package no lock has", ["update", "no-such-package", "--project-dir", "{P}"], "one"),
    ("update: no lock at all", ["update", "--project-dir", "{P}"], "empty"),
    ("create: no lock of that name", ["create", "--lock", "nope", "--project-dir", "{P}"], "one"),
    ("create: no lock at all", ["create", "--project-dir", "{P}"], "empty"),
    ("create: a lock file that is not there", ["create", "--lock", "{T}/gone/conda-lock.yml", "-p", "{T}/env"], "one"),
    ("create: a prefix nvcc cannot use", ["create", "-p", "{T}/with space/env", "--project-dir", "{P}"], "one"),
    ("export dockerfile: the output exists", ["export", "dockerfile", "-o", "{P}/Dockerfile", "--project-dir", "{P}"],
     "one"),
    ("export dockerfile: no lock of that name", ["export", "dockerfile", "nope", "--project-dir", "{P}"], "one"),
    ("export explicit: no mirror in force", ["export", "explicit", "-o", "{T}/x", "--project-dir", "{P}"], "one"),
    ("export explicit: the output exists", ["export", "explicit", "--mirror", "{CF}", "-o", "{T}", "--project-dir",
                                            "{P}"], "one"),
    ("mirror: no folder given", ["mirror", "--project-dir", "{P}"], "one"),
    ("mirror: no lock of that name", ["mirror", "nope", "{T}/m", "--project-dir", "{P}"], "one"),
    ("pack: the output exists", ["pack", "-o", "{T}/env.tar", "--project-dir", "{P}"], "one"),
    ("pack: no lock of that name", ["pack", "nope", "-o", "{T}/other.tar", "--project-dir", "{P}"], "one"),
    ("doctor: no env of that name", ["doctor", "-n", "nope"], "one"),
    ("resolve: a torch outside the table under --dry-run", ["resolve", "--torch", "9.9.9", "--dry-run",
                                                            "--project-dir", "{P}"], "one"),
]


#: The setups whose hint commands may stop at a later error of their own (every other hint command must succeed):
#: the mirror of a lock that names no mirror reaches for the canonical channel, which no test reaches; torch 9.9.9
#: is not on the loopback index either.
LATER_ERROR = {"export explicit: no mirror in force", "resolve: a torch outside the table under --dry-run"}


def _tally(setup: str, command: list[str], code: int, err: str = "") -> None:
    """One hint command run, for the walk's counts (ENVLOCK_TEST_HINT_TALLY=FILE: a JSON line each)."""
    out = os.environ.get("ENVLOCK_TEST_HINT_TALLY")
    if out:
        error = next((ln for ln in err.splitlines() if ln.startswith("error: ")), "")
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"setup": setup, "command": command, "exit": code, "error": error}) + "\n")


def _no_placeholder(command: list[str], where: str) -> None:
    text = " ".join(command)
    assert not PLACEHOLDER.search(text), f"{where}: a placeholder in `envlock {text}`"


def walk(setup: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    """Run `argv`: it fails with a hint naming commands; each one runs as written and gets past the error."""
    code = run(argv)
    err = capsys.readouterr().err
    assert code != 0, (argv, err)
    error, hint = error_and_hint(err)
    commands = hint_commands(hint)
    assert commands, (setup, hint)  # every setup of the walk is a refusal whose hint names a command
    for command in commands:
        _no_placeholder(command, setup)
        again = run(command)
        out = capsys.readouterr()
        _tally(setup, command, again, out.err)
        assert again != 2, (setup, hint, command, out.err)  # a command envlock accepts
        if again != 0:
            assert error_and_hint(out.err)[0] != error, (setup, hint, command, out.err)  # progress, not a loop
            assert setup in LATER_ERROR, (setup, hint, command, out.err)  # it runs where it was meant to: succeeds
    return commands


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """A project with one lock, `first` (linux-64, toolchain only), against the test channel."""
    from tests.lockproject import make_project

    return make_project(tmp_path_factory.mktemp("walk") / "one", test_channel, platforms=("linux-64",), name="first")


@pytest.fixture
def place(tmp_path: Path, locked: Path, test_channel_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    monkeypatch.setenv("ENVLOCK_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("ENVLOCK_MIRRORS", f"conda-forge={test_channel_url}")
    monkeypatch.chdir(tmp_path)
    yield {"tmp": tmp_path, "locked": locked, "cf": f"conda-forge={test_channel_url}"}


def _project(kind: str, place: dict) -> Path:
    tmp = place["tmp"]
    if kind == "empty":
        (tmp / "empty").mkdir()
        return tmp / "empty"
    project = Path(shutil.copytree(place["locked"], tmp / "p", symlinks=True))
    if kind == "no-block":
        spec = project / "environments" / "first.yml"
        text = spec.read_text()
        spec.write_text(text[: text.index("\nenvlock:") + 1])
    return project


@pytest.mark.parametrize(("setup", "argv", "kind"), SETUPS, ids=[s for s, _, _ in SETUPS])
def test_every_hint_runs_as_written_and_gets_past_its_error(setup: str, argv: list[str], kind: str, place: dict,
                                                            capsys, monkeypatch) -> None:
    tmp, project = place["tmp"], _project(kind, place)
    words = [w.replace("{P}", str(project)).replace("{T}", str(tmp)).replace("{CF}", place["cf"]) for w in argv]
    if setup.startswith("export explicit: no mirror"):
        monkeypatch.delenv("ENVLOCK_MIRRORS")  # the refusal; the walk's mirror step then reads the test channel's
        # packages from the package cache a create filled (this machine reaches no conda channel)
        assert run(["create", "-q", "-p", str(tmp / "filled"), "--project-dir", str(project),
                    "--mirror", place["cf"]]) == 0
    if setup.endswith("the output exists"):
        target = Path(words[words.index("-o") + 1])
        (target / "conda-linux-64.lock" if words[:2] == ["export", "explicit"] else target).write_text("in the way\n")
    if setup.startswith("doctor"):
        monkeypatch.chdir(project)  # `envlock create -n NAME` runs in the project that has the lock
    walk(setup, words, capsys)
    if setup == "mirror: no lock of that name":  # the lock named, into the folder the user named (not one named first)
        assert (tmp / "m" / "envlock-mirror.json").is_file() and not (tmp / "first").exists()


def test_the_walk_covers_every_command() -> None:
    """Each command of the issue's list has a setup of its own here (resolve's many more: test_hint_walk.py)."""
    covered = {argv[0] for _, argv, _ in SETUPS}
    assert set(COMMANDS) <= covered, sorted(set(COMMANDS) - covered)


def test_the_walk_would_catch_a_placeholder_and_a_loop(place: dict, capsys, monkeypatch) -> None:
    """Control: the checks can fail (a hint with `NAME`; a hint that leads back to its own error)."""
    with pytest.raises(AssertionError, match="placeholder"):
        _no_placeholder(["create", "-n", "NAME"], "control")
    project = _project("one", place)
    with pytest.raises(AssertionError):  # `lock nope`'s hint, made to name `nope` again
        import envlock.usecases.resolve.status as status
        from envlock.errors import SpecError, again

        def loop(project_dir, names=(), *, tables=None, naming=None):  # noqa: ANN001, ANN202
            raise SpecError("no lock named nope", hint=("pick one: ", again(args=("nope",))))

        monkeypatch.setattr(status, "check", loop)
        import envlock.usecases.resolve.relock as relock

        monkeypatch.setattr(relock, "check", loop)
        walk("control", ["lock", "nope", "--project-dir", str(project)], capsys)


# --------------------------------------------------------------------------- doctor's fix lines


def _fix_commands(hint: str) -> list[list[list[str]]]:
    """The envlock commands a doctor `fix:` names, each chain (`a && b`) as its commands; `<your build command>`
    (the user's own, the one thing envlock cannot know) runs as `true`."""
    chains = []
    text = hint.replace("<your build command>", "true")
    for m in re.finditer(r"(?:(?<=^)|(?<=[\s:]))envlock (?:[^;()]|\([^)]*\))*?(?=\s{2}|\s\(|, |; |\)|\"|$)", text):
        before = text[:m.start()]
        if before.count("(") > before.count(")"):
            continue  # inside parentheses: a note ("the newest torch envlock knows") or `eval "$(envlock …)"`
        chains.append([shlex.split(c)[1:] for c in m.group(0).split(" && ")])
    return chains


def _doctor(prefix: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    run(["doctor", "-p", str(prefix), "--json"])
    return {f["code"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def walk_fixes(setup: str, prefix: Path, codes: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    """Each finding of `codes` carries a fix naming envlock commands; each chain runs as written (accepted; every
    command succeeds, or one stops at an error of its own), and doctor then says something else: no loop.
    `envlock run -p … -- CMD` is the activation a build runs in: it must run; doctor reads the env unactivated."""
    before = _doctor(prefix, capsys)
    ran = 0
    for code in codes:
        finding = before[code]
        chains = _fix_commands(finding["hint"] or "")
        assert chains, (setup, finding)
        stopped = False
        for chain in chains:
            for command in chain:
                _no_placeholder(command, setup)
                again = run(command)
                out = capsys.readouterr()
                _tally(setup, command, again, out.err)
                ran += 1
                assert again != 2, (setup, finding["hint"], command, out.err)
                if again != 0:
                    assert error_and_hint(out.err)[0], out.err  # a refusal of its own: one error line
                    stopped = True
                    break
        if not stopped and any(c[0] != "run" for chain in chains for c in chain):
            after = _doctor(prefix, capsys).get(code)
            assert after is None or (after["severity"], after["message"]) != (finding["severity"], finding["message"]), \
                (setup, finding, after)  # the fix changed what doctor says
    return ran


@pytest.fixture
def made(place: dict) -> tuple[Path, Path]:
    """(project, env): an env `envlock create` made from the project's lock."""
    project = _project("one", place)
    prefix = place["tmp"] / "env"
    assert run(["create", "-q", "-p", str(prefix), "--project-dir", str(project)]) == 0
    return project, prefix


def test_doctors_group_fix_runs_as_written_and_the_group_is_there_after(made, capsys) -> None:
    """`add nvtx to with: in …/first.yml, then: envlock lock --project-dir P && envlock create --lock L -p E`."""
    project, prefix = made
    finding = _doctor(prefix, capsys)["header_group.nvtx"]
    assert finding["severity"] == "info" and "envlock lock --project-dir" in finding["hint"], finding
    spec = project / "environments" / "first.yml"
    assert str(spec) in finding["hint"]
    text = spec.read_text()  # the fix's words, done as they say: the group added to `with:`
    spec.write_text(text.replace("\nenvlock:\n", "\nenvlock:\n  with: [nvtx]\n", 1) if "  with:" not in text
                    else text.replace("  with: [", "  with: [nvtx, ", 1))
    walk_fixes("doctor: a --with group the env lacks", prefix, ["header_group.nvtx"], capsys)
    assert _doctor(prefix, capsys)["header_group.nvtx"]["severity"] == "ok"


def test_doctors_fix_for_an_env_without_its_record_runs_as_written(made, capsys, monkeypatch) -> None:
    """`record it: envlock hook -p E` (run in the project); a group of an env that is not envlock's: the package to
    add, never `activate it` for headers the env does not have (activating shows nothing that is not there)."""
    project, prefix = made
    (prefix / "conda-meta" / "envlock").unlink()
    monkeypatch.chdir(project)
    group = _doctor(prefix, capsys)["header_group.nvtx"]
    assert "not in this env" in group["message"] and "activate it" not in group["hint"], group
    walk_fixes("doctor: an env without its record", prefix, ["env.target"], capsys)
    assert "header_group.nvtx" in _doctor(prefix, capsys)


def _fix_lines(text: str) -> list[str]:
    """doctor's `fix:` lines, each joined back from its folded lines (the `where …` legend left out)."""
    fixes: list[str] = []
    for line in text.splitlines():
        if line.startswith("    fix: "):
            fixes.append(line.removeprefix("    fix: "))
        elif fixes and line.startswith("      ") and not line.startswith("      where ") and fixes[-1] is not None:
            fixes[-1] += " " + line.strip()
        elif fixes and not line.startswith("      "):
            fixes.append(None)  # type: ignore[arg-type]  # the fix ended
    return [f for f in fixes if f]


def test_doctors_grouped_fix_names_each_group_in_its_command(place: dict, capsys) -> None:
    """Findings that share a fix are said once; a fix whose command takes the group said `--with GROUP` (and the
    torch as VERSION) with a legend under it: now each group, in a command that runs as written."""
    import subprocess
    import sys

    toolkit = place["tmp"] / "cuda"
    (toolkit / "include").mkdir(parents=True)  # a system CUDA without its parts: every group is absent
    keep = {k: v for k, v in os.environ.items() if k.startswith(("ENVLOCK_", "HOME", "LANG", "TMPDIR"))}
    env = {**keep, "PATH": "/usr/bin:/bin", "CUDA_HOME": str(toolkit), "COLUMNS": "400",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "envlock", "doctor", "--python-exe", sys.executable], env=env,
                          cwd=place["tmp"], capture_output=True, text=True, timeout=300, check=False)
    fixes = [f for f in _fix_lines(done.stdout) if "envlock " in f]
    grouped = [f for f in fixes if f.count("--with ") > 1]
    assert grouped, done.stdout
    for fix in fixes:
        for chain in _fix_commands(fix):
            for command in chain:
                _no_placeholder(command, "doctor: a system CUDA without its groups")
    for chain in _fix_commands(grouped[0]):
        for command in chain:
            again = run(command)
            out = capsys.readouterr()
            _tally("doctor: a system CUDA without its groups", command, again, out.err)
            assert again != 2, (grouped[0], command, out.err)
            if again != 0:
                assert error_and_hint(out.err)[0], out.err  # stopped at a refusal of its own (the test channel)
                break
