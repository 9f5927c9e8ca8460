"""Transcript formats: detection, reading and writing.

>>> from ctxtool import formats
>>> for t in formats.read("session.jsonl"):          # doctest: +SKIP
...     print(t.format, len(t.messages))
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import CtxtoolError, Failure
from ..registry import LazyEntry, Registry

if TYPE_CHECKING:
    from collections import Counter
    from pathlib import Path

    from ..io.jsonl import Source
    from ..model import Transcript
    from .base import ErrorPolicy, Format


LAYOUTS = ("jsonl", "json", "zip")  # what a Source may be (ctxtool.io.jsonl.Source.layout; "sqlite": opencode's only)


class Lazy(LazyEntry["Format"]):
    """A registered format whose module is not imported yet: the dotted name of the module
    exposing it as ``FORMAT`` (or as ``attribute``), and the detection hints that let :func:`detect` pass it by
    without importing it. Each hint is a necessary condition of the format's own ``sniff``
    (a test checks them against every sample): ``layouts``, the source layouts its sniff
    accepts; ``keys``, top-level keys one of which its sampled values carry (a JSONL line, the
    JSON document, or the first element of a JSON array); ``records``: or one of the keys a
    dataset record holds its messages under (:data:`ctxtool.formats.dataset.MESSAGE_KEYS`).
    No ``keys`` and no ``records``: any value of those layouts may be this format's."""

    __slots__ = ("_hints", "attribute", "keys", "layouts", "module", "records")
    changes = 0  # counts hints set on any entry: detection's candidates (:func:`_candidates`) are made again

    def __init__(self, module: str, layouts: Sequence[str] = LAYOUTS, keys: Sequence[str] = (), *,
                 records: bool = False, attribute: str = "FORMAT") -> None:
        super().__init__(f"{module}:{attribute}")
        self.module, self.layouts, self.keys, self.records = module, tuple(layouts), tuple(keys), records
        self.attribute = attribute
        self._hints: tuple[tuple[str, ...], bool, frozenset[str]] | None = None  # made on first use from keys, records

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in ("layouts", "keys", "records"):
            Lazy.changes += 1

    def may_sniff(self, layout: str, present: Collection[str]) -> bool:
        """False when this format's sniff is known to say 0 (its module need not be imported);
        ``present``: the top-level keys of the sample's objects (:func:`_heads`)."""
        if layout not in self.layouts:
            return False
        made = self._hints
        if made is None or made[0] is not self.keys or made[1] is not self.records:
            keys = self.keys
            if self.records:
                # lazy: start-up (`ctxtool --version` would load ctxtool.formats.base)
                from .dataset import MESSAGE_KEYS

                keys += MESSAGE_KEYS
            made = self._hints = (self.keys, self.records, frozenset(keys))
        hints = made[2]
        return not hints or not hints.isdisjoint(present)

    def load(self) -> Format:
        # a module imported already is taken from sys.modules: what importlib would return,
        # without its machinery on each lookup (detection asks once per record)
        m = sys.modules.get(self.module)
        if m is None or getattr(getattr(m, "__spec__", None), "_initializing", False):
            return super().load()
        return cast("Format", getattr(m, self.attribute))


def _heads(sample: list[Any], layout: str) -> frozenset[str]:
    """The top-level keys of the detection sample's objects, which the hints look at (once
    per detection, not once per format and line)."""
    heads: list[Mapping[str, Any]] = []
    if layout == "jsonl":
        heads = [o for o in sample if isinstance(o, dict)]
        if len(heads) == 1:  # one record's (records.process): its keys
            return frozenset(heads[0])
    elif layout == "json" and sample:
        doc = sample[0]
        if isinstance(doc, list):
            doc = doc[0] if doc else None
        heads = [doc] if isinstance(doc, dict) else []
    return frozenset(k for h in heads for k in h)


_JSONL, _JSON, _DOCS = ("jsonl",), ("json",), ("json", "jsonl")

