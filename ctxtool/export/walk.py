"""A transcript as a reader sees it: turns made of parts, and compaction markers.

Both renderers (markdown, html) draw the same :class:`ExportedTranscript`, so what counts as injected
content, how a tool output is matched to its call and how a compaction is described are
decided here once. Nothing is dropped: every message becomes a turn, every block a part.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..formats import get_format, images
from ..io import jsonl as jsonio
from ..model import Block, Compaction, Message, Record, Transcript, injected_kind, injected_text
from ..tokens.context import BOUNDARY_RECORDS, is_summary
from ..tool_outputs.saved import saved_output

#: image types a browser shows from a data URI (anything else is named, never embedded)
SAFE_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True, slots=True)
class TurnPart:
    """One piece of a turn.

    ``kind``: ``text`` (the speaker's words), ``injected`` (content an agent put in a user
    turn; ``label`` says which), ``thinking``, ``call`` (``label``: the tool; ``text``: its
    arguments), ``output`` (``label``: the tool that produced it), ``image`` (``label``: what
    it is; ``url``: a data URI to show, when the transcript holds the image)."""

    kind: str
    text: str = ""
    label: str = ""
    call_id: str | None = None
    error: bool = False
    url: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    number: int  # 1-based position among the transcript's messages
    role: str
    parts: list[TurnPart]
    injected: str | None = None  # the whole turn is injected content of this kind
    model: str | None = None
    timestamp: str | None = None
    line: int | None = None
    hidden: tuple[str, ...] = ()  # "agent" / "user": not shown to them (metadata visibility)


@dataclass(frozen=True, slots=True)
class Marker:
    """A compaction: Claude Code's boundary line (``boundary``) or a recorded compaction entry
    with its summary (``compaction``: pi, Codex, ctxtool); or a ``notice`` the agent showed
    between turns (its text in ``summary``)."""

    kind: str
    summary: str = ""
    trigger: str | None = None
    tokens_before: int | None = None
    timestamp: str | None = None
    line: int | None = None
    title: str = ""  # a ``notice``'s: what the agent called it (Info, Error, Warning)

    @property
    def is_compaction(self) -> bool:
        return self.kind in ("boundary", "compaction")


# records an agent wrote between turns that its user saw ("Request cancelled.", an API
# error): shown as notices (Gemini CLI's info, error and warning records)
NOTICE_RECORDS = {"gemini:info": "Info", "gemini:error": "Error", "gemini:warning": "Warning"}

Item = Turn | Marker


@dataclass(slots=True)
class ExportedTranscript:
    label: str
    format: str
    id: str | None
    items: list[Item] = field(default_factory=list)

    @property
    def turns(self) -> int:
        return sum(isinstance(i, Turn) for i in self.items)

    @property
    def markers(self) -> int:
        return sum(isinstance(i, Marker) and i.is_compaction for i in self.items)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _line_obj(lines: list[Any]) -> dict[str, Any]:
    o = lines[0].obj if lines else None
    return o if isinstance(o, dict) else {}


def arguments_text(b: Block) -> str:
    """A call's arguments, pretty JSON when they are JSON (a string holding JSON too)."""
    a = b.arguments
    if isinstance(a, str):
        try:
            a = jsonio.loads(a)
        except Exception:  # not JSON: shown as written
            return b.arguments_text()
        if not isinstance(a, (dict, list)):
            return b.arguments_text()
    if a is None:
        return ""
    return jsonio.dumps_pretty(a).decode("utf-8")


def image_part(b: Block) -> TurnPart:
    if images.is_document(b.data):
        return document_part(b.data)
    p = images.parse(b.data)
    if p is None:
        return TurnPart("image", label="image (no data in the transcript)")
    kind, a, payload = p
    if kind == "url":
        shown = a if len(a) <= 200 else a[:200] + "…"
        return TurnPart("image", label=f"image at {shown}")
    size = len(payload) * 3 // 4
    label = f"image ({a}, {size:,} bytes)"
    return TurnPart("image", label=label, url=f"data:{a};base64,{payload}" if a in SAFE_IMAGE_TYPES else None)


