"""Solving with rattler: Gateway, one solve per platform, errors mapped (envlock/seams/conda/errors.py).

Platforms are solved concurrently; within a platform the plan's candidates are tried in order
(exact minor first) and the first that solves wins. When all fail, one SolveError lists each attempt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rattler
import rattler.exceptions
from rattler import BuildString, Channel, GenericVirtualPackage, PackageName, SourceConfig, Version

from envlock.seams.conda.channels import canonical_channel_url, check_channel_security, check_channel_url, fetch_url
from envlock.seams.conda.errors import mapped, translate
from envlock.errors import ChannelError, SolveError, SpecError
from envlock.formats import dependency_order
from envlock.models import Candidate, LockedPackage, Plan, PlatformPlan, PlatformResult, replace
from envlock.names import match_spec_name, strip_credentials
from envlock.seams.net import HttpSettings, settings

if TYPE_CHECKING:
    import datetime

    from envlock.core.solve_explain import Attempt


@dataclass(frozen=True)
class SolveOptions:
    """How to reach channels: cache, mirrors, offline."""

    cache_dir: Path
    mirrors: Mapping[str, str] = field(default_factory=dict)  # channel name/URL -> URL fetched instead
    offline: bool = False
    allow_insecure: bool = False
    timeout_s: float = 300.0
    # ENVLOCK_HTTP_TIMEOUT / ENVLOCK_HTTP_RETRIES (envlock.seams.net): without a client timeout rattler waits on a
    # stalled server for ever outside the solve's own timeout (e.g. the conda-forge torch lookup).
    http: HttpSettings = field(default_factory=settings)
    # The spec's resolution cutoff (ISO UTC): rattler compares each record's indexed timestamp, else
    # its build timestamp; a record with neither is kept (conda-forge has a few).
    exclude_newer: str | None = None


def _source_config(url: str, offline: bool) -> SourceConfig:
    cache_action = "force-cache-only" if offline else "cache-or-fetch"
    if url.startswith("file://"):
        # A local directory has no .zst/.bz2/shards unless indexed with them; skip the probes.
        return SourceConfig(zstd_enabled=False, bz2_enabled=False, sharded_enabled=False, cache_action=cache_action)
    return SourceConfig(cache_action=cache_action)


def _virtual(candidate: Candidate) -> list[GenericVirtualPackage]:
    return [
        GenericVirtualPackage(PackageName(v.name), Version(v.version), BuildString(v.build))
        for v in candidate.virtual_packages
    ]


class RattlerSolver:
    """Solves a Plan with py-rattler."""

    def __init__(self, options: SolveOptions) -> None:
        self.options = options
        per_channel: dict[str, SourceConfig] = {}
        self._fetch: dict[str, str] = {}
        self._gateway: rattler.Gateway | None = None
        self._per_channel = per_channel
        self._optional: tuple[str, ...] = ()
        self._extras: tuple[str, ...] = ()  # the spec's own dependencies (CUDA-independent)
        self._torch: str | None = None
        self._present_cache: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}

    def _channel(self, name: str) -> tuple[Channel, str, str]:
        fetch = fetch_url(name, self.options.mirrors)
        check_channel_url(fetch)
        check_channel_security(fetch, allow_insecure=self.options.allow_insecure)
        channel = Channel(fetch)
        # rattler normalises the URL (file:///a/../b -> file:///b): records carry its form, so the
        # mirror-to-canonical rewrite must match on that, not on what the user typed.
        base = str(channel.base_url)
        self._per_channel.setdefault(fetch, _source_config(fetch, self.options.offline))
        self._per_channel.setdefault(base, _source_config(base, self.options.offline))
        return channel, base, canonical_channel_url(name)

    def _gateway_key(self) -> tuple[object, ...]:
        """What a Gateway is made of (the per-channel configs follow from the URLs and `offline`)."""
        o = self.options
        return (str(o.cache_dir), o.offline, o.http, tuple(sorted(self._per_channel)))

    def _gateway_for(self) -> rattler.Gateway:
        from envlock.seams import conda
        from envlock.seams.conda.client import http_client

        if self._gateway is None:
            shared = conda.shared_gateways  # one per command and settings (envlock.seams.conda.one_command)
            self._gateway = shared.get(self._gateway_key()) if shared is not None else None
        if self._gateway is None:
            self._gateway = rattler.Gateway(
                cache_dir=self.options.cache_dir,
                default_config=SourceConfig(cache_action="force-cache-only" if self.options.offline else "cache-or-fetch"),
                per_channel_config=dict(self._per_channel),
                client=http_client(self.options.http),
            )
            if conda.shared_gateways is not None:
                conda.shared_gateways[self._gateway_key()] = self._gateway
        return self._gateway

    async def _locked_records(
        self, chans: list[rattler.Channel], platform: str, keep: Sequence[LockedPackage]
    ) -> list[rattler.RepoDataRecord]:
        """The channel records of packages to hold at their locked version (for `envlock update`)."""
        if not keep:
            return []
        specs = [f"{p.name} =={p.version} {p.build}" for p in keep]
        res = await self._gateway_for().query(chans, [platform, "noarch"], specs, recursive=False)
        wanted = {(p.name, p.version, p.build) for p in keep}
        return [r for recs in res for r in recs if (r.name.normalized, str(r.version), str(r.build)) in wanted]

    async def _present(self, chans: list[rattler.Channel], platform: str, names: Sequence[str]) -> list[str]:
        """The names among `names` the channels have any record of for the platform (optional specs); asked
        once per platform and channels, not once per candidate."""
        if not names:
            return []
        key = (platform, tuple(str(c.base_url) for c in chans), tuple(names))
        if key not in self._present_cache:
            res = await self._gateway_for().query(chans, [platform, "noarch"], list(names), recursive=False)
            cutoff = _cutoff(self.options.exclude_newer)
            found = {r.name.normalized for recs in res for r in recs
                     if cutoff is None or r.timestamp is None or r.timestamp <= cutoff}
            self._present_cache[key] = [n for n in names if n in found]
        return self._present_cache[key]

    async def _solve_candidate(
        self, platform: str, cand: Candidate, keep: Sequence[LockedPackage] = ()
    ) -> list[LockedPackage]:
        chans = [self._channel(c) for c in cand.channels]
        gateway = self._gateway_for()
        locked = await self._locked_records([c for c, _, _ in chans], platform, keep)
        optional = await self._present([c for c, _, _ in chans], platform, self._optional)
        records = await asyncio.wait_for(
            rattler.solve(
                [c for c, _, _ in chans],
                [*cand.specs, *optional],
                gateway=gateway,
                platforms=[platform, "noarch"],
                virtual_packages=_virtual(cand),
                locked_packages=locked or None,
                exclude_newer=_cutoff(self.options.exclude_newer),
                timestamp_policy="allow-missing",
            ),
            timeout=self.options.timeout_s,
        )
        rewrite = [(fetch, canon) for _, fetch, canon in chans]
        return dependency_order([_locked(r, platform, rewrite) for r in records])

    async def _solve_platform(self, pp: PlatformPlan, keep: Sequence[LockedPackage] = ()) -> PlatformResult:
        from envlock import progress

        # Why a candidate failed (envlock.seams.conda.why, envlock.core.solve_explain) is loaded when one does.
        attempts: list[Attempt] = []
        lacking: set[str] = set()  # CUDA minors for which the channel lacks an asked-for extra
        for cand in pp.candidates:
            if cand.cuda in lacking:
                continue  # cuDNN relaxations cannot bring the extra: said once for the minor
            try:
                found = await self._try_candidate(pp, cand, keep, attempts, lacking)
            except (rattler.exceptions.FetchRepoDataError, rattler.exceptions.GatewayError) as exc:
                if is_truncated_body(str(exc)):
                    raise  # the whole fetch starts again (_run_retrying_truncation)
                raise self._fetch_failure(exc, pp.platform, cand, attempts) from None
            if found is not None:
                progress.done(pp.platform)
                return found
        progress.done(pp.platform)
        from envlock.core import solve_explain

        raise solve_explain.platform_failure(pp.platform, attempts, lacking=bool(lacking))

    async def _try_candidate(self, pp: PlatformPlan, cand: Candidate, keep: Sequence[LockedPackage],
                             attempts: list, lacking: set[str]) -> PlatformResult | None:  # type: ignore[type-arg]  # solve_report.Attempt, imported lazily (the report is loaded only on a failure)
        """Solve one candidate: its PlatformResult, or None after recording why it failed (attempts/lacking)."""
        from envlock import progress

        if not attempts and cand is pp.candidates[0] and progress.active():
            # The fetch as a phase of its own, for the person watching: the solve would fetch the same
            # records itself, and the query makes a Python object of every one of them (~5 ms a platform).
            from envlock.seams.conda import why as solve_why

            progress.report(pp.platform, f"fetching repodata ({solve_why.channel_label(cand.channels)})")
            chans = [self._channel(c)[0] for c in cand.channels]
            await self._gateway_for().query(chans, [pp.platform, "noarch"], list(cand.specs), recursive=True)
        variant = f" with {cand.cudnn}" if cand.cudnn else (" without cuDNN" if cand.relaxed else "")
        after = f" ({len(attempts)} did not)" if attempts else ""
        progress.report(pp.platform, f"solving CUDA {cand.cuda}{variant}{after}")
        try:
            packages = await self._solve_candidate(pp.platform, cand, keep)
        except rattler.exceptions.SolverError as exc:
            # Why a candidate failed (envlock.seams.conda.why, envlock.core.solve_explain) is loaded when one does.
            from envlock.core import solve_explain
            from envlock.seams.conda import why as solve_why

            raw = str(exc)
            if keep:  # `update`: the reason a lock records must not depend on what was held (it is re-read
                try:  # by `lock --all`), so it is the reason of the same candidate solved without holding
                    packages = await self._solve_candidate(pp.platform, cand)
                except rattler.exceptions.SolverError as free:
                    raw = str(free)
                else:
                    return PlatformResult(pp.platform, cand, tuple(packages), tuple(a.recorded for a in attempts))
            chans = [self._channel(c)[0] for c in cand.channels]
            attempt = await solve_why.attempt_of(self._gateway_for(), chans, pp.platform, cand, raw)
            optional_only = False  # the extras it lacks are all a partial bundle's: no reason to leave the minor
            if attempt.lacking_extra and cand.optional_extras:
                found, without = await self._without_lacking(pp.platform, cand, keep, attempts)
                if isinstance(found, PlatformResult):
                    return found
                optional_only = without is not None
                attempt = without or attempt  # what failed once those groups were left out (a cuDNN, say)
            attempts.append(attempt)
            if attempt.lacking_extra and not optional_only:
                lacking.add(cand.cuda)
            elif len(attempts) == 1:  # can any CUDA minor change this at all?
                why = await solve_why.blocker(self._gateway_for(), chans, pp.platform, cand, self._extras,
                                              virtual=_virtual(cand), exclude_newer=_cutoff(self.options.exclude_newer),
                                              torch=self._torch)
                if why is not None:
                    raise solve_explain.blocked(pp.platform, attempt, why) from None
            return None
        return PlatformResult(pp.platform, cand, tuple(packages), tuple(a.recorded for a in attempts))

    async def _without_lacking(self, platform: str, cand: Candidate, keep: Sequence[LockedPackage],
                               attempts: list) -> tuple[PlatformResult | None, Any]:  # type: ignore[type-arg]  # solve_report.Attempt, imported lazily
        """`--with all` (a partial bundle): the candidate without the groups its channel has no build of for the CUDA
        minor, each left out with a note, when those are all it lacks (docs/usage.md). (its result, or None; when it
        still does not solve, the Attempt that says why: the minor's other variants, a relaxed cuDNN, are tried
        next; None when it lacks more than such groups)."""
        from envlock.seams.conda.extras import missing_extras

        chans = [self._channel(c)[0] for c in cand.channels]
        blamed = await missing_extras(self._gateway_for(), chans, platform, cand)
        gone = {spec for cause in blamed for label, spec in cand.extras
                if label == cause.asked and match_spec_name(spec) == cause.package}
        if not blamed or not gone <= set(cand.optional_extras):
            return None, None
        reduced = replace(cand, specs=tuple(s for s in cand.specs if s not in gone),
                          extras=tuple((label, s) for label, s in cand.extras if s not in gone),
                          optional_extras=tuple(s for s in cand.optional_extras if s not in gone),
                          notes=(*cand.notes, *(f"{cause.said(platform, cand.cuda)} (left out)" for cause in blamed)))
        try:
            packages = await self._solve_candidate(platform, reduced, keep)
        except rattler.exceptions.SolverError as exc:
            from envlock.seams.conda import why as solve_why

            return None, await solve_why.attempt_of(self._gateway_for(), chans, platform, reduced, str(exc))
        return PlatformResult(platform, reduced, tuple(packages), tuple(a.recorded for a in attempts)), None

    def _names_resolve(self, channels: Sequence[str]) -> None:
        """Each channel's host name resolves, asked once: rattler retries a failed lookup (seconds of waiting for the
        same answer); one that does not is a ChannelError naming the channel, its host and the setting around it."""
        from envlock.seams import net
        from envlock.seams.mirror_urls import display

        for canon, base in dict.fromkeys((self._channel(c)[2], self._channel(c)[1]) for c in channels):
            host = net.unresolvable(base)
            if host is not None:
                from envlock.seams.conda.errors import unresolved

                raise unresolved(display(canon), host, mirrored=base.rstrip("/") != canon.rstrip("/"))

    def _fetch_failure(self, exc: BaseException, platform: str, cand: Candidate, attempts: list) -> ChannelError:  # type: ignore[type-arg]  # solve_report.Attempt, imported lazily (the report is loaded only on a failure)
        """A channel of `cand` could not be fetched: named, with what was tried before (conda/errors.py)."""
        from envlock.seams.conda.errors import fetch_failure
        from envlock.seams.mirror_urls import display

        channels = [(display(canon), base) for canon, base in
                    ((self._channel(c)[2], self._channel(c)[1]) for c in cand.channels)]
        return fetch_failure(exc, channels=channels, platform=platform, cuda=cand.cuda,
                             tried=[(a.cuda, a.reason) for a in attempts], offline=self.options.offline)

    async def _solve_all(self, plan: Plan, locked: Mapping[str, Sequence[LockedPackage]]) -> list[PlatformResult]:
        # Build every channel first so the gateway sees each one's source config.
        for pp in plan.platforms:
            for cand in pp.candidates:
                for c in cand.channels:
                    self._channel(c)
        if not self.options.offline:
            self._names_resolve([c for pp in plan.platforms for cand in pp.candidates for c in cand.channels])
        self._extras, self._torch = tuple(plan.options.extra_specs), plan.anchor.torch
        outcomes = await asyncio.gather(
            *(self._solve_platform(pp, locked.get(pp.platform, ())) for pp in plan.platforms),
            return_exceptions=True,
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            failed = [(pp.platform, o) for pp, o in zip(plan.platforms, outcomes) if isinstance(o, SolveError)]
            if len(failed) == len(errors) and len(plan.platforms) > 1:
                from envlock.core.solve_explain import combined

                solved = [pp.platform for pp, o in zip(plan.platforms, outcomes) if isinstance(o, PlatformResult)]
                raise combined(failed, solved, [pp.platform for pp in plan.platforms])
            raise errors[0]
        return [o for o in outcomes if isinstance(o, PlatformResult)]

    def solve(
        self,
        plan: Plan,
        locked: Mapping[str, Sequence[LockedPackage]] | None = None,
        optional: Sequence[str] = (),
    ) -> list[PlatformResult]:
        """Solve every platform of the plan; raise SolveError/ChannelError with hints.

        `locked` (platform → packages) are preferred at their locked versions (py-rattler
        locked_packages), which is how `envlock update` moves only the packages it names.
        `optional` names are added to a platform's specs where its channels have them (ninja).
        """
        self._optional = tuple(optional)
        try:
            return self._run_retrying_truncation(plan, locked or {})
        except (SolveError, SpecError):
            raise
        except asyncio.TimeoutError:
            raise SolveError(
                f"the solve took longer than {self.options.timeout_s:.0f} s",
                hint="retry; if it persists, narrow the plan with --platform",
            ) from None
        except Exception as exc:
            err = translate(exc, offline=self.options.offline)  # the one map of rattler's errors
            if err is None:
                raise
            raise err from None

    def _run_retrying_truncation(
        self, plan: Plan, locked: Mapping[str, Sequence[LockedPackage]]
    ) -> list[PlatformResult]:
        """Run the solve; start again (fresh gateway, bounded, with backoff) after a body cut off mid-way.

        rattler's RetryMiddleware retries 5xx, timeouts and resets, but only up to the response
        headers: a connection that drops mid-body surfaces as one error. The on-disk cache keeps
        what was fetched whole, so a new attempt re-fetches only the cut-off file.
        """
        restarts = max(0, min(TRUNCATION_RETRIES, int(self.options.http.retries)))  # ENVLOCK_HTTP_RETRIES=0: none
        for attempt in range(restarts + 1):
            try:
                return asyncio.run(self._solve_all(plan, locked))
            except (rattler.exceptions.FetchRepoDataError, rattler.exceptions.GatewayError) as exc:
                if attempt == restarts or not is_truncated_body(str(exc)):
                    raise
            self._gateway = None  # the old one remembers the failed fetch: nobody gets it again
            from envlock.seams import conda

            if conda.shared_gateways is not None:
                conda.shared_gateways.pop(self._gateway_key(), None)
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")


#: Whole-fetch restarts after a truncated body (on top of rattler's per-request retries; at most ENVLOCK_HTTP_RETRIES).
TRUNCATION_RETRIES = 2
_TRUNCATION_MARKERS = ("error decoding response body", "error reading a body", "end of file before message length")


def is_truncated_body(text: str) -> bool:
    """Whether a rattler fetch error is a response body cut off mid-way (worth a new attempt).

    A whole repodata.json download ("failed to download …") was already retried 4 times by
    rattler itself (measured); shards and the shard index were not.
    """
    return any(m in text for m in _TRUNCATION_MARKERS) and "failed to download" not in text


def _locked(record: rattler.RepoDataRecord, platform: str, rewrite: Sequence[tuple[str, str]]) -> LockedPackage:
    url = str(record.url)
    channel = str(record.channel or "")
    for fetch, canon in rewrite:
        if url.startswith(fetch):
            url = canon + url[len(fetch) :]
            channel = canon.rstrip("/")
            break
    md5 = record.md5.hex() if record.md5 else ""
    if not md5:
        raise ChannelError(
            f"{record.file_name} has no md5 in the channel's repodata",
            hint="conda lockfiles need md5 for every package; re-index the channel",
        )
    return LockedPackage(
        name=record.name.normalized,
        version=str(record.version),
        build=str(record.build),
        platform=platform,
        url=url,
        md5=md5,
        sha256=record.sha256.hex() if record.sha256 else None,
        depends=tuple(record.depends),
        constrains=tuple(record.constrains),
        subdir=str(record.subdir),
        size=record.size,
        channel=strip_credentials(channel),
    )


def _cutoff(text: str | None) -> datetime.datetime | None:
    """The spec's ISO cutoff as the datetime rattler takes (None: no cutoff)."""
    if not text:
        return None
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def conda_forge_pytorch_lookup(options: SolveOptions,
                               channel: str = "conda-forge") -> Callable[[str], list[tuple[str, str]]]:
    """A function torch-version → [(version, build)] of a channel's `pytorch` records (for the anchor)."""

    def lookup(version: str) -> list[tuple[str, str]]:
        async def query() -> list[tuple[str, str]]:
            res = await gateway.query([chan], ["linux-64", "linux-aarch64", "win-64"], [f"pytorch =={version}"], recursive=False)
            return sorted({(str(r.version), str(r.build)) for recs in res for r in recs})

        with mapped(offline=options.offline):  # the one map of rattler's errors
            solver = RattlerSolver(options)
            chan, _, _ = solver._channel(channel)
            gateway = solver._gateway_for()
            return asyncio.run(query())

    return lookup
