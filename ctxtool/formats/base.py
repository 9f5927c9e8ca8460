"""The interface every transcript format implements, and shared writer plumbing."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io import jsontext
from ..io.jsonl import Source
from ..model import Block, Compaction, Cont, Entry, Line, Message, Metadata, Record, Transcript, source_lines

META_KEY = "ctxtool"  # where ctxtool keeps message metadata inside foreign formats
#: Block hints every format may read, set by any reader (all other hints belong to the
#: format that set them, and only its writer reads them):
#: a provider-side tool call (web search run by the provider; no result message follows)
SERVER_TOOL = "server_tool"
TERMINAL_CALL = "terminal_call"  # a call that ends the run (OpenHands finish): no result answers it
SCAN_STYLE = 8  # entries looked at for a source line whose style new lines follow


@dataclass
class ErrorPolicy:
    """What to do with a record that cannot be read: ``fail`` (raise) or ``skip`` (count it)."""

    mode: str = "fail"
    skipped: list[CtxtoolError] = field(default_factory=list)

    def handle(self, err: CtxtoolError) -> None:
        if self.mode != "skip":
            raise err
        self.skipped.append(err)

    def reject(self, e: BaseException, path: str, line: int | None, what: str = "record") -> None:
        """A record that could not be read (``e``: one of :data:`RECORD_ERRORS`) handled as
        the error naming ``path`` and ``line``: ctxtool's own error placed there, any other
        :func:`malformed`."""
        self.handle(placed(e, path, line) if isinstance(e, CtxtoolError) else malformed(e, path, line, what))


def placed(e: CtxtoolError, path: str, line: int | None) -> CtxtoolError:
    """``e`` with the file and line it came from, unless it names them already."""
    if e.path is None:
        e.path = path
    if e.line is None:
        e.line = line
    return e


#: what interpreting a record of the wrong shape raises (a list where a string belongs, a
#: string where an object belongs, a value nested too deeply): bad input, never a bug report
STRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError,
)

#: what reading one record may raise: ctxtool's error, or a record of the wrong shape
#: (:meth:`ErrorPolicy.reject` handles either)
RECORD_ERRORS: tuple[type[BaseException], ...] = (CtxtoolError, *STRUCTURE_ERRORS)


def malformed(e: BaseException, path: str, line: int | None, what: str = "record") -> CtxtoolError:
    """A record ctxtool cannot interpret, as one line naming the file and line. The message
    names the Python error without the value's repr (a deeply nested value has none)."""
    try:
        detail = str(e)
    except RecursionError:  # pragma: no cover - str of a deep KeyError
        detail = ""
    detail = detail if len(detail) <= 160 else detail[:157] + "..."
    return CtxtoolError(f"malformed {what}: unexpected structure ({type(e).__name__}: {detail})", path=path, line=line)


