"""Ask the torch of a python what it was built with (a subprocess): the source of `--torch installed`.

`user_python` is THE rule for which python that is (resolve, doctor, `--for PACKAGE` and every hint that
names `--torch installed` go through it); the answer is an InstalledTorch value the caller hands to the pure
anchor (envlock.core.anchor.Sources).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

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


#: The variables that name an active environment, in the order a tie on PATH keeps: a venv, conda's env, the env
#: `envlock run` / shell-hook activated (envlock.seams.activation.ACTIVE).
_ACTIVE_ENVS = ("VIRTUAL_ENV", "CONDA_PREFIX", "_ENVLOCK_PREFIX")


@dataclass(frozen=True, slots=True)
class UserPython:
    """The python a user would run, and why that one (said in the summary and in doctor's finding)."""

    exe: str | None  # None: none found
    why: str  # "--python-exe", "the active venv ($VIRTUAL_ENV)", "python3 on PATH", ...


def _env_python(root: str) -> str | None:
    for rel in ("bin/python", "bin/python3", "python.exe", "Scripts/python.exe"):
        path = os.path.join(root, rel)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def user_python(python_exe: str | None, environ: Mapping[str, str] | None = None) -> UserPython:
    """The python `--torch installed` (and doctor, and `--for PACKAGE`) asks: `--python-exe` (a bare name is
    looked up on PATH); else the python of the active venv or conda env ($VIRTUAL_ENV, $CONDA_PREFIX, or the env
    `envlock run` activated; when several are, the one whose bin/ comes first on PATH, as a shell picks); else
    python3, then python, on PATH. Never envlock's own interpreter: envlock may live in a venv of its own (pipx)."""
    env = os.environ if environ is None else environ
    path = env.get("PATH", "")
    if python_exe:
        given = os.path.expanduser(python_exe)
        if os.sep not in given and "/" not in given:
            given = shutil.which(given, path=path) or given
        return UserPython(given, "--python-exe")
    dirs = [os.path.realpath(d) for d in path.split(os.pathsep) if d]

    def rank(item: tuple[int, str, str]) -> tuple[int, int]:
        order, root, _ = item
        bins = {os.path.realpath(os.path.join(root, b)) for b in ("bin", "Scripts", "")}
        where = next((i for i, d in enumerate(dirs) if d in bins), len(dirs))
        return where, order

    active = [(i, env[v], v) for i, v in enumerate(_ACTIVE_ENVS) if env.get(v)]
    found = [(item, exe) for item in sorted(active, key=rank) if (exe := _env_python(item[1]))]
    if found:
        (_, _, var), exe = found[0]
        what = {"VIRTUAL_ENV": "venv", "CONDA_PREFIX": "conda env"}.get(var, "env")
        return UserPython(exe, f"the active {what} ${var}")
    for name in ("python3", "python"):
        on_path = shutil.which(name, path=path)
        if on_path:
            return UserPython(on_path, f"{name} on PATH")
    return UserPython(None, "no python3 on PATH")


def probe(python_exe: str | None, environ: Mapping[str, str] | None = None) -> InstalledTorch:
    """Run the probe in the python `user_python` picks; AnchorError when there is none or it cannot run at all."""
    chosen = user_python(python_exe, environ)
    hint = "pass --python-exe PATH of the python that has torch, or give --torch VERSION"
    if chosen.exe is None:
        raise AnchorError("no python to ask for the installed torch: no --python-exe, no active venv or conda env, "
                          "no python3 on PATH", hint=hint)
    exe = chosen.exe

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
        return InstalledTorch(exe, error=str(found["error"]), chosen=chosen.why)
    cudnn = found.get("cudnn")
    return InstalledTorch(
        exe,
        version=str(found.get("version")),
        cuda=str(found["cuda"]) if found.get("cuda") else None,
        cudnn=cudnn if isinstance(cudnn, int) else None,
        file=found.get("file"),
        chosen=chosen.why,
    )
