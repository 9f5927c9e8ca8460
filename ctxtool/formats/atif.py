"""Harbor's ATIF trajectories (Agent Trajectory Interchange Format, ``ATIF-v1.0`` ... ``v1.8``):
one JSON document, the root trajectory and each embedded subagent one transcript each.

A step is one message, its observation's results one tool message after it; audio parts are
named, never opened; drift is counted and warned about; what is written is what Harbor's models
accept. The details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import mimetypes
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from ..io.jsonl import Source
from ..model import HINT_SUMMARY, Block, Compaction, Line, Message, Metadata, Transcript, Usage, token_count
from . import images
from .anthropic_blocks import tool_input
from .base import (
    META_KEY,
    STRUCTURE_ERRORS,
    ErrorPolicy,
    Format,
    document_style,
    is_synthetic,
    make_exact,
    malformed,
    read_meta,
    write_document,
)

ROLE = {"system": "system", "user": "user", "agent": "assistant"}
SOURCE = {"system": "system", "user": "user", "assistant": "agent"}
STEP = "atif_step"  # hint: a message read from a step ("step") or from its observation ("observation")
PART = "atif_part"
OBS_AT = "atif_observation_at"  # hint: where the step's observation was among its keys
#: the newest ATIF version this reader knows, and the one a document made from another format gets
NEWEST = (1, 8)
WRITTEN = "ATIF-v1.6"
AUDIO_VERSION = "ATIF-v1.8"  # the version that brought audio content parts
#: content part types: text and image (v1.6), audio (v1.8)
PART_TYPES = frozenset({"text", "image", "audio"})
#: a step's fields in the v1.8 model (``ctxtool``: where ctxtool keeps its own metadata)
STEP_FIELDS = frozenset({
    "step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content", "tool_calls",
    "observation", "metrics", "extra", "llm_call_count", "is_copied_context", META_KEY,
})


def is_trajectory(doc: Any) -> bool:
    v = doc.get("schema_version") if isinstance(doc, dict) else None
    return isinstance(v, str) and v.upper().startswith("ATIF") and isinstance(doc.get("steps"), list)


def version(v: Any) -> tuple[int, int] | None:
    """``ATIF-v1.8`` as ``(1, 8)``; None for a tag of another shape."""
    m = re.fullmatch(r"ATIF-v(\d+)\.(\d+)", v.strip(), re.IGNORECASE) if isinstance(v, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def audio_text(p: dict[str, Any]) -> str:
    """The line of text an audio part (v1.8) reads as: its media type, duration and path."""
    src = p.get("source")
    if not (isinstance(src, dict) and isinstance(src.get("media_type"), str) and isinstance(src.get("path"), str)):
        raise CtxtoolError("audio content part needs a 'source' with 'media_type' and 'path' (ATIF v1.8)")
    d = src.get("duration_sec")
    secs = f", {d:g} s" if isinstance(d, int | float) and not isinstance(d, bool) else ""
    return f"[audio {src['media_type']}{secs}: {src['path']}]"


# -- reading ---------------------------------------------------------------------------------
def _part(p: Any) -> Block:
    if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
        return Block("text", text=p["text"])
    if isinstance(p, dict) and p.get("type") == "image":
        # a document ctxtool put in an image part (ATIF has no document part): the document
        return Block("image", data=p["source"] if images.is_document(p.get("source")) else p)
    if isinstance(p, dict) and p.get("type") == "audio":  # v1.8: a file beside the trajectory, named
        return Block("text", text=audio_text(p), extra={PART: p})
    return Block("text", text=p if isinstance(p, str) else jsonio.dumps_text(p), extra={PART: p})


def content_text(c: Any) -> str:
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.text for b in map(_part, c) if b.type == "text")
    return jsonio.dumps_text(c)


def _usage(m: Any, lineno: int | None) -> Usage | None:
    if not isinstance(m, dict) or ("prompt_tokens" not in m and "completion_tokens" not in m):
        return None
    try:
        cached = token_count(m.get("cached_tokens"))
        return Usage(max(token_count(m.get("prompt_tokens")) - cached, 0), token_count(m.get("completion_tokens")), 0, cached)
    except CtxtoolError as e:
        e.line = lineno
        raise


def _meta(obj: dict[str, Any]) -> Metadata:
    """ctxtool's metadata of a step (in its ``extra``) or of an observation (in its first
    result's ``extra``); files ctxtool wrote before kept it in a ``ctxtool`` field of their own."""
    if META_KEY in obj:
        return read_meta(obj)
    res = obj.get("results")
    holder = res[0] if "step_id" not in obj and isinstance(res, list) and res and isinstance(res[0], dict) else obj
    ex = holder.get("extra")
    return read_meta(ex) if isinstance(ex, dict) and META_KEY in ex else Metadata()


