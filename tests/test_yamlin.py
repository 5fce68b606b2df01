"""envlock.formats.yamlsubset.parse reads what yaml.safe_load reads, value for value, or says NotSimple (the checked
PyYAML loader then reads it): on envlock's own files, on documents PyYAML wrote, and on edits of them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.formats.yamlsubset import MAX_DEPTH, NotSimple, parse
from tests.tiers import counts

REPO = Path(__file__).resolve().parent.parent
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def agrees(text: str) -> str:
    """'read' (the same value as PyYAML's) or 'left' (NotSimple); fails when the two readers differ."""
    try:
        ours = parse(text)
    except NotSimple:
        return "left"
    theirs = yaml.load(text, Loader=LOADER)  # a YAMLError here: we read what PyYAML refuses (fails the test)
    assert ours == theirs and type(ours) is type(theirs), (text[:400], ours, theirs)
    return "read"


def envlock_files() -> list[Path]:
    return sorted([*REPO.glob("environments/*.yml"), *REPO.glob("locks/*/conda-lock.yml")])


def test_envlock_s_own_spec_and_lock_are_read_without_pyyaml() -> None:
    files = envlock_files()
    assert files
    assert [agrees(f.read_text()) for f in files] == ["read"] * len(files)


def test_real_locks_of_other_projects_are_read_as_pyyaml_reads_them_or_left_to_it(shared_dir: Path) -> None:
    outcomes = [agrees(f.read_text()) for f in sorted((shared_dir / "real-locks").rglob("*.y*ml"))]
    assert "read" in outcomes  # conda-lock's own files are in the subset too


def test_a_resolved_project_s_files_are_read_as_pyyaml_reads_them(tmp_path: Path, test_channel: Path) -> None:
    from envlock.usecases.resolve import ResolveRequest, resolve

    resolve(ResolveRequest(torch="2.3.0", platforms=("linux-64", "linux-aarch64", "win-64"), toolchain_only=True,
                           mirrors={"conda-forge": test_channel.as_uri()}, project_dir=tmp_path, with_extras=("nvtx",)))
    files = sorted(p for p in tmp_path.rglob("*.yml"))
    # the spec, conda-lock.yml and one plain-conda environment-<platform>.yml per platform
    assert len(files) == 2 + 3 and {agrees(f.read_text()) for f in files} == {"read"}


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",  # an anchor and an alias
    "a: !!str 1\n",  # a tag
    'a: "double"\n',
    "a: 1.5\n", "a: 2026-01-01\n", "a: 017\n", "a: 0x1f\n", "a: 1_000\n", "a: .inf\n",
    "a: b\n  continued\n",  # a multi-line plain scalar
    "a: 'open\n  quote'\n",
    "a:\tb\n", "a: b\x85c\n", "\ufeffa: b\n",
    "a: 1\na: 2\n",  # a duplicate key
    "---\na: 1\n", "a: 1\n...\n", "? a\n: b\n", "- - a\n", "a: [b, [c]]\n", "a: {b: c}\n", "a: ['x, y']\n",
    "",
])
def test_what_it_does_not_read_it_leaves_to_pyyaml(text: str) -> None:
    with pytest.raises(NotSimple):
        parse(text)


def test_nesting_is_bounded() -> None:
    deep = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH + 5)) + f"{'  ' * (MAX_DEPTH + 5)}v: 1\n"
    with pytest.raises(NotSimple):
        parse(deep)
    assert agrees("".join(f"{'  ' * i}k{i}:\n" for i in range(10)) + f"{'  ' * 10}v: 1\n") == "read"


@pytest.mark.parametrize("text", [
    "a: yes\nb: No\nc: ON\nd: off\ne: ~\nf:\ng: null\nh: -12\ni: +3\nj: 0\n",
    "o8: 0o17\nk: 'it''s'\n'quoted key': v\nurl: http://x/a#b  # comment\nl: a#b\nm: []\nn: {}\no: [p, q]\n",
    "list:\n- a\n-   b\n- key: v\n  other: w\n-\n  nested: 1\nafter: 2\n",
    "top:\n  inner:\n  - 1\n  - two\n  again: x\n",
    "# only a comment line first\nname: x  # [linux64]\n",
])
def test_what_it_reads_is_what_pyyaml_reads(text: str) -> None:
    assert agrees(text) == "read"


TEXT = st.text(alphabet=st.sampled_from(list("-:#?,[]{}&*!|>'\"%@` .=~<+_0123456789eEnNyYtTfFoOxXbl"))
               | st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), max_size=16)
LEAF = TEXT | st.integers(-10**6, 10**6) | st.booleans() | st.none() | st.floats(allow_nan=False, width=32)
DOC = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT | st.integers(0, 9), inner,
                                                                                       max_size=4), max_leaves=14)
DUMPERS = [yaml.SafeDumper, *([yaml.CSafeDumper] if hasattr(yaml, "CSafeDumper") else [])]


@pytest.mark.parametrize("n", counts(500))
def test_any_document_pyyaml_wrote_is_read_back_as_pyyaml_reads_it(n: int) -> None:
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck))
    @given(doc=DOC, flow=st.sampled_from([False, None]), unicode=st.booleans(), dumper=st.sampled_from(DUMPERS))
    def prop(doc: Any, flow: bool | None, unicode: bool, dumper: Any) -> None:
        agrees(yaml.dump(doc, Dumper=dumper, default_flow_style=flow, allow_unicode=unicode, sort_keys=False))

    prop()


@pytest.mark.parametrize("n", counts(1500))
def test_edited_envlock_files_are_read_as_pyyaml_reads_them_or_left_to_it(n: int) -> None:
    """Random edits (insert, delete, replace a character YAML cares about) of envlock's files: the first n of one
    seeded sequence (the default tier's 300 are the slow tier's first 300; 201 of them are read, 958 of 1,500)."""
    rng = random.Random(25)
    pool = [f.read_text() for f in envlock_files()]
    chars = list(" -:#'\"[]{},&*!|>%@`?~\n\t0123456789.aZ_")
    read = 0
    for _ in range(n):
        text = list(rng.choice(pool))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(text))
            op = rng.random()
            if op < 0.4:
                text.insert(pos, rng.choice(chars))
            elif op < 0.7:
                del text[pos]
            else:
                text[pos] = rng.choice(chars)
        read += agrees("".join(text)) == "read"  # a YAMLError: we read what PyYAML refuses (a failure)
    assert read > 100  # the edits that keep a file in the subset are read, not all left to PyYAML