class Format:
    """A transcript format: detection, reading and writing.

    Subclasses implement ``sniff`` (a confidence 0-100 from the first parsed
    values), ``read`` and ``render`` (a message as the format's raw objects). The
    generic writer copies unchanged messages' source lines verbatim and renders
    changed or new ones.
    """

    name: str = ""
    description: str = ""
    #: default layout when writing transcripts that came from another format
    default_layout: str = "entries_jsonl"
    #: kinds (prefixes) of records that are bookkeeping of the messages around them: a
    #: compaction drops them with the messages it summarizes
    bookkeeping_records: tuple[str, ...] = ()
    #: formats whose turns alternate: the assistant's acknowledgement after a compaction's summary
    compaction_ack: str | None = None
    #: capabilities ``ctxtool formats`` lists: what it reads (its layouts), and whether ctxtool
    #: writes it back (a read-only format's transcripts become any writable format with --to)
    reads: str = ""
    writes: bool = True
    #: what a transcript's ``record`` (the fields around its messages) is: "" for a dataset
    #: record any format may keep; otherwise a name only formats of that family understand
    #: (a whole eval log, a trajectory), and other formats leave it behind
    record_family: str = ""
    #: the kinds of records (``Record.kind``, or its part before the first ``:``) its reader
    #: knows; a record of any other kind is a line type the agent added since (drift): kept
    #: verbatim, counted by ``stats`` and warned about. None: the format does not tell.
    known_records: frozenset[str] | None = None

    def unknown_records(self, t: Transcript) -> Counter[str]:
        """How many records of each kind ``t`` holds that this format does not know."""
        out: Counter[str] = Counter()
        known = self.known_records
        if known is None:
            return out
        for e in t.entries:
            if isinstance(e, Record) and e.kind not in known and e.kind.split(":", 1)[0] not in known:
                out[e.kind] += 1
        return out

    def sniff(self, sample: list[Any], src: Source) -> int:
        raise NotImplementedError

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        raise NotImplementedError

    def read_records(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        """Dataset layouts: one transcript per record of a JSON array, one JSON object, or one
        record per JSONL line (``_record`` turns a record into a transcript)."""
        if src.layout == "json":
            doc = src.doc
            recs = doc if isinstance(doc, list) else [doc]
            layout = "records_array" if isinstance(doc, list) else "record_object"
            for i, rec in enumerate(recs):
                try:
                    t = self._record(rec, src, i, None, layout)
                    if src.style is not None:
                        t.extra["source_style"] = src.style.to_json()
                    yield t
                except CtxtoolError as e:
                    e.message = f"record {i}: {e.message}"
                    policy.handle(e)
                except STRUCTURE_ERRORS as e:
                    policy.handle(malformed(e, src.path, None, f"record {i}"))
            return
        for k, ln in enumerate(src.lines(policy), src.first_index):
            # a record's index is its line's (0-based): the same when a range of the file is
            # read by a worker process, whatever blank lines come before it
            i = ln.lineno - 1 if ln.lineno else k
            try:
                yield self.line_record(ln, src, i)
            except RECORD_ERRORS as e:
                policy.reject(e, src.path, ln.lineno)

    def line_record(self, ln: Line, src: Source, i: int) -> Transcript:
        """The transcript of a JSON Lines record, the ``i``-th of its file."""
        t = self._record(ln.obj, src, i, ln.lineno, "records_jsonl")
        t.extra["record_raw"] = ln.raw
        t.extra["record_obj"] = ln.obj  # read fast: see make_exact
        return t

    def _record(self, rec: Any, src: Source, i: int, lineno: int | None, layout: str) -> Transcript:
        raise NotImplementedError

    def records_per_line(self, src: Source) -> bool:
        """True when every line of this JSONL source is one whole transcript (a dataset), so
        the file can be split across processes."""
        return False

    # -- writing ---------------------------------------------------------------
    def render(self, msg: Message, t: Transcript) -> list[Any]:
        """The raw objects (lines or array items) for a changed or new message."""
        raise NotImplementedError

    def render_compaction(self, c: Compaction, t: Transcript) -> list[Any]:
        """Raw objects for a compaction entry; by default a user message carrying the summary."""
        msg = Message(
            "user",
            [Block("text", text=c.summary)],
            id=c.first_kept_id and f"compaction-{c.first_kept_id}",
            metadata=Metadata(kind="compaction_summary"),
        )
        return self.render(msg, t)

    # -- compaction hooks (pi-style compaction: persisted compactions) -----------------------
    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        """The entries that record a compaction in ``t`` (the new transcript, whose ``extra`` a
        format may update), placed before ``note.first_kept``. Default: the summary messages
        (and ``compaction_ack`` when the first kept message is not the assistant's)."""
        out: list[Message | Compaction] = [*note.messages, *note.pin_messages()]
        if self.compaction_ack and note.first_kept.role != "assistant":
            ack = Message("assistant", [Block("text", text=self.compaction_ack)],
                          metadata=Metadata(kind="compaction_summary"), dirty=True)
            out.append(ack)
        return out

    def read_compaction(self, t: Transcript, c: Compaction) -> tuple[str, Message | None]:
        """The summary a recorded compaction shows the agent, and the first message it kept
        verbatim (``None``: the messages after the entry)."""
        kept = next((m for m in t.messages if m.id == c.first_kept_id), None) if c.first_kept_id else None
        return c.summary, kept

    def agent_window(self, t: Transcript, model: str, registered: int) -> tuple[int, str] | None:
        """The window the agent that wrote ``t`` ran ``model`` with, when its own rule differs
        from the model's ``registered`` window: (tokens, the rule's name); ``None``: the
        registry's window holds."""
        return None

    def source_line(self, ln: Line) -> Line | None:
        """``ln`` as its source wrote it, when this format changed it only for bookkeeping
        (a re-linked parent); ``None``: ``ln`` is its source form. Restore finds a line by
        the bytes it had when an operation recorded it."""
        return None

    def output_items(self, t: Transcript) -> Iterator[Line]:
        """Every output element of ``t`` in order, reusing source lines where unchanged."""

        def render(m: Message) -> list[Any]:
            return self.render(m, t)

        def render_compaction(c: Compaction) -> list[Any]:
            return self.render_compaction(c, t)

        for e in t.entries:
            if type(e) is Record:  # kept as it came (entry_items' answer, without its generator)
                yield e.line
            else:
                yield from entry_items(e, render, render_compaction)

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        """Write transcripts; the layout (JSONL lines, JSON array, dataset records) is the source's."""
        ts = iter(transcripts)
        first = next(ts, None)
        if first is None:
            return
        layout = first.extra.get("layout", self.default_layout)
        if layout == "entries_jsonl":
            for t in _chain(first, ts):
                style = source_style(t)  # new and changed lines are written like the file's
                for ln in self.output_items(t):
                    out.write(ln.raw if ln.raw is not None else jsonio.dumps(ln.obj, style))
                    out.write(b"\n")
        elif layout == "entries_array":
            items = [ln.obj for t in _chain(first, ts) for ln in self.output_items(t)]
            write_document(out, items, document_style(first))
        elif layout == "records_jsonl":
            for t in _chain(first, ts):
                raw = t.extra.get("record_raw")
                out.write(raw if raw is not None and self.record_unchanged(t) else self.changed_record(t))
                out.write(b"\n")
        elif layout in ("records_array", "record_object"):
            recs = [self.build_record(t) for t in _chain(first, ts)]
            doc: Any = recs[0] if layout == "record_object" and len(recs) == 1 else recs
            write_document(out, doc, document_style(first))
        else:  # pragma: no cover - a programming error
            raise ValueError(f"unknown layout {layout!r}")

    def changed_record(self, t: Transcript) -> bytes:
        """A changed record of a JSON Lines dataset, in its source's style (separators,
        escaping): its source bytes with only the message list written again when that is
        all that changed (:func:`splice_messages`), else the record written whole with every
        number as its source wrote it (:func:`make_exact`)."""
        if not t.extra.get("exact"):
            spliced = splice_messages(t, self.build_record(t))
            if spliced is not None:
                return spliced
            make_exact(t)
        return jsonio.dumps(self.build_record(t), source_style(t))

    def record_unchanged(self, t: Transcript) -> bool:
        if "record_raw" not in t.extra or t.extra.get("entries_count") != len(t.entries):
            return False
        return all(not getattr(e, "dirty", False) and (not isinstance(e, Message) or e.lines) for e in t.entries)

    def build_record(self, t: Transcript) -> dict[str, Any]:
        """A dataset record with its messages replaced and every other field kept in order."""
        items = [ln.obj for ln in self.output_items(t)]
        key = t.messages_key or "messages"
        if t.record is None:
            return {key: items}
        rec = dict(t.record)
        rec[key] = items
        return rec


def source_style(t: Transcript, document: bool = False) -> jsontext.Style:
    """How ``t``'s source lines were written: detected from their bytes, or as a canonical
    header recorded it (compact when unknown). A document's indentation only with ``document``."""
    raw = t.extra.get("record_raw")
    if isinstance(raw, bytes):
        return jsontext.Style.detect(raw)
    d = t.extra.get("source_style")
    if isinstance(d, dict):
        style = jsontext.Style.from_json(d)
        return style if document else jsontext.Style(style.item_sep, style.key_sep, style.ascii)
    raws = []  # JSON Lines of entries: the first lines read from the file
    for e in t.entries[:SCAN_STYLE]:
        first = source_lines(e)[:1]
        if first and first[0].raw is not None:
            raws.append(first[0].raw)
    return jsontext.Style.detect_lines(raws) if raws else jsontext.COMPACT


def entry_items(
    e: Entry, render: Callable[[Message], list[Any]], render_compaction: Callable[[Compaction], list[Any]]
) -> Iterator[Line]:
    """One entry's output lines: its source lines while unchanged, else ``render``'s objects."""
    if isinstance(e, Message):
        if e.lines and not e.dirty:
            yield e.lines[0]
        else:
            for obj in render(e):
                yield Line(obj)
    elif isinstance(e, Cont):
        if not e.message.dirty and e.part < len(e.message.lines):
            yield e.message.lines[e.part]
    elif isinstance(e, Record):
        yield e.line
    elif isinstance(e, Compaction):
        if e.lines and not e.dirty:
            yield from e.lines
        else:
            for obj in render_compaction(e):
                yield Line(obj)


def document_style(t: Transcript) -> jsontext.Style:
    """How to write a JSON document: as its source was (indentation or one line, escaping,
    its final newline or none), else indented by 2 with raw UTF-8."""
    style = source_style(t, document=True)
    return style if style.document else jsontext.Style(",", ": ", style.ascii, 2)


def write_document(out: IO[bytes], doc: Any, style: jsontext.Style) -> None:
    """The one place a JSON document is written: in ``style``, ending as its source ended
    (a source without a final newline does not gain one)."""
    out.write(jsonio.dumps(doc, style))
    out.write(style.end())


def _chain(first: Transcript, rest: Iterator[Transcript]) -> Iterator[Transcript]:
    yield first
    yield from rest


def template(msg: Message) -> dict[str, Any]:
    """A shallow copy of the message's first source object, to keep its other fields."""
    if msg.lines and isinstance(exact_obj(msg.lines[0]), dict):
        return copy.copy(msg.lines[0].obj)
    return {}


def exact_obj(line: Line) -> Any:
    """``line.obj`` with every number as the source wrote it. JSON Lines are read fast (orjson);
    a writer that serializes a source object again asks for it here, and the line is parsed
    again, exactly, when its bytes hold a number orjson would change."""
    if not line.exact and line.raw is not None:
        if jsontext.needs_exact(line.raw):
            line.obj = jsonio.loads(line.raw, line=line.lineno)
        line.exact = True
    return line.obj


def record_bytes(ln: Line) -> bytes | None:
    """A JSON Lines record's bytes: as read, or, for a caller's parsed record handed over
    without them (:func:`ctxtool.run.records.process`), made from its value now, as that
    function makes them (compact), and kept on the line."""
    if ln.raw is None and ln.obj is not None:
        ln.raw = jsonio.dumps(ln.obj)
    return ln.raw


def writes_anew(ln: Line, key: str | None, dropped: Collection[int]) -> bool:
    """Whether a caller's parsed record without its bytes (:func:`record_bytes`) may be written
    with the messages at ``dropped`` (of its list at ``key``) left out, without making them
    first: when orjson writes those messages. Its bytes are then made as the record written
    anew is (orjson, or the exact encoder for both when what is kept needs it); otherwise
    its bytes would come from the exact encoder, whose numbers differ from orjson's
    (``1e-05`` against ``0.00001``) in the fields kept as they were."""
    import orjson

    items = ln.obj.get(key) if key and isinstance(ln.obj, dict) else None
    if not isinstance(items, list):
        return False
    try:
        orjson.dumps([items[k] for k in dropped])
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


def splice_messages(t: Transcript, rec: dict[str, Any]) -> bytes | None:
    """``rec``, the new value of a dataset record read fast, as its source bytes with the
    message list alone written again (in the source's style, :class:`jsontext.SourceStyle`:
    its escaping read only when the text written depends on it), or None: write it whole. Only when
    every other field is as it was, the source's list was not empty and the source items of
    the messages still there hold no number it may write otherwise (:func:`jsontext.may_change`;
    a message dropped is not written, and what ctxtool adds has no source text): the other
    fields keep their bytes (numbers as written, escapes as written), and no scan of the
    record for numbers is needed. The list's place is checked,
    not assumed: the record with an empty list there must read as ``rec`` with an empty
    list, key for key."""
    import orjson

    raw, fast, key = t.extra.get("record_raw"), t.extra.get("record_obj"), t.messages_key
    if not (isinstance(raw, bytes) and isinstance(fast, dict) and key and list(rec) == list(fast)):
        return None
    old, items = fast.get(key), rec.get(key)
    if not (isinstance(old, list) and old and isinstance(items, list)):
        return None
    sources = [ln.obj for e in t.entries for ln in source_lines(e)]
    if jsontext.may_change(sources):
        return None
    # the items written are those source values themselves (messages kept unchanged): shown
    # plain by that walk (no float, no other type), not walked again to be written
    plain = len(items) == len(sources) and all(a is b for a, b in zip(items, sources, strict=True))
    style = jsontext.SourceStyle(raw)
    keys = list(rec)
    after = keys.index(key) + 1
    stop = len(raw)
    if after < len(keys):  # the next field's key closes the list
        stop = raw.rfind(style.item_sep.encode() + style.encode(keys[after]) + style.key_sep.encode())
    b = raw.rfind(b"]", 0, stop) if stop >= 0 else -1
    head = style.encode(key) + style.key_sep.encode()
    want = {**rec, key: []}
    a = raw.find(head)
    for _ in range(4):  # the key's first places (a field before it may hold the same key)
        if a < 0 or a > b:
            return None
        start = a + len(head)
        if raw[start : start + 1] == b"[":
            try:
                rest = orjson.loads(raw[:start] + b"[]" + raw[b + 1 :])
                same = isinstance(rest, dict) and list(rest) == keys and rest == want
            except (orjson.JSONDecodeError, RecursionError):  # nested too deep to compare here: written whole
                same = False
            if same:
                return b"".join((raw[:start], style.encode(items, plain), raw[b + 1 :]))
        a = raw.find(head, a + 1)
    return None


def make_exact(t: Transcript) -> None:
    """For a dataset record read fast: swap its values (record fields, messages) for exact
    ones when its bytes hold a number orjson would change (see :func:`exact_obj`)."""
    raw, fast = t.extra.get("record_raw"), t.extra.get("record_obj")
    if not isinstance(raw, bytes) or not isinstance(fast, dict) or t.extra.get("exact"):
        return
    t.extra["exact"] = True
    if not jsontext.needs_exact(raw):
        return
    rec = jsonio.loads(raw)
    if not isinstance(rec, dict) or list(rec) != list(fast):
        return
    # Source lines hold containers of the record (its messages, a field such as a system
    # prompt): those are found by identity. Scalars are not (orjson's 0 for "0" and for "-0"
    # is one object): a record field is swapped for the exact value of the same key.
    swap: dict[int, Any] = {id(v): rec[k] for k, v in fast.items() if isinstance(v, dict | list)}
    items, exact_items = fast.get(t.messages_key or ""), rec.get(t.messages_key or "")
    if isinstance(items, list) and isinstance(exact_items, list) and len(items) == len(exact_items):
        swap.update({id(a): b for a, b in zip(items, exact_items, strict=True) if isinstance(a, dict | list)})
    if t.record is not None:
        t.record = {k: rec[k] if v is not None and k in fast and v is fast[k] else v for k, v in t.record.items()}
    for e in t.entries:
        for ln in source_lines(e):
            if id(ln.obj) in swap:
                ln.obj = swap[id(ln.obj)]
                ln.exact = True


def read_meta(obj: dict[str, Any]) -> Metadata:
    m = obj.get(META_KEY)
    return Metadata.from_json(m) if isinstance(m, dict) else Metadata()


def put_meta(obj: dict[str, Any], msg: Message) -> None:
    if msg.metadata.is_empty():
        obj.pop(META_KEY, None)
    else:
        obj[META_KEY] = msg.metadata.to_json()


def assign_positional_ids(messages: list[Message], prefix: str) -> None:
    """For formats without call ids (ShareGPT, some datasets): pair calls and results by position.

    Each call gets a synthetic id; each following result takes the oldest unanswered id.
    When a run of results ends with calls of the same batch still open, the last result of
    the run answers them too (LLaMA-Factory puts all parallel results in one message).
    Synthetic ids are marked so writers do not emit them.
    """
    pending: list[str] = []
    n = 0
    last_result: Block | None = None
    for m in messages:
        has_call = False
        for b in m.content:
            if b.type == "tool_call" and not b.id:
                if not has_call and pending and last_result is not None:
                    _answer_rest(last_result, pending)
                has_call = True
                n += 1
                b.id = f"{prefix}{n}"
                b.extra = {**(b.extra or {}), "synthetic_id": True}
                pending.append(b.id)
                last_result = None
            elif b.type == "tool_result" and not b.id:
                if pending:
                    b.id = pending.pop(0)
                    b.extra = {**(b.extra or {}), "synthetic_id": True}
                    last_result = b
        if m.role not in ("tool",) and not has_call and pending and last_result is not None:
            _answer_rest(last_result, pending)
            last_result = None
    if pending and last_result is not None:
        _answer_rest(last_result, pending)


def _answer_rest(result: Block, pending: list[str]) -> None:
    result.extra = {**(result.extra or {}), "answers": list(pending)}
    pending.clear()


def is_synthetic(b: Block) -> bool:
    return bool(b.extra and b.extra.get("synthetic_id"))


@dataclass(slots=True)
class CompactionNote:
    """A compaction handed to a format to record (:meth:`Format.record_compaction`)."""

    text: str  # the summary as the agent reads it next, without a prefix
    prefixed: str  # the same behind the ``[Previous conversation summary]`` prefix
    messages: list[Message]  # the same as summary messages (what datasets carry)
    first_kept: Message  # the first message kept verbatim; the entries go before it
    tokens_before: int | None = None
    trigger: str = "auto"  # auto | manual
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)  # pinned instructions, as the agent reads them (compaction.pins)

    def pin_messages(self) -> list[Message]:
        """The pinned instructions as user messages, recorded beside the summary."""
        return [Message("user", [Block("text", text=p)], dirty=True) for p in self.pins]

    def entry(self, summary: str) -> Compaction:
        """A new compaction entry carrying ``summary`` (for formats that persist one)."""
        return Compaction(summary=summary, first_kept_id=self.first_kept.id, tokens_before=self.tokens_before,
                          details={"trigger": self.trigger}, dirty=True)