def _put_meta(obj: dict[str, Any], msg: Message) -> None:
    """ctxtool's metadata where ATIF has room for it (harbor's models allow no field of
    their own): a step's ``extra``, an observation's first result's ``extra``."""
    obj.pop(META_KEY, None)
    res = obj.get("results")
    if "step_id" not in obj:
        if not (isinstance(res, list) and res and isinstance(res[0], dict)):
            return
        res[0] = obj = dict(res[0])
    ex = obj.get("extra")
    ex = {k: v for k, v in ex.items() if k != META_KEY} if isinstance(ex, dict) else {}
    if not msg.metadata.is_empty():
        ex[META_KEY] = msg.metadata.to_json()
    if ex or isinstance(obj.get("extra"), dict) and META_KEY not in obj["extra"]:
        obj["extra"] = ex
    else:
        obj.pop("extra", None)


def decode_step(step: dict[str, Any], prefix: str = "") -> list[Message]:
    """A step as its message, and the tool message of its observation when it answers calls.
    The step message's source is the step without that observation; the tool message's is
    the observation (each message's source changes only with it)."""
    role = ROLE.get(step.get("source", ""))
    if role is None:
        raise CtxtoolError(f"step {step.get('step_id')!r}: source must be system, user or agent, not {step.get('source')!r}")
    blocks: list[Block] = []
    rc = step.get("reasoning_content")
    if isinstance(rc, str) and rc:
        blocks.append(Block("thinking", text=rc))
    msg = step.get("message")
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        raise CtxtoolError("tool_calls must be a list")
    if isinstance(msg, list):
        blocks.extend(_part(p) for p in msg)
    elif isinstance(msg, str) and (msg or not calls):
        blocks.append(Block("text", text=msg))
    for c in calls:
        blocks.append(Block("tool_call", id=c.get("tool_call_id"), name=c.get("function_name"), arguments=c.get("arguments")))
    sid = step.get("step_id")
    mid = f"{prefix}{sid}" if sid is not None else None
    model = step.get("model_name")
    meta = _meta(step)
    obs = step.get("observation")
    results = obs.get("results") if isinstance(obs, dict) else None
    answered = bool(calls) and isinstance(results, list) and bool(results)
    # an observation that answers no call (a parse-error notice, a context summary): its
    # text is a user message of its own, read and written with the step
    told = not calls and isinstance(results, list) and any(isinstance(r, dict) and r.get("content") for r in results)
    head_obj = step
    extra: dict[str, Any] = {STEP: "step"}
    if answered or told:
        head_obj = {k: v for k, v in step.items() if k != "observation"}
        extra[OBS_AT] = list(step).index("observation")
    out = [Message(role, blocks, id=mid, metadata=meta, usage=_usage(step.get("metrics"), None),
                   model=model if isinstance(model, str) else None, lines=[Line(head_obj)], extra=extra)]
    if told:
        assert isinstance(obs, dict) and isinstance(results, list)
        oextra: dict[str, Any] = {STEP: "observation"}
        if _context_step(step):
            oextra[HINT_SUMMARY] = True  # the summary a context-management step left
        out.append(Message("user", [Block("text", text=content_text(r.get("content"))) for r in results if isinstance(r, dict)],
                           id=f"{mid}/observation" if mid else None,
                           metadata=_meta(obs), lines=[Line(obs)], extra=oextra))
    if answered:
        assert isinstance(obs, dict) and isinstance(results, list)
        names = {c.get("tool_call_id"): c.get("function_name") for c in calls}
        positional = len(results) == len(calls)
        rblocks = []
        for i, r in enumerate(results):
            cid = r.get("source_call_id")
            rextra = None
            if cid is None and positional:
                cid = calls[i].get("tool_call_id")
                rextra = {"positional": True}
            rblocks.append(Block("tool_result", text=content_text(r.get("content")), id=cid, name=names.get(cid), extra=rextra))
        ometa = _meta(obs)
        out.append(Message("tool", rblocks, id=f"{mid}/observation" if mid else None, metadata=ometa, lines=[Line(obs)],
                           extra={STEP: "observation"}))
    return out


