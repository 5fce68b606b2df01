"""Ask the torch of a python what it was built with (a subprocess): the source of `--torch installed`.

The answer is an InstalledTorch value the caller hands to the pure anchor (envlock.core.anchor.Sources).
"""

from __future__ import annotations

import json
import sys

from envlock.seams import proc
from envlock.errors import AnchorError
from envlock.models import InstalledTorch

_TIMEOUT_S = 120.0  # importing a real torch can take many seconds on a cold disk
_MARK = "ENVLOCK-TORCH-PROBE "
_PROBE = f"""
import json, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # never a stray ./torch of the cwd
try:
    import torch
except BaseException as exc:
    print({_MARK!r} + json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}))
    raise SystemExit(0)
cudnn = None
try:
    cudnn = torch.backends.cudnn.version()
except BaseException:
    pass
print({_MARK!r} + json.dumps({{
    "version": str(torch.__version__),
    "cuda": getattr(torch.version, "cuda", None),
    "cudnn": cudnn,
    "file": getattr(torch, "__file__", None),
}}))
"""


def probe(python_exe: str | None) -> InstalledTorch:
    """Run the probe in that python (None: this interpreter); AnchorError when it cannot run at all."""
    exe = python_exe or sys.executable
    hint = "pass --python-exe PATH of the python that has torch, or give --torch VERSION"

    def failed(why: proc.Failure) -> AnchorError:
        words = {"missing": f"python {exe} does not exist",
                 "denied": f"python {exe} cannot be run (permission denied)",
                 "timeout": f"`import torch` in {exe} did not finish within {_TIMEOUT_S:.0f} s"}
        return AnchorError(words.get(why.kind, f"python {exe}: {why}"), hint=hint)

    proc_ = proc.run([exe, "-c", _PROBE], what=f"asking the torch of {exe}", timeout=_TIMEOUT_S, failed=failed)
    line = next((x for x in reversed(proc_.stdout.splitlines()) if x.startswith(_MARK)), None)
    if line is None:
        tail = (proc_.stderr.strip().splitlines() or ["no output"])[-1]
        raise AnchorError(f"cannot ask the torch of {exe} (exit {proc_.returncode}: {tail})", hint=hint)
    found = json.loads(line[len(_MARK) :])
    if "error" in found:
        return InstalledTorch(exe, error=str(found["error"]))
    cudnn = found.get("cudnn")
    return InstalledTorch(
        exe,
        version=str(found.get("version")),
        cuda=str(found["cuda"]) if found.get("cuda") else None,
        cudnn=cudnn if isinstance(cudnn, int) else None,
        file=found.get("file"),
    )
