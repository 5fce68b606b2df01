"""What a build asks of the toolchain besides headers and libraries: the C++ / CUDA standard, the GPU
architectures it compiles for, and the nvcc versions it refuses (pure: flags and `ast` in, Facts out).

  * flags (setup.py's extra_compile_args, a JIT load()'s extra_cuda_cflags, CMAKE_CUDA_FLAGS,
    target_compile_options): `-std=c++17`; `-gencode arch=compute_80,code=sm_80`, `-arch=sm_90a`,
    `--gpu-architecture=…`;
  * CMake properties: CMAKE_CXX_STANDARD / CXX_STANDARD, CMAKE_CUDA_STANDARD / CUDA_STANDARD, cxx_std_17,
    CMAKE_CUDA_ARCHITECTURES / CUDA_ARCHITECTURES (`80;90a-real;native`);
  * setup.py's own checks, read with `ast`: `if bare_metal_version < Version("11.7"): raise …` is an nvcc
    floor; an arch flag appended under `if bare_metal_version >= Version("12.8"):` is built only from that
    nvcc on.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence

from envlock.sources.pystatic import Fact, dotted, known_false

_STD = re.compile(r"^(?:-|--)std=(?:c|gnu)\+\+(\d+)$")
_ARCH = re.compile(r"\b(?:compute|sm|lto)_(\d+[a-z]?)\b")
_VERSION_NAME = re.compile(r"(bare_metal|nvcc|cuda)\w*ver|ver\w*cuda", re.I)
_VERSION_CALLS = ("Version", "parse", "parse_version", "LooseVersion", "StrictVersion")


def flag_facts(flags: Iterable[str], where: str, *, cuda_flags: bool = True) -> list[Fact]:
    """The standard and the architectures a list of compiler flags asks for."""
    out: list[Fact] = []
    for f in flags:
        m = _STD.match(f.strip())
        if m:
            out.append(Fact("cuda_std" if cuda_flags else "cxx_std", m.group(1), where))
        if "arch" in f or "code=" in f:
            out += [Fact("arch", a, where) for a in _ARCH.findall(f)]
    return out


def cmake_facts(props: Mapping[str, str], flags: Sequence[str], where: str) -> tuple[Fact, ...]:
    """A CMake target's facts from its properties (or the CMAKE_* values when it was made) and flags."""
    out: list[Fact] = []
    for key, names in (("cxx_std", ("CXX_STANDARD", "CMAKE_CXX_STANDARD")), ("cuda_std", ("CUDA_STANDARD", "CMAKE_CUDA_STANDARD"))):
        value = next((props[n] for n in names if props.get(n)), None)
        if value and value.isdigit():
            out.append(Fact(key, value, where))
    arches = next((props[n] for n in ("CUDA_ARCHITECTURES", "CMAKE_CUDA_ARCHITECTURES") if props.get(n)), "")
    for item in arches.split(";"):
        a = re.sub(r"-(real|virtual)$", "", item.strip())
        if re.fullmatch(r"\d+[a-z]?|native|all|all-major", a):
            out.append(Fact("arch", a, where))
        elif "\x01" in a:  # computed at configure time (cmakelang.UNKNOWN)
            out.append(Fact("arch", "configure-time", where))
    cuda = [f for f in re.split(r"[\s;]+", props.get("CMAKE_CUDA_FLAGS", "")) if f]
    out += flag_facts([*cuda, *flags], where)
    return tuple(dict.fromkeys(out))


def setup_facts(tree: ast.Module, path: str) -> list[Fact]:
    """nvcc floors, nvcc-gated arch flags and `-std=` flags of a setup.py (branches known false on Linux with
    CUDA skipped: a Windows `/std:c++17` or a ROCm branch says nothing here)."""
    out: list[Fact] = []

    def visit(body: Sequence[ast.stmt], gate: str) -> None:
        for st in body:
            if isinstance(st, ast.If):
                verdict = known_false(st.test)
                op, bound = _version_test(st.test)
                if verdict is not True:
                    if op == "Lt" and any(isinstance(s, ast.Raise) or _exits(s) for s in st.body):
                        out.append(Fact("nvcc_min", bound, f"{path}:{st.lineno}"))
                    visit(st.body, bound if op in ("GtE", "Gt") and bound else gate)
                if verdict is not False:
                    visit(st.orelse, gate)
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(st, part, None) or [], gate)
                for handler in getattr(st, "handlers", []):
                    visit(handler.body, gate)
            else:
                out.extend(_arch_list(st, path, gate))
                for node in ast.walk(st):
                    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                        continue
                    if "arch" in node.value or "code=" in node.value:
                        out.extend(Fact("arch", a, f"{path}:{node.lineno}", gate) for a in _ARCH.findall(node.value))
                    m = _STD.match(node.value)
                    if m:  # nvcc passes its -std to the host compiler: either way the host compiler needs it
                        out.append(Fact("cxx_std", m.group(1), f"{path}:{node.lineno}"))

    visit(tree.body, "")
    return out


