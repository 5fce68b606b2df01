"""Secrets in every form conda and rattler accept (issue 33, class 6).

On e081238 only a `/t/<token>/` FIRST path segment was scrubbed: conda takes `/t/<token>` anywhere in the path
(conda.common.url.split_anaconda_token searches the whole URL), so `https://host/api/t/<token>/conda-forge` put
the token into the spec, conda-lock.yml, the @EXPLICIT file, the shared repodata cache and `config`'s output.
The URL scrubber stopped at `'`, `"` and `<`, so a password holding one was printed whole in create, mirror
and pack hints, human and `--json`.

Now one rule (envlock/names.py: strip_credentials for one URL, scrub for a text) removes the userinfo up to the
authority's last `@` whatever it holds, every `/t/<token>` segment wherever it is, and then every secret in force
(the command line, the environment, envlock.toml, pip's configuration: remember_secrets, and the error reporter
reads them all on its way out) wherever it appears, in its raw, percent-encoded, JSON and escaped spellings; every
line the process prints passes through it. Tested with random tokens and passwords (quotes, `<`, `%`, `@`, `/`,
spaces, unicode).
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.security.inputs import TOOLCHAIN, assert_one_error, copy, envlock, toolchain_template
from tests.tiers import counts

__all__ = ["toolchain_template"]  # fixture used here

# A password: any of the characters the issue names (quotes, <, %, @), a '/', ':', spaces, unicode, around a
# marker that makes it unmistakable in any output. A token: conda's alphabet ([A-Za-z0-9-]) or anything.
_ODD = "'\"<>%@/:;!$&()*+,= é€\u00a0\\"
password = st.tuples(st.text(alphabet=_ODD + string.ascii_letters, min_size=0, max_size=6),
                     st.text(alphabet=_ODD + string.digits, min_size=0, max_size=6)).map(lambda t: f"{t[0]}PW9q{t[1]}")
conda_token = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=0, max_size=20).map(
    lambda t: f"tkQ7{t}")
any_token = st.text(alphabet=_ODD.replace("/", "") + string.ascii_letters, min_size=0, max_size=8).map(
    lambda t: f"tkQ7{t}").filter(lambda t: t.strip() == t and " " not in t)
#: Every secret holds one of these: found in an output in any spelling (shell-quoted in a hint's command too).
MARKERS = ("PW9q", "tkQ7")
user = st.text(alphabet=string.ascii_letters + string.digits + ".-_@:", min_size=1, max_size=8).map(lambda t: f"u{t}")


def _forms(secret: str) -> set[str]:
    """What must never be seen: the secret as written, percent-encoded (either way), as JSON writes it, and its
    marker (in whatever quoting a hint's command puts around it)."""
    forms = {secret, quote(secret, safe=""), quote(secret), json.dumps(secret)[1:-1], *(m for m in MARKERS if m in secret)}
    return {f for f in forms if len(f) >= 3}


def _url(kind: str, secret: str, name: str = "u", host: str = "https://127.0.0.1:9") -> str:
    """A channel URL carrying `secret` the way `kind` says (as a user would type it)."""
    enc = quote(secret, safe="")
    scheme, _, where = host.partition("://")
    return {
        "password-raw": f"{scheme}://{name}:{secret}@{where}/conda-forge",
        "password-encoded": f"{scheme}://{name}:{enc}@{where}/conda-forge",
        "token-userinfo": f"{scheme}://{enc}@{where}/conda-forge",
        "conda-token-first": f"{host}/t/{secret}/conda-forge",
        "conda-token-api": f"{host}/api/t/{secret}/conda-forge",
        "conda-token-deep": f"{host}/a/b/t/{secret}/conda-forge",
        "conda-token-encoded-t": f"{host}/api/%74/{secret}/conda-forge",
    }[kind]


KINDS = ["password-raw", "password-encoded", "token-userinfo", "conda-token-first", "conda-token-api",
         "conda-token-deep", "conda-token-encoded-t"]
CONTEXTS = ["{u}", "'{u}'", '"{u}"', "<{u}>", "({u})", "cannot fetch {u}: HTTP 401", "url={u},next", "{u}\n{u}/linux-64"]


# --------------------------------------------------------------------------- the one scrubber


@pytest.mark.parametrize("n", counts(1500, 200))
def test_the_one_scrubber_removes_any_secret_in_any_form(n: int) -> None:
    """Any password in the userinfo (raw or percent-encoded) and any token (as userinfo, or `/t/<token>` at any
    depth, `/%74/` too), in any surrounding text: `strip_credentials` removes what a URL parser reads as one
    (a raw password without / ? # or whitespace), `scrub` removes all of it once the URL is a secret in force,
    and also as --json and a terminal would show it; the host and the channel stay visible."""
    from envlock.names import forget_secrets, remember_secrets, scrub, strip_credentials

    @settings(max_examples=n, deadline=None)
    @given(kind=st.sampled_from(KINDS), context=st.sampled_from(CONTEXTS), name=user,
           secret=st.one_of(password, conda_token, any_token))
    def prop(kind: str, context: str, name: str, secret: str) -> None:
        if kind.startswith("conda-token") and "/" in secret:
            return  # a token is one path segment
        url = _url(kind, secret, name)
        text = context.format(u=url)
        forms = _forms(secret)
        # A raw password holding / ? # or whitespace is no userinfo to any URL parser: only the secrets in force
        # (below) can know it; every other shape is a credential strip_credentials removes by itself.
        if kind != "password-raw" or (not any(c in secret for c in "/?#") and secret.split() == [secret]):
            stripped = strip_credentials(url)
            assert not [f for f in forms if f in stripped], stripped
            assert "127.0.0.1:9" in stripped and "conda-forge" in stripped
        forget_secrets()
        remember_secrets(url)  # the command line, the environment, the config files hold it
        try:
            for shown in (scrub(text), scrub(json.dumps({"error": text})), scrub(text, marked=True)):
                assert not [f for f in forms if f in shown], (url, shown)
                assert "conda-forge" in shown
        finally:
            forget_secrets()

    prop()


# --------------------------------------------------------------------------- every command that prints a URL


def _sources(url: str, tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Every place a mirror URL comes from: (extra arguments, environment), files written under `tmp`."""
    user_dir, project = tmp / "userconf", tmp / "project"
    user_dir.mkdir(exist_ok=True)
    toml = url.replace("\\", "\\\\").replace('"', '\\"')
    (user_dir / "envlock.toml").write_text(f'[mirrors]\nconda-forge = "{toml}"\n')
    (project / "envlock.toml").write_text(f'[mirrors]\nconda-forge = "{toml}"\n')
    base = {"ENVLOCK_CONFIG_DIR": str(tmp / "noconf"), "ENVLOCK_CACHE_DIR": str(tmp / "cache"),
            "ENVLOCK_HTTP_RETRIES": "0"}
    return {
        "--mirror": (["--mirror", f"conda-forge={url}"], base),
        "ENVLOCK_MIRRORS": ([], {**base, "ENVLOCK_MIRRORS": f"conda-forge={url}"}),
        "user envlock.toml": ([], {**base, "ENVLOCK_CONFIG_DIR": str(user_dir)}),
        "project envlock.toml": ([], base),  # commands below run with --project-dir project
    }


@pytest.mark.parametrize("n", counts(6, 1))
def test_every_command_that_prints_a_url_hides_any_secret(n: int, toolchain_template: Path, tmp_path: Path) -> None:
    """Random passwords and tokens, in every shape, from every source, through `config` and the errors of
    resolve, create, mirror and pack (a mirror nobody answers, or one that answers 404: their messages and
    hints name it), human and --json."""
    from tests.security.hostile import AnyPathServer

    cases = iter(range(10**6))
    ran: list[str] = []

    @settings(max_examples=n, deadline=None)
    @example(kind="password-raw", secret="pa'ss\"<PW9q", source="--mirror", answer="404")  # the issue's: ' " <
    @example(kind="conda-token-api", secret="tkQ7ISSUE-33", source="project envlock.toml", answer="nobody")
    @given(kind=st.sampled_from(["password-raw", "password-encoded", "conda-token-api", "conda-token-deep"]),
           secret=st.one_of(password, conda_token), source=st.sampled_from(["--mirror", "ENVLOCK_MIRRORS",
                                                                              "user envlock.toml",
                                                                              "project envlock.toml"]),
           answer=st.sampled_from(["nobody", "404"]))
    def prop(kind: str, secret: str, source: str, answer: str) -> None:
        if (kind.startswith("conda-token") and "/" in secret) or (kind == "password-raw" and (
                " " in secret or "\u00a0" in secret)):
            return  # a token is one segment; a raw space would split --mirror's NAME=URL
        work = tmp_path / f"case{next(cases)}"
        project = copy(toolchain_template, work / "project")
        url = _url(kind, secret, host=server.url if answer == "404" else "https://127.0.0.1:9")
        extra, env = _sources(url, work)[source]
        forms = _forms(secret)
        runs = {
            "config": ["config", *extra],
            "resolve": ["resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", *extra],
            "create": ["create", TOOLCHAIN, "--platform", "linux-64", "-p", str(work / "env"), *extra],
            "mirror": ["mirror", TOOLCHAIN, str(work / "mirror"), *extra],
            "pack": ["pack", TOOLCHAIN, "--platform", "linux-64", "-o", str(work / "env.tar"), *extra],
        }
        for what, args in runs.items():
            for fmt in ([], ["--json"]):
                done = envlock(*args, *fmt, "--project-dir", str(project), env=env, cwd=work, timeout=120)
                text = done.stdout + done.stderr
                assert not [f for f in forms if f in text], f"{what} {fmt} ({source}, {kind}): {text}"
                if what == "config":
                    assert done.returncode == 0 and "127.0.0.1:" in text, text
                else:
                    assert done.returncode != 0, text
                    if not fmt:
                        assert_one_error(done, code=done.returncode)
        written = [p for p in work.rglob("*") if p.is_file() and "cache" not in p.parts and p.name != "envlock.toml"]
        assert [(p, f) for p in written for f in forms if f.encode() in p.read_bytes()] == []
        ran.append(f"{kind} {source}")

    with AnyPathServer({}) as server:  # answers 404 to every path
        prop()
    assert ran, "no case ran"


# --------------------------------------------------------------------------- /t/<token> anywhere: files and caches


TOKEN = "tk-ANYWHERE-7f3a9c"


def test_a_token_anywhere_in_the_path_reaches_no_file_no_output_and_no_shared_cache(
        channel_root: Path, tmp_path: Path) -> None:
    """`--channel http://…/api/t/<token>/conda-forge` (a real server that needs the token): the spec,
    conda-lock.yml, the @EXPLICIT files, environment-*.yml, `check --json`, `config`, `export explicit` and a
    mirror's manifest hold no token; rattler's repodata cache that records it is this user's own."""
    from tests.channelbuilder import ChannelServer
    from tests.second_user import open_dir, second_user

    as_other, _ = second_user()
    server = ChannelServer(channel_root).start()
    port = server.port
    url = f"http://127.0.0.1:{port}/api/t/{TOKEN}/conda-forge"
    project = tmp_path / "p"
    try:
        with open_dir("envlock-cache-", 0o2775) as cache:
            env = {"ENVLOCK_CACHE_DIR": str(cache), "ENVLOCK_CONFIG_DIR": str(tmp_path / "noconf")}
            outputs = []
            done = envlock("resolve", "--torch", "2.3.0", "--platform", "linux-64", "--toolchain-only", "--channel",
                           url, "--project-dir", str(project), "--json", env=env, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            assert any(r.token == TOKEN for r in server.requests)  # the token was used, from /api/t/
            outputs.append(done.stdout + done.stderr)
            lock = (project / "locks" / TOOLCHAIN / "conda-lock.yml").read_text()
            assert TOKEN not in lock and f"127.0.0.1:{port}/api/conda-forge" in lock  # recorded without its token
            # The lock records the channel without its token: a mirror of it (keyed by that URL) gives the token back.
            mirror = f"http://127.0.0.1:{port}/api/conda-forge={url}"
            for args in (["check", "--json"], ["config", "--mirror", mirror],
                         ["export", "explicit", "--mirror", mirror, "-o", str(tmp_path / "explicit")],
                         ["mirror", "--mirror", mirror, str(tmp_path / "mirror")]):
                done = envlock(*args, "--project-dir", str(project), env=env, timeout=300)
                outputs.append(done.stdout + done.stderr)
                assert done.returncode == 0, (args, done.stdout + done.stderr)
            hits = sorted({str(p) for p in cache.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()})
            probe = ("import json, sys\nok = []\nfor p in json.load(sys.stdin):\n    try:\n"
                     "        open(p, 'rb').close()\n        ok.append(p)\n    except OSError:\n        pass\n"
                     "print(json.dumps(ok))")
            import subprocess

            readable = json.loads(subprocess.run([*as_other, "-c", probe], input=json.dumps(hits), capture_output=True,
                                                 text=True, cwd="/", check=True).stdout)
    finally:
        server.stop()
    written = [p for root in (project, tmp_path / "explicit", tmp_path / "mirror") for p in root.rglob("*") if p.is_file()]
    assert written and [p for p in written if TOKEN.encode() in p.read_bytes()] == []
    assert not [o for o in outputs if TOKEN in o], outputs
    assert hits and readable == [] and all("/private-" in h for h in hits), (hits, readable)
    assert os.path.isdir(project / "locks" / TOOLCHAIN)


@pytest.mark.parametrize("password", ["pa€'ss\"<PW9q", "p%40ss:é PW9q"])
def test_a_login_of_any_characters_is_sent_whole_and_shown_nowhere(password: str, channel_root: Path,
                                                                   toolchain_template: Path, tmp_path: Path) -> None:
    """`mirror` fetches every package of the lock through a credentialed mirror whose password holds '€' (requests
    encoded Basic auth as latin-1: `internal error: UnicodeEncodeError` on e081238), quotes, `<`, a space, '%':
    the server gets the login in UTF-8 (as rattler and uv send it), the output and DIR's files hold none of it."""
    import base64

    from tests.channelbuilder import ChannelServer

    server = ChannelServer(channel_root).start()
    port = server.port
    url = f"http://{quote('alice', safe='')}:{quote(password, safe='')}@127.0.0.1:{port}/conda-forge"
    project = copy(toolchain_template, tmp_path / "p")
    try:
        done = envlock("mirror", TOOLCHAIN, str(tmp_path / "m"), "--mirror", f"conda-forge={url}", "--project-dir",
                       str(project), env={"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_HTTP_RETRIES": "0"},
                       timeout=300)
        seen = {r.authorization for r in server.requests if r.authorization}
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    want = "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    assert seen == {want}, seen
    text = done.stdout + done.stderr
    assert not [f for f in _forms(password) if f in text], text
    files = [p for p in (tmp_path / "m").rglob("*") if p.is_file()]
    assert files and [p for p in files if b"PW9q" in p.read_bytes()] == []
