"""Every value of a spec, fuzzed through every command that reads a spec (issue 33.7, 34.6).

`python: '3.x'` ended `lock` in `internal error: ValueError`, `exclude_newer: '0001-01-01T00:00:00+01:00'` ended
check, lock and update in `internal error: OverflowError`, `cudnn: banana` passed as true. Hypothesis writes one
value (a scalar of any YAML type, a list, a mapping, version-like and date-like text) into one key of a resolved
spec — each key of the `envlock:` block, a misspelt key, `name`, `platforms`, `channels`, `dependencies` — and
runs check, lock, update, create --locked and a resolve of that lock through envlock's own CLI (in-process:
envlock.cli.run, which never raises). Each answer is a success or one `error:` line with one `hint:` and the
exit code of docs/reference.md's table; never `internal error`, never a traceback.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from envlock.cli import run
from envlock.formats.spec_values import ENVLOCK_KEYS
from tests.lockproject import NAME, make_project, spec_file
from tests.output import logical_lines
from tests.tiers import counts

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
VERSIONISH = st.from_regex(r"\A\s?[0-9v]{0,3}(\.[0-9a-z*x]{0,3}){0,4}([+-][a-z0-9._]{0,8})?\s?\Z")
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), TEXT, VERSIONISH,
    st.sampled_from(["3.x", "9.10", "banana", "installed", "2.28", "2.5", "12", "12.4", "3.11", "2.3.0",
                     "2.5.1+cu124", "pip", "conda-forge", "deepspeed", "all", "cusparse", "linux-64", "osx-arm64",
                     "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00", "2026-11-30T12:00:00Z", ""]),
    st.dates(), st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
)
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=2),
                     max_leaves=5)
KEYS = st.sampled_from([*ENVLOCK_KEYS, "cudn", "tool_chain_only", "name", "platforms", "channels", "dependencies"])
TOP = ("name", "platforms", "channels", "dependencies")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    return make_project(tmp_path_factory.mktemp("spec-fuzz"), test_channel, platforms=("linux-64",))


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, test_channel: Path) -> Path:
    """torch 2.7.1 (CUDA 12.6), a full environment on linux-64 (its python is read; a toolchain's is not)."""
    return make_project(tmp_path_factory.mktemp("spec-fuzz-full"), test_channel, torch="2.7.1",
                        platforms=("linux-64",), toolchain_only=False)


def with_value(text: str, key: str, value: Any) -> str:
    """The spec text with `key` set to `value` (written as YAML writes it)."""
    dumped = yaml.safe_dump({key: value}, default_flow_style=True, width=10**6, allow_unicode=True).strip()
    dumped = dumped[1:-1] if dumped.startswith("{") and dumped.endswith("}") else dumped
    lines, out, skip = text.splitlines(), [], False
    block = key not in TOP
    for line in lines:
        if skip and line.startswith("  "):
            continue
        skip = False
        if (block and line.startswith(f"  {key}:")) or (not block and line.startswith(f"{key}:")):
            skip = not block
            continue
        out.append(line)
    if block:
        return "\n".join(out) + f"\n  {dumped}\n"
    at = out.index("envlock:")
    return "\n".join([*out[:at], dumped, *out[at:]]) + "\n"


def answer(args: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = run(args)
    return code, err.getvalue()


def check_answer(args: list[str], code: int, err: str, spec: str) -> None:
    where = f"{args}\nexit {code}\nspec:\n{spec}\nstderr:\n{err}"
    assert code in (0, 1, 2, 3, 4), where
    assert "internal error" not in err and "Traceback" not in err, where
    lines = logical_lines(err)
    errors = [ln for ln in lines if ln.startswith("error:")]
    hints = [ln for ln in lines if ln.startswith("hint:")]
    assert len(errors) == (0 if code == 0 else 1) and len(hints) == len(errors), where


COMMANDS = (["check"], ["lock", "--mirror", "CF"], ["update", "cuda-nvcc", "--dry-run", "--mirror", "CF"],
            ["create", "--locked", "-p", "ENV", "--mirror", "CF"],
            ["resolve", "--torch", "2.3.0", "--lock", NAME, "--toolchain-only", "--platform", "linux-64", "--dry-run"])


def fuzz(n: int, project_of: Any, commands: Any, cf: str, tmp_path: Path) -> list[str]:
    """Run `n` drawn (key, value) pairs (and the issue's own cases, first) through `commands`; the keys run."""
    ran: list[str] = []

    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(KEYS, VALUE)
    @example("python", "3.x")  # internal error: ValueError (a full env's lock)
    @example("exclude_newer", "0001-01-01T00:00:00+01:00")  # internal error: OverflowError (check, lock, update)
    @example("exclude_newer", "9999-12-31T23:59:59-14:00")
    @example("cudnn", "banana")  # taken as true
    def one(key: str, value: Any) -> None:
        project = project_of(tmp_path / f"p{len(ran)}")
        spec = next((project / "environments").glob("*.yml"))
        text = with_value(spec.read_text(), key, value)
        spec.write_text(text)
        for args in commands:
            args = [cf if a == "CF" else str(project / "env") if a == "ENV" else a for a in args]
            code, err = answer([*args, "--project-dir", str(project)])
            check_answer(args, code, err, text)
        ran.append(key)
        shutil.rmtree(project)

    one()
    return ran


@pytest.mark.parametrize("n", counts(150, 25))
def test_any_value_of_any_spec_key_is_one_error_never_an_internal_error(n: int, template: Path, tmp_path: Path,
                                                                       test_channel: Path) -> None:
    """A toolchain-only spec through check, lock, update, create --locked and resolve of that lock."""
    ran = fuzz(n, lambda dest: shutil.copytree(template, dest, symlinks=True), COMMANDS,
               f"conda-forge={test_channel.as_uri()}", tmp_path)
    assert len(ran) >= n


@pytest.mark.parametrize("n", counts(50, 8))
def test_any_value_of_a_full_env_spec_is_one_error_never_an_internal_error(n: int, full: Path, tmp_path: Path,
                                                                          test_channel: Path) -> None:
    """A full env's spec (its python and `- pip:` list are read) through check and lock."""
    ran = fuzz(n, lambda dest: shutil.copytree(full, dest, symlinks=True), COMMANDS[:2],
               f"conda-forge={test_channel.as_uri()}", tmp_path)
    assert len(ran) >= n and "python" in ran


def test_the_writer_of_the_fuzz_puts_each_value_where_the_reader_finds_it(template: Path) -> None:
    """The fuzz proves something only if its edits land: each key's value reads back from the written spec."""
    text = spec_file(template).read_text()
    for key, value in (("cudnn", "banana"), ("exclude_newer", datetime.datetime(2026, 1, 1, 0, 0)),
                       ("platforms", ["osx-64"]), ("cudn", False)):
        doc = yaml.safe_load(with_value(text, key, value))
        got = doc.get(key) if key in TOP else doc["envlock"].get(key)
        assert got == value, (key, got)
