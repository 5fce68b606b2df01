"""The test channel builder: real packages, real index, real solver and installer, real HTTP server."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.channelbuilder import (
    CUDA_MINORS,
    ChannelServer,
    PackageSpec,
    build_channel,
    plain_source_config,
    virtual_packages,
    write_package,
)

DEV_SET = ["cuda-nvcc", "cuda-cudart-dev", "libcusparse-dev", "libcublas-dev", "libcusolver-dev"]


def repodata(channel: Path, subdir: str) -> dict[str, Any]:
    return json.loads((channel / subdir / "repodata.json").read_text())


def records(channel: Path, subdir: str) -> list[dict[str, Any]]:
    doc = repodata(channel, subdir)
    return [*doc.get("packages", {}).values(), *doc.get("packages.conda", {}).values()]


def names(channel: Path, subdir: str) -> set[str]:
    return {r["name"] for r in records(channel, subdir)}


def solve(channels: list[str], specs: list[str], subdir: str, cache: Path, **vp: Any) -> list[Any]:
    """Solve with rattler for subdir + noarch with explicit virtual packages."""
    from rattler import Gateway
    from rattler import solve as rattler_solve

    async def run() -> list[Any]:
        gateway = Gateway(cache_dir=cache, default_config=plain_source_config())
        return await rattler_solve(
            channels,
            specs,
            gateway=gateway,
            platforms=[subdir, "noarch"],
            virtual_packages=virtual_packages(subdir, **vp),
        )

    return asyncio.run(run())


def by_name(recs: list[Any]) -> dict[str, Any]:
    return {r.name.normalized: r for r in recs}


def test_every_subdir_is_indexed_with_zst_and_shards(test_channel: Path) -> None:
    for subdir in ("noarch", "linux-64", "linux-aarch64", "win-64"):
        files = {p.name for p in (test_channel / subdir).iterdir()}
        assert {"repodata.json", "repodata.json.zst", "repodata_shards.msgpack.zst"} <= files, subdir
        assert records(test_channel, subdir), subdir


def test_expected_names_per_subdir(test_channel: Path) -> None:
    common = {
        "cuda-nvcc",
        "cuda-nvcc-impl",
        "cuda-cudart",
        "cuda-cudart-dev",
        "libcusparse",
        "libcusparse-dev",
        "libcublas",
        "libcublas-dev",
        "libcusolver",
        "libcusolver-dev",
        "libnvjitlink",
        "cuda-nvrtc",
        "python",
        "cudnn",
        "libcudnn",
        "libcudnn-dev",
        "pytorch",
    }
    assert common | {
        "cuda-nvcc_linux-64",
        "gcc_linux-64",
        "gxx_linux-64",
        "gcc_impl_linux-64",
        "cudatoolkit",
        "cudatoolkit-dev",
        "libgcc",
    } <= names(test_channel, "linux-64")
    assert common | {"cuda-nvcc_linux-aarch64", "gcc_linux-aarch64", "gxx_linux-aarch64"} <= names(
        test_channel, "linux-aarch64"
    )
    assert common | {"cuda-nvcc_win-64", "vs2019_win-64", "vs2022_win-64", "cudatoolkit-dev"} <= names(
        test_channel, "win-64"
    )
    assert {
        "cuda-version",
        "python_abi",
        "cuda-cudart-dev_linux-64",
        "cuda-cudart-dev_linux-aarch64",
        "cuda-cudart-dev_win-64",
        "sysroot_linux-64",
        "cuda-cccl_linux-64",
    } <= names(test_channel, "noarch")
    assert "gcc_linux-64" not in names(test_channel, "win-64")


def test_cuda_versions_match_the_facts_and_skip_12_7(test_channel: Path) -> None:
    versions = {r["version"] for r in records(test_channel, "noarch") if r["name"] == "cuda-version"}
    assert versions == {*CUDA_MINORS, "11.7", "11.8"}
    for subdir in ("noarch", "linux-64", "linux-aarch64", "win-64"):
        for rec in records(test_channel, subdir):
            pins = [d for d in rec["depends"] if d.startswith("cuda-version")]
            assert not any(">=12.7" in p or "cuda-version 12.7" in p for p in pins), rec
        assert all(
            not r["version"].startswith("12.7")
            for r in records(test_channel, subdir)
            if r["name"].startswith("cuda-")
        ), subdir
    cv = next(
        r for r in records(test_channel, "noarch") if r["name"] == "cuda-version" and r["version"] == "12.6"
    )
    # rattler's indexer normalises the spec text ("cudatoolkit 12.6|12.6.*" -> "cudatoolkit ==12.6|12.6.*")
    assert cv["constrains"][0] == "__cuda >=12" and cv["constrains"][1].startswith("cudatoolkit ")
    assert cv["constrains"][1].endswith("12.6|12.6.*")


def test_nvcc_impl_carries_the_conda_forge_gcc_constraint(test_channel: Path) -> None:
    impls = {r["version"]: r for r in records(test_channel, "linux-64") if r["name"] == "cuda-nvcc-impl"}
    assert impls["12.6.85"]["constrains"] == ["gcc_impl_linux-64 >=6,<14.0a0"]
    assert impls["12.4.131"]["constrains"] == ["gcc_impl_linux-64 >=6,<13"]
    assert impls["13.0.88"]["constrains"] == ["gcc_impl_linux-64 >=6,<16.0a0"]
    assert "cuda-version >=12.6,<12.7.0a0" in impls["12.6.85"]["depends"]


def test_rebuilding_gives_byte_identical_repodata(test_channel: Path, tmp_path: Path) -> None:
    again = build_channel(tmp_path)
    for subdir in ("noarch", "linux-64", "linux-aarch64", "win-64"):
        for name in ("repodata.json", "repodata.json.zst"):  # the shard index carries a created_at, so not it
            assert (again / subdir / name).read_bytes() == (test_channel / subdir / name).read_bytes(), (
                subdir,
                name,
            )
        assert sorted(p.name for p in (again / subdir).iterdir()) == sorted(
            p.name for p in (test_channel / subdir).iterdir()
        )
    rec = repodata(again, "linux-64")["packages"]
    assert {r["indexed_timestamp"] for r in rec.values()} == {r["timestamp"] for r in rec.values()}


def test_dev_set_solves_for_12_6_with_gcc_13(test_channel_url: str, tmp_path: Path) -> None:
    specs = ["cuda-version=12.6", *DEV_SET, "gcc_linux-64=13", "gxx_linux-64=13", "python=3.11"]
    recs = by_name(solve([test_channel_url], specs, "linux-64", tmp_path, cuda="12.6", glibc="2.28"))
    assert str(recs["cuda-nvcc"].version).startswith("12.6.")
    assert str(recs["cuda-nvcc-impl"].version) == "12.6.85"
    assert str(recs["gcc_impl_linux-64"].version) == "13.3.0"
    assert str(recs["libcusparse-dev"].version) == "12.5.4.2"
    assert str(recs["python"].version).startswith("3.11.")


def test_gcc_14_with_nvcc_12_6_is_unsatisfiable(test_channel_url: str, tmp_path: Path) -> None:
    from rattler.exceptions import SolverError

    specs = ["cuda-version=12.6", "cuda-nvcc", "gcc_linux-64=14", "gxx_linux-64=14"]
    with pytest.raises(SolverError, match="gcc_impl_linux-64"):
        solve([test_channel_url], specs, "linux-64", tmp_path)


def test_install_with_rattler_gives_a_working_nvcc_and_headers(test_channel_url: str, tmp_path: Path) -> None:
    from rattler import install

    recs = solve(
        [test_channel_url],
        ["cuda-version=12.6", *DEV_SET, "gcc_linux-64=13", "gxx_linux-64=13"],
        "linux-64",
        tmp_path / "cache",
    )
    prefix = tmp_path / "env"
    asyncio.run(install(recs, prefix, cache_dir=tmp_path / "pkgs", show_progress=False))
    out = subprocess.run(
        [prefix / "bin" / "nvcc", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert "Cuda compilation tools, release 12.6, V12.6.85" in out
    assert "Build cuda_12.6.r12.6/compiler." in out
    via_targets = subprocess.run(
        [prefix / "targets/x86_64-linux/bin/nvcc", "--version"], capture_output=True, text=True, check=False
    )
    assert via_targets.stdout == out
    inc = prefix / "targets" / "x86_64-linux" / "include"
    for header in (
        "cuda_runtime.h",
        "cuda_runtime_api.h",
        "cuda.h",
        "cusparse.h",
        "cublas_v2.h",
        "cublasLt.h",
        "cusolverDn.h",
    ):
        assert (inc / header).is_file(), header
    assert "#define CUDART_VERSION 12060" in (inc / "cuda_runtime_api.h").read_text()
    assert (prefix / "lib" / "libcudart.so").resolve() == (
        prefix / "targets/x86_64-linux/lib/libcudart.so.12.6.77"
    ).resolve()
    assert (prefix / "lib" / "libcudart.so").resolve().is_file()
    probe = (
        "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); v = ctypes.c_int(-1); "
        "rc = lib.cudaRuntimeGetVersion(ctypes.byref(v)); print(rc, v.value)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe, prefix / "lib" / "libcudart.so.12"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.stdout.split() == ["0", "12060"], loaded.stderr  # a real dlopen-able ELF stand-in
    assert not list((prefix / "lib").glob("libstdc++*"))  # never a fake C++ runtime on LD_LIBRARY_PATH
    gcc = subprocess.run(
        [prefix / "bin/x86_64-conda-linux-gnu-gcc", "-dumpfullversion"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert gcc.stdout.strip() == "13.3.0"
    # conda-forge's activation names the -cc/-c++ drivers (symlinks to -gcc/-g++), and so does the stand-in's.
    for var, name in (("CC", "x86_64-conda-linux-gnu-cc"), ("CXX", "x86_64-conda-linux-gnu-c++")):
        driver = prefix / "bin" / name
        assert driver.is_symlink() and os.access(driver, os.X_OK), name
        banner = subprocess.run([driver, "--version"], capture_output=True, text=True, check=True).stdout
        assert banner.startswith(f"{name} (conda-forge gcc 13.3.0-1) 13.3.0\n"), banner
        script = next((prefix / "etc/conda/activate.d").glob(f"activate-g{'cc' if var == 'CC' else 'xx'}_linux-64.sh"))
        assert f'export {var}="${{CONDA_PREFIX}}/bin/{name}"' in script.read_text()
    assert not (prefix / "include" / "cusparse.h").exists()  # CUDA 12 headers are NOT in $PREFIX/include


def test_headers_compile_with_the_system_gcc(test_channel: Path, tmp_path: Path) -> None:
    """The stand-in headers are valid C: a translation unit including all of them compiles."""
    import shutil

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc on PATH")
    pkgs = [
        p
        for p in (test_channel / "linux-64").glob("*.tar.bz2")
        if p.name.startswith(
            ("libcusparse-dev-12.5.4.2", "libcublas-dev-12.6.4.1", "libcusolver-dev-11.7.1.2")
        )
    ]
    pkgs += [p for p in (test_channel / "noarch").glob("cuda-cudart-dev_linux-64-12.6.77-*.tar.bz2")]
    assert len(pkgs) == 4
    import tarfile

    for pkg in pkgs:
        with tarfile.open(pkg) as tar:
            tar.extractall(tmp_path, filter="tar")
    src = tmp_path / "t.c"
    src.write_text(
        "".join(
            f"#include <{h}>\n"
            for h in ("cuda_runtime.h", "cuda.h", "cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h")
        )
        + "int main(void) { return CUDART_VERSION == 12060 ? 0 : 1; }\n"
    )
    subprocess.run(
        [gcc, "-I", tmp_path / "targets/x86_64-linux/include", src, "-o", tmp_path / "t"], check=True
    )
    assert subprocess.run([tmp_path / "t"], check=False).returncode == 0


def test_solve_over_http_through_channel_server(channel_server: ChannelServer, tmp_path: Path) -> None:
    channel_server.reset_log()
    recs = by_name(
        solve(
            [channel_server.channel_url("conda-forge")],
            ["cuda-version=12.9", *DEV_SET],
            "linux-64",
            tmp_path,
            cuda="12.9",
        )
    )
    assert str(recs["cuda-nvcc"].version) == "12.9.86"
    assert recs["cuda-nvcc"].url.startswith(channel_server.url)
    assert channel_server.count("/conda-forge/linux-64/repodata.json", status=200) == 1
    assert channel_server.bytes_sent("/conda-forge/linux-64/repodata.json") == len(
        (channel_server.root / "conda-forge/linux-64/repodata.json").read_bytes()
    )


def test_server_faults_status_and_close_mid_body(
    test_channel: Path, make_channel_server: Callable[..., ChannelServer]
) -> None:
    server = make_channel_server(test_channel.parent, faults={"*/noarch/repodata.json": "status:503"})
    url = server.channel_url() + "/noarch/repodata.json"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=5)
    assert err.value.code == 503
    server.clear_faults()
    server.add_fault("*/linux-64/repodata.json", "close-mid-body", times=1)
    with pytest.raises(http.client.IncompleteRead):  # body shorter than its Content-Length
        urllib.request.urlopen(server.channel_url() + "/linux-64/repodata.json", timeout=5).read()
    body = urllib.request.urlopen(server.channel_url() + "/linux-64/repodata.json", timeout=5).read()
    assert json.loads(body)["info"]["subdir"] == "linux-64"
    assert server.count("*/linux-64/repodata.json") == 2
    # the server logs a request after answering it, so two requests' records may swap (seen under load, -n 2):
    # which faults were served, not their order
    assert sorted(str(r.fault) for r in server.log()) == sorted(["status:503", "close-mid-body", "None"])


def test_server_corrupt_fault_flips_bytes(
    test_channel: Path, make_channel_server: Callable[..., ChannelServer]
) -> None:
    server = make_channel_server(test_channel.parent, faults={"*.tar.bz2": "corrupt"})
    pkg = next((test_channel / "noarch").glob("cuda-version-12.6-*.tar.bz2"))
    got = urllib.request.urlopen(f"{server.channel_url()}/noarch/{pkg.name}", timeout=5).read()
    assert len(got) == pkg.stat().st_size and got != pkg.read_bytes()


def test_make_channel_drop_removes_one_minor_only(make_channel: Callable[..., Path]) -> None:
    channel = make_channel(
        cuda_minors=["12.8", "12.9"],
        subdirs=["linux-64"],
        pythons=["3.11"],
        drop={("libcusparse-dev", "12.8")},
        with_pytorch=False,
        with_cudnn=False,
    )
    versions = {r["version"] for r in records(channel, "linux-64") if r["name"] == "libcusparse-dev"}
    assert versions == {"12.5.10.65"}  # 12.9's; 12.8's 12.5.8.93 was dropped
    assert (channel / "win-64").exists() is False


def test_nvidia_label_channel_gives_nvcc_11_8(nvidia_label_channel: Path, tmp_path: Path) -> None:
    from rattler import install

    specs = [
        "cuda-nvcc=11.8.89",
        "cuda-cudart-dev=11.8.89",
        "cuda-cccl=11.8.89",
        "libcublas-dev=11.11.3.6",
        "libcusparse-dev=11.7.5.86",
        "libcusolver-dev",
    ]
    recs = solve([nvidia_label_channel.as_uri()], specs, "linux-64", tmp_path / "c", cuda="11.8")
    assert str(by_name(recs)["libcusolver-dev"].version).startswith("11.")
    asyncio.run(install(recs, tmp_path / "env", cache_dir=tmp_path / "pkgs", show_progress=False))
    out = subprocess.run(
        [tmp_path / "env/bin/nvcc", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert "release 11.8, V11.8.89" in out
    assert (tmp_path / "env/include/cusparse.h").is_file()
    assert {r["name"] for r in records(nvidia_label_channel, "win-64")} >= {"cuda-nvcc", "libcusparse-dev"}


def test_conda_forge_pytorch_pins_cuda_version_to_its_build(test_channel_url: str, tmp_path: Path) -> None:
    recs = by_name(
        solve(
            [test_channel_url],
            ["pytorch ==2.7.1 cuda126*", "python=3.11", "cuda-nvcc"],
            "linux-64",
            tmp_path,
            cuda="12.6",
        )
    )
    assert str(recs["pytorch"].build).startswith("cuda126_generic_py311_h")
    assert str(recs["cuda-version"].version) in {"12.6", "12.8", "12.9"}
    assert "cuda-version >=12.6,<13" in recs["pytorch"].depends
    assert recs["cudnn"].version >= recs["cudnn"].version.__class__("9")


def test_win_layout_has_library_include(test_channel_url: str, tmp_path: Path) -> None:
    recs = by_name(
        solve([test_channel_url], ["cuda-version=12.8", *DEV_SET], "win-64", tmp_path, cuda="12.8")
    )
    assert "vs2019_win-64" in recs
    assert str(recs["cuda-nvcc"].version) == "12.8.93"


def test_aarch64_uses_sbsa_targets(test_channel: Path) -> None:
    import tarfile

    pkg = next((test_channel / "linux-aarch64").glob("libcusparse-dev-12.5.4.2-*.tar.bz2"))
    with tarfile.open(pkg) as tar:
        assert "targets/sbsa-linux/include/cusparse.h" in tar.getnames()


@pytest.mark.parametrize("fmt", [".tar.bz2", ".conda"])
def test_write_package_round_trips_through_index_and_installer(fmt: str, tmp_path: Path) -> None:
    from rattler import install

    from tests.channelbuilder import index_channel

    spec = PackageSpec(
        "tiny",
        "1.0",
        subdir="linux-64",
        fmt=fmt,
        files={"bin/tiny": "#!/bin/sh\necho tiny\n", "share/tiny/data.bin": bytes(range(256))},
        symlinks={"bin/tiny-link": "tiny"},
        executables={"bin/tiny"},
    )
    path = write_package(spec, tmp_path / "ch" / "linux-64")
    assert path.name == spec.filename and path.name.endswith(fmt)
    index_channel(tmp_path / "ch", write_zst=False, write_shards=False)
    recs = solve([(tmp_path / "ch").as_uri()], ["tiny"], "linux-64", tmp_path / "cache")
    asyncio.run(install(recs, tmp_path / "env", cache_dir=tmp_path / "pkgs", show_progress=False))
    assert (
        subprocess.run([tmp_path / "env/bin/tiny-link"], capture_output=True, text=True, check=False).stdout
        == "tiny\n"
    )
    assert os.access(tmp_path / "env/bin/tiny", os.X_OK)
    assert (tmp_path / "env/share/tiny/data.bin").read_bytes() == bytes(range(256))


def test_aarch64_12_9_selects_the_sbsa_arm_variant(test_channel_url: str, tmp_path: Path) -> None:
    recs = by_name(
        solve([test_channel_url], ["cuda-version=12.9", *DEV_SET], "linux-aarch64", tmp_path, cuda="12.9")
    )
    assert str(recs["arm-variant"].build) == "sbsa"
    assert str(recs["gcc_impl_linux-aarch64"].version) == "14.2.0"  # newest gcc under nvcc 12.9's <15 bound


def test_cuda_11_8_conda_forge_pytorch_uses_cudatoolkit(test_channel_url: str, tmp_path: Path) -> None:
    recs = by_name(
        solve([test_channel_url], ["pytorch ==2.4.0", "python=3.11"], "linux-64", tmp_path, cuda="11.8")
    )
    assert str(recs["pytorch"].build).startswith("cuda118_py311h")
    assert str(recs["cudatoolkit"].version) == "11.8.0"
    assert str(recs["cudnn"].version) == "8.9.7.29" and "cudatoolkit 11.*" in recs["cudnn"].depends
    assert "cuda-nvcc" not in recs


def test_cudatoolkit_dev_stops_at_11_7_and_ships_its_post_link_script(test_channel: Path) -> None:
    import tarfile

    versions = {r["version"] for r in records(test_channel, "linux-64") if r["name"] == "cudatoolkit-dev"}
    assert versions == {"11.7.0"}
    pkg = next((test_channel / "linux-64").glob("cudatoolkit-dev-11.7.0-*.tar.bz2"))
    with tarfile.open(pkg) as tar:
        assert "bin/.cudatoolkit-dev-post-link.sh" in tar.getnames()


def test_conda_format_channel_installs(make_channel: Callable[..., Path], tmp_path: Path) -> None:
    from rattler import install

    channel = make_channel(
        cuda_minors=["13.0"],
        subdirs=["linux-64"],
        pythons=["3.12"],
        fmt=".conda",
        with_pytorch=False,
        with_cudnn=False,
        with_cuda11=False,
        write_shards=False,
    )
    assert repodata(channel, "linux-64").get("packages") in (None, {})
    recs = solve([channel.as_uri()], ["cuda-version=13.0", *DEV_SET], "linux-64", tmp_path / "c", cuda="13.0")
    asyncio.run(install(recs, tmp_path / "env", cache_dir=tmp_path / "pkgs", show_progress=False))
    out = subprocess.run(
        [tmp_path / "env/bin/nvcc", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert "release 13.0, V13.0.88" in out
    assert str(by_name(recs)["gcc_impl_linux-64"].version) == "15.1.0"


def test_server_stall_and_reset_faults(
    test_channel: Path, make_channel_server: Callable[..., ChannelServer]
) -> None:
    import time

    server = make_channel_server(test_channel.parent)
    server.add_fault("*/noarch/repodata.json", "stall:0.3", times=1)
    server.add_fault("*/win-64/repodata.json", "reset", times=1)
    start = time.monotonic()
    urllib.request.urlopen(server.channel_url() + "/noarch/repodata.json", timeout=5).read()
    assert time.monotonic() - start >= 0.3
    with pytest.raises(http.client.RemoteDisconnected):  # no status line at all
        urllib.request.urlopen(server.channel_url() + "/win-64/repodata.json", timeout=5)
    assert urllib.request.urlopen(server.channel_url() + "/win-64/repodata.json", timeout=5).status == 200
    # The server appends a record once its handler returns, which can be after the client already has the
    # body: under load the stalled noarch record lands after the win-64 ones. The set of records is the point.
    assert sorted((r.path.rsplit("/", 2)[-2], r.status) for r in server.log()) == [
        ("noarch", 200),
        ("win-64", 0),
        ("win-64", 200),
    ]


def test_install_over_http_downloads_packages_from_the_server(
    channel_server: ChannelServer, tmp_path: Path
) -> None:
    from rattler import install

    recs = solve(
        [channel_server.channel_url()],
        ["cuda-version=12.4", "cuda-cudart-dev", "libcusparse-dev"],
        "linux-64",
        tmp_path / "c",
        cuda="12.4",
    )
    channel_server.reset_log()
    asyncio.run(install(recs, tmp_path / "env", cache_dir=tmp_path / "pkgs", show_progress=False))
    downloaded = channel_server.count("/conda-forge/*/*.tar.bz2", status=200)
    assert downloaded == len(recs)
    assert channel_server.bytes_sent("*.tar.bz2") == sum(r.size for r in recs)
    assert (tmp_path / "env/targets/x86_64-linux/include/cusparse.h").is_file()


def test_sharded_repodata_solves_over_http(channel_server: ChannelServer, tmp_path: Path) -> None:
    """With rattler's default source config the channel is read through its shards, not repodata.json."""
    from rattler import Gateway
    from rattler import solve as rattler_solve

    async def run() -> list[Any]:
        gateway = Gateway(cache_dir=tmp_path)
        return await rattler_solve(
            [channel_server.channel_url()],
            ["cuda-version=12.6", "cuda-nvcc"],
            gateway=gateway,
            platforms=["linux-64", "noarch"],
            virtual_packages=virtual_packages("linux-64"),
        )

    channel_server.reset_log()
    recs = by_name(asyncio.run(run()))
    assert str(recs["cuda-nvcc"].version) == "12.6.85"
    assert channel_server.count("/conda-forge/linux-64/repodata_shards.msgpack.zst", status=200) == 1
    assert channel_server.count("/conda-forge/linux-64/shards/*.msgpack.zst", status=200) > 0
    assert channel_server.count("/conda-forge/linux-64/repodata.json") == 0
