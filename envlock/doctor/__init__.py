"""`envlock doctor`: can this environment JIT-compile a CUDA extension?

    observe.py (+ programs.py, probe.py)   every subprocess and file probe -> one frozen Observation
    checks_*.py                            pure: (Observation, Tables) -> findings; no I/O, no shared state
    hints.py                               the one-line fixes, built from the Observation
    result.py                              exit code, summary, the --json document (the command renders)
observation.py holds the values, data.py the facts and tables the checks judge by.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from envlock.doctor import (
    checks_build,
    checks_compile,
    checks_env,
    checks_gpu,
    checks_groups,
    checks_runtime,
    checks_sources,
)
from envlock.doctor.data import CUDNN_HEADER, FOR_CHOICES, HEADERS, Tables, load_tables
from envlock.doctor.observation import Observation
from envlock.doctor.observe import DoctorOptions, observe
from envlock.doctor.result import DOCTOR_RESULT_VERSION, exit_code, result_json, summary
from envlock.models import Finding

__all__ = [
    "CHECKS",
    "CUDNN_HEADER",
    "DOCTOR_RESULT_VERSION",
    "FOR_CHOICES",
    "HEADERS",
    "DoctorOptions",
    "Finding",
    "diagnose",
    "exit_code",
    "result_json",
    "run_doctor",
    "summary",
]

Check = Callable[[Observation, Tables], list[Finding]]

#: Every check, in the order the findings are listed. Each reads only the Observation and the tables.
CHECKS: tuple[Check, ...] = (
    checks_env.check_target,
    checks_env.check_path,
    checks_env.check_activation,
    checks_env.check_torch,
    checks_env.check_nvcc_found,
    checks_env.check_nvcc_skew,
    checks_env.check_cuda_home,
    checks_build.check_headers,
    checks_build.check_cudart,
    checks_build.check_host_compiler,
    checks_build.check_ccbin,
    checks_runtime.check_driver,
    checks_runtime.check_ld_library_path,
    checks_groups.check_header_groups,
    checks_groups.check_deepspeed,  # --for deepspeed
    checks_sources.check_sources,  # --for SOURCE
    checks_gpu.check_gpu,
)
COMPILE_CHECKS: tuple[Check, ...] = (checks_compile.check_compile_nvcc, checks_compile.check_compile_torch)


def diagnose(obs: Observation, tables: Tables, checks: Sequence[Check] | None = None) -> list[Finding]:
    """The findings of every check (and of the compile checks when the Observation has --compile)."""
    chosen = checks if checks is not None else CHECKS + (COMPILE_CHECKS if obs.compile else ())
    return [f for check in chosen for f in check(obs, tables)]


def run_doctor(options: DoctorOptions) -> list[Finding]:
    """Observe, then run every check; raise SpecError for a target that cannot be diagnosed."""
    tables = load_tables()
    return diagnose(observe(options, tables), tables)
