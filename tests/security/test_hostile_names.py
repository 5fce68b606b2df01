"""Names are never interpreted (issue 33, class 3): every exporter, fed hostile names, and parsed back by its
consumer's own parser.

On e081238 `export dockerfile` wrote a lock folder's name raw: `locks/x<newline>ARG EVIL=1<newline>COPY …/`
put ARG and COPY instructions into the Dockerfile (`check` flagged the folder; `export` used it). Now

* every command that takes or reads a lock or environment name (a NAME argument, `-n NAME`, `--lock NAME|FILE`,
  a folder under locks/, a spec's `name:`, a lock's recorded `env_name`) checks it with the one rule
  (envlock/envname.py, the function `check` uses): one `error:` line, nothing written;
* every generated file is built by a writer that quotes or refuses by construction (envlock/formats/slots.py,
  DockerfileSpec's own check, the shells' quoting): a property test renders each exporter with hostile names
  (newline, quotes, `$()`, backticks, `\\`, NUL, non-UTF-8, very long) and parses the result back with the
  consumer's parser (dockerfile-parse, json, conda's own @EXPLICIT and environment.yml readers, pip's
  requirements parser, conda-lock's lock parser, bash -n / zsh -n / fish --no-execute and the shells sourcing
  the hooks): the name comes back as data, and nothing else changed against the same file for a plain name.
  A writer may refuse only a name the one rule refuses; a valid name always renders.

WRITERS is the table: an exporter added later (`envlock export pixi`) adds its row.
PowerShell and cmd.exe are not installed here: their hooks are checked by envlock's own quoting rules only
(`test_powershell_and_cmd_literals_hold_hostile_prefixes`), not by their parsers.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.errors import EnvlockError
from envlock.models import LockedPackage, PypiPackage
from tests.security.inputs import TOOLCHAIN, assert_one_error, copy, envlock, toolchain_template
from tests.tiers import counts

__all__ = ["toolchain_template"]  # fixture used here

CF = "https://conda.anaconda.org/conda-forge"
BENIGN = "Benign0-name"
PLATFORM = "linux-64"
BASE = "python:3.12-slim@sha256:" + "a" * 64
#: What an attacker strings together: line breaks of every kind, both quotes (and PowerShell's curly ones),
#: command substitution, backticks, backslash, NUL, a lone surrogate (a non-UTF-8 byte under surrogateescape),
#: variable references of sh, Docker and cmd, a comment start, path pieces, and long runs.
PIECES = ["\n", "\r", "\r\n", "\x0b", "\x85", "\u2028", "'", '"', "\u2019", "$(touch PWNED)", "`touch PWNED`", "\\",
          "\x00", "\udcff", "${HOME}", "$PIP_INDEX_URL", "%PATH%", "!x!", "#", " ", "\t", ";", "&&", "|", "*", ":",
          "/", "..", "ARG EVIL=1", "COPY . /", "@EXPLICIT", "- evil", "name: evil", "--index-url x", "\x1b[2J",
          "a" * 300, "é", "\u202e"]
#: Each drawn name holds the marker Zq9 somewhere (first, last or between the pieces): where the consumer reads
#: the name, it is found by its marker, never confused with the file's own words.
MARK = "Zq9"
_pieces = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), min_size=1, max_size=6)
hostile = st.tuples(_pieces, st.integers(0, 6)).map(lambda t: "".join(t[0][: t[1]]) + MARK + "".join(t[0][t[1]:]))
valid = st.from_regex(r"Zq9[A-Za-z0-9._+-]{0,40}", fullmatch=True)
names = st.one_of(hostile, valid)


# --------------------------------------------------------------------------- the consumers' parsers


def _dockerfile(text: str, tmp: Path) -> list[dict[str, Any]]:
    """dockerfile-parse's instructions (comments kept apart: a forged line would be an instruction)."""
    from dockerfile_parse import DockerfileParser

    tmp.mkdir(parents=True, exist_ok=True)
    df = DockerfileParser(path=str(tmp), env_replace=False)
    df.content = text
    return [{"instruction": i["instruction"], "value": i["value"]} for i in df.structure]


