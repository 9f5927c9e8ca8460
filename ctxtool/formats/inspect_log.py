"""Inspect (UK AISI ``inspect_ai``) eval logs: ``.json`` documents and ``.eval`` zip archives;
each sample is one transcript (its ``messages``), every other field kept.

``attachment://`` references are resolved on reading and put back on writing; ``.json`` logs are
written back, ``.eval`` archives only read (converted with ``--to``)."""

from __future__ import annotations

import copy
import io
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import Block, Line, Message, Metadata, Transcript, Usage, token_count
from .base import (
    META_KEY,
    STRUCTURE_ERRORS,
    ErrorPolicy,
    Format,
    document_style,
    make_exact,
    malformed,
    put_meta,
    read_meta,
    template,
    write_document,
)

ATTACHMENT = "attachment://"
PART = "inspect_part"  # a content part kept whole (written back while its text is unchanged)
ROLES = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def is_log(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("eval"), dict) and "version" in doc and (
        "samples" in doc or "status" in doc
    )


# -- attachments ---------------------------------------------------------------------------
def resolve(v: Any, att: dict[str, Any]) -> Any:
    """``v`` with every ``attachment://<hash>`` string replaced by the attachment's text."""
    if isinstance(v, str):
        if v.startswith(ATTACHMENT):
            got = att.get(v[len(ATTACHMENT):])
            return got if isinstance(got, str) else v
        return v
    if isinstance(v, list):
        return [resolve(x, att) for x in v]
    if isinstance(v, dict):
        return {k: resolve(x, att) for k, x in v.items()}
    return v


def refer(v: Any, back: dict[str, str]) -> Any:
    """``v`` with every string that is an attachment's text replaced by its reference."""
    if isinstance(v, str):
        h = back.get(v)
        return ATTACHMENT + h if h is not None else v
    if isinstance(v, list):
        return [refer(x, back) for x in v]
    if isinstance(v, dict):
        return {k: refer(x, back) for k, x in v.items()}
    return v


# -- messages ------------------------------------------------------------------------------
def _part(p: Any) -> Block:
    if isinstance(p, str):
        return Block("text", text=p)
    t = p.get("type")
    if t == "text" and isinstance(p.get("text"), str):
        return Block("text", text=p["text"], extra={PART: p} if set(p) - {"type", "text"} else None)
    if t == "reasoning":
        txt = p.get("reasoning") or p.get("summary") or ""
        return Block("thinking", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p})
    if t == "image":
        return Block("image", data=p)
    txt = p.get("text", "")
    return Block("text", text=txt if isinstance(txt, str) else jsonio.dumps_text(txt), extra={PART: p})


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in map(_part, content) if b.type == "text")


def decode_message(o: dict[str, Any], line: Line, att: dict[str, Any]) -> Message:
    role = ROLES.get(o.get("role", ""))
    if role is None:
        raise CtxtoolError(f"not an Inspect chat message (role {o.get('role')!r})", line=line.lineno)
    c = resolve(o.get("content"), att)
    if not (c is None or isinstance(c, (str, list))):
        raise CtxtoolError(f"message content must be a string or a list, not {type(c).__name__}", line=line.lineno)
    blocks: list[Block] = []
    if role == "tool":
        err = o.get("error")
        blocks.append(Block("tool_result", text=_text(c), id=o.get("tool_call_id"), name=o.get("function"),
                            is_error=err is not None))
    else:
        if isinstance(c, str):
            if c or not o.get("tool_calls"):
                blocks.append(Block("text", text=c))
        elif c is not None:
            blocks.extend(_part(p) for p in c)
        calls = o.get("tool_calls") or []
        if not isinstance(calls, list):
            raise CtxtoolError("tool_calls must be a list", line=line.lineno)
        for tc in calls:
            blocks.append(Block("tool_call", id=tc.get("id"), name=tc.get("function"),
                                arguments=resolve(tc.get("arguments"), att)))
    mid = o.get("id")
    model = o.get("model")
    return Message(role, blocks, id=mid if isinstance(mid, str) else None, metadata=read_meta(o) if META_KEY in o else Metadata(),
                   model=model if isinstance(model, str) else None, lines=[line])


