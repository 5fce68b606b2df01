"""Hypothesis over every parser of user input: zero tracebacks, every refusal an EnvlockError with a hint.

Targets: the torch-version parser and the offline anchor, the spec reader, the conda-lock.yml and
@EXPLICIT readers, extra dependencies (match specs) through plan and the real solver, and
`--mirror`/`--channel` values through parse_mirrors, the channel security check, canonical URLs
and the solver's channel set-up. Each target runs FAST examples by default and SLOW in the slow
tier (9 targets x 1,200 = 10,800 cases); `CALLS` counts what really ran.
"""

from __future__ import annotations

import collections
import os
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.errors import EnvlockError
from envlock.models import LockedPackage

FAST, SLOW = 40, 1200
# The cases are fixed per test unless ENVLOCK_FUZZ_RANDOM=1 (tests/conftest.py's hypothesis profile).
TIERS = [pytest.param(FAST, id="default"), pytest.param(SLOW, id="slow", marks=pytest.mark.slow)]
CALLS: collections.Counter[str] = collections.Counter()


def run_examples(name: str, n: int, strategy: st.SearchStrategy[Any], check: Callable[[Any], None]) -> None:
    """Run `check` on `n` generated examples and make sure that many really ran."""
    before = CALLS[name]

    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(strategy)
    def inner(value: Any) -> None:
        CALLS[name] += 1
        check(value)

    inner()
    assert CALLS[name] - before >= n  # hypothesis ran (at least; shrinking adds more) n cases


