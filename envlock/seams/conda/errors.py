"""ONE map of rattler's exceptions to envlock's errors (STYLE.md §5: translate at the seam).

Every call into rattler that can fail runs under `mapped(...)`; what leaves the seam is an EnvlockError
with a hint, never a rattler exception. `KINDS` names a family for each of rattler's exception classes
(tests/test_conda_errors.py checks that none is missing), `translate` builds the error for a family:

    channel  a channel cannot be fetched or read (ChannelError, exit 4; `--offline`: the cache lacks it)
    spec     the request itself is invalid: a match spec, a channel, a platform (SpecError, exit 1)
    package  an archive or a cache entry cannot be used (EnvCreateError, exit 1)
    install  linking into a prefix failed (EnvCreateError, exit 1)
    solve    no solution (SolveError, exit 3): RattlerSolver reads these itself, per candidate
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from envlock.errors import ChannelError, EnvCreateError, EnvlockError, SolveError, SpecError
from envlock.seams.net import scrub

KINDS: dict[str, str] = {
    "FetchRepoDataError": "channel", "GatewayError": "channel", "IoError": "channel", "CacheDirError": "channel",
    "AuthenticationStorageError": "channel", "InvalidUrlError": "spec", "InvalidChannelError": "spec",
    "InvalidMatchSpecError": "spec", "CanonicalMatchSpecError": "spec", "InvalidPackageNameError": "spec",
    "InvalidVersionError": "spec", "InvalidVersionSpecError": "spec", "PackageNameMatcherParseError": "spec",
    "ParseArchError": "spec", "ParseSubdirError": "spec", "ConvertSubdirError": "spec", "ConfigError": "spec",
    "InvalidHeaderNameError": "spec", "InvalidHeaderValueError": "spec", "VersionBumpError": "spec",
    "VersionExtendError": "spec", "VirtualPackageOverrideError": "spec", "DetectVirtualPackageError": "spec",
    "ParseCondaLockError": "spec", "ParseExplicitEnvironmentSpecError": "spec", "RequirementError": "spec",
    "ConversionError": "package", "ExtractError": "package", "ValidatePackageRecordsError": "package",
    "AttestationError": "package", "InstallerError": "install", "LinkError": "install",
    "TransactionError": "install", "EnvironmentCreationError": "install", "ActivationError": "install",
    "ActivationScriptFormatError": "install", "ShellError": "install", "SolverError": "solve",
}
_NOT_ERRORS = frozenset({"GatewayWarning"})  # a warning category, never raised
PERMISSION_HINT = ("a file it names is not readable by you: in a cache shared by several users, `chmod -R g+rwX` the "
                   "cache dir and use umask 002 (docs/scale.md: several users on one cache), or set ENVLOCK_CACHE_DIR to a "
                   "cache of your own")


#: What rattler's io errors say when the disk, not the package, is at fault (os error numbers on Linux and macOS).
_DISK = (("No space left on device", "os error 28", "no space is left"), ("Disk quota exceeded", "os error 122",
         "the disk quota is used up"), ("Read-only file system", "os error 30", "the file system is read-only"))


def disk_problem(text: str) -> str:
    """'no space is left' (etc.) when a rattler message is about the disk it wrote to; '' otherwise."""
    return next((what for a, b, what in _DISK if a in text or b in text), "")


def first_lines(text: str, n: int = 6) -> str:
    """The first `n` non-empty lines of a (multi-line) rattler message, joined by ' / '."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " / ".join(lines[:n])


def kind_of(exc: BaseException) -> str | None:
    """The family of a rattler exception (None: not one of rattler's)."""
    for cls in type(exc).__mro__:
        if cls.__name__ in KINDS and (cls.__module__ or "").startswith(("exceptions", "rattler")):
            return KINDS[cls.__name__]
    return None


def translate(exc: BaseException, *, offline: bool = False, what: str = "",
              default: str | None = None) -> EnvlockError | None:
    """The EnvlockError for a rattler exception; `what` names the object at hand.

    Anything else gives None, or the `default` family's error (some rattler calls raise plain exceptions).
    """
    kind = kind_of(exc) or default
    if kind is None:
        return None
    text = scrub(first_lines(str(exc)) or type(exc).__name__)
    if kind == "channel":
        if offline:
            return ChannelError(f"--offline and the repodata cache lacks what the solve needs: {text}",
                                hint="run once without --offline to fill the cache")
        if "Permission denied" in text:  # e.g. a shared cache that another user's older envlock filled 0600
            return ChannelError(f"cannot fetch repodata: {text}", hint=PERMISSION_HINT)
        return ChannelError(f"cannot fetch repodata: {text}",
                            hint="check the channel URL and your network, or use --mirror NAME=URL / --offline")
    if kind == "spec":
        if type(exc).__name__ == "InvalidChannelError":
            return SpecError(f"invalid channel: {text}", hint="pass a channel name or URL")
        if "MatchSpec" in type(exc).__name__:
            return SpecError(f"invalid match spec: {text}", hint="fix the dependency in the spec")
        return SpecError(f"invalid input for rattler{' (' + what + ')' if what else ''}: {text}",
                         hint="check the spec's dependencies, channels and platforms")
    disk = disk_problem(str(exc))
    if kind == "package":
        if disk:  # the archive is fine: the disk under the package cache is not
            return EnvCreateError(f"cannot unpack {what or 'a package'}: {text}",
                                  hint=f"{disk} under envlock's package cache (ENVLOCK_CACHE_DIR): free space there or "
                                       "point ENVLOCK_CACHE_DIR elsewhere, then run the command again")
        return EnvCreateError(f"cannot unpack {what or 'a package'}: {text}",
                              hint="the archive matches the lock but is not a valid conda package; re-lock")
    if kind == "install":
        text = scrub(first_lines(str(exc), 1) or type(exc).__name__)
        return EnvCreateError(f"linking {what or 'the environment'} failed: {text}",
                              hint=f"{disk} where the environment is: free space there, then run `envlock create` again"
                                   if disk else "run `envlock create` again")
    return SolveError(f"the solve failed: {text}", hint="retry; if it persists, narrow the plan with --platform")