def _refs(v: Any, found: set[str]) -> set[str]:
    """The attachment hashes ``v`` refers to."""
    if isinstance(v, str):
        if v.startswith(ATTACHMENT):
            found.add(v[len(ATTACHMENT):])
    elif isinstance(v, list):
        for x in v:
            _refs(x, found)
    elif isinstance(v, dict):
        for x in v.values():
            _refs(x, found)
    return found


def render_message(msg: Message, tmpl: dict[str, Any], back: dict[str, str]) -> list[dict[str, Any]]:
    """A message as Inspect chat messages (one tool message per result); ``tmpl`` is its
    source object (other fields kept); the texts its source held as attachments go back to
    their references (text written inline stays inline)."""
    used = _refs(tmpl, set())
    back = {k: h for k, h in back.items() if h in used}
    out: list[dict[str, Any]] = []
    results = [b for b in msg.content if b.type == "tool_result"]
    for b in results:
        o = dict(tmpl) if msg.role == "tool" and len(results) == 1 else {}
        o["content"] = b.text
        o["role"] = "tool"
        o["tool_call_id"] = b.id
        if b.name is not None or "function" in o:
            o["function"] = b.name
        if not b.is_error:
            o.pop("error", None) if "error" not in tmpl else o.__setitem__("error", None)
        elif o.get("error") is None:
            o["error"] = {"type": "unknown", "message": b.text}
        put_meta(o, msg)
        out.append(refer(o, back))
    rest = [b for b in msg.content if b.type != "tool_result"]
    if rest or not results:
        o = dict(tmpl) if not results else {}
        role = msg.role if msg.role in ("system", "user", "assistant") else "user"
        parts = [b for b in rest if b.type != "tool_call"]
        calls = [b for b in rest if b.type == "tool_call"]
        was_list = isinstance(o.get("content"), list)
        if not was_list and all(b.type == "text" and not b.extra for b in parts) and len(parts) <= 1:
            o["content"] = parts[0].text if parts else ""
        else:
            content: list[Any] = []
            for b in parts:
                src = (b.extra or {}).get(PART)
                if b.type == "image":
                    content.append(b.data if isinstance(b.data, dict) and b.data.get("type") == "image" else
                                   {"type": "image", "image": b.data.get("url", "") if isinstance(b.data, dict) else ""})
                elif isinstance(src, dict) and _part(src).text == b.text:
                    content.append(src)
                elif b.type == "thinking":
                    content.append({"type": "reasoning", "reasoning": b.text})
                else:
                    content.append({"type": "text", "text": b.text})
            o["content"] = content
        o["role"] = role
        if calls:
            before = {tc.get("id"): tc for tc in tmpl.get("tool_calls") or [] if isinstance(tc, dict)}
            tcs = []
            for b in calls:
                tc = dict(before.get(b.id) or {})
                tc.update({"id": b.id, "function": b.name, "arguments": b.arguments})
                tcs.append(tc)
            o["tool_calls"] = tcs
        elif "tool_calls" in o:
            o["tool_calls"] = None if o["tool_calls"] is None else []
        put_meta(o, msg)
        out.append(refer(o, back))
    return out


