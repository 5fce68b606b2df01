"""The environment spec `environments/<name>.yml`: a conda environment.yml plus an `envlock:` block.

The `dependencies` list holds the toolchain of the preferred CUDA minor (with conda-lock platform
selectors where platforms differ) so conda-lock and conda can read the file too, plus any extra
dependencies the user adds; `envlock:` holds the anchor inputs that `envlock lock` re-plans from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock import UPGRADE_HINT
from envlock.envname import validate_name
from envlock.errors import NewerFormatError, SpecError, again
from envlock.formats.yamlsubset import NeedsPyYAML, scalar
from envlock.models import TORCH_SOURCES, TorchSource, field, record
from envlock.formats import slots
from envlock.names import printable, strip_credentials
from envlock.formats.untrusted import SPEC_CAP, load_yaml

if TYPE_CHECKING:
    from envlock.formats.spec_values import Groups

SPEC_VERSION = 1
SELECTORS = {"linux-64": "linux64", "linux-aarch64": "aarch64", "win-64": "win64"}


@record
class EnvSpec:
    """What a spec file says."""

    name: str
    torch: str
    torch_source: str = "pip"
    cuda: str | None = None  # --cuda override
    python: str | None = None
    platforms: tuple[str, ...] = ("linux-64",)
    channels: tuple[str, ...] = ("conda-forge",)
    glibc: str = "2.28"
    cudnn: bool = True
    dependencies: tuple[str, ...] = ()  # as written (toolchain + extras)
    with_extras: tuple[str, ...] = ()  # `with:` / --with NAME: groups of CUDA headers (data/extras.yaml)
    selected: dict[str, tuple[str, ...]] = field(default_factory=dict)  # dependencies per platform (selectors)
    pip: tuple[str, ...] = ()  # the `- pip:` list as written (torch and ninja lines + the user's)
    toolchain_only: bool = False  # no python, no PyPI part: beside a torch installed elsewhere
    exclude_newer: str | None = None  # resolution cutoff (ISO UTC): nothing newer is locked
    # Package indexes that give no upload times: the cutoff did not apply to the PyPI part (seams/pypi/undated.py).
    # What a lock found, not an input: not hashed (a re-lock finds it again).
    undated_indexes: tuple[str, ...] = ()

    @property
    def optional(self) -> str:
        """The optional package its solve takes where the channel has it, written as a bare line: ninja beside a
        toolchain, pip beside a full env's python (any other bare line, a full env's `- ninja`, is the user's)."""
        return "ninja" if self.toolchain_only else "pip"

    @property
    def torch_label(self) -> str | None:
        """The local label the spec's torch names ('cu118' of '2.3.0+cu118'): a PyTorch-index wheel."""
        return self.torch.partition("+")[2] or None

    def inputs(self) -> dict[str, Any]:
        """The anchor inputs, normalised (what the content hash sees of the envlock block)."""
        out: dict[str, Any] = {
            "torch": self.torch,
            "torch_source": self.torch_source,
            "cuda": self.cuda,
            "python": self.python,
            "glibc": self.glibc,
            "cudnn": self.cudnn,
            "exclude_newer": self.exclude_newer,
        }
        if self.toolchain_only:
            out["toolchain_only"] = True
        if self.with_extras:  # only when used: specs without `with:` keep the hash they had
            out["with"] = list(self.with_extras)
        return out


def check_torch_source(value: str, setting: str, error: type[SpecError] = SpecError) -> TorchSource:
    """The torch source (pip or conda-forge), or `error` naming the setting it came from (--torch-source,
    a spec's envlock.torch_source) with the nearest valid value."""
    if value in TORCH_SOURCES:
        return value
    close = "conda-forge" if "conda" in value.lower() else "pip"
    raise error(
        f"{setting} {value!r} is not a torch source (pip or conda-forge)",
        hint=f"did you mean {setting.rsplit(': ', 1)[-1]} {close}? pip: torch from the package index; "
        "conda-forge: conda-forge's pytorch builds",
    )




def _q(value: str) -> str:
    """A YAML scalar that round-trips as the same string on ONE line (as `yaml.safe_dump(value)` writes it; a
    value with a line break or control character double-quoted with escapes, so no continuation line depends on
    the indentation of the slot it is put in)."""
    try:
        return scalar(value)  # envlock.formats.yamlsubset: PyYAML's rule for one line of printable ASCII
    except NeedsPyYAML:
        import yaml

    if value.isprintable():
        dumped = yaml.safe_dump(value, default_style=None, width=4096).strip()
    else:
        dumped = yaml.safe_dump(value, default_style='"', width=1 << 30).strip()
    return dumped.removesuffix("\n...").strip()


