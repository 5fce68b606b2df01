"""Tests on the shipped torch table itself (envlock/data/torch.yaml) and its validating loader."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import re
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from envlock.errors import AnchorError
from envlock.models import asdict
from envlock.core.tables import TorchTable, parse_cuda_pins, parse_torch_table, torch_table

EXPECTED_MINORS = ["1.13"] + [f"2.{n}" for n in range(16)]


def _text() -> str:
    return importlib.resources.files("envlock").joinpath("data", "torch.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def table() -> TorchTable:
    return torch_table()


def test_every_minor_from_1_13_to_2_15_is_present_in_order(table: TorchTable) -> None:
    assert [r.minor for r in table.rows] == EXPECTED_MINORS
    for row in table.rows:
        assert row.releases[0] == f"{row.minor}.0", row.minor


def test_releases_sorted_unique_and_plain(table: TorchTable) -> None:
    versions = [Version(x) for x in table.releases()]
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)
    assert all(v.local is None and not v.is_prerelease and len(v.release) == 3 for v in versions)


def test_default_cuda_is_among_the_variants_when_they_are_known(table: TorchTable) -> None:
    for row in table.rows:
        if row.variants is None:
            assert not row.pypi_verified, f"{row.minor}: only an unverified row may lack variants"
            continue
        assert row.variant(row.pypi_cuda) is not None, row.minor
        keys = [tuple(int(p) for p in v.cuda.split(".")) for v in row.variants]
        assert keys == sorted(set(keys)), row.minor


def test_cudnn_strings_parse(table: TorchTable) -> None:
    values = [r.pypi_cudnn for r in table.rows] + [v.cudnn for r in table.rows for v in r.variants or ()]
    for value in filter(None, values):
        assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", value), value
        Version(value)


def test_the_stored_pin_says_the_stored_cuda(table: TorchTable) -> None:
    for row in table.rows:
        assert parse_cuda_pins([row.pypi_requires]).cuda == row.pypi_cuda, row.minor


@pytest.mark.parametrize(
    ("version", "cuda", "cudnn"),
    [
        ("2.3.0", "12.1", "8.9.2.26"),
        ("2.7.1", "12.6", "9.5.1.17"),
        ("2.8.0", "12.8", "9.10.2.21"),
        ("2.11.0", "13.0", "9.19.0.56"),
        ("1.13.1", "11.7", "8.5.0.96"),
    ],
)
def test_known_releases(table: TorchTable, version: str, cuda: str, cudnn: str) -> None:
    row = table.row_for(Version(version))
    assert row is not None
    assert (row.pypi_cuda, row.pypi_cudnn) == (cuda, cudnn)


def test_unknown_release_of_a_known_minor_is_not_in_the_table(table: TorchTable) -> None:
    assert table.row_for(Version("2.3.7")) is None
    assert table.row_for(Version("1.12.1")) is None
    assert table.row_for(Version("2.16.0")) is None


def test_unverified_values_are_flagged(table: TorchTable) -> None:
    row = table.row_for(Version("2.15.0"))
    assert row is not None and not row.pypi_verified and row.variants is None
    assert "UNVERIFIED" in _text()  # the comment that says why stays next to the value


def test_sources_are_kept(table: TorchTable) -> None:
    names = dict(table.sources)
    assert {"facts", "release_matrix", "pypi_metadata"} <= names.keys()
    assert "RELEASE.md" in names["release_matrix"]


def test_table_version_is_bumped_on_content_change(table: TorchTable) -> None:
    # Locks record table_version, so one number must always mean one content: table_version -> digest.
    canonical = json.dumps([asdict(r) for r in table.rows], sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    recorded = {1: "e9a4c7447bd708eb", 2: "3fdb1b12e54ebf4c"}  # 2: python ranges
    assert table.table_version in recorded, "new table_version: record its digest here"
    assert recorded[table.table_version] == digest, (
        f"torch.yaml changed (digest {digest}) but table_version is still {table.table_version}: bump it"
    )


def test_loader_is_cached() -> None:
    assert torch_table() is torch_table()


# --------------------------------------------------------------------------- the validator refuses defects


def _mutated(edit) -> str:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(_text())
    edit(data)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["torch"]["2.3"].update(releases=["2.3.1", "2.3.0"]), "sorted"),
        (lambda d: d["torch"]["2.3"].update(releases=["2.3.0", "2.3.0"]), "sorted"),
        (lambda d: d["torch"]["2.3"].update(releases=["2.4.0"]), "plain 2.3.N"),
        (lambda d: d["torch"]["2.3"].update(releases=["2.3.x"]), "2.3"),
        (lambda d: d["torch"]["2.3"]["variants"].pop("cu121"), "not among its variants"),
        (lambda d: d["torch"]["2.3"]["variants"].update(cu9x="1.0.0"), "cuXYZ"),
        (lambda d: d["torch"]["2.3"]["pypi"].update(cudnn="8.9"), "cuDNN"),
        (lambda d: d["torch"]["2.3"]["pypi"].update(cuda="12"), "X.Y"),
        (lambda d: d["torch"]["2.3"]["pypi"].update(cuda="12.4"), "does not say CUDA 12.4"),
        (lambda d: d["torch"]["2.3"]["pypi"].update(verified="yes"), "true/false"),
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.update(table_version=0), "table_version"),
        (lambda d: d.update(torch=dict(reversed(list(d["torch"].items())))), "oldest first"),
    ],
)
def test_validator_refuses(edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AnchorError, match=re.escape(needle)) as info:
        parse_torch_table(_mutated(edit))
    assert "reinstall envlock" in info.value.hint


def test_validator_refuses_duplicate_keys() -> None:
    text = _text().replace('  "2.4":\n', '  "2.3":\n', 1)
    with pytest.raises(AnchorError, match="duplicate keys 2.3"):
        parse_torch_table(text)


def test_validator_refuses_unsorted_variants() -> None:
    text = _text().replace('{cu118: "8.7.0.84", cu121: "8.9.2.26"}', '{cu121: "8.9.2.26", cu118: "8.7.0.84"}')
    with pytest.raises(AnchorError, match="variants must be sorted"):
        parse_torch_table(text)


# --------------------------------------------------------------------------- agreement with the facts


# Values the table adds that the facts file does not spell out per variant (with the reason in torch.yaml).
DOCUMENTED_EXTRAS = {("2.9", "cu129")}


def _runtime_pin(pypi_requires: dict[str, str]) -> str:
    key = next(k for k in pypi_requires if k.startswith(("nvidia-cuda-runtime-cu", "cuda-toolkit")))
    return f"{key}=={pypi_requires[key]}"


def test_table_agrees_with_the_facts_file(shared_dir: Path, table: TorchTable) -> None:
    facts = yaml.safe_load((shared_dir / "facts" / "toolchain.yaml").read_text(encoding="utf-8"))["torch"]
    in_scope = {m: f for m, f in facts.items() if Version(m) >= Version("1.13")}
    rows = {r.minor: r for r in table.rows}
    assert sorted(rows, key=Version) == sorted(in_scope, key=Version)
    extras = set()
    for minor, fact in in_scope.items():
        row = rows[minor]
        assert list(row.releases) == fact["releases"], minor
        assert row.pypi_cuda == fact["pypi_default_cuda"], minor
        assert row.pypi_verified == fact.get("pypi_default_verified", True), minor
        assert row.pypi_requires == _runtime_pin(fact["pypi_requires"]), minor
        assert row.pypi_cudnn == fact["cudnn"]["pypi"], minor
        assert row.aarch64_pypi_cuda == fact["aarch64_pypi_cuda"], minor
        if fact["variants"] == "unverified":
            assert row.variants is None, minor
            continue
        assert row.variants is not None and [v.tag for v in row.variants] == fact["variants"], minor
        for v in row.variants:
            if v.cuda in fact["cudnn"]:
                assert v.cudnn == fact["cudnn"][v.cuda], (minor, v.tag)
            elif v.cudnn is not None:
                extras.add((minor, v.tag))
    assert extras == DOCUMENTED_EXTRAS


def test_python_ranges_are_the_wheels_and_hold_envlocks_default_python(table: TorchTable) -> None:
    """Every row has [oldest, newest]; the python envlock picks by default has wheels for every release."""
    from envlock.usecases.resolve import default_python

    def key(xy: str) -> tuple[int, int]:
        return int(xy.split(".")[0]), int(xy.split(".")[1])

    newest_seen = (3, 0)
    for row in table.rows:
        assert row.python is not None, row.minor
        oldest, newest = row.python
        assert key(oldest) <= key(newest) and key(newest) >= newest_seen, row.minor  # never shrinks at the top
        newest_seen = key(newest)
        for release in row.releases:
            assert key(oldest) <= key(default_python(release)) <= key(newest), release
    assert table.row_for(Version("2.7.1")).python == ("3.9", "3.13")  # cp39 … cp313 on the index
    assert table.row_for(Version("2.9.0")).python == ("3.10", "3.14")


def test_the_plain_pin_path_reads_every_line_as_packaging_does() -> None:
    """parse_cuda_pins reads `name[extras]==version` lines without packaging's requirement parser (its import
    is ~40 ms of every check and resolve): that shortcut must give packaging's own answer, line by line."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from packaging.requirements import Requirement

    from envlock.core.tables import torch as torch_mod
    from tests.fixtures.pypi import TORCH_230_NVIDIA

    def slow(line: str) -> tuple[str, str | None, str]:
        req = Requirement(line)
        pin = next((s.version.removesuffix(".*") for s in req.specifier if s.operator in ("==", "===")), None)
        return torch_mod._canon(req.name), pin, str(req).split(";")[0].strip()

    fast_lines = [ln for ln in [*TORCH_230_NVIDIA, *(r.pypi_requires for r in torch_table().rows)] if torch_mod._PLAIN_PIN.match(ln)]
    assert len(fast_lines) >= len(torch_table().rows)  # every pin of the table takes the shortcut
    for line in fast_lines:
        assert torch_mod._read(line, "3.11") == slow(line), line
    name = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,12}[A-Za-z0-9])?\Z")
    extras = st.lists(name, max_size=3, unique=True)
    version = st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3}){0,3}(\.\*)?\Z")

    @settings(max_examples=300, deadline=None)
    @given(name, extras, version, st.sampled_from(["", " "]))
    def plain(n: str, ex: list[str], v: str, sp: str) -> None:
        line = f"{n}{sp}{'[' + ', '.join(ex) + ']' if ex else ''}{sp}=={sp}{v}"
        assert torch_mod._PLAIN_PIN.match(line) and torch_mod._read(line, "3.11") == slow(line), line

    @settings(max_examples=300, deadline=None)
    @given(st.text("ab-_.[], =0123456789*;<>", max_size=20))
    def anything(line: str) -> None:
        if torch_mod._PLAIN_PIN.match(line):  # whatever the shortcut takes, packaging reads alike
            assert torch_mod._read(line, "3.11") == slow(line), line

    plain()
    anything()
