"""envlock: lock a CUDA development toolchain that matches a torch build."""

from envlock.errors import EnvlockError

__version__ = "0.1.0"
__all__ = ["EnvlockError", "__version__"]