def document_part(d: dict[str, Any]) -> TurnPart:
    """A document block, named (its title, type and size), never embedded."""
    s0 = d.get("source")
    src: dict[str, Any] = s0 if isinstance(s0, dict) else {}
    title = _str(d.get("title"))
    mime = _str(src.get("media_type")) or _str(src.get("type")) or "document"
    data = src.get("data")
    size = (len(data) * 3 // 4 if src.get("type") == "base64" else len(data)) if isinstance(data, str) else None
    what = ", ".join(x for x in (title and repr(title), mime, size is not None and f"{size:,} bytes") if x)
    url = _str(src.get("url"))
    return TurnPart("image", label=f"document ({what})" + (f" at {url}" if url else ""))


def _parts(m: Message, names: dict[str, str], whole: str | None) -> list[TurnPart]:
    out: list[TurnPart] = []
    for b in m.content:
        t = b.type
        if t == "text":
            kind = whole or (injected_text(b.text) if m.role == "user" else None)
            out.append(TurnPart("injected", b.text, label=kind) if kind else TurnPart("text", b.text))
        elif t == "thinking":
            out.append(TurnPart("thinking", b.text))
        elif t == "tool_call":
            name = b.name or "tool"
            if b.id:
                names[b.id] = name
            out.append(TurnPart("call", arguments_text(b), label=name, call_id=b.id))
        elif t == "tool_result":
            name = b.name or (names.get(b.id, "") if b.id else "")
            saved = saved_output(b.text)
            if saved is not None:  # the output is in a file the agent wrote: its reference and preview
                size = f", {saved.size}" if saved.size else ""
                name = f"{name or 'output'} · saved to {saved.path}{size}"
            out.append(TurnPart("output", b.text, label=name, call_id=b.id, error=b.is_error))
        elif t == "image":
            out.append(image_part(b))
        else:  # a block type this build does not know: its text, named
            out.append(TurnPart("text", b.text or f"[{t} block]"))
    return out


def _turn(n: int, m: Message, names: dict[str, str]) -> Turn:
    whole = "summary" if is_summary(m) else injected_kind(m)
    o = _line_obj(m.lines)
    hidden = tuple(w for w, seen in (("agent", m.agent_visible), ("user", m.user_visible)) if not seen)
    return Turn(n, m.role, _parts(m, names, whole), whole, m.model, _str(o.get("timestamp")), m.lineno, hidden)


def _boundary(r: Record) -> Marker:
    o = r.line.obj if isinstance(r.line.obj, dict) else {}
    md = o.get("compactMetadata")
    md = md if isinstance(md, dict) else {}
    pre = md.get("preTokens")
    return Marker("boundary", trigger=_str(md.get("trigger")), tokens_before=pre if isinstance(pre, int) else None,
                  timestamp=_str(o.get("timestamp")), line=r.line.lineno)


def _compaction(t: Transcript, c: Compaction) -> Marker:
    try:
        summary, _kept = get_format(t.format).read_compaction(t, c)
    except Exception:  # a format this build does not know: the entry's own summary
        summary = c.summary
    o = _line_obj(c.lines)
    trigger = "hook" if c.details.get("fromHook") else None
    return Marker("compaction", summary=summary, trigger=trigger, tokens_before=c.tokens_before,
                  timestamp=_str(o.get("timestamp")), line=c.lines[0].lineno if c.lines else None)


def view(t: Transcript) -> ExportedTranscript:
    """The readable view of one transcript, in source order."""
    v = ExportedTranscript(t.label, t.format, t.id)
    names: dict[str, str] = {}
    n = 0
    for e in t.entries:
        if isinstance(e, Message):
            n += 1
            v.items.append(_turn(n, e, names))
        elif isinstance(e, Compaction):
            v.items.append(_compaction(t, e))
        elif isinstance(e, Record) and e.kind in BOUNDARY_RECORDS:
            v.items.append(_boundary(e))
        elif isinstance(e, Record) and e.kind in NOTICE_RECORDS:
            o = e.line.obj if isinstance(e.line.obj, dict) else {}
            c = o.get("content")
            text = c if isinstance(c, str) else jsonio.dumps_text(c) if c is not None else ""
            v.items.append(Marker("notice", summary=text, timestamp=_str(o.get("timestamp")), line=e.line.lineno,
                                  title=NOTICE_RECORDS[e.kind]))
    return v


def views(transcripts: Iterator[Transcript]) -> Iterator[ExportedTranscript]:
    for t in transcripts:
        yield view(t)
