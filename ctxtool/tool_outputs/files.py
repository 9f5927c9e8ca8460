"""truncate, trim and restore as file operations (picklable: their options are fields) and
the library's file functions, all run by :mod:`ctxtool.run.runner`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from ..agent.tools import add_hint
from ..cache import RefCache
from ..errors import CtxtoolError, Failure
from ..model import Transcript
from ..run.operation import Operation, RunContext, Task
from ..run.runner import FileKeywords, run_file
from ..tokens.context import ContextSettings

if TYPE_CHECKING:
    pass
from ..tokens.count import TiktokenTokenizer, Tokenizer, get_tokenizer
from .algorithms import Limits
from .common import COUNTED, DEFAULT_INCLUDE, Ctx, OpsReport, as_cache, parse_include
from .restore import restore
from .truncate import trim, truncate


class _OpsTask(Task[OpsReport]):
    gathers = True  # refs, into packs (stored at flush)

    def __init__(
        self, op: _CacheOp, rctx: RunContext, fn: Callable[[Ctx, Transcript], None], budget: int | None = None
    ) -> None:
        # refs are gathered into packs, stored at flush() before the output naming them is seen
        self.cache = RefCache(op.cache, pack=True)
        tok = get_tokenizer(op.tokenizer)
        if rctx.worker and isinstance(tok, TiktokenTokenizer):
            tok.threads = 1  # one process per core already
        self.report = OpsReport(op.name, rctx.path, budget=budget, items=[] if op.records else None)
        self.ctx = Ctx(op.name, self.cache, tok, rctx.events, self.report, rctx.policy)
        self.fn = fn

    def apply(self, t: Transcript) -> None:
        rep = self.report
        rep.format = rep.format or t.format
        if rep.items is None:
            self.fn(self.ctx, t)
            return
        before = [getattr(rep, k) for k in COUNTED[1:]]
        self.fn(self.ctx, t)
        item: dict[str, Any] = {"transcript": t.label, "path": t.path, "index": t.index, "id": t.id}
        item.update((k, getattr(rep, k) - b) for k, b in zip(COUNTED[1:], before, strict=True))
        rep.items.append(item)

    def flush(self) -> None:
        self.cache.flush()

    def finish(self) -> OpsReport:
        self.flush()
        return self.report

    def close(self) -> None:
        self.cache.close()


@dataclass(frozen=True)
class _CacheOp(Operation[OpsReport]):
    cache: str | None = None  # the ref cache's root
    tokenizer: str = "heuristic"
    #: keep each transcript's own counts in ``report.items`` (for --json)
    records: bool = field(default=False, kw_only=True)
    #: --agent-hint: a system note naming the cache's tools at the end of each transcript
    hint: bool = field(default=False, kw_only=True)

    def prepare(self) -> None:
        RefCache(self.cache).ensure()  # once, before the workers race to create it


@dataclass(frozen=True)
class TruncateOp(_CacheOp):
    """Cut every output of the included kinds that is over ``limits``."""

    name: ClassVar[str] = "truncate"
    limits: Limits = field(default_factory=Limits)
    include: tuple[str, ...] = DEFAULT_INCLUDE

    def start(self, ctx: RunContext) -> Task[OpsReport]:
        kinds = set(self.include)
        return _OpsTask(self, ctx, _hinted(self.hint, lambda c, t: truncate(c, t, self.limits, kinds)))


@dataclass(frozen=True)
class TrimOp(_CacheOp):
    """The tool-output cache spec; ``budget`` None: from each transcript's window."""

    name: ClassVar[str] = "trim"
    budget: int | None = None
    context: ContextSettings | None = None  # where a missing budget's window comes from

    def start(self, ctx: RunContext) -> Task[OpsReport]:
        return _OpsTask(self, ctx, _hinted(self.hint, lambda c, t: trim(c, t, self.budget, self.context)), self.budget)


@dataclass(frozen=True)
class RestoreOp(_CacheOp):
    """Put back every message truncate, spill or trim changed."""

    name: ClassVar[str] = "restore"

    def start(self, ctx: RunContext) -> Task[OpsReport]:
        return _OpsTask(self, ctx, restore)