# The format registry: name -> a Lazy entry (the module is imported on first use) or a Format
# instance. A new format is one module plus one line here (or one call to :func:`register`);
# detection, ``--format``, ``--to`` and ``ctxtool formats`` ask it.
FORMATS: Registry[Format] = Registry("format", fold=lambda name: name.lower().replace("_", "-"))
FORMATS.register(Lazy("ctxtool.formats.canonical", _JSONL, ("ctxtool",)), "ctxtool")
FORMATS.register(Lazy("ctxtool.formats.openai", _DOCS, ("role",), records=True), "openai")
FORMATS.register(Lazy("ctxtool.formats.anthropic", _DOCS, ("role",), records=True), "anthropic")
FORMATS.register(Lazy("ctxtool.formats.claude_code", _JSONL, ("type",)), "claude-code", aliases=("claude", "claudecode"))
FORMATS.register(Lazy("ctxtool.formats.codex", _JSONL, ("payload", "instructions", "git")), "codex")
FORMATS.register(Lazy("ctxtool.formats.pi", _JSONL, ("type",)), "pi")
FORMATS.register(Lazy("ctxtool.formats.sharegpt", _DOCS, records=True), "sharegpt")
FORMATS.register(Lazy("ctxtool.formats.cline", _DOCS, ("role",)), "cline")
FORMATS.register(Lazy("ctxtool.formats.responses", _DOCS, ("input", "type", "role"), records=True), "responses")
FORMATS.register(Lazy("ctxtool.formats.inspect_log", _DOCS, ("eval",)), "inspect")  # jsonl: written on one line
FORMATS.register(Lazy("ctxtool.formats.inspect_log", ("zip",), attribute="EVAL_FORMAT"), "inspect-eval")
FORMATS.register(Lazy("ctxtool.formats.atif", _DOCS, ("schema_version",)), "atif")  # jsonl: written on one line
FORMATS.register(Lazy("ctxtool.formats.gemini", _JSON, ("sessionId",)), "gemini")
FORMATS.register(Lazy("ctxtool.formats.gemini_jsonl", _JSONL, ("projectHash",)), "gemini-jsonl")
FORMATS.register(Lazy("ctxtool.formats.swe_agent", _DOCS, ("history",)), "swe-agent")
FORMATS.register(Lazy("ctxtool.formats.mini_swe_agent", _DOCS, ("messages", "role")), "mini-swe-agent")
FORMATS.register(Lazy("ctxtool.formats.openhands", _DOCS, ("history", "source")), "openhands")
FORMATS.register(Lazy("ctxtool.formats.opencode", ("sqlite",)), "opencode")
FORMAT_NAMES = FORMATS.names()  # the built-in formats; format_names() includes registered ones


def register(fmt: Format | str | Lazy, name: str | None = None) -> None:
    """Add a format: a :class:`Format` instance, or the dotted name of a module that exposes
    one as ``FORMAT``, or a :class:`Lazy` entry naming that module with detection hints (then
    ``name`` is required; the module is imported on first use)."""
    if isinstance(fmt, (str, Lazy)):
        if not name:
            raise ValueError("register(module_name, name): the name is required")
        FORMATS.register(Lazy(fmt) if isinstance(fmt, str) else fmt, name)
    else:
        FORMATS.register(fmt, name or fmt.name)


def format_names() -> tuple[str, ...]:
    return FORMATS.names()


def writable_names() -> tuple[str, ...]:
    """The formats ctxtool writes (every other one is read only)."""
    return tuple(n for n in format_names() if get_format(n).writes)


def writable(f: Format) -> Format:
    """``f`` when ctxtool writes it; else the one-line error naming the formats it can become."""
    if not f.writes:
        raise CtxtoolError(
            f"{f.name} is read only: ctxtool cannot write it back; convert with --to one of: {', '.join(writable_names())}",
            kind=Failure.USAGE,
        )
    return f


def get_format(name: str) -> Format:
    return FORMATS.get(name)