def _sh_parses(shell: str, text: str, tmp: Path) -> None:
    """`<shell> -n FILE` (fish: --no-execute) accepts the script."""
    path = tmp / f"script.{shell}"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    flag = "--no-execute" if shell == "fish" else "-n"
    done = subprocess.run([shell, flag, str(path)], capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, (shell, done.stderr[-2000:])


@dataclass(frozen=True)
class Writer:
    """One exporter. `write(name)` renders its files with `name` wherever the exporter puts a name (None: not a
    name this writer takes, e.g. a path for a non-path slot); `read(files, name, tmp)` parses them with the
    consumer's own parser and returns what the consumer sees, with every occurrence of the name's value replaced
    by NAME: a rendering for a hostile name must read exactly as one for BENIGN does. `batch`: consumers that run
    as one process over every accepted case (the real conda), given [(files, name)]."""

    id: str
    parser: str
    write: Callable[[str], dict[str, str]]
    read: Callable[[dict[str, str], str, Path], Any]
    batch: Callable[[list[tuple[dict[str, str], str]], Path], None] | None = None


def _sub(value: Any, name: str) -> Any:
    """`value` (strings, lists, dicts) with `name` (and BENIGN, the plain name some rows hold beside a value)
    replaced by NAME wherever it occurs."""
    if isinstance(value, str):
        return value.replace(name, "NAME").replace(BENIGN, "NAME")
    if isinstance(value, list):
        return [_sub(v, name) for v in value]
    if isinstance(value, tuple):
        return tuple(_sub(v, name) for v in value)
    if isinstance(value, dict):
        return {_sub(k, name): _sub(v, name) for k, v in value.items()}
    return value


# ---- Dockerfile and devcontainer.json (`envlock export dockerfile [--devcontainer]`)


def write_dockerfile(name: str) -> dict[str, str]:
    from envlock.usecases.export.dockerfile import DockerfileSpec, devcontainer, render
    from envlock.usecases.export.service import ExportRequest, _regenerate

    lock = f"locks/{name}/conda-lock.yml"
    spec = DockerfileSpec(
        env_name=name, platform=PLATFORM, lock=lock, explicit=f"locks/{name}/conda-{PLATFORM}.lock",
        requirements=f"locks/{name}/requirements-{PLATFORM}.txt", content_hash="a" * 64,
        packages=frozenset({"cuda-nvcc", "gcc_linux-64", "python"}), torch_source="pip", has_cudnn=True,
        build_base=BASE, runtime_base=BASE,
        regenerate=_regenerate(ExportRequest(project_dir=Path("/p"), name=name), Path("/p") / lock, Path("/p"),
                               PLATFORM, f"{name}.Dockerfile"),
        build_command=f"docker build -f {shlex.quote(name + '.Dockerfile')} .", envlock_version="0.1.0",
        context=f"{name}-image")
    return {"Dockerfile": render(spec),
            "devcontainer.json": devcontainer(f"{name} ({PLATFORM})", f"../{name}.Dockerfile", "..", PLATFORM)}


def read_dockerfile(files: dict[str, str], name: str, tmp: Path) -> Any:
    instructions = _dockerfile(files["Dockerfile"], tmp)
    labels = [i["value"] for i in instructions if i["instruction"] == "LABEL"]
    assert any(json.dumps(f"{name} ({PLATFORM})") in v for v in labels), labels  # the name, as a LABEL value
    for run in (i["value"] for i in instructions if i["instruction"] == "RUN"):
        done = subprocess.run(["bash", "-n", "-c", run], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (run[:300], done.stderr)  # each RUN is one well-formed shell command
    doc = json.loads(files["devcontainer.json"])
    assert doc["name"] == f"{name} ({PLATFORM})"
    return _sub([instructions, doc], name)


# ---- @EXPLICIT (`conda-<platform>.lock`, `envlock export explicit`)

PKGS = [LockedPackage(name="cuda-nvcc", version="12.1.105", build="0", platform=PLATFORM,
                      url=f"{CF}/{PLATFORM}/cuda-nvcc-12.1.105-0.conda", md5="0" * 32, sha256="1" * 64, subdir=PLATFORM),
        LockedPackage(name="gcc_linux-64", version="12.3.0", build="h1_0", platform=PLATFORM,
                      url=f"{CF}/{PLATFORM}/gcc_linux-64-12.3.0-h1_0.tar.bz2", md5="2" * 32, sha256=None,
                      subdir=PLATFORM)]


def write_explicit(name: str) -> dict[str, str]:
    from envlock.formats import render_explicit

    return {"conda-linux-64.lock": render_explicit(packages=PKGS, platform=PLATFORM, content_hash_value="c" * 64,
                                                    env_name=name, header=("# for mirrors: none",))}


def read_explicit(files: dict[str, str], name: str, tmp: Path) -> Any:
    from envlock.formats import header_value, parse_explicit

    path = tmp / "conda-linux-64.lock"
    path.write_text(files["conda-linux-64.lock"], errors="surrogateescape")
    assert header_value(path, "env") == name  # envlock's own reader of its header
    parsed = parse_explicit(files["conda-linux-64.lock"])
    assert [(p.url, p.md5, p.sha256) for p in parsed.packages] == [(p.url, p.md5, p.sha256) for p in PKGS]
    return _sub(files["conda-linux-64.lock"].splitlines(), name)


def conda_explicit(cases: list[tuple[dict[str, str], str]], tmp: Path) -> None:
    """conda's own reader of an @EXPLICIT file (yield_lines + _match_specs_from_explicit) sees the packages only."""
    paths = []
    for i, (files, _name) in enumerate(cases):
        paths.append(tmp / f"explicit-{i}.lock")
        paths[-1].write_text(files["conda-linux-64.lock"], errors="surrogateescape")
    script = ("import json, sys\nfrom conda.gateways.disk.read import yield_lines\n"
              "from conda.misc import _match_specs_from_explicit\n"
              "print(json.dumps([[[str(m.get_raw_value('url')), m.get_raw_value('md5')] "
              "for m in _match_specs_from_explicit(yield_lines(p))] for p in sys.argv[1:]]))")
    seen = _conda_python(script, paths)
    want = [[p.url, p.md5] for p in PKGS]
    assert all(got == want for got in seen), seen


# ---- requirements-<platform>.txt (pip's --require-hashes form)

WHEELS = [PypiPackage(name="torch", version="2.7.1+cu126", platform=PLATFORM, url="https://index.invalid/torch.whl",
                      sha256="3" * 64)]


def write_requirements(name: str) -> dict[str, str]:
    from envlock.formats import render_requirements

    return {"requirements.txt": render_requirements(WHEELS, platform=PLATFORM, content_hash_value="c" * 64,
                                                    env_name=name)}


def read_requirements(files: dict[str, str], name: str, tmp: Path) -> Any:
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    path = tmp / "requirements.txt"
    path.write_text(files["requirements.txt"], errors="surrogateescape")
    parsed = [(r.requirement.strip(), r.options) for r in parse_requirements(str(path), session=PipSession())]
    assert parsed == [("torch==2.7.1+cu126", {"hashes": {"sha256": ["3" * 64]}})], parsed
    return _sub(files["requirements.txt"].splitlines(), name)


# ---- environment-<platform>.yml (conda env create -f) and the spec (environments/<name>.yml)


def _spec(name: str) -> Any:
    from envlock.formats.spec import EnvSpec

    return EnvSpec(name=name, torch="2.3.0", platforms=(PLATFORM,))


def write_platform_env(name: str) -> dict[str, str]:
    from envlock.formats.spec import render_platform_env

    return {"environment.yml": render_platform_env(_spec(name), PLATFORM, ["cuda-nvcc 12.1.*"], ["ninja"],
                                                   pip=["torch==2.3.0"], channels=[f"{CF}"])}


def write_platform_env_values(value: str) -> dict[str, str]:
    """The values a lock's recorded plan puts into environment-<platform>.yml: channels and specs."""
    from envlock.formats.spec import render_platform_env

    return {"environment.yml": render_platform_env(_spec(BENIGN), PLATFORM, [f"cuda-nvcc {value}"], [value],
                                                   pip=[value], channels=[value])}


def read_platform_env(files: dict[str, str], name: str, tmp: Path) -> Any:
    import yaml

    doc = yaml.safe_load(files["environment.yml"])
    assert set(doc) == {"name", "channels", "dependencies"}
    return _sub(doc, name)


def conda_env_yaml(cases: list[tuple[dict[str, str], str]], tmp: Path) -> None:
    """conda's own environment.yml reader (conda.env.env.from_file) sees the same name, channels, dependencies."""
    import yaml

    paths = []
    for i, (files, _name) in enumerate(cases):
        paths.append(tmp / f"env-{i}.yml")
        paths[-1].write_text(files["environment.yml"], errors="surrogateescape")
    script = ("import json, sys\nfrom conda.env.env import from_file\nfrom conda import CondaMultiError\n"
              "from conda.exceptions import CondaError\nout = []\nfor p in sys.argv[1:]:\n"
              "    try:\n        e = from_file(p)\n    except (CondaError, CondaMultiError) as exc:\n"
              "        out.append(['refused', str(exc)])\n        continue\n"
              "    out.append([e.name, list(e.channels), e.dependencies.raw])\n"
              "print(json.dumps(out))")
    seen = _conda_python(script, paths)
    assert len(seen) == len(cases)
    for (files, name), got in zip(cases, seen):
        doc = yaml.safe_load(files["environment.yml"])
        if got[0] == "refused":  # conda's own validation refused a value: read as data, found invalid
            assert "Invalid spec" in got[1] or "invalid" in got[1].lower(), got[1]
            continue
        deps = [d for d in got[2] if d != "pip" or "pip" in doc["dependencies"]]  # conda adds pip for `- pip:`
        assert [got[0], got[1], deps] == [doc["name"], doc["channels"], doc["dependencies"]], (name, got)


def write_spec(name: str) -> dict[str, str]:
    from envlock.formats.spec import render_spec

    return {"spec.yml": render_spec(_spec(name), {PLATFORM: ["cuda-nvcc 12.1.*"]}, notes=(f"note {name}",))}


def read_spec(files: dict[str, str], name: str, tmp: Path) -> Any:
    import yaml

    doc = yaml.safe_load(files["spec.yml"])
    assert doc["name"] == name  # quoted by construction; envlock's reader then refuses a name outside the rule
    return _sub(dict(doc), name)


# ---- conda-lock.yml (conda-lock's own parser)


def write_conda_lock(name: str) -> dict[str, str]:
    from envlock.formats import render_conda_lock

    meta = {"envlock.version": "0.1.0", "envlock.lock_format": "1", "envlock.env_name": name}
    return {"conda-lock.yml": render_conda_lock(packages=PKGS, platforms=[PLATFORM], channels=["conda-forge"],
                                                content_hashes={PLATFORM: "c" * 64}, sources=["environments/x.yml"],
                                                custom_metadata=meta)}


def read_conda_lock(files: dict[str, str], name: str, tmp: Path) -> Any:
    from conda_lock.lockfile import parse_conda_lock_file

    path = tmp / "conda-lock.yml"
    path.write_text(files["conda-lock.yml"], encoding="utf-8", errors="surrogateescape")
    lock = parse_conda_lock_file(path)
    assert lock.metadata.custom_metadata["envlock.env_name"] == name
    return _sub([lock.metadata.custom_metadata, [(p.name, p.url, p.hash.md5) for p in lock.package]], name)


# ---- the activation hooks a prefix gets (create, hook): the prefix path in bash, zsh and fish


def write_hooks(name: str) -> dict[str, str]:
    from envlock.seams.activation import hook_files

    return hook_files(PLATFORM, f"/tmp/envlock-hostile/{name}")


def read_hooks(files: dict[str, str], name: str, tmp: Path) -> Any:
    prefix = f"/tmp/envlock-hostile/{name}".rstrip("/")
    for rel, text in files.items():
        for shell in (("bash", "zsh") if rel.endswith(".sh") else ("fish",)):
            _sh_parses(shell, text, tmp)
    activate = {rel.rsplit(".", 1)[1]: text for rel, text in files.items() if rel.startswith("etc/conda/activate.d/")}
    seen = {}
    for shell in ("bash", "zsh", "fish"):
        text = activate["fish" if shell == "fish" else "sh"]
        script = tmp / f"act.{shell}"
        script.write_bytes(text.encode("utf-8", "surrogateescape"))
        out = tmp / "out"
        # NUL-separated: CUDA_HOME, then PATH (sh: one string split at ':' below; fish: its list, element by element)
        show = (f"source {shlex.quote(str(script))}; printf '%s\\0' \"$CUDA_HOME\" \"$PATH\" > {shlex.quote(str(out))}"
                if shell != "fish" else
                f"source {shlex.quote(str(script))}; printf '%s\\0' \"$CUDA_HOME\" $PATH > {shlex.quote(str(out))}")
        done = subprocess.run([shell, "-c", show], cwd=tmp, capture_output=True, timeout=30, check=False,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp)})
        assert done.returncode == 0, (shell, done.stderr[-1000:])
        cuda_home, *rest = out.read_bytes().split(b"\0")[:-1]
        path = rest if shell == "fish" else rest[0].split(b":")
        assert cuda_home == os.fsencode(prefix), (shell, cuda_home)  # the prefix, as data
        assert path[0] == os.fsencode(prefix) + b"/bin", (shell, path)  # one PATH entry: the prefix's bin, whole
        assert not list(tmp.glob("PWNED*"))
        seen[shell] = _sub([os.fsdecode(cuda_home), [os.fsdecode(p) for p in path]], prefix)  # the prefix as given
    return seen