def render_spec(
    spec: EnvSpec,
    per_platform_specs: dict[str, Sequence[str]],
    extras: Sequence[str] = (),
    notes: Sequence[str] = (),
    pip: Sequence[str] = (),
) -> str:
    """Render the spec file deterministically (selectors where platforms differ; `notes` as comments)."""
    platforms = list(spec.platforms)
    order: list[str] = []
    where: dict[str, list[str]] = {}
    for platform in platforms:
        for s in per_platform_specs.get(platform, ()):
            if s not in where:
                order.append(s)
                where[s] = []
            where[s].append(platform)
    lines = [
        "# envlock spec. Edit the `envlock:` block (or add dependencies), then run `envlock lock`.",
        "# Install its lock with `envlock create`; installed by conda or conda-lock, add the CUDA activation with",
        "# `envlock hook -p PREFIX`.",
        f"name: {_q(spec.name)}",
        "channels:",
        # A spec is committed: credentials of a channel URL are used for this run, never written
        # (re-locking reads them from rattler's auth storage, as `envlock lock` documents).
        *[f"  - {_q(strip_credentials(c))}" for c in spec.channels],
        "dependencies:",
        *[f"  # {line}" for note in notes for line in _wrap(printable(note))],
    ]
    for s in order:
        sel = ""
        if len(where[s]) != len(platforms):
            sel = "  # [" + " or ".join(SELECTORS.get(p, p) for p in where[s]) + "]"
        lines.append(f"  - {_q(s)}{sel}")
    lines += [f"  - {_q(s)}" for s in extras if s not in where]
    if pip:
        lines += ["  - pip:", *[f"    - {_q(r)}" for r in pip]]
    lines += ["platforms:", *[f"  - {_q(p)}" for p in platforms]]
    lines += [
        "envlock:",
        f"  spec_version: {SPEC_VERSION}",
        f"  torch: {_q(spec.torch)}",
        f"  torch_source: {_q(spec.torch_source)}",
        f"  cuda: {_q(spec.cuda) if spec.cuda else 'null'}",
        f"  python: {_q(spec.python) if spec.python else 'null'}",
        f"  glibc: {_q(spec.glibc)}",
        f"  cudnn: {'true' if spec.cudnn else 'false'}",
    ]
    if spec.toolchain_only:
        lines.append("  toolchain_only: true")
    if spec.exclude_newer:
        lines.append(f"  exclude_newer: {_q(spec.exclude_newer)}")
    if spec.undated_indexes:  # written by envlock: the cutoff could not apply to these indexes
        lines.append("  undated_indexes: [" + ", ".join(_q(strip_credentials(u)) for u in spec.undated_indexes) + "]")
    if spec.with_extras:
        lines.append("  with: [" + ", ".join(_q(w) for w in spec.with_extras) + "]")
    return "\n".join(lines) + "\n"


def render_platform_env(spec: EnvSpec, platform: str, toolchain: Sequence[str], extras: Sequence[str] = (),
                        pip: Sequence[str] = (), channels: Sequence[str] = ()) -> str:
    """`locks/<name>/environment-<platform>.yml`: the spec of one platform as plain conda reads it (conda reads no
    `# [aarch64]` selectors and warns about `platforms:` and `envlock:`): name, channels, that platform's
    dependencies and the `- pip:` list. Rendered from what the spec is rendered from, so the two agree."""
    name, platform = validate_name(spec.name), slots.line(platform, "the platform")  # the comments' values
    lines = [
        f"# {name} for {platform}, for conda alone: conda env create -p PREFIX -f locks/{name}/environment-"
        f"{platform}.yml",
        f"# Generated by envlock from environments/{name}.yml and its lock: edit the spec, then `envlock lock`.",
        "# Then the lock's CUDA activation: envlock hook -p PREFIX (or copy activate.sh and deactivate.sh into",
        "# PREFIX/etc/conda/activate.d/ and deactivate.d/ as envlock-cuda.sh).",
        f"name: {_q(spec.name)}",
        "channels:",
        *[f"  - {_q(strip_credentials(c))}" for c in (channels or spec.channels)],
        "dependencies:",
        *[f"  - {_q(s)}" for s in dict.fromkeys([*toolchain, *extras])],
    ]
    if pip:
        lines += ["  - pip:", *[f"    - {_q(r)}" for r in pip]]
    return "\n".join(lines) + "\n"


def _wrap(note: str, width: int = 100) -> list[str]:
    words, lines, line = note.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


_DEP_LINE = re.compile(r"^\s+-\s+(?P<value>.+?)\s*(?:#\s*\[(?P<sel>[^\]]*)\])?\s*$")


