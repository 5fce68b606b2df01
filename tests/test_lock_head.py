"""check reads a lock's package section without YAML (envlock.formats.head.read_section) only where a YAML reader
reads the same packages: on envlock's own text, and on any edit of it either the same answer or none (the caller
then parses YAML). The derived files check renders, and the fingerprints it compares, come from this reading."""

from __future__ import annotations

import envlock.models as records
import random
from pathlib import Path

from envlock.errors import LockfileError
from envlock.formats import read_lock, read_to_install
from envlock.formats.condalock import load_yaml, parse, render_package_section
from envlock.formats.head import read_section
from envlock.models import LockedPackage, PypiPackage


def _no_deps(packages: tuple) -> list:  # read_section leaves dependency lists out (nothing it feeds reads them)
    out = []
    for p in packages:
        out.append(records.replace(p, depends=()) if isinstance(p, LockedPackage)
                   else records.replace(p, dependencies=(), requires=()))
    return out


def _yaml(text: str) -> tuple[list, list] | None:
    """What the YAML reader makes of the same text (None: it refuses it)."""
    try:
        lock = parse(load_yaml(text, Path("conda-lock.yml")), Path("conda-lock.yml"))
    except LockfileError:
        return None
    return _no_deps(lock.packages), _no_deps(lock.pypi)


def _sections(shared_dir: Path, per_platform: int | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """envlock's rendering of real locks' packages (the first `per_platform` of each platform), and one with
    wheels."""
    out = []
    for path in sorted((shared_dir / "real-locks").glob("*.conda-lock.yml")):
        lock = read_lock(path)
        some = [p for pl in lock.platforms for p in lock.packages_for(pl)[:per_platform]]
        out.append((render_package_section(some, list(lock.platforms)), lock.platforms))
    wheels = [PypiPackage("torch", "2.7.1+cu126", "linux-64", "http://127.0.0.1:8/whl/cu126/torch-2.7.1%2Bcu126-cp312-"
                          "cp312-linux_x86_64.whl#sha256=" + "ab" * 32, "ab" * 32, ("nvidia-nccl-cu12",),
                          (("nvidia-nccl-cu12", "==2.26.2"),)),
              PypiPackage("nvidia-nccl-cu12", "2.26.2", "linux-64", "http://127.0.0.1:8/nccl.whl", "0" * 63 + "c")]
    conda = [p for p in read_lock(sorted((shared_dir / "real-locks").glob("*.conda-lock.yml"))[0]).packages
             if p.platform == "linux-64"]
    # exact pins with a build string (run_exports: `ld_impl_linux-64: 2.45.1 default_hbd61a6d_102`), as envlock's
    # own locks hold them: a value with inner spaces (check read every such lock through YAML once)
    pins = ("ld_impl_linux-64 2.45.1 default_hbd61a6d_102", "kernel-headers_linux-64 4.18.0 he073ed8_9")
    conda = [records.replace(p, depends=(*p.depends, *pins)) if i < 5 else p for i, p in enumerate(conda)]
    out.append((render_package_section(conda, ["linux-64"], wheels), ("linux-64",)))
    return out


def _doc(section: str, platforms: tuple[str, ...]) -> str:
    plats = "".join(f"  - {p}\n" for p in platforms)
    return f"version: 1\nmetadata:\n  platforms:\n{plats}  content_hash: {{}}\n  channels: []\n  sources: []\n{section}"


def test_envlocks_own_sections_read_without_yaml_as_yaml_reads_them(shared_dir: Path) -> None:
    sections = _sections(shared_dir)
    for section, platforms in sections:
        text = _doc(section, platforms)
        fast = read_section(text, platforms)
        assert fast is not None, "envlock's own section fell back to YAML"
        assert ([*fast[0]], [*fast[1]]) == _yaml(text)
    assert sum(len(read_section(_doc(s, p), p)[0]) for s, p in sections) > 300  # type: ignore[index]


def test_any_edit_reads_as_yaml_reads_it_or_falls_back(shared_dir: Path) -> None:
    """1,500 random edits (a character or a line inserted, removed or replaced by YAML's indicators, quotes,
    control characters, line breaks): read_section gives YAML's packages or nothing, never other packages."""
    rng = random.Random(22)
    alphabet = list(":'\"#-{}[]&*!|>%@`, \t\r\n\x1b\x00\u202e/.") + ["  ", "\n- ", ": ", "''", "0", "a", "  url: x\n"]
    sections = _sections(shared_dir, per_platform=12)  # small: YAML reads each edit
    fell_back = same = 0
    for _ in range(1500):
        section, platforms = rng.choice(sections)
        text = _doc(section, platforms)
        start = text.index("\npackage:\n") + 1
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(start, len(text))
            cut = rng.choice([0, 0, 1, rng.randint(1, 40)])
            text = text[:at] + rng.choice(["", *alphabet]) + text[at + cut :]
        fast = read_section(text, platforms)
        if fast is None:
            fell_back += 1
            continue
        assert ([*fast[0]], [*fast[1]]) == _yaml(text), repr(text[start:][:400])
        same += 1
    assert fell_back > 100 and same > 100  # both ways were taken


def test_create_reads_a_lock_as_read_lock_reads_it(shared_dir: Path, tmp_path: Path) -> None:
    """read_to_install (create's reader) reads envlock's own text by its layout: read_lock's lock less the dependency
    lists (which an install does not read: each archive's own index.json is linked); a lock envlock did not lay out
    (a comment in it) and an @EXPLICIT file exactly as read_lock reads them."""
    section, platforms = _sections(shared_dir)[-1]  # conda packages, pins with inner spaces, wheels
    path = tmp_path / "conda-lock.yml"
    path.write_text(_doc(section, platforms), encoding="utf-8")
    full, fast = read_lock(path), read_to_install(path)
    assert list(fast.packages) == _no_deps(full.packages) and list(fast.pypi) == _no_deps(full.pypi)
    assert len(fast.packages) > 20 and len(fast.pypi) == 2 and any(p.depends for p in full.packages)
    assert (fast.platforms, fast.content_hash, fast.custom_metadata, fast.kind, fast.path) == \
        (full.platforms, full.content_hash, full.custom_metadata, full.kind, full.path)
    edited = _doc(section, platforms).replace("\n  category: main\n", "\n  category: main  # kept\n", 1)
    path.write_text(edited, encoding="utf-8")
    assert read_to_install(path) == read_lock(path) and any(p.depends for p in read_to_install(path).packages)
    explicit = tmp_path / "conda-linux-64.lock"
    explicit.write_text("# platform: linux-64\n@EXPLICIT\n" + "".join(f"{p.url}#{p.md5}\n" for p in full.packages_for("linux-64")),
                        encoding="utf-8")
    assert read_to_install(explicit) == read_lock(explicit) and len(read_lock(explicit).packages) > 20
