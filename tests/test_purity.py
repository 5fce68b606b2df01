"""The pure core imports nothing that reaches out: a fresh interpreter imports it and looks at sys.modules.

anchor, rules, tables and torch_support take their tables and sources as arguments: no typer, no rattler,
no requests, no conda_lock, no subprocess (not even through a dependency), and none of envlock's own
modules that run a process or reach the network. Modelled on pip-tools' test_circular_imports.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PURE = ("envlock.core.anchor", "envlock.core.rules", "envlock.core.tables", "envlock.core.torch_support", "envlock.models", "envlock.names")
#: The envlock modules importing the pure core may load: itself and what it stands on.
ALLOWED = {"envlock", "envlock.core", "envlock.errors", *PURE, "envlock.core.tables.cuda", "envlock.core.tables.other", "envlock.core.tables.torch",
           "envlock.models.record"}
FORBIDDEN = ("typer", "click", "rattler", "requests", "urllib3", "conda_lock", "rich", "subprocess", "yaml")


def _fresh(code: str) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("module", PURE)
def test_the_pure_core_imports_nothing_that_reaches_out(module: str) -> None:
    found = _fresh(
        f"import sys, json; import {module}\n"
        f"print(json.dumps({{'outside': sorted(m for m in {FORBIDDEN!r} if m in sys.modules),"
        "'envlock': sorted(m for m in sys.modules if m.startswith('envlock'))}))"
    )
    assert found["outside"] == [], f"{module} imports {found['outside']}"
    assert set(found["envlock"]) <= ALLOWED, f"{module} imports {set(found['envlock']) - ALLOWED}"


def test_the_probe_and_the_index_client_are_where_the_process_and_the_network_are() -> None:
    """Control: the check above can fail: the sources the caller makes do import what the core must not."""
    found = _fresh(
        "import sys, json; import envlock.seams.installed_torch\n"
        "print(json.dumps({'outside': sorted(m for m in ('subprocess',) if m in sys.modules), 'envlock': []}))"
    )
    assert found["outside"] == ["subprocess"]


def test_rules_receive_their_tables() -> None:
    """rules.make_plan plans from the tables it is handed: a changed gcc cap changes the plan, no patching."""
    import envlock.models as records

    from envlock.models import Anchor, PlanOptions
    from envlock.core.rules import make_plan
    from envlock.core.tables import cuda_tables, extras_tables

    real = cuda_tables()
    lower = records.replace(real, minors={**real.minors, "12.1": records.replace(real.minors["12.1"], gcc_max=11)})
    anchor = Anchor(torch="2.3.0", cuda="12.1", cudnn=None, source="table", detail="t")
    options = PlanOptions(platforms=("linux-64",))
    specs = {t.rules_version: make_plan(anchor, options, t, extras_tables()).platforms[0].candidates[0].specs
             for t in (real, records.replace(lower, rules_version="test"))}
    assert "gcc_linux-64 <13" in specs[real.rules_version] and "gcc_linux-64 <12" in specs["test"]


def test_locking_a_pypi_part_loads_no_index_client() -> None:
    """A full environment's PyPI part (uv, the wheels' metadata, pip's configured index) loads neither the anchor's
    index client nor its HTML parser: a torch the table anchors never asks the index (issue 25: ~8 ms of import)."""
    names = ("envlock.seams.pypi.index", "envlock.seams.pypi.simple", "html.parser")
    code = ("import sys, json; import envlock.usecases.pypi_lock, envlock.seams.pypi.compile, envlock.seams.pypi.requires, "
            "envlock.seams.pypi.pipconf; from envlock.seams.pypi import configured_index_url\n"
            f"print(json.dumps({{'outside': sorted(m for m in {names!r} if m in sys.modules), 'envlock': []}}))")
    assert _fresh(code)["outside"] == []
    # the anchor's lookup still finds it where it always was (a name of the package, loaded on first use)
    asked = _fresh("import sys, json; from envlock.seams.pypi import torch_cuda_from_index\n"
                   f"print(json.dumps({{'outside': sorted(m for m in {names!r} if m in sys.modules), 'envlock': []}}))")
    assert asked["outside"] == sorted(names)