class InspectFormat(Format):
    name = "inspect"
    description = "Inspect eval logs (.json; .eval zip archives read only): each sample's messages"
    reads = "`.json` log, `.eval` zip archive (read)"
    default_layout = "inspect_log"
    record_family = "inspect"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 96 if (src.layout == "json" or src.one_line_document()) and sample and is_log(sample[0]) else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        doc = src.as_document()  # a document written on one line too
        if not is_log(doc):
            raise CtxtoolError("not an Inspect eval log (needs 'version', 'eval' and 'samples')", path=src.path)
        samples = doc.get("samples") or []
        log = {k: (None if k == "samples" else v) for k, v in doc.items()}
        log_usage = not _samples_record_usage(samples)  # else each sample's own
        for i, s in enumerate(samples):
            try:
                t = sample_transcript(s, log, src.path, i)
                if i == 0 and log_usage:
                    place_log_usage(t, log)
            except CtxtoolError as e:
                e.message = f"sample {i}: {e.message}"
                policy.handle(e)
                continue
            except STRUCTURE_ERRORS as e:
                policy.handle(malformed(e, src.path, None, f"sample {i}"))
                continue
            if src.style is not None:
                t.extra["source_style"] = src.style.to_json()
            yield t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        tmpl = template(msg)
        if not (tmpl.get("role") in ROLES and "content" in tmpl and "type" not in tmpl):
            tmpl = {}  # a line of another format (converted): do not copy its fields
        return render_message(msg, tmpl, _back(t))

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        ts = list(transcripts)
        if not ts:
            return
        first = ts[0]
        log = (first.record or {}).get("log") if first.extra.get("layout") == "inspect_log" else None
        doc: dict[str, Any] = dict(log) if isinstance(log, dict) else {"version": 2, "status": "success", "eval": {}}
        doc["samples"] = [self.build_record(t) for t in ts]
        write_document(out, doc, document_style(first))

    def build_record(self, t: Transcript) -> dict[str, Any]:
        make_exact(t)
        items = [ln.obj for ln in self.output_items(t)]
        sample = (t.record or {}).get("sample") if t.extra.get("layout") == "inspect_log" else None
        rec: dict[str, Any] = dict(sample) if isinstance(sample, dict) else {"id": t.id or str(t.index)}
        rec["messages"] = items
        return rec


def _back(t: Transcript) -> dict[str, str]:
    sample = (t.record or {}).get("sample")
    att = sample.get("attachments") if isinstance(sample, dict) else None
    if not isinstance(att, dict):
        return {}
    return {v: k for k, v in att.items() if isinstance(v, str)}


def sample_transcript(s: Any, log: dict[str, Any], path: str, i: int) -> Transcript:
    if not isinstance(s, dict) or not isinstance(s.get("messages"), list):
        raise CtxtoolError("sample has no 'messages' list", path=path)
    got = s.get("attachments")
    att: dict[str, Any] = got if isinstance(got, dict) else {}
    t = Transcript("inspect", path=path, index=i)
    for k, o in enumerate(s["messages"]):
        if not isinstance(o, dict):
            raise CtxtoolError(f"message {k} is not an object", path=path)
        try:
            t.entries.append(decode_message(o, Line(o), att))
        except CtxtoolError as e:
            e.message = f"message {k}: {e.message}"
            raise
    _place_usage(t, s)
    sid, epoch = s.get("id"), s.get("epoch")
    t.id = f"{sid}" + (f"/{epoch}" if epoch is not None else "") if sid is not None else str(i)
    t.record = {"log": log, "sample": {k: (None if k == "messages" else v) for k, v in s.items()}}
    t.messages_key = "messages"
    t.extra["layout"] = "inspect_log"
    t.extra["entries_count"] = len(t.entries)
    return t


def model_usage(u: Any) -> Usage | None:
    """Inspect's ``ModelUsage`` as usage: ``input_tokens`` holds the cache reads when the
    provider counts them in (its ``total_tokens`` then leaves them out once)."""
    if not isinstance(u, dict) or not any(k in u for k in ("input_tokens", "output_tokens", "total_tokens")):
        return None
    inp, out = token_count(u.get("input_tokens")), token_count(u.get("output_tokens"))
    write, read = token_count(u.get("input_tokens_cache_write")), token_count(u.get("input_tokens_cache_read"))
    total = token_count(u.get("total_tokens"))
    if read and total and total != inp + out + write + read and total == inp + out + write:
        inp = max(inp - read, 0)  # the reads are inside input_tokens
    return Usage(inp, out, write, read)


def _sum_usage(by_model: Any) -> tuple[Usage | None, str | None]:
    """The usage of a ``model_usage`` map (model name -> ModelUsage), summed; its model when one."""
    if not isinstance(by_model, dict):
        return None, None
    total: Usage | None = None
    for u in map(model_usage, by_model.values()):
        if u is not None:
            total = u if total is None else Usage(total.input + u.input, total.output + u.output,
                                                  total.cache_creation + u.cache_creation, total.cache_read + u.cache_read)
    names = [k for k in by_model if isinstance(k, str)]
    return total, names[0] if len(names) == 1 else None


