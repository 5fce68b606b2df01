"""What the build stage of `envlock export dockerfile` installs envlock from: a folder beside the Dockerfile
holding envlock's own wheel and a requirements file that pins everything by hash, so the build needs no
published envlock and installs nothing unpinned (`pip install --no-deps --require-hashes -r`).

The wheel is made from the envlock that is running (its package's .py files and data, the installed
distribution's metadata), byte for byte the same every time: a checkout that is not released builds too.
The dependencies' pins are envlock/data/image-requirements.txt (tools/image_requirements.py: every platform
and Python envlock supports, the hashes of every file of each pinned version).
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

from envlock import DISTRIBUTION, REINSTALL_HINT, __version__
from envlock.errors import SpecError

FOLDER = "envlock-image"  # beside the Dockerfile, inside the build context
REQUIREMENTS = "requirements.txt"
IN_IMAGE = "/tmp/envlock-image"  # where the build stage copies the folder
_DATE = (2024, 1, 1, 0, 0, 0)  # every member's timestamp: the same files give the same bytes


def wheel_name() -> str:
    return f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _package_files() -> dict[str, bytes]:
    """envlock's own files: every module and the shipped tables (what the wheel of a release holds)."""
    import envlock

    root = Path(envlock.__file__).resolve().parent
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root.parent).as_posix()
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix == ".py" or (path.parent == root / "data" and path.suffix in (".yaml", ".json", ".txt")):
            out[rel] = path.read_bytes()
    return out


def _metadata() -> bytes:
    """The core metadata of the running envlock (its Requires-Dist without the test extra)."""
    from importlib import metadata

    try:
        meta = metadata.metadata(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise SpecError(f"envlock is running without its distribution's metadata ({DISTRIBUTION} is not installed)",
                        hint=REINSTALL_HINT) from None
    lines = ["Metadata-Version: 2.1", f"Name: {DISTRIBUTION}", f"Version: {__version__}"]
    for key in ("Summary", "Requires-Python", "License"):
        if meta.get(key):
            lines.append(f"{key}: {meta[key]}")
    lines += [f"Requires-Dist: {r}" for r in (meta.get_all("Requires-Dist") or []) if "extra ==" not in r]
    return ("\n".join(lines) + "\n\n").encode()


def envlock_wheel() -> bytes:
    """A py3-none-any wheel of the running envlock (deterministic bytes)."""
    info = f"{DISTRIBUTION.replace('-', '_')}-{__version__}.dist-info"
    members = _package_files()
    members[f"{info}/METADATA"] = _metadata()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: envlock export\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members[f"{info}/entry_points.txt"] = b"[console_scripts]\nenvlock = envlock.cli:main\n"
    record = [_record_line(p, d) for p, d in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in members.items():
            member = zipfile.ZipInfo(path, _DATE)
            member.external_attr = 0o644 << 16
            zf.writestr(member, data)
    return buf.getvalue()


def requirements(wheel: bytes) -> str:
    """The pinned, hashed requirements of the build stage: envlock's dependencies, then envlock's own wheel."""
    from importlib import resources

    pins = resources.files("envlock").joinpath("data", "image-requirements.txt").read_text(encoding="utf-8")
    own = (f"{DISTRIBUTION} @ file://{IN_IMAGE}/{wheel_name()} \\\n"
           f"    --hash=sha256:{hashlib.sha256(wheel).hexdigest()}\n")
    return pins.rstrip("\n") + "\n# envlock itself: the wheel beside this file (written by `envlock export dockerfile`)\n" + own


def context_files() -> dict[str, bytes]:
    """File name -> bytes of the folder beside the Dockerfile."""
    wheel = envlock_wheel()
    return {wheel_name(): wheel, REQUIREMENTS: requirements(wheel).encode()}
