"""restore: put back every message truncate, spill or trim changed, as it was read."""

from __future__ import annotations

from typing import Any

from .. import formats
from ..agent.tools import is_hint
from ..cache import RefCache
from ..errors import CtxtoolError, Failure
from ..formats.base import make_exact, source_style
from ..io import jsonl as jsonio
from ..io.events import EventLog
from ..model import Compaction, Cont, Line, Message, Metadata, Record, Transcript
from ..tokens.count import get_tokenizer
from .common import Ctx, OpsReport, block_from, line_key
from .stash import read_stash, unstash_refs


def restore_transcript(t: Transcript, cache: RefCache, *, report: OpsReport | None = None, events: EventLog | None = None) -> OpsReport:
    """Put back every message changed by truncate or trim, as it was read."""
    report = report or OpsReport("restore", t.path, format=t.format)
    ctx = Ctx("restore", cache, get_tokenizer("heuristic"), events, report)
    restore(ctx, t)
    return report


def restore(ctx: Ctx, t: Transcript) -> None:
    rep = ctx.report
    rep.transcripts += 1
    restored: dict[int, list[str]] = {}  # id(msg) -> predecessor key of each source line
    rep_before = rep.restored
    seen_refs: set[str] = set()
    drop: set[int] = set()
    packs: dict[str, Any] = {}  # this transcript's stash packs, read once
    style: Any = None  # how the source was written, as truncate or trim read it (see flush_stashes)
    for msg in t.iter_messages():
        rep.messages += 1
        if is_hint(msg):  # --agent-hint's note: not in what was read
            drop.add(id(msg))
            continue
        try:
            src = _source_ref(msg)
            if src is None:
                continue
            if src in seen_refs:  # a message the writer rendered as several: one comes back
                drop.add(id(msg))
                continue
            stash = read_stash(ctx, src, packs)
            if not isinstance(stash, dict) or stash.get("ctxtool_stash") != 1:
                raise CtxtoolError(f"ref {src} is not a message stash", path=t.path, line=msg.lineno)
            content = []
            for d in stash.get("content") or []:
                rf = d.pop("restore_from", None)
                blk = block_from(d)
                if rf:
                    text = ctx.cache.read_text(rf["ref"])
                    val: Any = jsonio.loads(text, path=f"ref:{rf['ref']}") if rf.get("json") else text
                    setattr(blk, rf["field"], val)
                content.append(blk)
            lines = [unstash_refs(x, ctx.cache) for x in stash.get("lines") or []]
        except CtxtoolError as e:
            ctx.handle(_in_transcript(e, t, msg))  # --on-error skip: the message stays as it is
            continue
        seen_refs.add(src)
        style = style or (stash.get("style") if isinstance(stash.get("style"), dict) else None)
        msg.content = content
        msg.metadata = Metadata.from_json(stash.get("metadata"))
        if lines and stash.get("format") == t.format:
            msg.lines = [
                Line(jsonio.loads(x["raw"]), x["raw"].encode("utf-8"), x.get("lineno"))
                if "raw" in x
                else Line(x.get("obj"), None, x.get("lineno"))
                for x in lines
            ]
            msg.dirty = False
            restored[id(msg)] = [str(x.get("after", "")) for x in lines]
        else:
            msg.touch()
        rep.restored += 1
        ctx.emit("restore", file=t.path, message_id=msg.id, line=msg.lineno, ref=src)
    if drop or restored:
        _fix_entries(t, drop, restored)
    if rep_before != rep.restored and "record_raw" in t.extra:
        # a dataset record: rebuilt from the restored lines, in the style it was read in, with
        # every value it read fast made exact first (its bytes go with record_raw)
        make_exact(t)
        t.extra["source_style"] = style or source_style(t, document=True).to_json()
        del t.extra["record_raw"]
    elif rep_before != rep.restored and style is not None:
        t.extra["source_style"] = style


def _source_ref(msg: Message) -> str | None:
    """The message's stash ref, after checking the refs it carries are what truncate and
    trim write (a ref that is a number, null or a list is bad input, never ignored)."""
    md = msg.metadata
    extra = md.extra
    if "output_ref" in extra or (md.output_ref is not None and not isinstance(md.output_ref, dict)):
        raise CtxtoolError(f"output_ref must be an object, not {_kind(extra.get('output_ref', md.output_ref))}")
    if "output_refs" in extra:
        refs = extra["output_refs"]
        if not isinstance(refs, list) or not all(isinstance(e, dict) for e in refs):
            raise CtxtoolError(f"output_refs must be a list of objects, not {_kind(refs)}")
    if "source_ref" not in extra:
        return None
    src = extra["source_ref"]
    if not isinstance(src, str):
        raise CtxtoolError(f"source_ref must be a string, not {_kind(src)}")
    return src


def _kind(v: Any) -> str:
    return {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
        type(v), "an object"
    )


def _in_transcript(e: CtxtoolError, t: Transcript, msg: Message) -> CtxtoolError:
    """A problem with a ref a message names: bad input at the message's line (a missing ref
    keeps its own code, the cache's path in the message)."""
    if e.path == t.path and e.line is not None:
        return e
    kind = Failure.NOT_FOUND if e.kind == Failure.NOT_FOUND else Failure.INPUT
    where = f" ({e.path})" if e.path and e.path != t.path else ""
    return CtxtoolError(f"{e.message}{where}", kind=kind, path=t.path, line=msg.lineno)


def _fix_entries(t: Transcript, drop: set[int], restored: dict[int, list[str]]) -> None:
    """Drop duplicates; put each restored message's continuation lines back where they were
    (right after the line that preceded each of them in the original)."""
    multi = {k for k, after in restored.items() if len(after) > 1}
    base = [
        e
        for e in t.entries
        if not (isinstance(e, Message) and id(e) in drop)
        and not (isinstance(e, Cont) and (id(e.message) in drop or id(e.message) in multi))
    ]
    if not multi:
        t.entries = base
        return
    pending: dict[str, list[Cont]] = {}
    msgs = {id(e): e for e in base if isinstance(e, Message) and id(e) in multi}
    for k in multi:
        m = msgs.get(k)
        if m is None:
            continue
        for part, key in enumerate(restored[k][1:], 1):
            pending.setdefault(key, []).append(Cont(m, part))
    out: list[Any] = []
    fmt = formats.get_format(t.format) if t.format in formats.format_names() else None

    def place(line: Line) -> None:
        todo = [line]
        while todo:
            ln = todo.pop()
            key = line_key(ln)
            if key not in pending and fmt is not None:  # a line re-linked since: its source bytes
                src = fmt.source_line(ln)
                key = line_key(src) if src is not None else key
            conts = pending.get(key)
            if not conts:
                continue
            c = conts.pop(0)  # identical predecessors: the rest wait for the next occurrence
            if not conts:
                del pending[key]
            out.append(c)
            todo.append(c.message.lines[c.part])

    for e in base:
        out.append(e)
        if isinstance(e, Compaction):
            if e.lines:
                place(e.lines[-1])
        elif isinstance(e, Message):
            if e.lines:
                place(e.lines[0])
        elif isinstance(e, Cont):
            if e.part < len(e.message.lines):
                place(e.message.lines[e.part])
        elif isinstance(e, Record):
            place(e.line)
    # continuation lines whose predecessor was not found: after their message
    left = sorted((c for cs in pending.values() for c in cs), key=lambda c: c.part, reverse=True)
    for c in left:
        i = next(i for i, e in enumerate(out) if e is c.message)
        out.insert(i + 1, c)
    t.entries = out