def trajectory_transcript(doc: dict[str, Any], path: str, index: int, sub: bool) -> Transcript:
    t = Transcript("atif", path=path, index=index)
    for k, step in enumerate(doc["steps"]):
        if not isinstance(step, dict):
            raise CtxtoolError(f"step {k} is not an object", path=path)
        try:
            t.entries.extend(decode_step(step, f"{doc.get('trajectory_id')}/" if sub else ""))
        except CtxtoolError as e:
            e.message = f"step {k}: {e.message}" if not e.message.startswith("step ") else e.message
            raise
    tid = doc.get("trajectory_id") if sub else doc.get("session_id") or doc.get("trajectory_id")
    t.id = str(tid) if tid is not None else str(index)
    own = ("steps",) if sub else ("steps", "subagent_trajectories")  # a subagent's own subagents stay as they are
    t.record = {k: (None if k in own else v) for k, v in doc.items()}
    t.messages_key = "steps"
    t.extra["layout"] = "atif_subagent" if sub else "atif_document"
    t.extra["entries_count"] = len(t.entries)
    return t


CONTEXT_KEYS = ("context_management", "summarization", "context_summarization", "compaction")


def _context_step(step: dict[str, Any]) -> bool:
    """A step recording a context summarization (its ``extra`` names it: the v1.2 system steps
    of context management, harbor's summarization steps)."""
    ex = step.get("extra")
    return isinstance(ex, dict) and any(k in ex for k in CONTEXT_KEYS)


# -- writing ---------------------------------------------------------------------------------
def _own_step(o: Any) -> bool:
    return isinstance(o, dict) and "step_id" in o and o.get("source") in ROLE


def _text_value(blocks: list[Block], before: Any) -> Any:
    """A step's ``message`` for its text and image blocks: a string unless it was a list of parts."""
    if not isinstance(before, list) and all(b.type == "text" and not b.extra for b in blocks):
        return "\n".join(b.text for b in blocks)
    parts: list[Any] = []
    for b in blocks:
        src = (b.extra or {}).get(PART)
        if b.type == "image":
            parts.append(image_part(b.data))
        elif src is not None and _part(src).text == b.text:
            parts.append(src)
        else:
            parts.append({"type": "text", "text": b.text})
    return parts


def image_part(data: Any) -> dict[str, Any]:
    """An ATIF image part (``source``: ``media_type`` and ``path``, a file or a URL) for an
    image block: an ATIF one as it came; another format's inline image as a data URL, its
    URL as the path. A document (Anthropic's) has no ATIF part: it is kept as it came."""
    if isinstance(data, dict) and data.get("type") == "image" and isinstance(data.get("source"), dict) \
            and "path" in data["source"] or images.is_document(data):
        return data if isinstance(data, dict) and data.get("type") == "image" else {"type": "image", "source": data}
    p = images.parse(data)
    if p is None:
        return {"type": "image", "source": data}
    kind, a, b = p
    if kind == "base64":
        return {"type": "image", "source": {"media_type": a, "path": f"data:{a};base64,{b}"}}
    mime = mimetypes.guess_type(a.split("?", 1)[0])[0]
    return {"type": "image", "source": {"media_type": mime if mime and mime.startswith("image/") else images.DEFAULT_MIME,
                                        "path": a}}


def render_head(head: Message, step_id: int) -> dict[str, Any]:
    """A step (without its observation) for a message: rebuilt from its source step, other fields kept."""
    src = head.lines[0].obj if head.lines else None
    src = src if _own_step(src) else None
    o: dict[str, Any] = dict(src) if src is not None else {"step_id": step_id}
    o["source"] = SOURCE.get(head.role, "user")
    thinking = [b for b in head.content if b.type == "thinking"]
    texts = [b for b in head.content if b.type in ("text", "image")]
    calls = [b for b in head.content if b.type == "tool_call"]
    if thinking:
        o["reasoning_content"] = "\n".join(b.text for b in thinking)
    else:
        o.pop("reasoning_content", None)
    o["message"] = _text_value(texts, o.get("message"))
    if calls:
        before = {c.get("tool_call_id"): c for c in (src or {}).get("tool_calls") or [] if isinstance(c, dict)}
        tcs: list[dict[str, Any]] = []
        for b in calls:
            c = dict(before.get(b.id) or {})
            # a call without an id of its own (a Codex web search) gets one: ATIF requires it
            c["tool_call_id"] = b.id if b.id is not None and not is_synthetic(b) else f"call_{step_id}_{len(tcs) + 1}"
            c["function_name"] = b.name
            c["arguments"] = tool_input(b.arguments)  # an object in ATIF (OpenAI's JSON text parsed)
            tcs.append(c)
        o["tool_calls"] = tcs
    else:
        o.pop("tool_calls", None)
    _put_meta(o, head)
    return o


