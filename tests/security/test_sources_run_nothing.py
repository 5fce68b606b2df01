"""Issue 33.7 (the sources part): `--for` reads, never runs, and never crashes.

* `doctor --for a.b` (an installed package's dotted name) ran `importlib.util.find_spec("a.b")` in `python -c`,
  which imports `a` — from the current folder first: a checkout's `a/__init__.py` ran. Now the package is
  found by `python -I -S` walking the search paths (folders and file names only).
* a deeply nested `#if` ended `doctor --for` and `resolve --for` in `internal error: RecursionError`; now the
  expression reader has a depth cap and calls such an expression undecidable. A hypothesis run feeds it
  arbitrary expressions and source text: an answer (True / False / None), never an exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.sources import cpp
from envlock.sources.classify import source_tables
from envlock.sources.reader import SourceFiles
from envlock.sources.scan import scan

RUNS = "open({marker!r}, 'w').write('ran')\n"


def _env(tmp: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR")}
    return {**keep, "PATH": "/usr/bin:/bin", "ENVLOCK_CACHE_DIR": str(tmp / "cache"),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip


def _envlock(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envlock", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def _site(prefix: Path) -> Path:
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return Path(out.stdout.strip())


def test_doctor_for_an_installed_dotted_name_imports_nothing(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = _site(env_dir)
    installed, checkout = tmp_path / "installed-ran", tmp_path / "checkout-ran"
    (site / "a" / "b").mkdir(parents=True)
    (site / "a" / "__init__.py").write_text(RUNS.format(marker=str(installed)))
    (site / "a" / "b" / "__init__.py").write_text(RUNS.format(marker=str(installed)))
    (site / "a" / "b" / "k.cu").write_text("#include <cuda_runtime.h>\n#include <cusparseLt.h>\n")
    # a distribution whose import name differs from its own (flash-attn -> flash_attn_core), found by top_level.txt
    (site / "flash_attn_core").mkdir()
    (site / "flash_attn_core" / "__init__.py").write_text(RUNS.format(marker=str(installed)))
    (site / "flash_attn_core" / "f.cu").write_text("#include <nccl.h>\n")
    (site / "flash_attn-2.8.3.dist-info").mkdir()
    (site / "flash_attn-2.8.3.dist-info" / "top_level.txt").write_text("flash_attn_core\n")
    # the folder doctor is run from: a checkout whose package of the same name would run on import
    work = tmp_path / "work"
    (work / "a" / "b").mkdir(parents=True)
    (work / "a" / "__init__.py").write_text(RUNS.format(marker=str(checkout)))
    (work / "a" / "b" / "__init__.py").write_text("")
    env = _env(tmp_path)
    python = str(env_dir / "bin" / "python")
    r = _envlock("doctor", "--json", "--for", "a.b", "--python-exe", python, cwd=work, env=env)
    assert not checkout.exists() and not installed.exists(), "a package's code ran"
    doc = json.loads(r.stdout)
    unit = next(f for f in doc["findings"] if f["code"].startswith("source."))
    assert unit["details"]["source"] == str(site / "a" / "b") and "cusparseLt.h" in unit["details"]["cuda_headers"]
    r = _envlock("doctor", "--json", "--for", "flash-attn", "--python-exe", python, cwd=work, env=env)
    unit = next(f for f in json.loads(r.stdout)["findings"] if f["code"].startswith("source."))
    assert unit["details"]["source"] == str(site / "flash_attn_core") and not installed.exists()
    r = _envlock("doctor", "--for", "a.nope", "--python-exe", python, cwd=work, env=env)
    # exit 1: a well-formed value envlock cannot serve (docs/reference.md's table; issue 34.7), as a missing -p PATH
    assert r.returncode == 1 and r.stderr.startswith("error: --for a.nope: no such file or folder") and not checkout.exists()


def _deep(n: int) -> str:
    return "#if " + "(" * n + "1" + ")" * n + "\n#include <cusparseLt.h>\n#endif\n#if " + "!" * n + "X\n#include <nccl.h>\n#endif\n"


def test_a_deeply_nested_if_is_undecidable_not_an_internal_error(tmp_path: Path, test_channel: Path) -> None:
    assert cpp.evaluate("(" * 100_000 + "1" + ")" * 100_000, cpp.KNOWN) is None
    assert cpp.evaluate("!" * 100_000 + "1", cpp.KNOWN) is None
    assert cpp.evaluate("(" * 20 + "1" + ")" * 20, cpp.KNOWN) is True  # within the cap: decided
    tree = tmp_path / "deep"
    tree.mkdir()
    (tree / "k.cu").write_text(_deep(50_000))
    env = _env(tmp_path)
    r = _envlock("doctor", "--json", "--for", str(tree), cwd=tmp_path, env=env)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    unit = next(f for f in json.loads(r.stdout)["findings"] if f["code"] == "source.all_sources")
    assert set(unit["details"]["cuda_headers"]) == {"cusparseLt.h", "nccl.h"}  # both under an undecidable #if
    r = _envlock("resolve", "--torch", "2.11.0", "--for", str(tree), "--platform", "linux-64", "--toolchain-only",
                 "--mirror", f"conda-forge={test_channel.as_uri()}", "--project-dir", str(tmp_path / "p"), "--json",
                 cwd=tmp_path, env=env)  # fmt: skip
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0 and json.loads(r.stdout)["with"] == ["cusparselt", "nccl"]


_NAME = st.sampled_from(["X", "WITH_NVTX", "__linux__", "_WIN32", "CUDA_VERSION", "defined", "USE_ROCM", "A_B"])
_ATOM = st.one_of(_NAME, st.integers(-5, 70000).map(str), _NAME.map(lambda n: f"defined({n})"), _NAME.map(lambda n: f"defined {n}"))
_EXPR = st.recursive(
    _ATOM,
    lambda e: st.one_of(
        e.map(lambda x: f"({x})"), e.map(lambda x: f"!{x}"),
        st.tuples(e, st.sampled_from(["&&", "||", "==", "!=", ">=", "<=", "<", ">", "+", "*", "?"]), e).map(" ".join),
    ),
    max_leaves=40,
)  # fmt: skip
_LINE = st.one_of(
    _EXPR.map(lambda x: f"#if {x}"), _EXPR.map(lambda x: f"#elif {x}"), _NAME.map(lambda n: f"#ifdef {n}"),
    _NAME.map(lambda n: f"#ifndef {n}"), st.just("#else"), st.just("#endif"), _NAME.map(lambda n: f"#define {n}"),
    _NAME.map(lambda n: f"#undef {n}"), st.sampled_from(["#include <cusparseLt.h>", '#include "x.h"', "#include MACRO",
                                                          "#include <", "#", "/* open comment", "\\", "#if", "#elif"]),
    st.text(max_size=40),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=st.one_of(_EXPR, st.text(max_size=200)), macros=st.dictionaries(_NAME, st.one_of(st.booleans(), st.integers(), st.none())))
def test_any_if_expression_is_true_false_or_undecidable(expr: str, macros: dict) -> None:
    assert cpp.evaluate(expr, macros) in (True, False, None)
    assert cpp.evaluate(expr, cpp.KNOWN) in (True, False, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINE, max_size=30), setup=st.sampled_from(["", "setup(ext_modules=[CUDAExtension('p', ['a.cu'], define_macros=[('X', None)], extra_compile_args=['-DWITH_NVTX'])])\n"]))
def test_any_source_text_scans_to_findings_never_an_exception(lines: list[str], setup: str) -> None:
    files = {"a.cu": "\n".join(lines), "x.h": "\n".join(reversed(lines)), **({"setup.py": setup} if setup else {})}
    got = scan(SourceFiles("fuzz", files), source_tables())
    for unit in got.units:
        assert all(n.provider.kind in ("cuda", "driver", "gone", "not_cuda", "unknown", "torch", "python", "system",
                                       "other_platform") for n in unit.needs)  # fmt: skip
