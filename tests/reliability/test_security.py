"""Security: credentials never reach a file or an output, plain http only where allowed, activation
scripts immune to hostile prefixes, the index client refuses a redirect to another scheme.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.formats import read_lock
from tests.channelbuilder import ChannelServer
from tests.reliability.conftest import ENV, LOCK, TORCH

ENVLOCK = [sys.executable, "-m", "envlock"]
USER, PASSWORD, TOKEN = "alice", "pw-Zq81xSECRET", "tk-77abSECRET"


def _cli(args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVLOCK, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


def _files_containing(root: Path, needles: tuple[str, ...]) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            hits += [f"{p}: {n}" for n in needles if n.encode() in data]
    return hits


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize("how", ["--channel", "--mirror"])
def test_channel_credentials_are_used_but_never_written_or_printed(
    how: str, small_root: Path, make_channel_server, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    server: ChannelServer = make_channel_server(small_root)
    secret_url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/t/{TOKEN}/conda-forge"
    value = secret_url if how == "--channel" else f"conda-forge={secret_url}"
    project = tmp_path / "project"
    project.mkdir()
    outputs = []
    for fmt in (["--json"], []):  # the JSON document and the terminal summary
        done = _cli(["resolve", *TORCH, how, value, "--project-dir", str(project), *fmt], cli_env)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]
    # The server really got them: basic auth from user:password, and the conda token path.
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    log = server.log()
    assert log and all(r.token == TOKEN for r in log) and all(r.authorization == basic for r in log)
    needles = (PASSWORD, TOKEN, f"{USER}:", base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())
    assert _files_containing(project, needles) == []  # spec, conda-lock.yml, @EXPLICIT, activation scripts
    assert not any(n in out for out in outputs for n in needles)
    lock = read_lock(project / LOCK)
    if how == "--channel":
        assert all(p.url.startswith(f"http://127.0.0.1:{server.port}/conda-forge/") for p in lock.packages)
    # `envlock check` and its --json say nothing secret either.
    for fmt in (["--json"], []):
        done = _cli(["check", *fmt], cli_env, cwd=project)
        assert not any(n in done.stdout + done.stderr for n in needles)


def test_credentials_stay_out_of_error_messages(small_root: Path, make_channel_server, tmp_path: Path,
                                                 cli_env: dict[str, str]) -> None:
    server: ChannelServer = make_channel_server(small_root)
    server.add_fault("*/linux-64/*", "status:500")
    cli_env["ENVLOCK_HTTP_RETRIES"] = "0"
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/t/{TOKEN}/conda-forge"
    project = tmp_path / "project"
    project.mkdir()
    for fmt in (["--json"], []):
        done = _cli(["resolve", *TORCH, "--channel", url, "--project-dir", str(project), *fmt], cli_env)
        assert done.returncode == 4
        text = done.stdout + done.stderr
        assert "500" in text and "127.0.0.1" in text and PASSWORD not in text and TOKEN not in text, text
    assert list(project.iterdir()) == []


def test_credentials_in_the_cache_dir_are_reported_not_committed(small_root: Path, make_channel_server,
                                                                  tmp_path: Path, cli_env: dict[str, str]) -> None:
    """The repodata cache lives outside the project: whatever rattler keeps there never enters the repo."""
    server: ChannelServer = make_channel_server(small_root)
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/t/{TOKEN}/conda-forge"
    project = tmp_path / "project"
    project.mkdir()
    assert _cli(["resolve", *TORCH, "--channel", url, "--project-dir", str(project)], cli_env).returncode == 0
    cache = Path(cli_env["ENVLOCK_CACHE_DIR"])
    assert not cache.resolve().is_relative_to(project.resolve())
    assert _files_containing(project, (PASSWORD, TOKEN)) == []


# --------------------------------------------------------------------------- plain http


def _non_loopback_ip() -> str:
    """This machine's first non-loopback IPv4 address, read from its interfaces (SIOCGIFADDR): no address but
    the machine's own is named or contacted."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address on this interface
            ip = socket.inet_ntoa(packed[20:24])
            if not ip.startswith("127."):
                return ip
    pytest.skip("this machine has no non-loopback IPv4 address to serve plain http from")