def _hinted(hint: bool, fn: Callable[[Ctx, Transcript], None]) -> Callable[[Ctx, Transcript], None]:
    if not hint:
        return fn

    def run(c: Ctx, t: Transcript) -> None:
        fn(c, t)
        add_hint(t)

    return run


def cache_root(cache: RefCache | str | Path | None) -> str:
    """The cache's root, resolved here (workers must agree on it)."""
    return str(as_cache(cache).root)


def tokenizer_name(tokenizer: str | Tokenizer | None) -> str:
    return tokenizer if isinstance(tokenizer, str) else tokenizer.name if tokenizer is not None else "heuristic"


def run_ops(op: _CacheOp, path: str, output: str | None, **run: Unpack[FileKeywords]) -> OpsReport:
    """Run a truncate/trim/restore operation over a file; the report names the files
    (``messages_column``: a Parquet dataset's conversation column, see :mod:`ctxtool.io.parquet`)."""
    ran = run_file(op, path, output, **run)
    rep = ran.report
    rep.path, rep.output = path, output
    rep.format = rep.format or ran.format
    rep.skipped = ran.skipped
    rep.file_bytes_before, rep.file_bytes_after = ran.file_bytes_before, ran.file_bytes_after
    return rep


def truncate_file(
    path: str,
    output: str | None,
    *,
    limits: Limits | None = None,
    include: Iterable[str] | str | None = None,
    cache: RefCache | str | Path | None = None,
    tokenizer: str | Tokenizer | None = None,
    records: bool = False,
    hint: bool = False,
    **run: Unpack[FileKeywords],
) -> OpsReport:
    """``ctxtool truncate``: write ``path`` to ``output`` (``-`` stdout, None: discard) with
    every over-limit output cut and its full text in the cache. ``records``: keep each
    transcript's counts in ``report.items``; ``hint``: end each transcript with a system note
    naming the tools that read the cache (:func:`ctxtool.agent.tools.add_hint`); ``run``: the
    runner's keywords (:class:`ctxtool.run.runner.FileKeywords`: ``fmt``, ``to``, ``events``,
    ``on_error``, ``jobs``, ``engine``, ``messages_column``)."""
    op = TruncateOp(cache_root(cache), tokenizer_name(tokenizer), limits or Limits(), parse_include(include),
                    records=records, hint=hint)
    return run_ops(op, path, output, **run)


def configured_budget(budget: int | None, config: Any) -> int | None:
    """The budget ``ctxtool trim`` runs by: ``budget``, else ``tool_output.context_budget_tokens``
    of ``config`` (a :class:`ctxtool.config.Config`); 0 or none: each transcript's window
    (:func:`trim_file`'s None)."""
    return budget if budget is not None else (config["tool_output.context_budget_tokens"] or None)


def trim_file(
    path: str,
    output: str | None,
    *,
    budget: int | None = None,
    cache: RefCache | str | Path | None = None,
    tokenizer: str | Tokenizer | None = None,
    context: ContextSettings | None = None,
    records: bool = False,
    hint: bool = False,
    **run: Unpack[FileKeywords],
) -> OpsReport:
    """``ctxtool trim``: per transcript, trim the oldest tool outputs down to ``budget`` tokens
    (None: the tool-output cache spec's clamp(window x 0.25, 20k, 60k) with each transcript's window, resolved by
    :mod:`ctxtool.tokens.context` from ``context``: flags and config, then what the transcript records);
    ``hint`` and ``run`` as for :func:`truncate_file`."""
    if budget is not None and budget < 0:
        raise CtxtoolError("--budget must be >= 0", kind=Failure.USAGE)
    op = TrimOp(cache_root(cache), tokenizer_name(tokenizer), budget, context, records=records, hint=hint)
    return run_ops(op, path, output, **run)


def restore_file(
    path: str,
    output: str | None,
    *,
    cache: RefCache | str | Path | None = None,
    records: bool = False,
    **run: Unpack[FileKeywords],
) -> OpsReport:
    """``ctxtool restore``: put back every truncated, spilled or trimmed message (``run`` as
    for :func:`truncate_file`)."""
    op = RestoreOp(cache_root(cache), records=records)
    return run_ops(op, path, output, **run)