def _place_usage(t: Transcript, s: dict[str, Any]) -> None:
    """Each model call's usage on the assistant message it produced (the sample's ``model``
    events name it by id); without events, the sample's ``model_usage`` on its last
    assistant message."""
    msgs = [m for m in t.iter_messages() if m.role == "assistant"]
    if not msgs:
        return
    by_id = {m.id: m for m in msgs if m.id}
    placed = False
    for ev in s.get("events") or []:
        if not (isinstance(ev, dict) and ev.get("event") == "model" and isinstance(ev.get("output"), dict)):
            continue
        out = ev["output"]
        u = model_usage(out.get("usage"))
        choices = out.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        msg = first.get("message")
        mid = msg.get("id") if isinstance(msg, dict) else None
        m = by_id.get(mid) if isinstance(mid, str) else None
        if u is not None and m is not None and m.usage is None:
            m.usage = u
            model = out.get("model") or ev.get("model")
            m.model = m.model or (model if isinstance(model, str) else None)
            placed = True
    if not placed:
        u, model = _sum_usage(s.get("model_usage"))
        if u is not None:
            msgs[-1].usage = u
            msgs[-1].model = msgs[-1].model or model


def place_log_usage(t: Transcript, log: dict[str, Any]) -> None:
    """A JSON log whose samples record no usage of their own: its ``stats.model_usage`` on
    its first transcript (a ``.eval`` archive's samples always record theirs)."""
    stats = log.get("stats")
    u, model = _sum_usage(stats.get("model_usage") if isinstance(stats, dict) else None)
    msgs = [m for m in t.iter_messages() if m.role == "assistant"]
    if u is not None and msgs:
        msgs[-1].usage = u
        msgs[-1].model = msgs[-1].model or model


def _samples_record_usage(samples: list[Any]) -> bool:
    """Whether any sample records its own usage (``model_usage``, or a model event's)."""
    for s in samples:
        if not isinstance(s, dict):
            continue
        if isinstance(s.get("model_usage"), dict) and s["model_usage"]:
            return True
        for ev in s.get("events") or []:
            if isinstance(ev, dict) and ev.get("event") == "model" and isinstance(ev.get("output"), dict) \
                    and ev["output"].get("usage"):
                return True
    return False


def is_eval_archive(data: Any) -> bool:
    if not isinstance(data, bytes):
        return False
    import zipfile  # .eval archives only (a JSON log needs none)

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return "header.json" in names or any(n.startswith("samples/") for n in names)


def read_eval_archive(data: bytes, path: str, policy: ErrorPolicy) -> Iterator[Transcript]:
    """The samples of a ``.eval`` zip archive (``header.json`` + ``samples/*.json``)."""
    import zipfile

    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (OSError, zipfile.BadZipFile) as e:
        raise CtxtoolError(f"not a readable .eval archive ({e})", path=path) from e
    with z:
        names = z.namelist()
        header = jsonio.loads(z.read("header.json")) if "header.json" in names else {}
        log = {k: copy.deepcopy(v) for k, v in header.items()} if isinstance(header, dict) else {}
        log["samples"] = None
        if "reductions.json" in names:  # the JSON log's ``reductions``, kept when it is converted
            log["reductions"] = jsonio.loads(z.read("reductions.json"))
        entries = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
        for i, name in enumerate(entries):
            try:
                t = sample_transcript(jsonio.loads(z.read(name)), log, path, i)
            except CtxtoolError as e:
                e.message = f"{name}: {e.message}"
                policy.handle(e)
                continue
            except STRUCTURE_ERRORS as e:
                policy.handle(malformed(e, path, None, name))
                continue
            t.format = "inspect-eval"
            t.extra["layout"] = "eval_archive"
            yield t


class InspectEvalFormat(Format):
    """``.eval`` archives: read only (their transcripts convert with ``--to``)."""

    name = "inspect-eval"
    description = "Inspect eval archives (.eval zip: header.json + samples/*.json), read only"
    reads = "`.eval` zip archive"
    writes = False
    record_family = "inspect"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 96 if src.layout == "zip" and sample and is_eval_archive(sample[0]) else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        if src.layout != "zip":
            raise CtxtoolError("not an Inspect .eval archive (a zip file)", path=src.path)
        yield from read_eval_archive(src.doc, src.path, policy)

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return INSPECT.render(msg, t)


INSPECT = InspectFormat()
FORMAT = INSPECT
EVAL_FORMAT = InspectEvalFormat()