# ---- pixi.toml and its activation scripts (`envlock export pixi`, issue 36)


def write_pixi(name: str) -> dict[str, str]:
    """The whole workspace's files of a lock whose recorded name is `name` (read as `envlock export pixi` reads
    it: the one lock reader, then envlock/project/pixiexport.py)."""
    from envlock.formats import parse_lock
    from envlock.project.pixiexport import whole

    text = write_conda_lock(name)["conda-lock.yml"]
    lock = parse_lock(text, Path("/p/locks") / BENIGN / "conda-lock.yml")
    return whole(lock, Path("/p/locks") / BENIGN / "conda-lock.yml")


def read_pixi(files: dict[str, str], name: str, tmp: Path) -> Any:
    import tomllib

    doc = tomllib.loads(files["pixi.toml"])
    assert doc["workspace"]["name"] == name
    for rel, text in files.items():
        if rel.endswith(".sh"):
            _sh_parses("bash", text, tmp)
    comments = [ln for ln in files["pixi.toml"].splitlines() if ln.startswith("#")]
    return _sub([doc, comments, {k: v for k, v in files.items() if k != "pixi.toml"}], name)


WRITERS = [
    Writer("dockerfile", "dockerfile-parse, bash -n of each RUN, json", write_dockerfile, read_dockerfile),
    Writer("explicit", "envlock's header reader, conda's @EXPLICIT reader", write_explicit, read_explicit,
           conda_explicit),
    Writer("requirements", "pip's requirements parser", write_requirements, read_requirements),
    Writer("environment-yml", "yaml, conda's environment.yml reader", write_platform_env, read_platform_env,
           conda_env_yaml),
    Writer("environment-yml-values", "yaml, conda's environment.yml reader", write_platform_env_values,
           read_platform_env, conda_env_yaml),
    Writer("spec", "yaml", write_spec, read_spec),
    Writer("conda-lock", "conda-lock's parser", write_conda_lock, read_conda_lock),
    Writer("hooks", "bash -n, zsh -n, fish --no-execute; bash, zsh and fish sourcing them", write_hooks, read_hooks),
    Writer("pixi", "tomllib (pixi's TOML), bash -n of its scripts", write_pixi, read_pixi),
]
#: Writers whose slot is a value, not a name (a path, a spec): they must render what the one name rule refuses
#: wherever the format can carry it, and may refuse only what it cannot.
VALUE_SLOTS = {"environment-yml-values", "hooks", "spec", "conda-lock"}


