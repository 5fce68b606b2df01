"""envlock: lock a CUDA development toolchain that matches a torch build."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
#: The name on the package index (`envlock` there is an unrelated project); the command stays `envlock`.
DISTRIBUTION = "envlock-cuda"
UPGRADE_HINT = f"upgrade envlock (`pip install -U {DISTRIBUTION}`)"
REINSTALL_HINT = f"reinstall envlock (`pip install --force-reinstall {DISTRIBUTION}`)"
__all__ = ["DISTRIBUTION", "EnvlockError", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy: the console script imports this package first, before envlock.cli can take over Ctrl-C.
    if name == "EnvlockError":
        from envlock.errors import EnvlockError

        return EnvlockError
    raise AttributeError(f"module 'envlock' has no attribute {name!r}")
