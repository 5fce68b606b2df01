"""Every hint is a command envlock accepts and that gets past the error it follows (issue 24, Build 1).

The walk runs each refusal path — over envlock's torch table (CPU and ROCm labels, every cuXYZ label a
release was never built as, a --cuda of a major it was never built for, a --python outside its wheels), the
CUDA overrides (a minor never released, one no toolchain exists for), platforms (macOS, a --with group a
platform lacks, a CPU-only torch on win-64), python versions, the PyPI part's variant check (the circle
`--torch 2.3.0 --cuda 12.6` → `+cu126` → "never built as +cu126" → back) and several locks in a project —
then takes every `envlock …` command its hint names, runs it as written, and asserts it is accepted (not a
usage error) and does not fail with the same error. Real runs of the CLI (in-process: the same `run()` the
console script calls), the real table, the test channel and the loopback wheel index.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envlock.cli import run
from envlock.core.tables import cuda_tables, torch_table
from tests.output import error_and_hint, hint_commands
from tests.test_hint_walk_commands import _no_placeholder, _tally

TABLE = torch_table()
TAGS = ("cu116", "cu117", "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")


def _major(cuda: str) -> int:
    return int(cuda.split(".")[0])


def _next(xy: str, step: int) -> str:
    major, minor = (int(p) for p in xy.split("."))
    return f"{major}.{minor + step}"


def table_refusals() -> Iterator[tuple[str, list[str]]]:
    """(what, resolve arguments) for every refusal the torch table leads to, release by release."""
    known_minors = list(cuda_tables().minors)
    for row in TABLE.rows:
        for release in row.releases:
            yield "cpu label", ["--torch", f"{release}+cpu"]
            yield "rocm label", ["--torch", f"{release}+rocm6.2"]
            if row.variants is not None:
                built = {v.tag for v in row.variants}
                for tag in TAGS:
                    if tag not in built:
                        yield "label never built", ["--torch", f"{release}+{tag}"]
            majors = {_major(v.cuda) for v in row.variants or ()} | {_major(row.pypi_cuda)}
            if row.variants is not None:
                for minor in known_minors:
                    if _major(minor) not in majors:
                        yield "cuda of another major", ["--torch", release, "--cuda", minor]
                        majors.add(_major(minor))  # one per major
            if row.python:
                yield "python above its wheels", ["--torch", release, "--python", _next(row.python[1], 1)]
                if row.python[0] != "3.0":
                    yield "python below its wheels", ["--torch", release, "--python", _next(row.python[0], -1)]


OTHER_REFUSALS = [
    ("cuda never released", ["--torch", "2.7.1", "--cuda", "12.7"]),
    ("cuda no toolchain knows", ["--torch", "2.7.1", "--cuda", "12.20"]),
    ("python 2", ["--torch", "2.7.1", "--python", "2.7"]),
    ("python of the wrong form", ["--torch", "2.7.1", "--python", "three"]),
    ("a torch of two parts", ["--torch", "2.7"]),
    ("a with group the platform lacks", ["--torch", "2.7.1", "--with", "cufile", "--platform", "win-64"]),
    ("a label with conda-forge's torch", ["--torch", "2.7.1+cu126", "--torch-source", "conda-forge"]),
    ("a cutoff of the wrong form", ["--torch", "2.7.1", "--exclude-newer", "yesterday"]),
]


def _walk(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Run `argv`; it must fail with a hint naming a command; run each such command: accepted, past the error.
    Returns the commands run (for the caller's own checks)."""
    code = run(argv)
    err = capsys.readouterr().err
    assert code not in (0,), (argv, err)
    error, hint = error_and_hint(err)
    commands = hint_commands(hint)
    assert commands, (argv, err)  # every refusal of the walk names a command to run
    for command in commands:
        _no_placeholder(command, " ".join(argv))
        again = run(command)
        out = capsys.readouterr()
        _tally(" ".join(argv), command, again, out.err)
        assert again != 2, (argv, hint, command, out.err)  # a command envlock accepts
        if again != 0:
            assert error_and_hint(out.err)[0] != error, (argv, hint, command, out.err)  # not the same error
    return [" ".join(c) for c in commands]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path / "p"


@pytest.mark.parametrize("kind", sorted({k for k, _ in table_refusals()}))
def test_every_table_refusal_names_a_command_that_gets_past_it(kind: str, project: Path, capsys) -> None:
    cases = [args for k, args in table_refusals() if k == kind]
    assert cases
    for args in cases:
        _walk(["resolve", *args, "--platform", "linux-64", "--dry-run", "--project-dir", str(project)], capsys)


@pytest.mark.parametrize(("what", "args"), OTHER_REFUSALS, ids=[w for w, _ in OTHER_REFUSALS])
def test_cuda_overrides_platforms_and_pythons(what: str, args: list[str], project: Path, capsys) -> None:
    platform = [] if "--platform" in args else ["--platform", "linux-64"]
    _walk(["resolve", *args, *platform, "--dry-run", "--project-dir", str(project)], capsys)