def dependencies_by_platform(text: str, dependencies: Sequence[str], platforms: Sequence[str],
                             ) -> dict[str, tuple[str, ...]]:
    """The spec's dependencies per platform, honouring conda-lock's `# [linux64 or win64]` selectors.

    The values are YAML's; a selector comes from a block-style `- value  # [sel]` line (flow style has none).
    """
    names = {v: k for k, v in SELECTORS.items()}
    selected: dict[str, list[str]] = {}
    for raw in text.splitlines():
        m = _DEP_LINE.match(raw)
        if m is None or not m.group("sel"):
            continue
        try:
            value = load_yaml(m.group("value"), "a dependency line", SpecError, hint="", cap=SPEC_CAP)
        except SpecError:
            continue  # the document as a whole was read already: a line alone may not be YAML
        if isinstance(value, (str, int, float)):
            selected[str(value)] = [names.get(t.strip(), t.strip()) for t in m.group("sel").split(" or ")]
    return {p: tuple(d for d in dependencies if p in selected.get(d, platforms)) for p in platforms}


def read_spec(path: Path, groups: Groups | None = None) -> EnvSpec:
    """Parse and validate a spec file; SpecError/LockfileError with hints otherwise (`groups`: the extras table
    its `with:` names are checked against)."""
    from envlock.formats import make_hint, read_text

    text = read_text(path, missing="no spec", missing_hint=make_hint, error=SpecError, cap=SPEC_CAP)
    spec = parse_spec(text, path, groups)
    return _with_selected(spec, text)


def _with_selected(spec: EnvSpec, text: str) -> EnvSpec:
    from envlock.models import replace

    return replace(spec, selected=dependencies_by_platform(text, spec.dependencies, spec.platforms))