def render_observation(results: list[Block], tools: list[Message], step_id: int) -> dict[str, Any]:
    """An observation for tool results: rebuilt from the source observation (each result's
    ``subagent_trajectory_ref`` and ``extra`` kept)."""
    src = tools[0].lines[0].obj if tools and tools[0].lines else None
    obs: dict[str, Any] = dict(src) if isinstance(src, dict) and "results" in src else {}
    old = [r for r in obs.get("results") or [] if isinstance(r, dict)]
    by_id = {r.get("source_call_id"): r for r in old if r.get("source_call_id") is not None}
    out = []
    for i, b in enumerate(results):
        positional = bool((b.extra or {}).get("positional"))
        r = dict(by_id.get(b.id) or (old[i] if positional and i < len(old) else {}))
        if not positional:
            r["source_call_id"] = b.id if not is_synthetic(b) else f"call_{step_id}_{i + 1}"
        r["content"] = r["content"] if "content" in r and content_text(r["content"]) == b.text else b.text
        out.append(r)
    obs["results"] = out
    if tools:  # the tool message's metadata (visibility, output refs) rides on its observation
        _put_meta(obs, tools[0])
    return obs


def _unchanged(m: Message) -> bool:
    return not m.dirty and bool(m.lines)


def build_step(head: Message | None, tools: list[Message], step_id: int) -> dict[str, Any]:
    """One step (``step_id``: its place, from 1: ATIF readers such as harbor's ``Trajectory``
    require ids sequential from 1, so a step kept after others were dropped is numbered
    again; a step already at its place is written as it came)."""
    if head is not None and _unchanged(head) and _own_step(head.lines[0].obj):
        step = head.lines[0].obj  # as it came
    elif head is not None:
        step = render_head(head, step_id)
    else:
        step = {"step_id": step_id, "source": "agent", "message": ""}
    if _renumbered(step.get("step_id"), step_id):
        step = {k: (step_id if k == "step_id" else v) for k, v in step.items()}
    results = [b for b in head.content if b.type == "tool_result"] if head is not None else []
    results += [b for m in tools for b in m.content if b.type == "tool_result"]
    told = [m for m in tools if m.role != "tool"]
    if not results and not told:
        return step
    if told:
        obs = told[0].lines[0].obj if len(told) == 1 and _unchanged(told[0]) and isinstance(told[0].lines[0].obj, dict) \
            else _told_observation(told)
    elif len(tools) == 1 and not results[: -len(tools[0].content)] and _unchanged(tools[0]) \
            and isinstance(tools[0].lines[0].obj, dict) and "results" in tools[0].lines[0].obj:
        obs = tools[0].lines[0].obj
    else:
        obs = render_observation(results, tools, step_id)
    at = head.extra.get(OBS_AT) if head is not None else None
    items = [(k, v) for k, v in step.items() if k != "observation"]
    at = at if isinstance(at, int) and 0 <= at <= len(items) else len(items)
    items.insert(at, ("observation", obs))
    return dict(items)


def _has_audio(step: dict[str, Any]) -> bool:
    """Whether a written step holds an audio part (which needs ATIF-v1.8)."""
    obs = step.get("observation")
    res = obs.get("results") if isinstance(obs, dict) else None
    contents = [step.get("message")] + [r.get("content") for r in res or [] if isinstance(r, dict)]
    return any(isinstance(p, dict) and p.get("type") == "audio" for c in contents if isinstance(c, list) for p in c)


def _renumbered(old: Any, step_id: int) -> bool:
    """Whether a step's id is a number out of its place (one that is not a number is kept)."""
    return isinstance(old, int) and not isinstance(old, bool) and old != step_id and step_id > 0