def test_plain_http_is_refused_for_a_remote_host_unless_allow_insecure(small_root: Path, tmp_path: Path,
                                                                       cli_env: dict[str, str]) -> None:
    with ChannelServer(small_root, host=_non_loopback_ip()) as server:
        url = server.channel_url()
        for how, value in (("--channel", url), ("--mirror", f"conda-forge={url}")):
            done = _cli(["resolve", *TORCH, how, value, "--project-dir", str(tmp_path), "--json"], cli_env)
            assert done.returncode == 1 and "plain http" in done.stdout and "--allow-insecure" in done.stdout
        assert server.count() == 0  # refused before any request
        assert not (tmp_path / "locks").exists()
        done = _cli(["resolve", *TORCH, "--mirror", f"conda-forge={url}", "--allow-insecure",
                     "--project-dir", str(tmp_path), "--json"], cli_env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.count() > 0 and (tmp_path / LOCK).is_file()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_plain_http_on_loopback_is_allowed(host: str, small_root: Path, make_channel_server, tmp_path: Path,
                                           cli_env: dict[str, str]) -> None:
    server: ChannelServer = make_channel_server(small_root)
    done = _cli(["resolve", *TORCH, "--mirror", f"conda-forge=http://{host}:{server.port}/conda-forge",
                 "--project-dir", str(tmp_path), "--json"], cli_env)
    assert done.returncode == 0, done.stdout + done.stderr


# Names that only look local (no request is made: the check refuses them first); the last two are this machine's
# own non-loopback address, as itself with a login and IPv4-mapped in IPv6.
@pytest.mark.parametrize("url", ["http://localhost.envlock-test/conda-forge", "http://127.0.0.1.envlock-test/cf",
                                 "http://user:pw@{ip}/cf", "http://[::ffff:{ip}]/cf"])
def test_look_alike_local_hosts_are_not_local(url: str) -> None:
    from envlock.errors import SpecError
    from envlock.seams.conda.channels import check_channel_security

    url = url.format(ip=_non_loopback_ip()) if "{ip}" in url else url
    with pytest.raises(SpecError) as info:
        check_channel_security(url, allow_insecure=False)
    assert "pw" not in info.value.message and info.value.hint


# --------------------------------------------------------------------------- activation scripts


EVIL = """a b'c"$(touch PWNED)`touch PWNED2`x\\ ;$HOME*"""


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={"PATH": os.environ["PATH"], "HOME": str(cwd)})


def _evil_prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "x" / EVIL
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    return prefix


def test_conda_hooks_are_safe_with_a_hostile_prefix(tmp_path: Path) -> None:
    from envlock.seams.activation import hook_files

    prefix = _evil_prefix(tmp_path)
    for rel, text in hook_files("linux-64", str(prefix), "pip", True).items():
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_text(text)
    activate = prefix / "etc/conda/activate.d/envlock-cuda.sh"
    deactivate = prefix / "etc/conda/deactivate.d/envlock-cuda.sh"
    assert activate.is_file() and deactivate.is_file()
    sq = "'" + str(activate).replace("'", "'\\''") + "'"
    dq = "'" + str(deactivate).replace("'", "'\\''") + "'"
    done = _bash(f'set -u; . {sq}; printf "%s\\n" "$CUDA_HOME"; printf "%s\\n" "$PATH"; . {dq}; '
                 'printf "%s\\n" "${CUDA_HOME-unset}"', tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(prefix)  # exactly the prefix, nothing expanded or executed
    assert lines[1].split(":")[0] == f"{prefix}/bin" or f"{prefix}/bin" in lines[1]
    assert lines[-1] == "unset"
    assert not list(tmp_path.rglob("PWNED*"))


def test_project_activate_script_and_shell_hook_are_safe_with_a_hostile_prefix(tmp_path: Path) -> None:
    from envlock.seams.activation import ActivationSpec, render_scripts, shell_hook

    prefix = _evil_prefix(tmp_path)
    scripts = render_scripts(ActivationSpec(("linux-64",), "pip", True))
    (tmp_path / "activate.sh").write_text(scripts["activate.sh"])
    (tmp_path / "deactivate.sh").write_text(scripts["deactivate.sh"])
    (tmp_path / "hook.sh").write_text(shell_hook("bash", "linux-64", str(prefix), "pip", True))
    q = "'" + str(prefix).replace("'", "'\\''") + "'"
    for script in (f"CONDA_PREFIX={q}; . ./activate.sh", f". ./activate.sh {q}", f"ENVLOCK_PREFIX={q} . ./activate.sh",
                   'eval "$(cat hook.sh)"'):
        done = _bash(f'set -u; {script}; printf "%s\\n" "$CUDA_HOME"; . ./deactivate.sh', tmp_path)
        assert done.returncode == 0, (script, done.stderr)
        assert done.stdout.splitlines()[0] == str(prefix), script
    assert not list(tmp_path.rglob("PWNED*"))


def test_resolve_writes_activation_scripts_that_never_embed_a_path(project: Path) -> None:
    """locks/<name>/activate.sh takes the prefix at run time; nothing from the machine is baked in."""
    text = (project / "locks" / ENV / "activate.sh").read_text()
    assert str(project) not in text and "/tmp" not in text


# --------------------------------------------------------------------------- the index client


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/simple/torch/"])
def test_cli_refuses_an_index_redirect_to_another_scheme(target: str, pypi_index, tmp_path: Path) -> None:
    """End to end: `envlock resolve --torch <newer than the table>` asks the index, which redirects."""
    pypi_index.redirect("/simple/torch/", target, times=10)
    env = {**os.environ, "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"),
           "PIP_INDEX_URL": pypi_index.url_with_credentials(USER, PASSWORD)}
    done = _cli(["resolve", "--torch", "2.16.0", "--platform", "linux-64", "--project-dir", str(tmp_path), "--json"],
                env)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "refuses" in done.stdout and "PIP_INDEX_URL" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr
    assert not (tmp_path / "locks").exists()