def _version_test(test: ast.AST) -> tuple[str, str]:
    """('Lt', '11.7') for `bare_metal_version < Version("11.7")` (within an `and` too), else ('', '')."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for v in test.values:
            got = _version_test(v)
            if got[0]:
                return got
        return "", ""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and _VERSION_NAME.search(dotted(test.left) or "")):
        return "", ""
    right = test.comparators[0]
    if isinstance(right, ast.Call) and dotted(right.func).rsplit(".", 1)[-1] in _VERSION_CALLS and right.args:
        right = right.args[0]
    if isinstance(right, ast.Constant) and isinstance(right.value, str) and re.fullmatch(r"\d+(\.\d+)*", right.value):
        return type(test.ops[0]).__name__, right.value
    return "", ""


def _exits(st: ast.stmt) -> bool:
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and dotted(st.value.func) in ("sys.exit", "exit")


def summary(facts: Iterable[Fact]) -> dict[str, object]:
    """The facts of a unit (or a project) as one document: the standards, the arch list (with the nvcc an
    arch needs), the nvcc bounds."""
    facts = list(facts)
    doc: dict[str, object] = {}
    for key in ("cxx_std", "cuda_std"):
        vals = sorted({int(f.value) for f in facts if f.key == key})
        if vals:
            doc[key] = f"c++{vals[-1]}"
    arches: dict[str, str | None] = {}
    for f in facts:  # an arch built whatever the nvcc: ""; else the lowest nvcc a check builds it from
        if f.key == "arch":
            old = arches.get(f.value)
            arches[f.value] = "" if "" in (old, f.nvcc) else min(f.nvcc, old or f.nvcc, key=_vkey)
    if arches:
        doc["arch"] = [a + (f" (nvcc >= {n})" if n else "") for a, n in sorted(arches.items(), key=lambda x: _akey(x[0]))]  # type: ignore[misc]  # n is a str here
    for key in ("nvcc_min", "nvcc_below", "nvcc_max"):
        vals = sorted({f.value for f in facts if f.key == key}, key=_vkey)
        if vals:
            doc[key] = vals[-1] if key == "nvcc_min" else vals[0]
    downloads = sorted({f.value for f in facts if f.key == "downloads"})
    if downloads:
        doc["downloads"] = downloads
    return doc


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _akey(a: str) -> tuple[int, str]:
    m = re.match(r"(\d+)(.*)", a)
    return (int(m.group(1)), m.group(2)) if m else (1 << 30, a)


def requirements(doc: Mapping[str, object]) -> dict[str, object]:
    """A summary() with what its C++ standard asks (data/buildsystems.yaml's standards): the host compiler,
    and an nvcc floor when it is above the one the project states."""
    from envlock.sources.buildsys import table

    out: dict[str, object] = {k: doc[k] for k in ("cxx_std", "cuda_std") if k in doc}
    stds = [int(str(doc[k])[3:]) for k in ("cxx_std", "cuda_std") if k in doc]
    row = table()["standards"].get(str(max(stds))) if stds else None
    stated = str(doc["nvcc_min"]) if "nvcc_min" in doc else ""
    if row:
        out["host_compiler"] = f"gcc >= {row['gcc']} (C++{max(stds)})"
    floor = row["nvcc"] if row and (not stated or _vkey(row["nvcc"]) > _vkey(stated)) else stated
    if floor:
        out["nvcc_min"] = floor
        out["nvcc_min_why"] = ("the project refuses older" if floor == stated else f"C++{max(stds)} needs it")
    for k in ("nvcc_below", "nvcc_max", "arch", "downloads"):
        if k in doc:
            out[k] = doc[k]
    return out


def _arch_list(st: ast.stmt, path: str, gate: str) -> list[Fact]:
    """`os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;9.0+PTX"` (a default the project sets): its arches."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Subscript)):
        return []
    target, value = st.targets[0], st.value
    key = target.slice
    if dotted(target.value) != "os.environ" or not (isinstance(key, ast.Constant) and key.value == "TORCH_CUDA_ARCH_LIST"):
        return []
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return []
    return [Fact("arch", f"{m.group(1)}{m.group(2)}{m.group(3)}", f"{path}:{st.lineno}", gate)
            for m in re.finditer(r"(\d+)\.(\d)([a-z]?)", value.value)]  # fmt: skip
