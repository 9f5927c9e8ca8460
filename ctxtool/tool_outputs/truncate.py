"""truncate (the Go agent and adk-code) and trim (the tool-output cache spec) of one transcript, in place."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..cache import RefCache
from ..cache.results import RefInfo
from ..errors import CtxtoolError, Failure
from ..history.pairing import tool_names
from ..io.events import EventLog
from ..model import Block, Message, Transcript
from ..tokens.context import ContextSettings
from ..tokens.count import Tokenizer, get_tokenizer
from ..tokens.heuristic import IMAGE_TOKENS
from .algorithms import (
    Limits,
    count_lines,
    spill_notice,
    trim_placeholder,
    truncate_text,
    truncation_notice,
    utf8_len,
    with_notice,
)
from .common import (
    DEFAULT_INCLUDE,
    TRIM_PREFIX,
    Change,
    Ctx,
    OpsReport,
    block_text,
    default_budget,
    existing_entry,
    tool_of,
    transcript_window,
)
from .stash import apply_changes, flush_stashes


def truncate_transcript(
    t: Transcript,
    limits: Limits,
    cache: RefCache,
    *,
    include: Iterable[str] = DEFAULT_INCLUDE,
    tok: Tokenizer | None = None,
    events: EventLog | None = None,
    report: OpsReport | None = None,
) -> OpsReport:
    """Cut every output of the included kinds that is over ``limits``, in place."""
    report = report or OpsReport("truncate", t.path, format=t.format)
    ctx = Ctx("truncate", cache, tok or get_tokenizer("heuristic"), events, report)
    truncate(ctx, t, limits, set(include))
    cache.flush()
    return report


def truncate(ctx: Ctx, t: Transcript, limits: Limits, include: set[str]) -> None:
    rep = ctx.report
    names = tool_names(t.iter_messages()) if "tool_result" in include else {}
    rep.transcripts += 1
    for msg in t.iter_messages():
        rep.messages += 1
        changes: list[Change] = []
        for i, b in enumerate(msg.content):
            if b.type not in include:
                continue
            rep.outputs += 1
            text = block_text(b)
            nbytes = utf8_len(text)
            ntok = IMAGE_TOKENS if b.type == "image" else ctx.tok.count(text)
            rep.bytes_before += nbytes
            rep.tokens_before += ntok
            if b.type == "image":
                cut = None
                if b.data is None:
                    rep.bytes_after += nbytes
                    rep.tokens_after += ntok
                    continue
            else:
                cut = truncate_text(text, limits)
                if not cut.changed:
                    rep.bytes_after += nbytes
                    rep.tokens_after += ntok
                    continue
            tool = tool_of(b, names)
            entry_old = existing_entry(msg, i)
            is_json = b.type == "image" or (b.type == "tool_call" and not isinstance(b.arguments, str))
            reuse = entry_old is not None and ctx.cache.exists(str(entry_old.get("id")))
            if reuse and entry_old:
                ref_id, data = str(entry_old["id"]), b""
            else:
                data = text.encode("utf-8", "surrogatepass")
                ref_id = hashlib.sha256(data).hexdigest()
            if cut is None:  # an image: moved out whole
                new_text = f"[ctxtool: image moved to the tool output cache; ref={ref_id}]"
                nb = Block("text", text=new_text)
                ev = "spill"
                fld = "data"
                after_b = utf8_len(new_text)
            else:
                if cut.spilled:
                    new_text = spill_notice(cut, ref_id, ntok)
                    ev = "spill"
                else:
                    new_text = with_notice(cut.text, truncation_notice(cut, ref_id, ntok))
                    ev = "truncate"
                after_b = utf8_len(new_text)
                if after_b >= nbytes:  # the notice would cost more than the cut saves
                    rep.bytes_after += nbytes
                    rep.tokens_after += ntok
                    continue
                nb = _with_text(b, new_text)
                fld = "arguments" if b.type == "tool_call" else "text"
            if ev == "spill":
                rep.spilled += 1
            else:
                rep.truncated += 1
            if reuse and entry_old:
                # cut again: the first ref still holds the full original
                info = RefInfo(ref_id, int(entry_old.get("byte_size", 0)), int(entry_old.get("line_count", 0)))
            else:
                lines = cut.orig_lines if cut is not None else count_lines(text)
                info = ctx.put_output(data, ref_id, lines, source=ctx.source(t, msg, tool, b.type))
            entry = {**info.ref_json(), "block": i, "kind": b.type}
            if is_json:
                entry["json"] = True
            entry["mode"] = ev
            changes.append(Change(i, nb, entry, fld))
            after_t = ctx.tok.count(new_text)
            rep.bytes_after += after_b
            rep.tokens_after += after_t
            if ctx.events is not None:
                ctx.emit_block(
                    ev, t, msg, tool, b,
                    bytes_before=nbytes,
                    bytes_after=after_b,
                    chars_before=len(text),
                    chars_after=len(new_text),
                    lines_before=count_lines(text),
                    lines_kept=cut.kept_lines if cut is not None else 0,
                    tokens_before=ntok,
                    tokens_after=after_t,
                    reasons=cut.reasons if cut is not None else ["image"],
                    ref=info.id,
                )
        if changes:
            apply_changes(ctx, t, msg, changes)
    flush_stashes(ctx, t)


def _with_text(b: Block, text: str) -> Block:
    nb = Block(b.type, text=b.text, id=b.id, name=b.name, arguments=b.arguments, is_error=b.is_error, data=b.data, extra=b.extra)
    if b.type == "tool_call":
        nb.arguments = text
    else:
        nb.text = text
    return nb


# -- trim (the tool-output cache spec) -----------------------------------------------------------------------


def is_trimmed(text: str) -> bool:
    return text.startswith(TRIM_PREFIX) and text.endswith("]") and "\n" not in text


def trim_transcript(
    t: Transcript,
    budget: int,
    cache: RefCache,
    *,
    tok: Tokenizer | None = None,
    events: EventLog | None = None,
    report: OpsReport | None = None,
) -> OpsReport:
    """While the tool outputs exceed ``budget`` tokens, replace the oldest by the tool-output cache spec
    placeholder (its full text in the cache). The newest output is always kept."""
    report = report or OpsReport("trim", t.path, format=t.format, budget=budget)
    ctx = Ctx("trim", cache, tok or get_tokenizer("heuristic"), events, report)
    trim(ctx, t, budget)
    cache.flush()
    return report


def trim(ctx: Ctx, t: Transcript, budget: int | None, context: ContextSettings | None = None) -> None:
    """``budget`` None: the tool-output cache spec's default from the transcript's window (:mod:`ctxtool.tokens.context`:
    ``context``'s flags and config, else what the transcript records or its model's)."""
    rep = ctx.report
    if budget is None:
        budget = default_budget(transcript_window(t, context))
        if budget is None:
            raise CtxtoolError(
                "no context window known for this transcript (no recorded window, no known model):"
                " give --budget TOKENS, or --model / --context-window",
                path=t.path, line=t.lineno, kind=Failure.USAGE,
            )
        if rep.budget is None:
            rep.budget = budget
    rep.transcripts += 1
    outs: list[tuple[Message, int, Block]] = []
    for msg in t.iter_messages():
        rep.messages += 1
        if not msg.agent_visible:
            continue
        for i, b in enumerate(msg.content):
            if b.type == "tool_result":
                outs.append((msg, i, b))
    rep.outputs += len(outs)
    texts = [b.text for _, _, b in outs]
    counts = ctx.tok.count_many(texts) if texts else []
    total = sum(counts)
    rep.tokens_before += total
    rep.bytes_before += sum(utf8_len(x) for x in texts)
    after_bytes = 0
    names = tool_names(t.iter_messages()) if outs else {}
    pending: dict[int, tuple[Message, list[Change]]] = {}
    ptok_est = ctx.tok.count(trim_placeholder("0" * 64))  # trimming smaller outputs would not save
    for k, (msg, i, b) in enumerate(outs):
        if total <= budget or k == len(outs) - 1 or is_trimmed(b.text) or counts[k] <= ptok_est:
            after_bytes += utf8_len(b.text)
            continue
        old = existing_entry(msg, i)
        tool = tool_of(b, names)
        if old is not None and old.get("id") and ctx.cache.exists(old["id"]):
            entry = dict(old)  # already truncated: its ref holds the full output
            ref = old["id"]
        else:
            info = ctx.put(b.text, kind="output", source=ctx.source(t, msg, tool, b.type))
            entry = {**info.ref_json(), "block": i, "kind": b.type}
            ref = info.id
        entry["mode"] = "trim"
        placeholder = trim_placeholder(ref)
        ptok = ctx.tok.count(placeholder)
        total -= counts[k] - ptok
        after_bytes += utf8_len(placeholder)
        rep.trimmed += 1
        pending.setdefault(id(msg), (msg, []))[1].append(Change(i, _with_text(b, placeholder), entry, "text"))
        ctx.emit_block(
            "trim", t, msg, tool, b,
            bytes_before=utf8_len(b.text),
            bytes_after=utf8_len(placeholder),
            tokens_before=counts[k],
            tokens_after=ptok,
            ref=ref,
            budget=ctx.report.budget,
        )
    for msg, changes in pending.values():
        apply_changes(ctx, t, msg, changes)
    flush_stashes(ctx, t)
    rep.tokens_after += total
    rep.bytes_after += after_bytes