def _candidates(layout: str, heads: frozenset[str]) -> list[tuple[str, Format]]:
    """The formats (name, format) :func:`_scores` asks to sniff a sample of ``layout`` whose objects
    have the top-level keys ``heads``: every registered one, but those whose hints rule it out
    (not imported). They depend on nothing else, so they are found once per layout and keys (a
    dataset's records share theirs) and the registry's and the hints' state (:func:`_found`)."""
    return _found(layout, heads, FORMATS.version, Lazy.changes)


@functools.lru_cache(maxsize=256)  # keys seen in a file with records of many shapes: kept bounded
def _found(layout: str, heads: frozenset[str], version: int, changes: int) -> list[tuple[str, Format]]:
    """:func:`_candidates` made: ``version`` and ``changes`` (the registry's version, a count of
    hints set) only key it, so that a format registered or removed or hints changed make it again."""
    return [(name, get_format(name)) for name, entry in FORMATS.entries().items()
            if not (isinstance(entry, Lazy) and not entry.may_sniff(layout, heads))]


def _scores(sample: list[Any], src: Source) -> list[tuple[int, str, Format]]:
    """Every format's confidence in ``sample``, best first (formats that say 0 left out). A
    format whose detection hints rule the sample out says 0 without being imported."""
    scores = []
    for name, fmt in _candidates(src.layout, _heads(sample, src.layout)):
        try:
            s = fmt.sniff(sample, src)
        except (KeyError, TypeError, AttributeError, IndexError):
            s = 0
        if s > 0:
            scores.append((s, name, fmt))
    scores.sort(key=lambda x: -x[0])
    return scores


def detect(src: Source) -> Format:
    """Pick the format whose ``sniff`` is most confident; fail naming the candidates.
    Unreadable records are left out of the sample (the reader reports them in their place).
    The answer is kept on ``src`` while its peek is the same (a source is detected once)."""
    memo = src.detected
    if memo is not None and memo[0] is src.peek and memo[1] == len(src.peek):
        return memo[2]
    scores = _scores(src.sample(), src)
    if not scores:
        raise CtxtoolError(
            "cannot detect the transcript format; use --format with one of: " + ", ".join(format_names()),
            path=src.path,
        )
    if len(scores) > 1 and scores[0][0] == scores[1][0]:
        tied = [n for s, n, _ in scores if s == scores[0][0]]
        raise CtxtoolError(
            f"ambiguous transcript format (candidates: {', '.join(tied)}); use --format", path=src.path
        )
    src.detected = (src.peek, len(src.peek), scores[0][2])
    return scores[0][2]


def read_source(
    src: Source, fmt: str | Format | None = None, policy: ErrorPolicy | None = None
) -> Iterator[Transcript]:
    # lazy: start-up (`ctxtool --version` would load ctxtool.formats.base)
    from .base import STRUCTURE_ERRORS, ErrorPolicy, malformed

    f = get_format(fmt) if isinstance(fmt, str) else fmt
    policy = policy or ErrorPolicy()
    try:
        if f is None:
            yield from _some_messages(detect(src).read(src, policy), src.path)
        else:
            yield from _some_messages(_read_forced(f, src, policy), src.path)
    except STRUCTURE_ERRORS as e:
        # a reader met a value of a shape it does not interpret where no record-level
        # guard caught it: bad input at the line being read, never an internal error
        raise malformed(e, src.path, src.at) from e


def unknown_records(t: Transcript) -> Counter[str]:
    """The records of ``t`` of types its format's reader does not know (see
    :attr:`ctxtool.formats.base.Format.known_records`): kept verbatim, counted as drift."""
    try:
        f = get_format(t.format)
    except CtxtoolError:
        from collections import Counter

        return Counter()
    return f.unknown_records(t)