def _told_observation(told: list[Message]) -> dict[str, Any]:
    """The observation of a step that answers no call, from its message(s): the source's
    other fields kept, each result's text replaced."""
    src = told[0].lines[0].obj if told[0].lines else None
    obs: dict[str, Any] = dict(src) if isinstance(src, dict) and "results" in src else {}
    old = [r for r in obs.get("results") or [] if isinstance(r, dict) and r.get("content")]
    texts = [b.text for m in told for b in m.content if b.type == "text"]
    out = []
    for i, text in enumerate(texts):
        r = dict(old[i]) if i < len(old) else {}
        r["content"] = r["content"] if "content" in r and content_text(r["content"]) == text else text
        out.append(r)
    obs["results"] = out
    _put_meta(obs, told[0])
    return obs


def build_steps(entries: list[Any]) -> list[dict[str, Any]]:
    """Steps from a transcript's entries: unchanged steps as they came, others rebuilt."""
    groups: list[tuple[Message | None, list[Message]]] = []
    for e in entries:
        if isinstance(e, Compaction):  # a summary: a user step
            groups.append((Message("user", [Block("text", text=e.summary)], metadata=Metadata(kind="compaction_summary"),
                                   dirty=True), []))
            continue
        if not isinstance(e, Message):
            continue
        if e.role == "tool" and groups and (groups[-1][0] is None or groups[-1][0].role == "assistant"):
            groups[-1][1].append(e)
        elif e.extra.get(STEP) == "observation" and e.role == "user" and groups and groups[-1][0] is not None \
                and groups[-1][0].extra.get(STEP) == "step" and not groups[-1][1]:
            groups[-1][1].append(e)  # an observation answering no call: its step's
        elif e.role == "tool":
            groups.append((None, [e]))
        elif groups and _calls_go_together(groups[-1], e):
            groups[-1] = (_joined(groups[-1][0], e), [])  # type: ignore[arg-type]
        else:
            groups.append((e, []))
    return [build_step(head, tools, n) for n, (head, tools) in enumerate(groups, 1)]


def _results_to_their_calls(steps: list[dict[str, Any]]) -> None:
    """Each result moved to the observation of the step holding its call, when that is an
    earlier step (another format's results may come a turn late: Claude Code answers two
    parallel calls after the next reply's call); ATIF answers a call in its own step."""
    where: dict[Any, int] = {}
    for i, step in enumerate(steps):
        for c in step.get("tool_calls") or []:
            where.setdefault(c.get("tool_call_id"), i)
        obs = step.get("observation")
        if not (isinstance(obs, dict) and isinstance(obs.get("results"), list)):
            continue
        res = obs["results"]
        own = {c.get("tool_call_id") for c in step.get("tool_calls") or []}
        late = [r for r in res if isinstance(r, dict) and r.get("source_call_id") not in own
                and where.get(r.get("source_call_id"), i) < i]
        if not late:
            continue
        for r in late:
            to = steps[where[r["source_call_id"]]]
            o = to.get("observation")
            if not isinstance(o, dict):
                o = to["observation"] = {"results": []}
            o["results"] = [*o.get("results", []), r]
        keep = [r for r in res if not any(r is x for x in late)]
        if keep:
            obs["results"] = keep
        else:
            del step["observation"]


def _calls(m: Message | None) -> bool:
    return m is not None and m.role == "assistant" and any(b.type == "tool_call" for b in m.content)


def _calls_go_together(group: tuple[Message | None, list[Message]], m: Message) -> bool:
    """Whether ``m``'s calls join the step before: another format's assistant messages one
    call each (Responses API items, ShareGPT ``function_call`` turns), their results after
    them all. ATIF answers a step's calls in that step's observation, so the calls are one
    step. Steps read from ATIF never join (each is written as it came)."""
    head, tools = group
    return (not tools and _calls(head) and _calls(m) and head is not None
            and STEP not in head.extra and STEP not in m.extra
            and not any(b.type == "tool_result" for b in head.content))


def _joined(a: Message, b: Message) -> Message:
    """One assistant message for two whose calls are one step (usage added unless both
    are the same API call's)."""
    u = a.usage or b.usage
    if a.usage is not None and b.usage is not None and (a.usage_key is None or a.usage_key != b.usage_key):
        u = Usage(a.usage.input + b.usage.input, a.usage.output + b.usage.output,
                  a.usage.cache_creation + b.usage.cache_creation, a.usage.cache_read + b.usage.cache_read)
    return Message("assistant", a.content + b.content, id=a.id, metadata=a.metadata, usage=u, usage_key=a.usage_key,
                   model=a.model or b.model, dirty=True)