def parse_spec(text: str, path: Path | None = None, groups: Groups | None = None) -> EnvSpec:
    """A spec's text read, every value validated (envlock.formats.spec_values): one SpecError naming the first
    value envlock cannot use."""
    from envlock.formats import spec_values as values

    where = str(path) if path else "spec"
    doc = load_yaml(text, where, SpecError, hint="fix the YAML syntax (indentation, colons)", cap=SPEC_CAP)
    if not isinstance(doc, dict):
        raise SpecError(f"{where} is not a mapping", hint="a spec has name, channels, dependencies, platforms, envlock")
    block = doc.get("envlock")
    if not isinstance(block, dict):
        from envlock.formats import make_hint

        raise SpecError(f"{where} has no `envlock:` block",
                        hint=make_hint("re-create it with", path.stem if path is not None else None))
    version = block.get("spec_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= SPEC_VERSION:
        pass
    elif isinstance(version, int) and not isinstance(version, bool) and version > SPEC_VERSION:
        raise NewerFormatError(
            f"{where} has spec_version {version!r}, newer than this envlock reads ({SPEC_VERSION})",
            hint=UPGRADE_HINT,
        )
    else:
        raise SpecError(f"{where}: envlock.spec_version {version!r} is not a spec version (this envlock writes "
                        f"{SPEC_VERSION})", hint=f"write spec_version: {SPEC_VERSION}")
    values.check_keys(block, where)

    def strs(key: str, default: Sequence[str]) -> tuple[str, ...]:
        value = doc.get(key, list(default))
        if value is None:
            return tuple(default)
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise SpecError(f"{where}: `{key}` must be a list of strings", hint=f"write `{key}:` as a YAML list")
        return tuple(str(v) for v in value)

    deps_raw = doc.get("dependencies")
    pip: tuple[str, ...] = ()
    if isinstance(deps_raw, list):
        pip_blocks = [d for d in deps_raw if isinstance(d, dict)]
        if any(set(d) != {"pip"} or not isinstance(d["pip"], list) for d in pip_blocks):
            raise SpecError(f"{where}: a mapping in `dependencies` must be `- pip: [requirements]`",
                            hint="list PyPI requirements under `- pip:` (as conda reads them)")
        pip = tuple(str(r) for d in pip_blocks for r in d["pip"])
        doc["dependencies"] = [d for d in deps_raw if not isinstance(d, dict)]
    torch = values.torch_value(values.text(block, "torch", where), where)
    source_text = values.text(block, "torch_source", where)
    source = check_torch_source("pip" if source_text is None else source_text, f"{where}: envlock.torch_source")
    toolchain_only = values.flag(block, "toolchain_only", False, where)
    python = values.checked(values.text(block, "python", where), "python", where, values.parse_python)
    if toolchain_only:
        values.toolchain_only_unused(python, pip, where)
    else:
        pip_requirements(pip, torch, source)  # each line a PEP 508 requirement, no pip option
    undated = block.get("undated_indexes") or []
    if not isinstance(undated, list) or not all(isinstance(u, str) and "://" in u for u in undated):
        raise SpecError(f"{where}: envlock.undated_indexes must be a list of index URLs",
                        hint="delete it: a re-lock finds the indexes without upload times again")
    name = doc.get("name") or (path.stem if path else "")
    return EnvSpec(
        name=validate_name(str(name)),
        torch=torch,
        torch_source=source,
        cuda=values.text(block, "cuda", where),  # its form: of_spec's (envlock.usecases.resolve.asked), once
        python=python,
        platforms=values.platforms(strs("platforms", ("linux-64",)), where),
        channels=values.channels(strs("channels", ("conda-forge",)), where),
        glibc=values.checked(values.text(block, "glibc", where), "glibc", where, values.parse_glibc) or "2.28",
        cudnn=values.flag(block, "cudnn", True, where),
        dependencies=strs("dependencies", ()),
        pip=pip,
        toolchain_only=toolchain_only,
        exclude_newer=read_cutoff(block.get("exclude_newer"), where),
        with_extras=normalise_with(values.groups(block.get("with"), where, groups)),
        undated_indexes=tuple(dict.fromkeys(strip_credentials(u) for u in undated)),
    )


def read_cutoff(value: Any, where: str) -> str | None:
    """envlock.exclude_newer as the canonical `YYYY-MM-DDTHH:MM:SS[.fff]Z` (YAML may hand back a datetime)."""
    import datetime

    if value is None:
        return None
    stamp: Any = None
    try:
        if isinstance(value, datetime.datetime):
            stamp = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            stamp = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        if stamp is not None:
            stamp.astimezone(datetime.timezone.utc)  # a stamp UTC cannot hold (year 1 at +01:00): OverflowError
    except (ValueError, OverflowError):
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        if where.startswith("--"):  # the command line's option
            raise SpecError(f"{where} {value!r} is not an ISO timestamp in UTC",
                            hint=("write it like ", again(where, "2026-11-30T12:00:00Z")))
        raise SpecError(f"{where}: envlock.exclude_newer {value!r} is not an ISO timestamp in UTC",
                        hint="write it like '2026-11-30T12:00:00Z', or delete it to re-lock as of now")
    return format_cutoff(stamp)


def format_cutoff(stamp: Any) -> str:
    """A datetime as the cutoff text a spec holds: UTC, to the millisecond (whole seconds written as such).

    Channels stamp records in milliseconds (`indexed_timestamp`); a cutoff cut to the second hid a package
    indexed earlier in the same second as the first resolve from that resolve and every later one.
    """
    import datetime

    utc = stamp.astimezone(datetime.timezone.utc)
    ms = int(utc.microsecond) // 1000
    return str(utc.strftime("%Y-%m-%dT%H:%M:%S")) + (f".{ms:03d}" if ms else "") + "Z"


def normalise_with(names: Sequence[str]) -> tuple[str, ...]:
    """`--with`/`with:` names stripped, lower-cased and each kept once, in the order given."""
    return tuple(dict.fromkeys(n.strip().lower() for n in names if n.strip()))


# --------------------------------------------------------------------------- the `- pip:` list


def pip_requirements(pip: Sequence[str], torch: str, torch_source: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(what uv locks, the user's own lines, lines envlock replaces) of a spec's `- pip:` list.

    envlock writes `torch==<release>` (torch from pip) and `ninja` itself; every other line is the user's.
    A user's ninja line stands instead of envlock's; a torch line other than envlock's is replaced
    (the anchor lives in the `envlock:` block).
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    generated = [f"torch=={torch}"] if torch_source == "pip" else []
    users: list[str] = []
    ignored: list[str] = []
    for line in pip:
        text = line.strip()
        if text.startswith("-"):
            raise SpecError(f"`- pip:` line {text!r} is a pip option; envlock takes indexes from pip's configuration",
                            hint="remove it (set PIP_INDEX_URL / pip.conf, or a +cuXYZ torch for the PyTorch index)")
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement as exc:
            raise SpecError(f"`- pip:` requirement {text!r} is not valid: {exc}",
                            hint="write PEP 508 requirements, e.g. einops>=0.7") from None
        if name == "torch":
            if text not in generated:
                ignored.append(text)
            continue
        if name == "ninja" and text == "ninja":
            continue  # envlock's own line
        if text not in users:
            users.append(text)
    has_ninja = any(canonicalize_name(Requirement(u).name) == "ninja" for u in users)
    always = [] if has_ninja else ["ninja"]
    return tuple(generated + always + users), tuple(users), tuple(ignored)
