"""The environment spec file: render, parse, validation, and what the content hash sees of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envlock.errors import EnvlockError, LockfileError, SpecError
from envlock.models import Anchor
from envlock.project import content_hashes
from envlock.usecases.resolve import SolveSettings, plan_for, shipped_tables
from envlock.formats.spec import EnvSpec, parse_spec, read_spec, render_spec

SPEC = EnvSpec(name="torch2.8.0-cu128", torch="2.8.0", python="3.10", platforms=("linux-64", "win-64"))
ANCHOR = Anchor(torch="2.8.0", cuda="12.8", cudnn="9.10.2.21", source="table", detail="t")


def plan_of(spec: EnvSpec):  # type: ignore[no-untyped-def]
    return plan_for(spec, ANCHOR, shipped_tables())


def rendered(extras: tuple[str, ...] = ()) -> str:
    plan = plan_of(SPEC)
    per = {pp.platform: pp.candidates[0].specs for pp in plan.platforms}
    return render_spec(SPEC, per, extras)


def test_render_uses_selectors_only_where_platforms_differ() -> None:
    text = rendered()
    assert "  - cuda-nvcc\n" in text
    assert "  - gcc_linux-64 <15  # [linux64]\n" in text
    assert "  - vs2022_win-64  # [win64]\n" in text
    assert "python: '3.10'" in text  # quoted: an unquoted 3.10 would read back as 3.1


def test_render_parse_roundtrip() -> None:
    spec = parse_spec(rendered(("numpy >=1.26",)))
    assert spec.name == SPEC.name and spec.torch == "2.8.0" and spec.python == "3.10"
    assert spec.platforms == ("linux-64", "win-64") and spec.channels == ("conda-forge",)
    assert "numpy >=1.26" in spec.dependencies


def test_conda_style_reader_sees_a_plain_environment_yml() -> None:
    doc = yaml.safe_load(rendered())
    assert doc["name"] == SPEC.name and doc["channels"] == ["conda-forge"]
    assert "cuda-version=12.8" in doc["dependencies"]


def test_extras_are_kept_and_hashed() -> None:
    spec = parse_spec(rendered(("numpy >=1.26",)))
    plan = plan_of(spec)
    assert plan.options.extra_specs == ("numpy >=1.26",)
    assert all("numpy >=1.26" in c.specs for pp in plan.platforms for c in pp.candidates)
    plain = parse_spec(rendered())
    base = content_hashes(plain, plan_of(plain))
    with_extra = content_hashes(spec, plan)
    assert base.keys() == with_extra.keys() and all(base[k] != with_extra[k] for k in base)


def test_layout_comments_and_order_do_not_change_the_hash() -> None:
    a = parse_spec(rendered())
    text = rendered()
    shuffled = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    doc = yaml.safe_load(shuffled)
    doc["dependencies"] = list(reversed(doc["dependencies"]))
    b = parse_spec("# reordered by hand\n" + yaml.safe_dump(doc, sort_keys=True, default_flow_style=True))
    ha = content_hashes(a, plan_of(a))
    hb = content_hashes(b, plan_of(b))
    assert ha == hb


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("name: x\n  bad: [", SpecError, "not valid YAML"),
        ("- a\n", SpecError, "not a mapping"),
        ("name: x\n", SpecError, "no `envlock:` block"),
        ("name: x\nenvlock: {spec_version: 1}\n", SpecError, "envlock.torch is missing"),
        ("name: x\nenvlock: {torch: '2.3.0', python: 3.10}\n", SpecError, "quoted string"),
        ("name: x\nenvlock: {torch: '2.3.0', torch_source: brew}\n", SpecError, "torch_source"),
        ("name: x\nenvlock: {torch: '2.3.0', spec_version: 9}\n", LockfileError, "spec_version 9"),
        ("name: 'a b'\nenvlock: {torch: '2.3.0'}\n", SpecError, "invalid lock name"),
        ("name: x\nplatforms: linux-64\nenvlock: {torch: '2.3.0'}\n", SpecError, "must be a list"),
    ],
)
def test_bad_specs_are_errors_with_hints(text: str, error: type[EnvlockError], needle: str) -> None:
    with pytest.raises(error) as err:
        parse_spec(text, Path("environments/x.yml"))
    assert needle in err.value.message and err.value.hint


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(LockfileError, match="no spec at"):
        read_spec(tmp_path / "x.yml")


def test_the_projects_own_example_spec_reads(shared_dir: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    spec = read_spec(repo / "environments" / "torch2.7.1-cu126.yml")
    assert spec.torch == "2.7.1" and spec.platforms == ("linux-64",)


def test_hand_edited_toolchain_lines_are_reported_not_silently_dropped(tmp_path: Path) -> None:
    from envlock.usecases.resolve.solve import solve

    text = rendered().replace("  - cuda-nvcc\n", "  - cuda-nvcc 12.8.61\n")
    kw = {"project_dir": tmp_path, "settings": SolveSettings(), "tables": shipped_tables(), "dry_run": True}
    result = solve(parse_spec(text), ANCHOR, **kw)  # type: ignore[arg-type]
    assert any("'cuda-nvcc 12.8.61'" in w and "envlock:" in w for w in result.warnings)
    clean = solve(parse_spec(rendered()), ANCHOR, **kw)  # type: ignore[arg-type]
    assert clean.warnings == ()