def _some_messages(ts: Iterator[Transcript], path: str) -> Iterator[Transcript]:
    """``ts``; but a file whose transcripts hold records and not one message is an error
    naming the record types it saw (a format that moved on: never "0 turns"). Transcripts
    without messages are held until one with messages shows the file is not that."""
    from collections import Counter

    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ..model import Message, Record

    held: list[Transcript] = []
    seen = False
    for t in ts:
        if seen or any(isinstance(e, Message) for e in t.entries):
            seen = True
            yield from held
            held.clear()
            yield t
        else:
            held.append(t)
    if seen or not held:
        return
    kinds = Counter(e.kind or "?" for t in held for e in t.entries if isinstance(e, Record))
    if not kinds:
        yield from held
        return
    n = sum(kinds.values())
    raise CtxtoolError(f"no messages here: {n:,} line(s) or record(s), none of a type read as a message "
                       f"({', '.join(f'{k} ×{c}' for k, c in kinds.most_common(8))})", path=path)


def _fits(f: Format, sample: list[Any], src: Source) -> bool:
    """True when ``f`` is sure to be among :func:`_scores` of ``sample`` (detection picked it
    from this peek, or its own detection says yes), found without asking every format;
    False: ask them all."""
    memo = src.detected
    if memo is not None and memo[0] is src.peek and memo[1] == len(src.peek) and memo[2] is f:
        return True
    entry = FORMATS.find(f.name)  # one lookup per record (no copy of the table)
    if entry is None or (isinstance(entry, Lazy) and not entry.may_sniff(src.layout, _heads(sample, src.layout))):
        return False
    if (entry.load() if isinstance(entry, LazyEntry) else entry) is not f:  # get_format(f.name), from the entry found
        return False
    try:
        return f.sniff(sample, src) > 0
    except (KeyError, TypeError, AttributeError, IndexError):
        return False


def fits(f: Format, src: Source) -> bool:
    """True when ``src`` (its first records) is sure to be read as ``f``, a format the user
    named: detection picked it from this peek, or its own detection says yes. Only ``f`` is
    asked (a record per line of a dataset whose format is named needs no other format's
    detection); False: not known (the reader of ``f`` says what is wrong, or reads it)."""
    sample = src.sample()
    return bool(sample) and _fits(f, sample, src)


