"""PURE rules: Anchor + PlanOptions + the CUDA tables → Plan (no I/O, no rattler, no typer).

The tables are arguments (envlock.core.tables loads them): the rules never read a file, so a test hands them
any table it likes.

The nvcc skew rule: same major as torch, minor within ±1 of torch's, tried as exact → minor-1 →
minor+1. A neighbour that was never released (12.7) is no candidate and the window never widens
further, so torch's 12.8 can move only to 12.9.
"""

from __future__ import annotations


from envlock.errors import HintPart, PlanError, again, either
from envlock.models import Anchor, Candidate, Plan, PlanOptions, PlatformPlan, Skew, VirtualPackage, replace
from envlock.core.tables import CudaMinor, CudaTables, ExtrasTables, minor_key

DEFAULT_CHANNELS: tuple[str, ...] = ("conda-forge",)


def skew_candidates(anchor: Anchor, platform: str, tables: CudaTables) -> list[tuple[CudaMinor, Skew]]:
    """The CUDA minors to try for a platform, in order, with their skew label."""
    major, minor = anchor.cuda_major, anchor.cuda_minor
    order: list[tuple[int, Skew]] = [(minor, "exact"), (minor - 1, "minor-1"), (minor + 1, "minor+1")]
    if anchor.torch_source == "conda-forge":
        # conda-forge pytorch is pinned to the build made for the anchor's CUDA; its cuda-version
        # run_export forbids an older nvcc and a newer one buys nothing, so only the exact minor.
        order = order[:1]
    out: list[tuple[CudaMinor, Skew]] = []
    for m, skew in order:
        if m < 0:
            continue
        row = tables.minor(f"{major}.{m}")
        if row is not None and platform in row.platforms:
            out.append((row, skew))
    return out


def gcc_specs(platform: str, row: CudaMinor, tables: CudaTables) -> tuple[str, ...]:
    """Host compiler match specs capped at what this nvcc accepts."""
    if platform == "win-64":
        key = "win-64-cuda11" if row.key < (12, 0) else "win-64"
        return tables.compilers[key]
    n = row.gcc_max
    return tuple(s.replace("{N+1}", str(n + 1)) for s in tables.compilers[platform])


def cudnn_spec(anchor: Anchor, row: CudaMinor, tables: CudaTables) -> tuple[str | None, str | None]:
    """cuDNN spec matching torch's major.minor where conda-forge builds one for this CUDA major.

    Returns (spec, note); the note explains a substitution.
    """
    if anchor.cudnn is None:
        return None, "torch's cuDNN is unknown: no cudnn requested"
    parts = anchor.cudnn.split(".")
    want = f"{parts[0]}.{parts[1]}"
    built = tables.cudnn.get(row.key[0], ())
    if not built:
        return None, f"conda-forge builds no cuDNN for CUDA {row.key[0]}: no cudnn requested"
    if want in built:
        return f"cudnn {want}.*", None
    wk = minor_key(want)
    same_major = [b for b in built if minor_key(b)[0] == wk[0]] or list(built)
    newer = [b for b in same_major if minor_key(b) > wk]
    pick = min(newer, key=minor_key) if newer else max(same_major, key=minor_key)
    note = (
        f"cuDNN {want} (torch's {anchor.cudnn}) is not built by conda-forge for CUDA {row.key[0]}; "
        f"nearest is {pick}"
    )
    return f"cudnn {pick}.*", note


def virtual_packages(platform: str, cuda: str, glibc: str, tables: CudaTables) -> tuple[VirtualPackage, ...]:
    """Virtual packages a platform is solved with; __cuda is the candidate's minor."""
    base = dict(tables.virtual_packages[platform])
    if "__glibc" in base:
        base["__glibc"] = glibc
    base["__cuda"] = cuda
    return tuple(VirtualPackage(name, version) for name, version in sorted(base.items()))


def torch_skew(torch_cuda: str, cuda: str) -> str:
    """How far nvcc `cuda` is from the CUDA torch was built with: exact, minor-1, minor+5, major+1 … (the label the
    summary, --json and a lock's plan show; a plan's own `skew` is its window around the anchor)."""
    (tmaj, tmin), (nmaj, nmin) = minor_key(torch_cuda), minor_key(cuda)
    if (tmaj, tmin) == (nmaj, nmin):
        return "exact"
    return f"major{nmaj - tmaj:+d}" if nmaj != tmaj else f"minor{nmin - tmin:+d}"