def clean(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call fn; an EnvlockError must carry a message and a hint; anything else propagates (= a bug)."""
    try:
        return fn(*args, **kwargs)
    except EnvlockError as err:
        assert err.message.strip() and err.hint.strip(), repr(err)
        assert "Traceback" not in err.message
        return err


# --------------------------------------------------------------------------- strategies

VERSIONISH = st.from_regex(r"\A\s?[0-9v]{0,3}(\.[0-9a-z*]{0,3}){0,5}([+-][a-z0-9._]{0,8})?\s?\Z")
TEXTISH = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
SPECISH = st.one_of(
    TEXTISH,
    st.from_regex(r"\A[a-z_][a-z0-9_.-]{0,12}( ?(==|>=|<=|=|<|>|!=|~=)[0-9.*a-z]{0,6}){0,2}( [a-z0-9_*]{0,6})?\Z"),
    st.from_regex(r"\A[a-z-]{0,8}::[a-z]{1,6}\[[a-z]{0,6}=[^\]]{0,6}\]\Z"),
)
URLISH = st.one_of(
    TEXTISH,
    st.builds(
        lambda scheme, cred, host, port, path: f"{scheme}{cred}{host}{port}{path}",
        st.sampled_from(["http://", "https://", "file://", "ftp://", "", "s3://", "oci://", "http:/"]),
        st.sampled_from(["", "user:SECRET1@", "u:@", ":SECRET2@", "a@SECRET3@", "us%40er:p%3ASECRET4@"]),
        st.sampled_from(["127.0.0.1", "localhost", "[::1]", "mirror.example.org", "", "10.0.0.1", "ex ample.org",
                         "MIRROR.example.org", "127.0.0.1.nip.io", "localhost.evil.org"]),
        st.sampled_from(["", ":8080", ":", ":99999", ":x"]),
        st.sampled_from(["", "/", "/conda-forge", "/t/tk-SECRET5/conda-forge", "/t/", "/a/../b", "/%2e%2e/", "?q=1#f"]),
    ),
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | TEXTISH,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTISH, inner, max_size=4),
    max_leaves=12,
)


# --------------------------------------------------------------------------- torch versions and the anchor


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_torch_version_parser(n: int) -> None:
    from packaging.version import Version

    from envlock.core.anchor import read_torch

    def check(text: str) -> None:
        out = clean(read_torch, text)
        if not isinstance(out, EnvlockError):
            assert out.text == text.strip()
            if not out.installed:
                assert out.version is not None and len(out.version.release) >= 3 and not out.version.local
                assert out.version == Version(out.public) and (out.local is None or out.local)

    run_examples("torch-version", n, st.one_of(VERSIONISH, TEXTISH), check)


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_anchor_offline(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    from packaging.version import Version

    from envlock.core.anchor import Sources, derive, parse_cuda, read_torch
    from envlock.formats.spec import check_torch_source
    from envlock.seams.pypi import torch_cuda_from_index
    from envlock.core.tables import torch_table

    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # offline must not reach it anyway
    known = ["2.3.0", "2.3.0+cu118", "1.13.1", "2.7.1", "2.11.0", "9.9.9", "2.3.0+cpu", "2.3.0+rocm6.0"]
    requests = st.tuples(
        st.one_of(st.sampled_from(known), VERSIONISH, TEXTISH).filter(lambda t: t.strip() != "installed"),
        st.one_of(st.none(), st.sampled_from(["12.1", "11.8", "13.0", "12.7", "99.9"]), VERSIONISH, TEXTISH),
        st.sampled_from(["pip", "conda-forge", "conda", ""]),
    )
    offline_index = Sources(index=lambda version: torch_cuda_from_index(version, offline=True))

    def anchor(torch: str, cuda: str | None, source: str) -> Any:
        """As `envlock resolve --offline` reads its options: the source, the CUDA, the torch, then the anchor."""
        checked = check_torch_source(source, "--torch-source")
        override = parse_cuda(cuda) if cuda is not None else None
        return derive(read_torch(torch), cuda=override, torch_source=checked, table=torch_table(), sources=offline_index)

    def check(req: tuple[str, str | None, str]) -> None:
        out = clean(anchor, *req)
        if not isinstance(out, EnvlockError):
            torch, cuda, source = req
            assert re.fullmatch(r"\d+\.\d+", out.cuda) and out.torch == str(Version(out.torch).public)
            assert out.source in ("override", "local-label", "table", "pypi") and out.torch_source == source
            if cuda is not None:
                assert out.source == "override" and out.cuda == parse_cuda(cuda)

    run_examples("anchor", n, requests, check)


# --------------------------------------------------------------------------- the spec reader

SPEC_TEXT = """name: torch2.3.0-cu121
channels:
  - conda-forge
dependencies:
  - cuda-version=12.1
  - cuda-nvcc
platforms:
  - linux-64
envlock:
  spec_version: 1
  torch: '2.3.0'
  torch_source: pip
  cuda: null
  python: '3.11'
  glibc: '2.28'
  cudnn: true
"""


def _mutate_text(text: str) -> st.SearchStrategy[str]:
    """The text with a slice replaced by generated characters (keeps most of the structure)."""
    return st.builds(
        lambda i, j, s: text[: min(i, j)] + s + text[max(i, j) :],
        st.integers(0, len(text)),
        st.integers(0, len(text)),
        st.text(string.printable, max_size=12),
    )


def _mutate_doc(doc: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """The document with one key (top level or inside one nested mapping) replaced or removed."""
    def apply(path: list[str], value: Any, remove: bool) -> dict[str, Any]:
        out = yaml.safe_load(yaml.safe_dump(doc))
        node = out
        for key in path[:-1]:
            node = node[key]
        if remove:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
        return out

    paths = [[k] for k in doc] + [[k, k2] for k, v in doc.items() if isinstance(v, dict) for k2 in v]
    return st.builds(apply, st.sampled_from(paths), JSONISH, st.booleans())


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_spec_reader(n: int) -> None:
    import re

    from envlock.formats.spec import EnvSpec, parse_spec, validate_name

    texts = st.one_of(
        TEXTISH,
        _mutate_text(SPEC_TEXT),
        _mutate_doc(yaml.safe_load(SPEC_TEXT)).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
        JSONISH.map(yaml.safe_dump),
    )

    def check(text: str) -> None:
        out = clean(parse_spec, text, Path("environments/x.yml"))
        if isinstance(out, EnvSpec):  # what every later step relies on, without re-checking it
            assert out.torch and out.torch_source in ("pip", "conda-forge") and validate_name(out.name) == out.name
            assert all(isinstance(v, str) for v in (*out.platforms, *out.channels, *out.dependencies, *out.pip))
            assert out.exclude_newer is None or re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", out.exclude_newer)

    run_examples("spec", n, texts, check)


# --------------------------------------------------------------------------- the lock readers


def _lock_text() -> tuple[str, str]:
    from envlock.formats import render_conda_lock, render_explicit

    pkgs = [
        LockedPackage(name="cuda-version", version="12.1", build="h1d6eff3_3", platform="linux-64",
                      url="https://conda.anaconda.org/conda-forge/noarch/cuda-version-12.1-h1d6eff3_3.conda",
                      md5="0" * 32, sha256="1" * 64, subdir="noarch"),
        LockedPackage(name="cuda-nvcc", version="12.1.105", build="hcdd1206_1", platform="linux-64",
                      url="https://conda.anaconda.org/conda-forge/linux-64/cuda-nvcc-12.1.105-hcdd1206_1.conda",
                      md5="2" * 32, sha256="3" * 64, depends=("cuda-version >=12.1,<12.2",), subdir="linux-64"),
    ]
    yml = render_conda_lock(packages=pkgs, platforms=["linux-64"], channels=["https://conda.anaconda.org/conda-forge"],
                            content_hashes={"linux-64": "a" * 64}, sources=["environments/x.yml"],
                            custom_metadata={"envlock.version": "0.1", "envlock.lock_format": "1"})
    explicit = render_explicit(packages=pkgs, platform="linux-64", content_hash_value="a" * 64, env_name="x")
    return yml, explicit


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_conda_lock_reader(n: int) -> None:
    from envlock.formats import parse_lock

    yml, _ = _lock_text()
    doc = yaml.safe_load(yml)
    entry_mutations = st.builds(
        lambda k, v, remove: {**doc, "package": [
            {kk: vv for kk, vv in {**doc["package"][0], **({} if remove else {k: v})}.items() if not (remove and kk == k)}
        ]},
        st.sampled_from(["name", "version", "url", "hash", "platform", "dependencies", "manager", "build"]),
        JSONISH,
        st.booleans(),
    )
    texts = st.one_of(
        TEXTISH,
        _mutate_text(yml),
        _mutate_doc(doc).map(yaml.safe_dump),
        entry_mutations.map(yaml.safe_dump),
        JSONISH.map(yaml.safe_dump),
    )

    def check(text: str) -> None:
        out = clean(parse_lock, text, Path("locks/x/conda-lock.yml"))
        if not isinstance(out, EnvlockError):  # what create installs from: every entry is installable
            assert all(isinstance(p.url, str) and p.md5 and p.name and p.platform for p in out.packages)
            assert all(w.sha256 and w.url for w in out.pypi)

    run_examples("conda-lock", n, texts, check)


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_explicit_reader(n: int) -> None:
    from envlock.formats import parse_lock

    _, explicit = _lock_text()
    lines = st.lists(
        st.one_of(
            TEXTISH,
            st.sampled_from(["@EXPLICIT", "# platform: linux-64", "# platform:", "#", "# sha256: a b", "# sha256: x"]),
            st.builds(lambda u, h: f"{u}#{h}", URLISH, st.text("0123456789abcdefmd5:", max_size=34)),
            st.from_regex(r"\Ahttps://h/c/linux-64/[a-z-]{0,6}-[0-9.]{0,4}-[a-z0-9_]{0,4}\.(conda|tar\.bz2)(#[0-9a-f]{0,32})?\Z"),
        ),
        max_size=8,
    )
    texts = st.one_of(lines.map("\n".join), _mutate_text(explicit))

    def check(text: str) -> None:
        out = clean(parse_lock, text, Path("locks/x/conda-linux-64.lock"))
        if not isinstance(out, EnvlockError) and out.kind == "explicit":  # one platform, each package with its md5
            assert len(out.platforms) == 1 and all(p.platform == out.platforms[0] and p.md5 for p in out.packages)

    run_examples("explicit", n, texts, check)


# --------------------------------------------------------------------------- match specs through plan and solver


@pytest.fixture(scope="module")
def fuzz_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.channelbuilder import build_channel

    return build_channel(tmp_path_factory.mktemp("fuzz-chan"), cuda_minors=["12.1"], subdirs=("linux-64",),
                         with_cuda11=False, pythons=("3.11",), with_cudnn=False)


@pytest.mark.parametrize("n", [pytest.param(FAST, id="default"), pytest.param(SLOW, id="slow", marks=pytest.mark.slow)])
def test_fuzz_extra_dependencies_through_plan_and_solver(n: int, fuzz_channel: Path, tmp_path: Path) -> None:
    """A spec's extra dependencies → plan_for → the real rattler solve (file:// channel): EnvlockError or a result."""
    from envlock.formats.spec import EnvSpec
    from envlock.models import Anchor
    from envlock.names import match_spec_name
    from envlock.usecases.resolve import plan_for, shipped_tables
    from envlock.seams.conda.solve import RattlerSolver, SolveOptions

    anchor = Anchor(torch="2.3.0", cuda="12.1", cudnn=None, source="override", detail="fuzz")
    options = SolveOptions(cache_dir=tmp_path / "cache", mirrors={"conda-forge": fuzz_channel.as_uri()})

    def check(extras: list[str]) -> None:
        spec = EnvSpec(name="x", torch="2.3.0", cuda="12.1", python="3.11", cudnn=False, dependencies=tuple(extras))
        plan = clean(plan_for, spec, anchor, shipped_tables())
        if isinstance(plan, EnvlockError):
            return
        result = clean(RattlerSolver(options).solve, plan)
        if not isinstance(result, EnvlockError):  # a solve that succeeds locks what the extras ask for
            names = {p.name for r in result for p in r.packages}
            assert {match_spec_name(e) for e in plan.options.extra_specs} <= names, (extras, sorted(names))

    run_examples("extra-specs", n, st.lists(SPECISH, min_size=1, max_size=2), check)


# --------------------------------------------------------------------------- --mirror / --channel values


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_mirror_values(n: int) -> None:
    from envlock.commands.resolve import parse_mirrors
    from envlock.seams.conda.channels import check_channel_security

    values = st.lists(st.one_of(TEXTISH, st.builds(lambda k, u: f"{k}={u}", TEXTISH, URLISH)), max_size=3)

    def check(vals: list[str]) -> None:
        out = clean(parse_mirrors, vals)
        if isinstance(out, dict):
            for url in out.values():
                clean(check_channel_security, url, allow_insecure=False)

    run_examples("mirror", n, values, check)


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_channel_values_urls_and_security(n: int) -> None:
    """canonical_channel_url never keeps a credential; http is refused unless local or allowed."""
    from envlock.seams.conda.channels import canonical_channel_url, check_channel_security

    def check(channel: str) -> None:
        canon = clean(canonical_channel_url, channel)
        if isinstance(canon, str) and channel.startswith(("http://", "https://")):
            # user:password@ and conda's /t/<token>/ are gone. Checked by position, not by the SECRET markers
            # alone: hypothesis also draws this file's string constants, so `http://SECRET` (a host) occurs.
            given, out = urlsplit(channel), urlsplit(canon)
            assert "@" not in out.netloc, (channel, canon)
            segs = given.path.split("/")
            token = segs[2] if len(segs) > 2 and segs[1] == "t" else ""
            if token and given.path.count(token) == 1:
                assert token not in out.path, (channel, canon)
        for allow in (False, True):
            out = clean(check_channel_security, channel, allow_insecure=allow)
            if allow:
                assert out is None

    run_examples("channel", n, URLISH, check)


@pytest.mark.parametrize("n", TIERS)
def test_fuzz_channels_through_the_solver_setup(n: int, tmp_path: Path) -> None:
    """Channel names/URLs as a spec gives them, through the solver's channel set-up and an offline solve."""
    from envlock.formats.spec import EnvSpec
    from envlock.models import Anchor
    from envlock.usecases.resolve import plan_for, shipped_tables
    from envlock.seams.conda.solve import RattlerSolver, SolveOptions

    anchor = Anchor(torch="2.3.0", cuda="12.1", cudnn=None, source="override", detail="fuzz")
    options = SolveOptions(cache_dir=tmp_path / "empty-cache", offline=True)

    def check(channels: list[str]) -> None:
        spec = EnvSpec(name="x", torch="2.3.0", cuda="12.1", python="3.11", channels=tuple(channels), cudnn=False)
        out = clean(plan_for, spec, anchor, shipped_tables())
        if isinstance(out, EnvlockError):
            return
        result = clean(RattlerSolver(options).solve, out)
        assert isinstance(result, EnvlockError)  # an empty cache and --offline: never a result

    run_examples("solver-channels", n, st.lists(URLISH, min_size=1, max_size=2), check)


#: Each fuzz test and the target it counts under (CALLS).
TARGETS = {
    "test_fuzz_torch_version_parser": "torch-version", "test_fuzz_anchor_offline": "anchor",
    "test_fuzz_spec_reader": "spec", "test_fuzz_conda_lock_reader": "conda-lock",
    "test_fuzz_explicit_reader": "explicit", "test_fuzz_extra_dependencies_through_plan_and_solver": "extra-specs",
    "test_fuzz_mirror_values": "mirror", "test_fuzz_channel_values_urls_and_security": "channel",
    "test_fuzz_channels_through_the_solver_setup": "solver-channels",
}


def test_fuzz_case_count_is_reported(request: pytest.FixtureRequest) -> None:
    """Runs last in this module: every fuzz test this session selected ran its cases, and the total is the
    figure docs/reliability.md quotes (9 targets x 1,200 in the slow tier = 10,800)."""
    wanted: collections.Counter[str] = collections.Counter()
    for item in request.session.items:
        name = getattr(item, "originalname", item.name)
        if item.module is request.module and name in TARGETS:
            wanted[TARGETS[name]] += item.callspec.params["n"]
    assert set(TARGETS) == {n for n in dir(request.module) if n.startswith("test_fuzz_") and n != "test_fuzz_case_count_is_reported"}
    for target, n in wanted.items():
        assert CALLS[target] >= n, f"{target}: {CALLS[target]} cases ran, {n} were selected"
    total = sum(CALLS.values())
    assert total >= sum(wanted.values())
    print(f"\nfuzz cases this session: {total} {dict(CALLS)}")
    if os.environ.get("ENVLOCK_FUZZ_REPORT"):
        Path(os.environ["ENVLOCK_FUZZ_REPORT"]).write_text(f"{total} {dict(CALLS)}\n")