def _read_forced(f: Format, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
    """Read with a format the user named. One that matches nothing in the file (no message
    read, and its detection says no) is an error naming the format detection would pick."""
    sample = src.sample()
    fits = bool(sample) and _fits(f, sample, src)
    scores = _scores(sample, src) if sample and not fits else []  # every format scored for the hint only
    fits = fits or any(fmt is f for _, _, fmt in scores)
    messages = 0
    hint = "" if fits or not scores else f"this file looks like {scores[0][1]}: use --format {scores[0][1]}, or leave --format out"
    try:
        for t in f.read(src, policy):
            messages += len(t.messages)
            yield t
    except CtxtoolError as e:
        if hint and messages == 0:
            e.message = f"{e.message} (--format {f.name}: {hint})"
        raise
    if hint and messages == 0:
        raise CtxtoolError(f"no {f.name} transcript here (--format {f.name} read no message); {hint}", path=src.path)


def read(
    path: str | Path, format: str | Format | None = None, policy: ErrorPolicy | None = None
) -> Iterator[Transcript]:
    """Read every transcript in ``path`` (``-`` for stdin), detecting the format unless given."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ..io.jsonl import open_source

    yield from read_source(open_source(path), format, policy)


def read_all(path: str | Path, format: str | Format | None = None) -> list[Transcript]:
    return list(read(path, format))


def write(transcripts: Iterable[Transcript], out, format: str | Format | None = None) -> None:
    """Write transcripts to a binary stream in ``format`` (default: each one's own)."""
    ts = iter(transcripts)
    first = next(ts, None)
    if first is None:
        return
    f = get_format(format) if isinstance(format, str) else format
    if f is None:
        f = get_format(first.format)
    writable(f)

    current = first

    def chained() -> Iterator[Transcript]:
        nonlocal current
        yield first
        for current in ts:  # noqa: UP028 - sets the nonlocal current
            yield current

    try:
        if f.name != first.format:
            f.write((_retarget(t, f) for t in chained()), out)
        else:
            f.write(chained(), out)
    except CtxtoolError as e:
        # a source line parsed again for writing (exact numbers) names its line, not its file
        if e.path in (None, "-") and current.path:
            e.path = str(current.path)
        raise


def write_path(transcripts: Iterable[Transcript], path: str | Path | None, format: str | Format | None = None) -> None:
    """Write atomically to ``path`` (``-`` or None: stdout)."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ..io.outputs import atomic_output

    with atomic_output(path) as out:
        write(transcripts, out, format)


def _retarget(t: Transcript, f: Format) -> Transcript:
    """Prepare a transcript for writing in another format ``f``.

    A transcript read from canonical JSONL whose source format is ``f`` goes back
    as it came (source lines reused); otherwise every message is rendered anew
    and bookkeeping lines, which ``f`` has no place for, are left out.
    """
    # lazy: start-up (`ctxtool --version` would load ctxtool.formats.base, ctxtool.io)
    from ..model import Compaction, Entry, Message, Record, Transcript
    from .base import make_exact, source_style

    make_exact(t)  # the record's bytes stay behind
    same_origin = t.extra.get("source_format") == f.name
    origin = t.extra.get("source_format") if t.format == "ctxtool" else t.format
    # a record only its own format understands (a whole eval log, a trajectory) stays behind
    portable = same_origin or f.name == "ctxtool" or _record_family(origin) in ("", f.record_family)
    out = Transcript(
        format=f.name,
        path=t.path,
        index=t.index,
        id=t.id,
        record=t.record if portable else None,
        messages_key=t.messages_key if portable else None,
        lineno=t.lineno,
        extra={k: v for k, v in t.extra.items() if k not in ("layout", "record_raw", "record_obj", "entries_count")},
    )
    style = source_style(t, document=True)
    out.extra.pop("source_style", None)
    if (not style.compact or style.document) and (same_origin or f.name == "ctxtool"):
        out.extra["source_style"] = style.to_json()  # the raw bytes stay behind: keep how they were written
    if same_origin:
        out.extra["layout"] = t.extra.get("source_layout", f.default_layout)
        out.entries = list(t.entries)
        return out
    out.extra["layout"] = f.default_layout
    if f.name == "ctxtool":
        out.extra["source_format"] = t.format
        out.extra["source_layout"] = t.extra.get("layout")
        out.entries = list(t.entries)
        return out
    entries: list[Entry] = []
    for e in t.entries:
        if isinstance(e, Message):
            e.dirty = True
            entries.append(e)
        elif isinstance(e, Compaction):
            e.dirty = True
            entries.append(e)
        elif isinstance(e, Record):
            continue
    out.entries = entries
    return out


def _record_family(name: Any) -> str:
    try:
        return get_format(name).record_family if isinstance(name, str) else ""
    except CtxtoolError:
        return ""


def split_plan(
    path: str, fmt: str | None, workers: int, min_bytes: int, *, lines: bool = True, writes: bool = False
) -> tuple[str, list[tuple[int, int, int]]] | None:
    """How to split a large dataset file (one transcript per JSONL line) across ``workers``
    processes: its format and byte ranges ``(start, end, first line)``; None when it is not one.
    ``lines=False``: first lines are not counted (see :func:`ctxtool.io.jsonl.split_ranges`).
    ``writes``: the run writes the file back, so it is split only when its ranges' outputs end
    as it does (:meth:`ctxtool.io.jsonl.Source.plain_ending`; another is rewritten whole, keeping it)."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ..io.files import input_size, splittable
    from ..io.jsonl import open_source, split_ranges

    if workers < 2 or not splittable(path) or (input_size(path) or 0) < min_bytes:
        return None
    src = open_source(path)
    try:
        f = get_format(fmt) if fmt else detect(src)
        if src.layout != "jsonl" or not f.records_per_line(src) or (writes and not src.plain_ending()):
            return None
    finally:
        src.close()
    return f.name, split_ranges(path, workers, lines=lines)