def complaints(anchor: Anchor, cuda: str, tables: CudaTables) -> tuple[str, ...]:
    """Which tools would complain about nvcc `cuda` next to torch's own CUDA (`anchor.own_cuda`)."""
    own = anchor.own_cuda
    if cuda == own:
        return ()
    if minor_key(cuda)[0] != minor_key(own)[0]:
        return (f"torch's cpp_extension refuses nvcc {cuda} with torch's CUDA {own} (a major mismatch)",)
    out = [
        f"torch's cpp_extension warns about the minor mismatch (nvcc {cuda} vs torch {own}) "
        "but builds"
    ]
    accepted = tables.deepspeed_ok.get(minor_key(own)[0], ())
    if not (cuda in accepted and own in accepted):
        out.append(
            f"DeepSpeed refuses nvcc {cuda} with torch {own} (CUDAMismatchException) "
            "unless DS_SKIP_CUDA_CHECK=1"
        )
    if minor_key(cuda) < minor_key(own) and anchor.torch_source == "pip":
        out.append(
            "older CUDA libraries than pip torch's: keep the env's lib dir off the front of "
            "LD_LIBRARY_PATH (envlock's activation appends it)"
        )
    return tuple(out)


def _channels(row: CudaMinor, options: PlanOptions) -> tuple[str, ...]:
    channels = tuple(options.channels) or DEFAULT_CHANNELS
    if row.channel and row.channel not in channels:
        # The nvidia label goes first: its nvcc must win over anything named alike on conda-forge.
        channels = (row.channel, *channels)
    return channels


