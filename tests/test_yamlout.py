"""envlock.formats.yamlsubset writes what PyYAML writes (its pure emitter and libyaml's), or says it cannot."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.formats.yamlsubset import NeedsPyYAML, dump, scalar
from tests.tiers import counts

OPTIONS = {"sort_keys": False, "default_flow_style": False, "width": 4096, "allow_unicode": True}
DUMPERS = [yaml.SafeDumper, *([yaml.CSafeDumper] if hasattr(yaml, "CSafeDumper") else [])]
#: Printable ASCII, weighted towards what YAML treats specially.
SPECIAL = list("-:#?,[]{}&*!|>'\"%@` .=~<+_0123456789eEnNyYtTfFoOxXbl")
TEXT = st.text(alphabet=st.sampled_from(SPECIAL) | st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=24)
#: Strings every implicit resolver of YAML 1.1 matches (they must come back quoted).
TRICKY = ["", " ", "a ", " a", "yes", "No", "ON", "off", "true", "FALSE", "null", "Null", "~", "1", "-1", "+1", "0x1f",
          "0o7", "017", "0b101", "1_000", "1.5", ".5", "1e3", "1.0e+3", "-.inf", ".NaN", "1:30", "190:20:30.15", "<<", "=",
          "2026-12-01", "2026-12-01T10:00:00Z", "2026-12-01 10:00:00.5 +1", "!", "&", "*", "---", "...x", "- a", "-a",
          "? a", ":a", "a:", "a: b", "a #b", "a#b", "#a", "'", "a'b", "\"", "%", "@", "`", "|", ">", "[a]", "{a}", "a,b",
          "-", "--", "?", ":", "https://x.org/a b", "cuda-version >=12,<13", ">=3.10,<3.11.0a0", "python_abi 3.11.* *_cp311"]


def _pyyaml(dumper: Any, doc: Any) -> str:
    return yaml.dump(doc, Dumper=dumper, **OPTIONS)


@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("value", TRICKY)
def test_a_tricky_string_is_written_as_pyyaml_writes_it(dumper: Any, value: str) -> None:
    assert f"k: {scalar(value)}\n" == _pyyaml(dumper, {"k": value})
    if value:  # an empty key is a complex `? ''` entry (NeedsPyYAML)
        assert f"{scalar(value, key=True)}: 1\n" == _pyyaml(dumper, {value: 1})
    assert f"- {scalar(value)}\n" == _pyyaml(dumper, [value])
    assert yaml.safe_load(f"k: {scalar(value)}") == {"k": value}  # and read back as itself


@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda d: d.__name__)
@settings(max_examples=400, deadline=None)
@given(value=TEXT)
def test_any_line_of_printable_ascii_is_written_as_pyyaml_writes_it(dumper: Any, value: str) -> None:
    assert f"k: {scalar(value)}\n" == _pyyaml(dumper, {"k": value})
    if value:
        assert f"{scalar(value, key=True)}: 1\n" == _pyyaml(dumper, {value: 1})


@pytest.mark.parametrize("value", ["a\nb", "tab\there", "é", "\x7f", "\u2028", "x " * 2100])
def test_what_it_does_not_write_it_leaves_to_pyyaml(value: str) -> None:
    with pytest.raises(NeedsPyYAML):
        scalar(value)
    with pytest.raises(NeedsPyYAML):
        dump({"k": value})
    for key in ("k" * 123, ""):
        with pytest.raises(NeedsPyYAML):
            scalar(key, key=True)  # a key PyYAML writes as a complex `? key` entry


@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda d: d.__name__)
def test_a_long_line_below_the_width_is_written_whole(dumper: Any) -> None:
    for value in ("a b " * 990, '{"k": "a b", ' * 280):  # ~3,900 characters with spaces PyYAML could fold at
        assert f"k: {scalar(value, column=3)}\n" == _pyyaml(dumper, {"k": value})


LEAF = TEXT | st.integers(-10**6, 10**6) | st.booleans() | st.none()
DOC = st.recursive(
    LEAF,
    lambda inner: st.lists(inner.filter(lambda v: not isinstance(v, list)), max_size=3)
    | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize("n", counts(300))
@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda d: d.__name__)
def test_any_document_of_mappings_lists_and_scalars_is_dumped_as_pyyaml_dumps_it(dumper: Any, n: int) -> None:
    @settings(max_examples=n, deadline=None)
    @given(doc=st.dictionaries(TEXT, DOC, min_size=1, max_size=5))
    def prop(doc: dict[str, Any]) -> None:
        try:
            ours = dump(doc)
        except NeedsPyYAML:
            return  # a list in a list: PyYAML's to write
        assert ours == _pyyaml(dumper, doc)

    prop()


def test_a_lock_header_shape_is_dumped_as_pyyaml_dumps_it() -> None:
    doc = {"version": 1, "metadata": {
        "content_hash": {"linux-64": "ab" * 32, "win-64": "cd" * 32},
        "channels": [{"url": "https://conda.anaconda.org/conda-forge", "used_env_vars": []}],
        "platforms": ["linux-64", "win-64"], "sources": ["../../environments/x.yml"],
        "custom_metadata": {"envlock.anchor": '{"cuda": "12.6", "note": "it\'s # here: yes"}', "envlock.version": "0.1.0",
                            "envlock.empty": "", "envlock.list": "[1, 2]"}}}
    for dumper in DUMPERS:
        assert dump(doc) == _pyyaml(dumper, doc)
