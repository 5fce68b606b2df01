"""envlock/data/tables.json: the compiled copy of the tables resolve and check read (envlock/core/tables/compiled.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import envlock.core.tables as tables
from envlock.core.tables import compiled


def test_tables_json_is_compiled_from_the_yaml_files_as_they_are() -> None:
    assert compiled.text_of(compiled.COMPILED) == compiled.compile_tables(), (
        "envlock/data/tables.json is stale: run `python -m envlock.core.tables.compiled`")


def test_the_compiled_tables_are_the_yaml_tables() -> None:
    for name in compiled.SOURCES:
        assert compiled.document(name) is not None, name  # read from the JSON, not the YAML
    assert tables.torch_table_of(compiled.document("torch.yaml")) == tables.parse_torch_table(tables.text_of("torch.yaml"))
    assert tables.parse_cuda(compiled.document("cuda.yaml")) == tables.parse_cuda(yaml.safe_load(tables.text_of("cuda.yaml")))
    assert (tables.parse_extras(compiled.document("extras.yaml"))
            == tables.parse_extras(yaml.safe_load(tables.text_of("extras.yaml"))))


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """envlock/data copied to tmp_path, in force for the test (the tables' caches emptied before and after)."""
    data = tmp_path / "data"
    shutil.copytree(tables.DATA, data)
    monkeypatch.setattr(tables, "DATA", data)
    caches = (compiled._compiled, tables.torch_table, tables.cuda_tables, tables.extras_tables)
    for cache in caches:
        cache.cache_clear()
    yield data
    for cache in caches:
        cache.cache_clear()


def test_a_yaml_edit_not_yet_compiled_is_read_from_the_yaml(data_copy: Path) -> None:
    text = (data_copy / "cuda.yaml").read_text()
    assert "rules_version:" in text
    edited = text.replace("rules_version:", "rules_version: 'edited-here' #", 1)
    (data_copy / "cuda.yaml").write_text(edited)
    assert compiled.document("cuda.yaml") is None and compiled.document("torch.yaml") is not None
    assert tables.cuda_tables().rules_version == "edited-here"


def test_a_missing_or_damaged_tables_json_falls_back_to_the_yaml(data_copy: Path) -> None:
    (data_copy / "tables.json").write_text("{not json")
    assert compiled.document("torch.yaml") is None
    assert tables.torch_table().rows  # from the YAML
    compiled._compiled.cache_clear()
    (data_copy / "tables.json").unlink()
    assert compiled.document("extras.yaml") is None and tables.extras_tables().extras


def test_a_resolve_s_tables_need_no_yaml() -> None:
    code = ("import sys; from envlock.core.tables import torch_table, cuda_tables, extras_tables; "
            "torch_table(), cuda_tables(), extras_tables(); print('yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_full_env_s_pypi_table_needs_no_yaml_and_is_the_yaml_s() -> None:
    code = ("import sys; from envlock.core.tables import pypi_table, variant_index_url; "
            "print(variant_index_url('cu126'), 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-1] == "False" and out.split()[0].endswith("/cu126")
    assert tables.parse_pypi(compiled.document("pypi.yaml")) == tables.parse_pypi(yaml.safe_load(tables.text_of("pypi.yaml")))