# --------------------------------------------------------------------------- the property


_CONDA: dict[str, Path] = {}


def _conda_python(script: str, paths: list[Path]) -> Any:
    python = _CONDA["python"]
    done = subprocess.run([str(python), "-c", script, *map(str, paths)], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "CONDA_PKGS_DIRS": str(paths[0].parent / "pkgs")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def conda_python(request: pytest.FixtureRequest) -> Path:
    """The real conda's python (../shared/tools/conda, installed once by tests/test_conda.py's fixture)."""
    venv: Path = request.getfixturevalue("conda_venv")
    _CONDA["python"] = venv / "bin" / "python"
    return _CONDA["python"]


from tests.test_conda import conda_venv  # noqa: E402 - the real conda, built once and cached

__all__ += ["conda_venv"]


@pytest.mark.parametrize("writer", WRITERS, ids=[w.id for w in WRITERS])
@pytest.mark.parametrize("n", counts(300, 40))
def test_every_exporter_renders_a_hostile_name_as_data_or_refuses_it(writer: Writer, n: int, tmp_path: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    """The name comes back as data (the consumer reads the same file as for a plain name, the name in its place)
    or the writer refuses it with one EnvlockError; a name the one rule accepts is never refused."""
    from envlock.envname import problem

    if writer.id in ("hooks",):
        for shell in ("bash", "zsh", "fish"):
            if shutil.which(shell) is None:
                pytest.skip(f"{shell} is not installed here")
    if writer.batch is not None:
        request.getfixturevalue("conda_python")
    (tmp_path / "benign").mkdir()
    benign = writer.read(writer.write(BENIGN), BENIGN, tmp_path / "benign")
    accepted: list[tuple[dict[str, str], str]] = []
    refused: list[str] = []
    counter = iter(range(10**9))

    def check(name: str) -> None:
        try:
            files = writer.write(name)
        except EnvlockError as exc:
            assert "\n" not in exc.message and exc.hint, exc.message
            assert problem(name) is not None, f"{writer.id} refused the valid name {name!r}: {exc.message}"
            refused.append(name)
            return
        work = tmp_path / f"case{next(counter)}"
        work.mkdir()
        seen = writer.read(files, name, work)
        assert seen == benign, f"{writer.id}: {name!r} changed what the consumer reads"
        accepted.append((files, name))

    for piece in PIECES:  # each piece alone, before and after the marker, then hypothesis's combinations
        check(piece + MARK)
        check(MARK + piece)

    @settings(max_examples=n, deadline=None)
    @given(name=names)
    def prop(name: str) -> None:
        check(name)

    prop()
    assert accepted, f"{writer.id} rendered no name at all"
    if writer.id not in VALUE_SLOTS:
        assert refused, f"{writer.id} refused no hostile name"
    if writer.batch is not None:
        writer.batch(accepted, tmp_path)


@pytest.mark.parametrize("prefix", [MARK + p for p in PIECES if p not in ("\x00",)] + ["C:\\Users\\x\u2019; calc"])
def test_powershell_and_cmd_literals_hold_hostile_prefixes(prefix: str) -> None:
    """No PowerShell or cmd.exe parser is installed here (said in the module docstring): the literal each renders
    is read back by those languages' documented rules. PowerShell ends a single-quoted string at ' and at the
    typographic single quotes, and reads a doubled one as one; cmd's `set "V=…"` reads %% as %."""
    from envlock.errors import UnsafeNameError
    from envlock.seams.activation.cmd import bat_literal
    from envlock.seams.activation.powershell import ps_quote

    quotes = ("'", "\u2018", "\u2019", "\u201a", "\u201b")  # PowerShell's IsSingleQuote, stated here on its own

    quoted = ps_quote(prefix)
    body, out, i = quoted[1:-1], [], 0
    while i < len(body):  # PowerShell's tokenizer over a single-quoted string
        if body[i] in quotes:
            assert i + 1 < len(body) and body[i + 1] in quotes, f"{quoted!r} ends early at {i}"
            out.append(body[i])
            i += 2
            continue
        out.append(body[i])
        i += 1
    assert "".join(out) == prefix
    try:
        literal = bat_literal(prefix)
    except UnsafeNameError:
        assert '"' in prefix or not prefix.isprintable()
        return
    assert '"' not in literal and literal.replace("%%", "%") == prefix


# --------------------------------------------------------------------------- every command that takes or reads a name

#: Names as a command line, a folder under locks/ or a lock's recorded env_name carry them (argv holds no NUL;
#: a folder name no '/' and at most 255 bytes: those are left out where they cannot exist).
CLI_NAMES = ["x\nARG EVIL=1\nCOPY sitecustomize.py .\n#", "a'b", 'a"b', "$(touch PWNED)", "`touch PWNED`",
             "a\\b", "a\udcffb", "a" * 300, "../evil", "-x", " x", "a b", "x;touch PWNED", "x\u202eevil", "."]


def _project(tmp: Path, template: Path) -> Path:
    return copy(template, tmp / "p")


def _by_argument(project: Path, name: str) -> list[str]:
    return [name]


def _plant_folder(project: Path, name: str) -> Path:
    """locks/<name>/: a copy of the template's lock under the attacker's folder name."""
    dest = project / "locks" / name
    shutil.copytree(project / "locks" / TOOLCHAIN, dest)
    return dest


def _plant_recorded(project: Path, name: str) -> None:
    """The template's lock, its recorded env_name the attacker's (YAML double-quoted: any character)."""
    lock = project / "locks" / TOOLCHAIN / "conda-lock.yml"
    text = lock.read_text()
    old = f"envlock.env_name: {TOOLCHAIN}"
    assert old in text
    lock.write_bytes(text.replace(old, f"envlock.env_name: {json.dumps(name)}").encode("utf-8", "surrogateescape"))


#: (id, how the name enters, the command's words with NAME/LOCK/OUT/ARCHIVE in place)
COMMANDS: list[tuple[str, str, list[str]]] = [
    ("export-dockerfile", "argument", ["export", "dockerfile", "NAME", "-o", "PROJ/Dockerfile"]),
    ("export-dockerfile", "folder", ["export", "dockerfile", "--lock", "LOCK", "-o", "PROJ/Dockerfile"]),
    ("export-dockerfile", "recorded", ["export", "dockerfile", TOOLCHAIN, "--platform", "linux-64", "-o", "PROJ/Dockerfile",
                                       "--devcontainer"]),
    ("export-explicit", "argument", ["export", "explicit", "NAME", "--mirror", "conda-forge=file:///nowhere", "-o", "OUT"]),
    ("export-explicit", "folder", ["export", "explicit", "--lock", "LOCK", "--mirror", "conda-forge=file:///nowhere",
                                   "-o", "OUT"]),
    ("export-explicit", "recorded", ["export", "explicit", TOOLCHAIN, "--mirror", "conda-forge=file:///nowhere",
                                     "-o", "OUT"]),
    ("create", "argument", ["create", "NAME", "-p", "OUT/env"]),
    ("create", "folder", ["create", "--lock", "LOCK", "-p", "OUT/env"]),
    ("create", "recorded", ["create", TOOLCHAIN, "--platform", "linux-64"]),  # the default prefix: the recorded name
    ("create-n", "argument", ["create", TOOLCHAIN, "--platform", "linux-64", "-n", "NAME"]),
    ("pack", "argument", ["pack", "NAME", "-o", "OUT/x.tar"]),
    ("pack", "folder", ["pack", "--lock", "LOCK", "-o", "OUT/x.tar"]),
    ("pack", "recorded", ["pack", TOOLCHAIN, "--platform", "linux-64", "-o", "OUT/x.tar"]),
    ("unpack-n", "argument", ["unpack", "ARCHIVE", "-n", "NAME"]),
    ("mirror", "argument", ["mirror", "NAME", "OUT/m"]),
    ("mirror", "recorded", ["mirror", TOOLCHAIN, "OUT/m"]),
    ("check", "argument", ["check", "NAME"]),
    ("check", "folder", ["check"]),
    ("check", "recorded", ["check"]),
    ("lock", "argument", ["lock", "NAME", "--offline"]),
    ("lock", "folder", ["lock", "--offline"]),
    ("update", "argument", ["update", "cuda-nvcc", "--lock", "NAME", "--offline"]),
    ("run-n", "argument", ["run", "-n", "NAME", "--", "true"]),
    ("shell-hook-n", "argument", ["shell-hook", "-n", "NAME"]),
    ("hook-n", "argument", ["hook", "-n", "NAME"]),
    ("doctor-n", "argument", ["doctor", "-n", "NAME"]),
]
_NO_PROJECT = {"run-n", "shell-hook-n", "hook-n", "doctor-n", "unpack-n"}


def _cli_cases() -> list[Any]:
    out = []
    for i, (cid, how, words) in enumerate(COMMANDS):
        names = [n for n in CLI_NAMES if how == "argument" or ("/" not in n and len(n.encode(errors="surrogateescape"))
                                                               <= 255 and n not in (".", ".."))]
        # The default tier: the newline (the Dockerfile injection) and one more name, rotating over the
        # list; the slow tier: three more (every name runs for several commands; all of them would take ~400 runs).
        picked = [0, *(1 + (i + k * 5) % (len(names) - 1) for k in range(4))]
        for j in dict.fromkeys(picked):
            marks = () if j in picked[:2] else (pytest.mark.slow,)
            out.append(pytest.param(cid, how, words, names[j], marks=marks, id=f"{cid}-{how}-{j}"))
    return out


@pytest.mark.parametrize(("cid", "how", "words", "name"), _cli_cases())
def test_every_command_refuses_a_hostile_name_with_one_error_and_writes_nothing(
        cid: str, how: str, words: list[str], name: str, toolchain_template: Path, tmp_path: Path) -> None:
    """A NAME argument (its folder planted where one can exist), `-n NAME`, a planted folder under locks/ and a
    recorded env_name: each command says one `error:` (check and lock: a report naming it escaped, exit 1),
    runs nothing and writes nothing."""
    project = _project(tmp_path, toolchain_template)
    out = tmp_path / "out"
    out.mkdir()
    envs = tmp_path / "envs"
    lock = ""
    if how == "folder" or (how == "argument" and "/" not in name and name not in (".", "..")
                           and len(name.encode(errors="surrogateescape")) <= 255 and cid not in _NO_PROJECT):
        lock = str(_plant_folder(project, name) / "conda-lock.yml")  # the NAME exists: only its check stops it
    elif how == "recorded":
        _plant_recorded(project, name)
    archive = tmp_path / "x.tar"
    archive.write_bytes(b"")
    args = [{"NAME": name, "LOCK": lock, "ARCHIVE": str(archive)}.get(w, w).replace("OUT", str(out))
            .replace("PROJ", str(project)) for w in words]
    if cid not in _NO_PROJECT:
        args += ["--project-dir", str(project)]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    done = envlock(*args, cwd=tmp_path, timeout=120,
                   env={"ENVLOCK_ENVS_DIR": str(envs), "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)})
    text = done.stdout + done.stderr
    assert done.returncode != 0, text
    assert "Traceback" not in text and "internal error" not in text, text
    if cid in ("check", "lock") and how != "argument":  # a report: the lock named escaped, then one error
        assert done.returncode == 1 and "error:" in done.stderr, text
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text), text
    else:  # a name on the command line is a value not of its form (exit 2); one read from a file, exit 1
        assert_one_error(done, code=2 if how == "argument" else 1)
    if "\n" in name:  # the forged lines never reach the output as lines of their own
        assert not any(ln.startswith(("ARG EVIL", "COPY sitecustomize")) for ln in text.splitlines()), text
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "cache" not in p.relative_to(tmp_path).parts)
    assert [p for p in after if p not in before] == [], "something was written"
    assert not envs.exists() or not any(envs.iterdir())
    assert not list(tmp_path.rglob("PWNED*"))


@pytest.mark.parametrize("how", ["create", "hook"])
def test_a_prefix_its_activation_cannot_carry_is_refused_before_anything_is_written(
        how: str, toolchain_template: Path, tmp_path: Path, test_channel_url: str) -> None:
    """`-p` is the user's own path, any character a shell's quoting carries is data (the property above), but a
    ':' would make the prefix's bin/ two PATH entries in every hook (conda refuses such a prefix too): refused
    before a package is fetched or a hook written."""
    project = _project(tmp_path, toolchain_template)
    prefix = tmp_path / "env:x"
    env = {"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    if how == "create":
        done = envlock("create", TOOLCHAIN, "--platform", "linux-64", "-p", str(prefix), "--mirror",
                       f"conda-forge={test_channel_url}", "--project-dir", str(project), env=env)
    else:
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "history").write_text("")
        done = envlock("hook", "-p", str(prefix), "--torch-source", "pip", env=env)
    assert_one_error(done, "':'")
    assert sorted(p.name for p in prefix.rglob("*")) == ([] if how == "create" else ["conda-meta", "history"])
    assert not (tmp_path / "cache" / "pkgs").exists() or not any((tmp_path / "cache" / "pkgs").glob("cuda*"))