def extra_specs(
    platform: str, row: CudaMinor, names: tuple[str, ...], base: list[str], table: ExtrasTables
) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The (label, spec) pairs `--with` adds for one CUDA minor, notes, and why it cannot be served.

    A partial bundle (`all`) leaves out what has no package here, with a note; anything else that has
    none makes the candidate impossible (the third list says why; never dropped in silence).
    """
    pairs: list[tuple[str, str]] = []
    notes: list[str] = []
    missing: list[str] = []
    for label, name, partial in table.expand(names):
        extra = table.extras[name]
        if extra.platforms is not None and platform not in extra.platforms:
            why = f"--with {label}: {extra.what} is not built for {platform}"
        elif row.toolchain not in extra.packages:
            why = f"--with {label}: conda has no {name} package for CUDA {row.cuda}"
        else:
            pairs += [(label, spec) for spec in extra.packages[row.toolchain] if spec not in base]
            continue
        (notes if partial else missing).append(why + (" (left out)" if partial else ""))
    return pairs, notes, missing


def candidate(
    anchor: Anchor, platform: str, row: CudaMinor, skew: Skew, options: PlanOptions, tables: CudaTables,
    extras_table: ExtrasTables,
) -> Candidate:
    """Everything needed to solve one CUDA minor on one platform."""
    fill = {"{X.Y}": row.cuda, "{V}": row.package_version or row.cuda}
    specs: list[str] = []
    for template in tables.toolchain_specs[row.toolchain]:
        spec = template
        for k, v in fill.items():
            spec = spec.replace(k, v)
        specs.append(spec)
    specs.extend(gcc_specs(platform, row, tables))
    notes: list[str] = []
    if row.toolchain in tables.toolchain_notes:
        notes.append(tables.toolchain_notes[row.toolchain])
    if row.note:
        notes.append(row.note)
    if not row.verified:
        notes.append(f"CUDA {row.cuda} on conda-forge is not confirmed by envlock's sources")
    cudnn, cudnn_note = (None, None)
    pytorch = anchor.torch_source == "conda-forge" and not options.toolchain_only  # in the env, from conda-forge
    if options.with_cudnn and pytorch and anchor.cudnn is None:
        cudnn_note = "cuDNN comes with conda-forge's pytorch (its own dependency): not requested apart"
        notes.append(cudnn_note)
    elif options.with_cudnn:
        cudnn, cudnn_note = cudnn_spec(anchor, row, tables)
        if cudnn:
            specs.append(cudnn)
        if cudnn_note:
            notes.append(cudnn_note)
    if pytorch:  # --toolchain-only: conda-forge's torch is installed elsewhere, the env has none
        specs.append(f"pytorch =={anchor.torch} cuda{row.cuda.replace('.', '')}*")
    extras, extra_notes, _ = extra_specs(platform, row, options.with_extras, specs, extras_table)
    partial = {label for label, _, is_partial in extras_table.expand(options.with_extras) if is_partial}
    specs.extend(spec for _, spec in extras)
    notes.extend(extra_notes)
    if options.python:
        specs.append(f"python {options.python}.*")
    specs.extend(options.extra_specs)
    return Candidate(
        cuda=row.cuda,
        skew=skew,
        specs=tuple(specs),
        channels=_channels(row, options),
        virtual_packages=virtual_packages(platform, row.cuda, options.glibc, tables),
        gcc_max=None if platform == "win-64" else row.gcc_max,
        cudnn=cudnn,
        notes=tuple(notes),
        complaints=complaints(anchor, row.cuda, tables),
        extras=tuple(extras),
        optional_extras=tuple(spec for label, spec in extras if label in partial),
    )


def _neighbours(cuda: str, tables: CudaTables) -> list[str]:
    """The known minors nearest to `cuda` of its major (at most two), else the nearest known ones."""
    major, minor = minor_key(cuda)
    near = [f"{major}.{m}" for m in (minor - 1, minor + 1) if tables.minor(f"{major}.{m}")]
    if near:
        return near
    known = sorted(tables.minors, key=lambda m: (abs(minor_key(m)[0] - major), abs(minor_key(m)[1] - minor)))
    return known[:2]


def _nearest(cuda: str, minors: list[str]) -> str:
    major, minor = minor_key(cuda)
    return min(minors, key=lambda m: (abs(minor_key(m)[0] - major), abs(minor_key(m)[1] - minor)))


def relaxed_cudnn(c: Candidate, anchor: Anchor) -> list[Candidate]:
    """Fallbacks of a candidate whose cuDNN pin fails: torch's cuDNN major, then no cuDNN at all.

    nvcc's minor matters more than cuDNN's (DeepSpeed wants an exact CUDA 13 minor; headers of a newer
    cuDNN minor build fine against torch; most JIT extensions never include cudnn.h), so a channel
    without torch's cuDNN widens and then drops cuDNN before the plan moves to the next CUDA minor.
    """
    if not c.cudnn:
        return []
    out: list[Candidate] = []
    pinned = c.cudnn.split()[1]
    if anchor.cudnn:
        major = anchor.cudnn.split(".")[0]
        wide = f"cudnn {major}.*"
        if wide != c.cudnn:
            out.append(
                replace(
                    c,
                    specs=tuple(wide if s == c.cudnn else s for s in c.specs),
                    cudnn=wide,
                    notes=(*c.notes, f"cuDNN widened to {major}.x: {pinned} did not solve with nvcc {c.cuda}"),
                    relaxed=True,
                )
            )
    out.append(
        replace(
            c,
            specs=tuple(s for s in c.specs if s != c.cudnn),
            cudnn=None,
            notes=(
                *c.notes,
                f"no cuDNN solves with nvcc {c.cuda} on the channel: cuDNN is not locked (extensions that "
                f"include cudnn.h will not build; a cudnn line in the spec is replaced by the plan: lock against "
                f"a channel with cuDNN for CUDA {c.cuda} (--channel/--mirror), or a torch variant for a CUDA "
                "that has it)",
            ),
            relaxed=True,
        )
    )
    return out


def make_plan(anchor: Anchor, options: PlanOptions, tables: CudaTables, extras_table: ExtrasTables) -> Plan:
    """The plan: per platform, the candidates the solver tries in order."""
    if anchor.cuda in tables.never_released:
        raise PlanError(
            f"CUDA {anchor.cuda} was never released by NVIDIA",
            hint=("a released minor next to it: ", *either(again("--cuda", m) for m in _neighbours(anchor.cuda, tables))),
        )
    if tables.minor(anchor.cuda) is None and not any(
        tables.minor(f"{anchor.cuda_major}.{anchor.cuda_minor + d}") for d in (-1, 1)
    ):
        known = ", ".join(tables.minors)
        raise PlanError(
            f"CUDA {anchor.cuda} has no conda toolchain envlock knows (known: {known})",
            hint=("the nearest known: ", *either(again("--cuda", m) for m in _neighbours(anchor.cuda, tables))),
        )
    platforms: list[PlatformPlan] = []
    for platform in options.platforms:
        pairs = skew_candidates(anchor, platform, tables)
        if not pairs:
            fix: tuple[HintPart, ...] = ("lock without it: ", again(drop=(f"--platform={platform}",)))
            builds = [m for m in tables.minors if platform in tables.minors[m].platforms]
            if builds:
                fix += (", or a CUDA built for it: ", again("--cuda", _nearest(anchor.cuda, builds)))
            raise PlanError(
                f"no CUDA {anchor.cuda_major}.x toolchain within ±1 of {anchor.cuda} is built for {platform}",
                hint=fix,
            )
        tries: list[Candidate] = []
        refused: list[str] = []
        for row, skew in pairs:
            missing = extra_specs(platform, row, options.with_extras, [], extras_table)[2]
            if missing:  # no package of an asked-for extra exists for this minor: not a candidate
                refused += [m for m in missing if m not in refused]
                continue
            strict = candidate(anchor, platform, row, skew, options, tables, extras_table)
            tries.append(strict)
            tries.extend(relaxed_cudnn(strict, anchor))
        if refused and tries:  # a minor left out for an extra is said on the ones that stay
            tries = [replace(c, notes=(*c.notes, *(f"not a candidate: {r}" for r in refused))) for c in tries]
        if not tries:
            raise PlanError(
                "; ".join(refused),
                hint=("without those groups: ", again(drop=("--with",)), ", or without the platform: ",
                      again(drop=(f"--platform={platform}",)), " (or drop them from the spec's `with:`/platforms)"),
            )
        platforms.append(PlatformPlan(platform, tuple(tries)))
    return Plan(anchor=anchor, options=options, platforms=tuple(platforms), rules_version=tables.rules_version)
