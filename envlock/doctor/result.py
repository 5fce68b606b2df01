"""What `envlock doctor` hands the command to render: the exit code, the summary and the --json document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envlock.models import Finding

DOCTOR_RESULT_VERSION = 2  # 2: severity "skipped" (a check that could not run here)


def exit_code(findings: Sequence[Finding]) -> int:
    """1 if any finding is an error, else 0."""
    return 1 if any(f.severity == "error" for f in findings) else 0


def summary(findings: Sequence[Finding]) -> dict[str, int]:
    """How many findings of each severity."""
    counts: dict[str, int] = {"ok": 0, "info": 0, "skipped": 0, "warning": 0, "error": 0}
    for f in findings:
        counts[f.severity] += 1
    return counts


def result_json(findings: Sequence[Finding]) -> dict[str, Any]:
    """The --json document: a versioned object wrapping the findings."""
    return {
        "doctor_result_version": DOCTOR_RESULT_VERSION,
        "exit_code": exit_code(findings),
        "summary": summary(findings),
        "findings": [
            {
                "code": f.code,
                "severity": f.severity,
                "message": f.message,
                "hint": f.hint,
                "details": f.details,
            }
            for f in findings
        ],
    }