def root_cause(text: str) -> str:
    """The innermost `Caused by:` of a rattler error chain (what a user can act on: dns error, refused, …)."""
    causes = [c.strip(" /") for c in text.replace("\n", " / ").split("Caused by:")]
    causes = [c for c in causes if c]
    if not causes:
        return text
    if len(causes) > 1 and len(causes[-1].split()) < 6:  # "Unknown frame descriptor": what it was about comes first
        return f"{causes[-2]}: {causes[-1]}"
    return causes[-1]


def fetch_failure(exc: BaseException, *, channels: Sequence[tuple[str, str]], platform: str, cuda: str,
                  tried: Sequence[tuple[str, str]], offline: bool) -> ChannelError:
    """A channel that could not be fetched while solving a candidate, in the words a user acts on.

    `channels`: (the name a user gives it, the URL fetched) of the candidate's channels; `tried`: (CUDA, why)
    of the candidates that did not solve before it. The message names the channel, the CUDA minor that needed
    it and what came before; the hint the mirror key that routes around it; `detail` the whole chain.
    """
    text = scrub(str(exc))
    named = [name for name, url in channels if url.rstrip("/") in text] or [name for name, _ in channels]
    channel = named[-1]
    key = channel if "://" in channel else channel.split("/", 1)[0]  # nvidia covers nvidia/label/…
    before = ""
    if tried:
        minors = list(dict.fromkeys(c for c, _ in tried))
        before = f"; CUDA {', '.join(minors)} did not solve before it (--verbose says why)"
    where = f"{channel} for {platform} (needed by the CUDA {cuda} candidate{before})"
    detail = (*dict.fromkeys(f"CUDA {c}: {why}" for c, why in tried), f"fetching {channel}: {text}")
    if offline:
        return ChannelError(f"--offline and the repodata cache lacks {where}",
                            hint="run once without --offline to fill the cache", detail=detail)
    if "Permission denied" in text:  # e.g. a shared cache that another user's older envlock filled 0600
        return ChannelError(f"cannot fetch {where}: {root_cause(text)}", hint=PERMISSION_HINT, detail=detail)
    label = " (it covers its labels)" if key != channel else ""
    return ChannelError(f"cannot fetch {where}: {root_cause(text)}",
                        hint=f"fetch it from a mirror: --mirror {key}=URL{label}, or ENVLOCK_MIRRORS / "
                             "envlock.toml (`envlock config`); or check the network",
                        detail=detail)


def unresolved(channel: str, host: str, *, mirrored: bool) -> ChannelError:
    """A channel whose host name does not resolve here: the host and the setting that names it, in words."""
    from envlock.seams.net import HOST_NOT_FOUND, said

    key = channel if "://" in channel else channel.split("/", 1)[0]
    if mirrored:
        where = f"the mirror for {key} (--mirror, ENVLOCK_MIRRORS or envlock.toml: `envlock config` says which)"
        return ChannelError(f"cannot fetch {channel} from {where}: {said(HOST_NOT_FOUND, host)}",
                            hint="check the network and that mirror's URL (`envlock config` shows it)")
    return ChannelError(f"cannot fetch {channel}: {said(HOST_NOT_FOUND, host)}",
                        hint=f"check the network or proxy (HTTPS_PROXY), or name a mirror for {key} you can reach "
                             f"(--mirror {key}=<its URL>, ENVLOCK_MIRRORS or envlock.toml: `envlock config`)")


@contextlib.contextmanager
def mapped(*, offline: bool = False, what: str = "", default: str | None = None) -> Iterator[None]:
    """Run a block of rattler calls; a rattler exception leaves it as the EnvlockError `translate` gives."""
    try:
        yield
    except EnvlockError:
        raise
    except Exception as exc:
        err = translate(exc, offline=offline, what=what, default=default)
        if err is None:
            raise
        raise err from None
