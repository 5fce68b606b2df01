"""`envlock update` on multi-platform full locks (issue 23): the uv path with existing pins.

The failure seen with the real index (torch 2.11.0, linux-64 + linux-aarch64): `update cuda-nvcc` died with
"nvidia-nvshmem-cu13==3.4.5 has no wheels with a matching platform tag (manylinux_2_28_aarch64)" while
`lock --refresh` passed. The cause: an extra index (pip's extra-index-url) lists the same version with an
x86_64 wheel only, and uv, given the held pins as *preferences* (an output file that already holds them), takes
that version's files from the first index that has it. Reproduced here with the tests' own wheel indexes:
the primary one has both wheels, the extra one only the x86_64 wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lockproject import edit, snapshot
from tests.output import logical_lines
from tests.wheelindex import WheelIndex, _torch, build_wheel, common_wheels

ENVLOCK = [sys.executable, "-m", "envlock"]
X86 = "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64"
ARM = "py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64"
OLD = "2023-01-01T00:00:00Z"  # every wheel but einops 0.8.0: before the first lock's cutoff
CUTOFF = "2024-02-01T00:00:00Z"  # after the test channel's packages (2024-01-01), before einops 0.8.0


def _indexes() -> tuple[WheelIndex, WheelIndex]:
    """torch 2.11.0 for both arches pinning nvshmem (like the real 2.11.0); nvshmem's x86_64 wheel also on an
    extra index, which lacks its aarch64 wheel."""
    linux = 'platform_system == "Linux"'
    wheels = []
    for plat in ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64"):
        wheels.append(_torch("2.11.0", "3.11", plat, "13.0", [
            "filelock", f"cuda-toolkit[cudart]==13.0.2; {linux}", f"nvidia-nvshmem-cu13==3.4.5; {linux}"],
            upload_time=OLD))
    wheels += [build_wheel("cuda-toolkit", "13.0.2", requires=['nvidia-cuda-runtime==13.0.96; extra == "cudart"'],
                           upload_time=OLD)]
    for tag in (X86, ARM):
        wheels += [build_wheel("nvidia-cuda-runtime", "13.0.96", tag, upload_time=OLD),
                   build_wheel("nvidia-nvshmem-cu13", "3.4.5", tag, upload_time=OLD)]
    plain = {w.filename: w for w in common_wheels()}
    for name in ("filelock-3.16.1-py3-none-any.whl", next(f for f in plain if f.startswith("ninja-") and "x86_64" in f),
                 next(f for f in plain if f.startswith("ninja-") and "aarch64" in f)):
        w = plain[name]
        wheels.append(build_wheel(w.project, w.version, name.split("-", 2)[2].removesuffix(".whl"),
                                  scripts={"ninja": "#!/bin/sh\necho 1.13.2\n"} if w.project == "ninja" else None,
                                  upload_time=OLD))
    wheels += [build_wheel("einops", "0.7.0", upload_time=OLD),
               build_wheel("einops", "0.8.0", upload_time="2024-06-01T00:00:00Z")]
    primary = WheelIndex().add(wheels).start()
    extra = WheelIndex().add([build_wheel("nvidia-nvshmem-cu13", "3.4.5", X86, upload_time=OLD)]).start()
    return primary, extra


@pytest.fixture
def indexes() -> tuple[WheelIndex, WheelIndex]:
    primary, extra = _indexes()
    yield primary, extra
    primary.stop()
    extra.stop()


def _cli(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args, "--project-dir", str(project)], env=env, capture_output=True, text=True,
                          timeout=600)


def _env(tmp_path: Path, primary: WheelIndex, extra: WheelIndex) -> dict[str, str]:
    return {**os.environ, "PIP_INDEX_URL": primary.url, "PIP_EXTRA_INDEX_URL": extra.url, "PIP_CONFIG_FILE": os.devnull,
            "ENVLOCK_CACHE_DIR": str(tmp_path / "cache")}


def _resolve(project: Path, env: dict[str, str], cf: str, name: str, *args: str) -> None:
    done = _cli(project, env, "resolve", "--torch", "2.11.0", "--platform", "linux-64", "--platform", "linux-aarch64",
                "--mirror", f"conda-forge={cf}", "--exclude-newer", CUTOFF, "--lock", name, *args)
    assert done.returncode == 0, done.stderr


def _pins(project: Path, name: str, platform: str) -> dict[str, str]:
    text = (project / "locks" / name / f"requirements-{platform}.txt").read_text()
    return dict(ln.split(" ", 1)[0].split("==") for ln in text.splitlines() if "==" in ln and not ln.startswith("#"))


def test_update_holds_the_pins_where_uv_s_preferences_took_the_wrong_index(indexes: tuple[WheelIndex, WheelIndex],
                                                                           tmp_path: Path, test_channel_url: str) -> None:
    primary, extra = indexes
    env = _env(tmp_path, primary, extra)
    project = tmp_path / "p"
    _resolve(project, env, test_channel_url, "a", "--pip", "einops")
    assert _pins(project, "a", "linux-aarch64")["nvidia-nvshmem-cu13"] == "3.4.5"
    assert _pins(project, "a", "linux-64")["einops"] == "0.7.0"  # 0.8.0 is newer than the cutoff
    done = _cli(project, env, "update", "einops", "--mirror", f"conda-forge={test_channel_url}")
    assert done.returncode == 0, done.stderr  # before: "nvidia-nvshmem-cu13==3.4.5 has no wheels with a matching …"
    for platform in ("linux-64", "linux-aarch64"):
        pins = _pins(project, "a", platform)
        assert pins["einops"] == "0.8.0" and pins["nvidia-nvshmem-cu13"] == "3.4.5" and pins["torch"] == "2.11.0"
    lock = (project / "locks" / "a" / "conda-lock.yml").read_text()
    assert "nvidia_nvshmem_cu13-3.4.5-py3-none-manylinux2014_aarch64" in lock
    assert "einops" in done.stdout and "0.8.0" in done.stdout


def test_one_lock_that_cannot_be_updated_leaves_the_others_updated(indexes: tuple[WheelIndex, WheelIndex],
                                                                   tmp_path: Path, test_channel_url: str) -> None:
    primary, extra = indexes
    env = _env(tmp_path, primary, extra)
    project = tmp_path / "p"
    _resolve(project, env, test_channel_url, "a", "--pip", "einops")
    _resolve(project, env, test_channel_url, "b", "--pip", "einops")
    # b's spec now asks for a project no index has: b cannot be updated, a can.
    edit(project / "environments" / "b.yml", "    - einops\n", "    - einops\n    - no-such-project-envlock\n")
    before_b = snapshot(project / "locks" / "b")
    done = _cli(project, env, "update", "einops", "--mirror", f"conda-forge={test_channel_url}")
    assert done.returncode == 3, done.stdout + done.stderr
    errors = [ln for ln in logical_lines(done.stderr) if ln.startswith("error: ")]  # each folded to 80 columns
    assert len(errors) == 1 and errors[0].startswith("error: b: ") and "no-such-project-envlock" in errors[0]
    assert "hint: " in done.stderr and "Traceback" not in done.stderr
    assert _pins(project, "a", "linux-64")["einops"] == "0.8.0" and "wrote locks/a/conda-lock.yml" in done.stdout
    assert snapshot(project / "locks" / "b") == before_b  # nothing of b was written
    as_json = _cli(project, env, "update", "einops", "--mirror", f"conda-forge={test_channel_url}", "--json")
    assert as_json.returncode == 3
    doc = json.loads(as_json.stdout)
    by_name = {e["name"]: e for e in doc["environments"]}
    assert by_name["b"]["error"]["exit_code"] == 3 and "no-such-project-envlock" in by_name["b"]["error"]["message"]
    assert "error" not in by_name["a"]