def test_the_label_hint_never_names_a_label_the_release_lacks(project: Path, capsys) -> None:
    """The issue's cases: `+cpu` hinted `2.7.1+cu121`, which envlock refuses; `2.3.0+cu126` hinted itself."""
    for torch, wanted in (("2.7.1+cpu", "--torch 2.7.1+cu126"), ("2.3.0+cu126", "--torch 2.3.0+cu121")):
        commands = _walk(["resolve", "--torch", torch, "--dry-run", "--project-dir", str(project)], capsys)
        assert any(wanted in c for c in commands), commands
        assert not any("+cu121" in c for c in commands if c.startswith("resolve --torch 2.7.1"))


# --------------------------------------------------------------------------- the PyPI part's variant check


@pytest.fixture
def variant_mirrors(monkeypatch: pytest.MonkeyPatch, wheel_index) -> None:  # noqa: ANN001 - session fixture
    """The PyTorch variant indexes on the loopback wheel index (site-wide: only used where in play)."""
    entries = [f"https://download.pytorch.org/whl/{t}={wheel_index.variant_url(t)}" for t in ("cu121", "cu126", "cu128")]
    monkeypatch.setenv("ENVLOCK_MIRRORS", ",".join(entries))


@pytest.mark.parametrize("args", [
    ["--torch", "2.3.0", "--cuda", "12.6"],  # the circle: its hint named +cu126, never built for 2.3.0
    ["--torch", "2.7.1", "--cuda", "12.8"],  # a label that exists: +cu128
    ["--torch", "2.7.1", "--platform", "win-64"],  # the default index's win-64 torch is a CPU build
], ids=["2.3.0 --cuda 12.6", "2.7.1 --cuda 12.8", "2.7.1 win-64"])  # fmt: skip
def test_the_variant_check_hint_leads_out_of_the_circle(args, project: Path, test_channel_url: str, capsys,
                                                        variant_mirrors) -> None:
    platform = [] if "--platform" in args else ["--platform", "linux-64"]
    commands = _walk(["resolve", *args, *platform, "--mirror", f"conda-forge={test_channel_url}",
                      "--project-dir", str(project)], capsys)
    if args[1] == "2.3.0":
        assert not any("+cu126" in c for c in commands), commands
        assert any("--toolchain-only" in c for c in commands), commands


# --------------------------------------------------------------------------- several locks


@pytest.fixture(scope="module")
def two_locks(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    from tests.lockproject import make_project

    root = tmp_path_factory.mktemp("two-locks")
    make_project(root, test_channel, platforms=("linux-64",), name="first")
    make_project(root, test_channel, torch="2.4.0", platforms=("linux-64",), name="second")
    return root


@pytest.mark.parametrize("command", [
    ["create"], ["pack", "-o", "{tmp}/env.tar"], ["export", "dockerfile", "-o", "{tmp}/Dockerfile"],
    ["create", "--lock", "nope"], ["check", "nope"], ["lock", "nope"], ["update", "cuda-nvcc", "--lock", "nope"],
    ["lock", "--name", "first"], ["check", "--name=second"],  # -n/--name names an environment: the NAME argument
], ids=" ".join)
def test_several_locks_name_one_with_the_command_that_was_run(command, two_locks: Path, test_channel_url: str,
                                                              tmp_path: Path, capsys, monkeypatch) -> None:
    """`export dockerfile` and `pack` hinted `envlock create NAME` (another command): now their own."""
    monkeypatch.setenv("ENVLOCK_ENVS_DIR", str(tmp_path / "envs"))
    argv = [w.replace("{tmp}", str(tmp_path)) for w in command]
    ran = _walk([*argv, "--project-dir", str(two_locks), "--mirror", f"conda-forge={test_channel_url}"]
                if argv[0] not in ("check", "export") else [*argv, "--project-dir", str(two_locks)], capsys)
    assert all(c.startswith(" ".join(argv[:2] if argv[0] == "export" else argv[:1])) for c in ran), ran


def test_the_walk_would_catch_a_circular_hint(project: Path, capsys, monkeypatch) -> None:
    """Control: a hint that leads back to the same error fails the walk (the check can fail)."""
    import envlock.core.anchor as anchor
    from envlock.errors import AnchorError, again

    def circular(version, local, table):  # noqa: ANN001
        raise AnchorError(f"torch {version}+{local} is refused", hint=("try ", again("--torch", f"{version}+{local}")))

    monkeypatch.setattr(anchor, "_from_local_label", circular)
    with pytest.raises(AssertionError):
        _walk(["resolve", "--torch", "2.7.1+cu126", "--dry-run", "--project-dir", str(project)], capsys)
