"""``stats`` as a runner operation: a part of the figures that merges (``StatsPart``, sent
between processes as plain tuples) and the operation that folds transcripts into one
(:class:`StatsOp`, picklable, run by :mod:`ctxtool.run.runner` over files and byte ranges)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from ..formats.base import ErrorPolicy, Format
from ..io.jsonl import Source
from ..model import Transcript, Usage
from ..run.operation import Operation, RunContext, Task, merge_reports
from ..tokens.backends import exact_counter
from ..tokens.bpe import OFFICIAL_BPE
from ..tokens.context import ContextSettings
from ..tokens.count import (
    HeuristicTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    count_messages,
    for_transcript,
    get_tokenizer,
    message_texts,
)
from ..tokens.heuristic import estimate, estimates
from . import fast as stats_fast
from .fast import TALLY_KEY, Tally
from .figures import (
    BATCH_MESSAGES,
    TOP_OUTPUTS,
    Figures,
    Overview,
    RoleStats,
    ToolOutput,
    TranscriptStats,
    most_context,
    output_size,
    top_outputs,
)
from .transcript import _policies, threshold_levels, transcript_stats

# With an exact tokenizer the cost of a byte varies with the text: more ranges than processes,
# so one that finishes early takes the next. The heuristic's cost follows the bytes: one each
# (measured: two or four per worker take longer, 0.27 s against 0.30 and 0.37 s on 200 MB).
RANGES_PER_WORKER = 4


_FIGURE_FIELDS = (
    "messages", "tokens", "chars", "tool_calls", "tool_results", "tool_errors", "thinking_blocks", "thinking_tokens",
    "thinking_chars", "images", "documents", "saved_outputs", "system_prompt_chars", "system_prompt_tokens", "framing_tokens",
)


def _pack_output(o: ToolOutput) -> tuple[Any, ...]:
    o.counted()
    return (o.transcript, o.message_id, o.line, o.tool, o.tokens, o.chars, o.lines)


def _pack_figures(f: Figures) -> tuple[Any, ...]:
    u = f.usage
    return (
        tuple(getattr(f, k) for k in _FIGURE_FIELDS),
        [(r, s.messages, s.tokens, s.chars) for r, s in f.by_role.items()],
        dict(f.tool_calls_by_name),
        (u.input, u.output, u.cache_creation, u.cache_read, u.calls),
    )


def _unpack_figures(p: tuple[Any, ...]) -> Figures:
    fig, roles, calls, usage = p
    f = Figures(by_role={r: RoleStats(m, t, c) for r, m, t, c in roles}, tool_calls_by_name=Counter(calls), usage=Usage(*usage))
    for k, v in zip(_FIGURE_FIELDS, fig, strict=True):
        setattr(f, k, v)
    return f


def _pack_transcript(x: TranscriptStats) -> tuple[Any, ...]:
    return (
        x.path, x.index, x.id, x.format, _pack_figures(x.figures), x.context_tokens, x.context_source, x.context_window,
        x.level, [_pack_output(o) for o in x.largest], x.label, x.model, x.first_timestamp, x.last_timestamp,
        x.accuracy, x.rate_limits,
    )


def _unpack_transcript(p: tuple[Any, ...]) -> TranscriptStats:
    path, index, id_, fmt, fig, ctx_tokens, ctx_source, window, level, largest, label, model, first, last, acc, rl = p
    return TranscriptStats(
        path, index, id_, fmt, _unpack_figures(fig), ctx_tokens, ctx_source, window, level, [ToolOutput(*o) for o in largest],
        label, model, first, last, acc, rl,
    )


def _part_from(totals: tuple[Any, ...], transcripts: list[tuple[Any, ...]], largest: list[tuple[Any, ...]],
               skipped: list[str], rows: list[dict[str, Any]] | None, overview: Overview, keep: int | None) -> StatsPart:
    return StatsPart(
        _unpack_figures(totals), [_unpack_transcript(t) for t in transcripts], [ToolOutput(*o) for o in largest], skipped, rows,
        overview, keep,
    )


@dataclass(slots=True)
class StatsPart:
    """The figures of some transcripts: what one file, or one byte range of one, adds up to.
    ``keep``: hold only the ``keep`` transcripts with the most context tokens (``overview``
    counts them all), so memory and what a worker sends back stay flat in the input's size;
    None: every transcript, in input order."""

    totals: Figures  # (made when first read in a part made by summed_when_read)
    transcripts: list[TranscriptStats]
    largest: list[ToolOutput]
    skipped: list[str]
    rows: list[dict[str, Any]] | None
    overview: Overview = field(default_factory=lambda: Overview())  # (as totals)
    keep: int | None = None
    sink: Callable[[TranscriptStats], None] | None = None  # gets each transcript (then not held)
    #: the first transcript added while ``totals`` and ``overview`` are not made (summed_when_read)
    pending: TranscriptStats | None = field(default=None, repr=False, compare=False)

    @classmethod
    def summed_when_read(cls, rows: list[dict[str, Any]] | None, keep: int | None = None,
                         sink: Callable[[TranscriptStats], None] | None = None) -> StatsPart:
        """An empty part whose ``totals`` and ``overview`` are made when first read (by
        anyone: merging, equality, pickling): ``Figures()`` and ``Overview()`` with the
        transcript added meanwhile added as an eager part adds it. One record's part
        (:func:`ctxtool.run.records.process`) holds one transcript: its figures are not
        summed a second time, nor counted, unless asked."""
        return cls(None, [], [], [], rows, None, keep=keep, sink=sink)  # type: ignore[arg-type]

    def add(self, ts: TranscriptStats) -> None:
        if self.pending is None and _TOTALS.__get__(self, StatsPart) is None and _OVERVIEW.__get__(self, StatsPart) is None:
            self.pending = ts  # the first: summed and counted when read
        else:
            self.totals.add(ts.figures)
            self.overview.add(ts)
        self._hold((ts,))

    def merge(self, other: StatsPart) -> None:
        # a part's totals and overview not made yet are Figures() and Overview() plus its pending
        # transcript: adding that transcript adds the same (hypothesis tests)
        pending = other.pending
        totals: Figures | None = _TOTALS.__get__(other, StatsPart)
        if totals is not None:
            self.totals.add(totals)
        elif pending is not None:
            self.totals.add(pending.figures)
        overview: Overview | None = _OVERVIEW.__get__(other, StatsPart)
        if overview is not None:
            self.overview.merge(overview)
        elif pending is not None:
            self.overview.add(pending)
        self._hold(other.transcripts)
        self.largest = top_outputs(self.largest + other.largest)
        self.skipped.extend(other.skipped)
        if self.rows is not None and other.rows:
            self.rows.extend(other.rows)

    def _hold(self, transcripts: Iterable[TranscriptStats]) -> None:
        """Pass transcripts to the sink, or hold them (at most twice ``keep``)."""
        if self.sink is not None:
            for ts in transcripts:
                self.sink(ts)
            return
        self.transcripts.extend(transcripts)
        if self.keep is not None and len(self.transcripts) > 2 * self.keep:
            self.transcripts = most_context(self.transcripts, self.keep)

    def kept(self) -> list[TranscriptStats]:
        """The transcripts to report: all in input order, or the ``keep`` with most context."""
        kept = self.transcripts
        if self.keep is not None and self.overview.count > self.keep:
            kept = most_context(kept, self.keep)
        for t in kept:
            for o in t.largest:
                o.counted()
        for o in self.largest:
            o.counted()
        return kept

    def __reduce__(self) -> tuple[Any, ...]:
        # a worker's result crosses to the parent as plain tuples: several times cheaper to
        # pickle and unpickle than thousands of small dataclass instances. Holding ``keep``,
        # only its ``keep`` with most context can be reported (most_context of them and any
        # others is most_context of all): the others' outputs need not have their lines counted.
        held = self.transcripts
        if self.keep is not None and len(held) > self.keep:
            held = most_context(held, self.keep)
        return (
            _part_from,
            (
                _pack_figures(self.totals),
                [_pack_transcript(t) for t in held],
                [_pack_output(o) for o in self.largest],
                self.skipped,
                self.rows,
                self.overview,
                self.keep,
            ),
        )


# ``totals`` and ``overview`` of a part made by summed_when_read are made when first read:
# their slots hold None until then and the properties in their place make them (Figures() and
# Overview() with the pending transcript added, as add would have added it); a value set
# replaces the slot's.
_TOTALS: Any = StatsPart.__dict__["totals"]  # the slots' descriptors
_OVERVIEW: Any = StatsPart.__dict__["overview"]


def _totals(p: StatsPart) -> Figures:
    made: Figures | None = _TOTALS.__get__(p, StatsPart)
    if made is None:
        made = Figures()
        if p.pending is not None:
            made.add(p.pending.figures)
        _TOTALS.__set__(p, made)
        _made(p)
    return made


def _overview(p: StatsPart) -> Overview:
    made: Overview | None = _OVERVIEW.__get__(p, StatsPart)
    if made is None:
        made = Overview()
        if p.pending is not None:
            made.add(p.pending)
        _OVERVIEW.__set__(p, made)
        _made(p)
    return made


def _made(p: StatsPart) -> None:
    """Lets go of the pending transcript once both are made."""
    if _TOTALS.__get__(p, StatsPart) is not None and _OVERVIEW.__get__(p, StatsPart) is not None:
        p.pending = None


setattr(StatsPart, "totals", property(_totals, _TOTALS.__set__))  # noqa: B010
setattr(StatsPart, "overview", property(_overview, _OVERVIEW.__set__))  # noqa: B010


def _exact_counts(batch: list[Transcript], tok: Tokenizer) -> list[tuple[list[int], int]]:
    """Each transcript's message tokens (and, for a tallied record, its thinking tokens),
    every text of the batch counted in one call (on every core)."""
    flat: list[str] = []
    plans: list[tuple[list[tuple[int, int, int]], list[int]]] = []
    for t in batch:
        spans: list[tuple[int, int, int]] = []
        thinking: list[int] = []
        tl: Tally | None = t.extra.get(TALLY_KEY)
        if tl is None:
            for m in t.iter_messages():
                texts, images = message_texts(m)
                spans.append((len(flat), len(flat) + len(texts), images))
                flat.extend(texts)
        else:
            starts = []
            for mt in tl.texts or ():
                starts.append(len(flat))
                spans.append((len(flat), len(flat) + len(mt), 0))
                flat.extend(mt)
            thinking = [starts[i] for i, _ in tl.thinking]  # a thinking text is its message's first
        plans.append((spans, thinking))
    counts = tok.count_many(flat) if flat else []
    return [
        # estimate(0, 0) is 0: a message without images (every tallied one) adds nothing to its texts' count
        ([sum(counts[a:b]) + (estimate(0, images) if images else 0) for a, b, images in spans],
         sum([counts[k] for k in thinking]) if thinking else 0)
        for spans, thinking in plans
    ]


def fold(part: StatsPart, batch: list[Transcript], tok: Tokenizer, opts: dict[str, Any]) -> None:
    """Add a batch of transcripts to ``part``; exact tokenizers count its messages at once
    (on every core), the heuristic needs no batch. A record tallied by :mod:`ctxtool.stats.fast`
    is finished from its tally, every other transcript by :func:`ctxtool.stats.transcript.transcript_stats`."""
    calibrated = getattr(tok, "fitted", None) is not None
    exact = None if isinstance(tok, HeuristicTokenizer) or calibrated else _exact_counts(batch, tok)
    for k, t in enumerate(batch):
        tl: Tally | None = t.extra.get(TALLY_KEY)
        if tl is not None:
            if exact is None:
                counts = estimates(tl.chars)  # no images in a tally
                thinking = sum(estimates([len(x) for _, x in tl.thinking])) if tl.thinking else 0
            else:
                counts, thinking = exact[k]
            ts = stats_fast.finish(t, tl, counts, thinking, opts, opts["window"])
        else:
            tt = for_transcript(tok, t)  # a calibrated estimate fitted to the transcript's own usage
            own = count_messages(t.messages, tt) if calibrated else None if exact is None else exact[k][0]
            ts = transcript_stats(
                t, own, tt, context=opts["context"],
                warning_chars=opts["warning_chars"], critical_chars=opts["critical_chars"], rows=part.rows,
                accuracy=opts["accuracy"],
            )
        if opts["count_lines"]:
            for o in ts.largest:
                o.counted()  # every transcript held: its outputs' texts let go now
        part.add(ts)
        if ts.largest:
            top = part.largest
            # the earlier of equal sizes is kept: outputs no larger than the smallest kept change nothing
            if len(top) < TOP_OUTPUTS or output_size(max(ts.largest, key=output_size)) > output_size(top[-1]):
                part.largest = top_outputs(top + ts.largest)


_DERIVED = "_derived"  # where a StatsOp keeps its _Derived (not a field: not compared, shown or sent)


class _Derived(NamedTuple):
    opts: dict[str, Any]  # a task's options but the window (resolved per task) and count_lines (per input)
    fast: bool
    tok: Tokenizer | None  # the heuristic tokenizer (shared); None: one made per task
    policies: int  # the policy registry's version the levels were made from


@dataclass(frozen=True)
class StatsOp(Operation[StatsPart]):
    """``stats`` over one input: reads only (no output)."""

    name: ClassVar[str] = "stats"
    writes: ClassVar[bool] = False
    shares_source: ClassVar[bool] = True  # reads only
    collect_garbage: ClassVar[bool] = False  # its figures live to the end: nothing to collect
    max_range_bytes: ClassVar[int | None] = 128 << 20  # a range's transcripts, held until streamed or kept
    tokenizer: str = "heuristic"
    context: ContextSettings | None = None  # the window's flags and config (each transcript's resolved from it)
    warning_chars: int = 200_000
    critical_chars: int = 400_000
    per_message: bool = False
    fast: bool = True  # tally dataset records from their parsed values (False: always the full model)
    keep: int | None = None  # transcripts held (those with most context); None: all
    each: Callable[[TranscriptStats], None] | None = field(default=None, compare=False, repr=False)  # see stats.stats
    accuracy: bool = False  # measure the estimates against recorded usage (see stats.stats)

    def __getstate__(self) -> dict[str, Any]:
        # a callback stays in its process: a worker holds its range's transcripts and the
        # parent passes them on (collect); the settings its tasks derive are made again there
        state = dict(self.__dict__, each=None, keep=None if self.each is not None else self.keep)
        state.pop(_DERIVED, None)
        return state

    def derived(self) -> _Derived:
        """What every task of this operation derives from it alone, made by the first and kept
        on it (:func:`ctxtool.run.records.process` starts a task per record): the options
        that do not depend on the input, whether records are tallied, and the heuristic
        tokenizer (it holds nothing). The threshold levels are made again when the policy
        registry changes, as :func:`threshold_levels` would answer."""
        made: _Derived | None = self.__dict__.get(_DERIVED)
        policies = _policies().version
        if made is None or made.policies != policies:
            tok = get_tokenizer(self.tokenizer)
            made = _Derived(
                {"context": self.context, "warning_chars": self.warning_chars, "critical_chars": self.critical_chars,
                 "per_message": self.per_message, "keep": self.keep,
                 "level": threshold_levels(self.warning_chars, self.critical_chars), "accuracy": self.accuracy},
                # per-message rows need the model, and so does an estimate calibrated to the transcript
                self.fast and not self.per_message and self.tokenizer != "calibrated" and not self.accuracy,
                tok if type(tok) is HeuristicTokenizer else None, policies,
            )
            object.__setattr__(self, _DERIVED, made)
        return made

    def collect(self, reports: Iterable[StatsPart]) -> StatsPart:
        if self.each is None:
            return merge_reports(reports)
        total = StatsPart(Figures(), [], [], [], [] if self.per_message else None, keep=0, sink=self.each)
        for part in reports:  # in input order as each range is done: its transcripts passed on, then let go
            total.merge(part)
            part.transcripts = []
        return total

    def ranges_per_job(self) -> int:
        return 1 if self.tokenizer == "heuristic" else RANGES_PER_WORKER

    def prepare(self) -> None:
        if self.tokenizer in OFFICIAL_BPE:
            exact_counter(self.tokenizer)  # once here; the forked workers share it
        threshold_levels(self.warning_chars, self.critical_chars)  # the policies loaded once, before the fork

    def start(self, ctx: RunContext) -> Task[StatsPart]:
        return _StatsTask(self, ctx)


class _StatsTask(Task[StatsPart]):
    """Folds transcripts as they come; exact tokenizers count a batch of messages at once."""

    def __init__(self, op: StatsOp, ctx: RunContext) -> None:
        derived = op.derived()
        self.tok = derived.tok or get_tokenizer(op.tokenizer)
        if ctx.worker and isinstance(self.tok, TiktokenTokenizer):
            self.tok.threads = 1  # one process per core already
        self.opts = dict(derived.opts, window=stats_fast.resolved_window(op.context),
                         # the lines of the largest outputs are counted when read (reported): held
                         # until then, when only a few transcripts are held (keep) or one record's
                         count_lines=op.keep is None and not ctx.record)
        self.fast = derived.fast
        self.limit = 1 if isinstance(self.tok, HeuristicTokenizer) else BATCH_MESSAGES
        rows: list[dict[str, Any]] | None = [] if op.per_message else None
        sink = None if ctx.worker else op.each
        # one record's totals and overview are its transcript's: made only where they are read
        self.part = (StatsPart.summed_when_read(rows, op.keep, sink) if ctx.record
                     else StatsPart(Figures(), [], [], [], rows, keep=op.keep, sink=sink))
        self.batch: list[Transcript] = []
        self.entries = 0

    def read(self, src: Source, fmt: str | Format | None, policy: ErrorPolicy) -> Iterator[Transcript]:
        ts = stats_fast.read(src, fmt, policy, exact=not isinstance(self.tok, HeuristicTokenizer)) if self.fast else None
        return ts if ts is not None else super().read(src, fmt, policy)

    def apply(self, t: Transcript) -> None:
        self.batch.append(t)
        tl = t.extra.get(TALLY_KEY)
        self.entries += len(t.entries) if tl is None else len(tl.chars)
        if self.entries >= self.limit:
            self._fold()

    def _fold(self) -> None:
        if self.batch:
            fold(self.part, self.batch, self.tok, self.opts)
        self.batch, self.entries = [], 0

    def finish(self) -> StatsPart:
        self._fold()
        return self.part