class ATIFFormat(Format):
    name = "atif"
    description = "Harbor ATIF trajectories (Agent Trajectory Interchange Format v1.x; embedded subagents)"
    reads = "JSON document (`steps`; `subagent_trajectories` as more transcripts)"
    default_layout = "atif_document"
    record_family = "atif"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 96 if (src.layout == "json" or src.one_line_document()) and sample and is_trajectory(sample[0]) else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        doc = src.as_document()  # a document written on one line too
        if not is_trajectory(doc):
            raise CtxtoolError("not an ATIF trajectory (needs 'schema_version' ATIF-v1.x and 'steps')", path=src.path)
        subs = doc.get("subagent_trajectories")
        todo: list[tuple[Any, bool]] = [(doc, False)] + [(s, True) for s in (subs if isinstance(subs, list) else [])]
        for i, (d, sub) in enumerate(todo):
            try:
                if not (isinstance(d, dict) and isinstance(d.get("steps"), list)):
                    raise CtxtoolError("subagent trajectory has no 'steps' list")
                t = trajectory_transcript(d, src.path, i, sub)
            except CtxtoolError as e:
                e.path = e.path or src.path
                e.message = f"trajectory {i}: {e.message}" if sub else e.message
                policy.handle(e)
                continue
            except STRUCTURE_ERRORS as e:
                policy.handle(malformed(e, src.path, None, f"trajectory {i}"))
                continue
            if src.style is not None:
                t.extra["source_style"] = src.style.to_json()
            yield t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return [build_step(msg, [], 0)]

    def build_record(self, t: Transcript) -> dict[str, Any]:
        make_exact(t)
        # the record of a trajectory (another format's, such as an OpenAI dataset row, is no trajectory)
        own = t.record if isinstance(t.record, dict) and t.format == "atif" else {}
        rec: dict[str, Any] = dict(own) if version(own.get("schema_version")) is not None else {}
        made = not rec
        if made:
            rec = {"schema_version": WRITTEN, "session_id": t.id or str(t.index),
                   "agent": {"name": "ctxtool", "version": "1"}}
        rec["steps"] = build_steps(t.entries)
        if made:
            _results_to_their_calls(rec["steps"])
        if made and any(_has_audio(s) for s in rec["steps"]):
            rec["schema_version"] = AUDIO_VERSION
        return rec

    def unknown_records(self, t: Transcript) -> Counter[str]:
        """What a trajectory holds that this reader does not know (kept as it came): a
        ``schema_version`` newer than ATIF-v1.8, content parts of types no version defines,
        step fields outside the v1.8 step model."""
        out: Counter[str] = Counter()
        rec = t.record if isinstance(t.record, dict) else {}
        v = rec.get("schema_version")
        ver = version(v)
        if ver is not None and ver > NEWEST:
            out[f"schema_version {v} (newer than ATIF-v{NEWEST[0]}.{NEWEST[1]})"] += 1
        for m in t.messages:
            obj = m.lines[0].obj if m.lines else None
            if not isinstance(obj, dict):
                continue
            if m.extra.get(STEP) == "step":
                out.update(f"step field {k}" for k in obj if k not in STEP_FIELDS)
                parts: list[Any] = [obj.get("message")]
            else:
                parts = [r.get("content") for r in obj.get("results") or [] if isinstance(r, dict)]
            out.update(f"content part {p.get('type')}" for c in parts if isinstance(c, list)
                       for p in c if isinstance(p, dict) and p.get("type") not in PART_TYPES)
        return out

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        ts = list(transcripts)
        if not ts:
            return
        root = self.build_record(ts[0])
        subs = [self.build_record(t) for t in ts[1:]]
        seen: set[Any] = {s.get("trajectory_id") for s in subs}
        for t, s in zip(ts[1:], subs, strict=True):
            if s.get("trajectory_id") is None:  # an embedded trajectory needs one, unique among its siblings (v1.7)
                tid, n = str(t.id or t.index), 1
                while tid in seen:
                    n += 1
                    tid = f"{t.id or t.index}-{n}"
                seen.add(tid)
                s["trajectory_id"] = tid
        if subs or "subagent_trajectories" in root:
            root["subagent_trajectories"] = subs
        root_layout = ts[0].extra.get("layout") == "atif_document"
        if not root_layout and not subs:
            root.pop("subagent_trajectories", None)
        write_document(out, root, document_style(ts[0]))


FORMAT = ATIFFormat()
