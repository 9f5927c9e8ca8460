"""SWE-agent trajectories (``.traj``): one JSON document per run; ``history`` is one transcript
(OpenAI messages with SWE-agent's fields), ``trajectory`` (the per-step log) a second one.

Both generations are read: function calling, and thought/action pairs matched by position with
the action kept in the assistant's text. Details: docs/architecture.md, "Formats as ctxtool reads them"."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from ..io.jsonl import Source
from ..model import KIND_TOOL_RESULT, KIND_TOOL_RESULT_ARCHIVED, Block, Line, Message, Transcript
from .base import META_KEY, ErrorPolicy, is_synthetic, put_meta, read_meta, template
from .dataset import DatasetFormat
from .openai import _is_message, _looks_openai, decode_message, render_message

__all__ = ["FORMAT", "IN_TEXT", "TRAJECTORY", "SweAgentFormat", "pair_in_text", "render_in_text", "render_with_in_text"]

#: a call written in the assistant's text, or a result that is a user message (no ids)
IN_TEXT = "in_text"
#: the layout of the second transcript of a ``.traj``: its ``trajectory`` steps
TRAJECTORY = "swe_trajectory"


def pair_in_text(msgs: list[Message], action: Callable[[Message], str | None],
                 observation: Callable[[Message], bool], prefix: str) -> None:
    """Pair text-protocol turns: an assistant message whose ``action`` is not None and the
    next message when it is an ``observation`` become a call and its result (synthetic ids)."""
    n = 0
    for a, o in zip(msgs, msgs[1:], strict=False):
        if a.role != "assistant" or o.role != "user" or any(b.type == "tool_call" for b in a.content):
            continue
        name = action(a)
        if o.metadata.kind not in (None, KIND_TOOL_RESULT, KIND_TOOL_RESULT_ARCHIVED):
            continue  # ctxtool's own messages (summaries) are never observations
        if name is None or not observation(o) or len(o.content) != 1 or o.content[0].type != "text":
            continue
        n += 1
        cid = f"{prefix}{n}"
        a.content.append(Block("tool_call", id=cid, name=name, extra={"synthetic_id": True, IN_TEXT: True}))
        o.content = [Block("tool_result", text=o.content[0].text, id=cid, name=name,
                           extra={"synthetic_id": True, IN_TEXT: True})]


def render_in_text(msg: Message, tmpl: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A message of the text protocol as its source object (None: not one)."""
    results = [b for b in msg.content if b.type == "tool_result" and (b.extra or {}).get(IN_TEXT)]
    if results and msg.role != "tool":
        o = dict(tmpl)
        o["role"] = msg.role if msg.role in ("user", "system", "assistant") else "user"
        rest = "\n".join(b.text for b in msg.content if b.type == "text")
        o["content"] = "\n".join(x for x in [*(b.text for b in results), rest] if x)
        put_meta(o, msg)
        return [o]
    return None


def render_with_in_text(msg: Message) -> list[dict[str, Any]]:
    """A message as OpenAI-style objects, tool calls and results of the text protocol put
    back into the text they were read from (SWE-agent and mini-swe-agent)."""
    tmpl = template(msg)
    if tmpl and not _is_message(tmpl):
        tmpl = {}
    done = render_in_text(msg, tmpl)
    return done if done is not None else render_message(_without_in_text(msg), tmpl)


def _without_in_text(msg: Message) -> Message:
    keep = [b for b in msg.content if not (b.type == "tool_call" and (b.extra or {}).get(IN_TEXT))]
    if len(keep) == len(msg.content):
        return msg
    return Message(msg.role, keep, msg.id, msg.metadata, msg.usage, msg.usage_key, msg.model, msg.lines, True, msg.extra)


def _action(m: Message) -> str | None:
    o = m.lines[0].obj if m.lines else None
    act = o.get("action") if isinstance(o, dict) else None
    if not isinstance(act, str) or not act.strip():
        return None
    return act.split()[0]


def _observation(m: Message) -> bool:
    o = m.lines[0].obj if m.lines else None
    return isinstance(o, dict) and not o.get("is_demo") and o.get("message_type", "observation") == "observation"


class SweAgentFormat(DatasetFormat):
    name = "swe-agent"
    reads = "one JSON document"
    description = "SWE-agent trajectories (.traj: history with tool_call_ids, or thought/action turns)"
    default_layout = "record_object"
    keys = ("history",)
    entries = False
    id_prefix = "swe_"
    item_needs = "a SWE-agent history message (needs 'role' and 'content')"

    def is_item(self, o: Any) -> bool:
        return _is_message(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        if rec is None or not _looks_openai(items):
            return 0
        own = "trajectory" in rec or any(isinstance(m, dict) and ("tool_call_ids" in m or "agent" in m) for m in items[:50])
        return 95 if own else 0  # above openai's 90: the most specific reading wins

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        m = decode_message(o, line)
        ids = o.get("tool_call_ids")
        if m.role == "tool" and isinstance(ids, list) and ids and all(isinstance(x, str) for x in ids):
            b = m.content[0]
            b.id = ids[0]
            if len(ids) > 1:
                b.extra = {**(b.extra or {}), "answers": ids[1:]}
        return m

    def _transcript(self, items: list[Any], src: Any, index: int, lineno: int | None) -> Transcript:
        t = super()._transcript(items, src, index, lineno)
        if not any(b.type == "tool_call" for m in t.messages for b in m.content):
            pair_in_text(t.messages, _action, _observation, f"{self.id_prefix}{index}_")
        return t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        out = render_with_in_text(msg)
        results = [b for b in msg.content if b.type == "tool_result"]
        for o, b in zip((o for o in out if o.get("role") == "tool"), results, strict=False):
            o.pop("tool_call_id", None)
            if b.id and not is_synthetic(b):
                o["tool_call_ids"] = [b.id, *(b.extra or {}).get("answers", ())]
        return out

    # -- the trajectory: a second transcript ------------------------------------------
    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        for t in super().read(src, policy):
            yield t
            traj = trajectory_transcript(t)
            if traj is not None:
                yield traj

    def write(self, transcripts: Iterable[Transcript], out: IO[bytes]) -> None:
        super().write(with_trajectories(transcripts), out)


def trajectory_transcript(t: Transcript) -> Transcript | None:
    """The ``trajectory`` steps of ``t``'s record as a transcript (None: no step list)."""
    steps = t.record.get("trajectory") if t.record is not None else None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        return None
    out = Transcript(t.format, path=t.path, index=t.index, id=f"{t.id}/trajectory", lineno=t.lineno,
                     extra={"layout": TRAJECTORY})
    for k, step in enumerate(steps, 1):
        out.entries.extend(decode_step(step, f"swe_traj_{t.index}_{k}", t.lineno))
    return out


def decode_step(step: dict[str, Any], cid: str, lineno: int | None) -> list[Message]:
    """A step: the thought and the action (a call), and the observation (its result)."""
    thought, action, obs = step.get("thought"), step.get("action"), step.get("observation")
    if not (isinstance(action, str) and action.strip()):
        if isinstance(thought, str) and thought:
            return [Message("assistant", [Block("text", text=thought)], metadata=read_meta(step), lines=[Line(step, None, lineno)])]
        text = obs if isinstance(obs, str) else ""
        return [Message("user", [Block("text", text=text)], metadata=read_meta(step), lines=[Line(step, None, lineno)])]
    name = action.split()[0]
    # the observation (and ctxtool's metadata about it) is the tool message's: the step
    # without them is the assistant's source
    head_obj = step if not isinstance(obs, str) else {k: v for k, v in step.items() if k != META_KEY}
    head = Message("assistant", [*([Block("text", text=thought)] if isinstance(thought, str) and thought else []),
                                 Block("tool_call", id=cid, name=name, arguments={"command": action},
                                       extra={"synthetic_id": True})],
                   lines=[Line(head_obj, None, lineno)])
    if not isinstance(obs, str):
        return [head]
    result = Block("tool_result", text=obs, id=cid, name=name, extra={"synthetic_id": True})
    return [head, Message("tool", [result], metadata=read_meta(step), lines=[Line({"observation": obs}, None, lineno)])]


def build_steps(t: Transcript) -> list[Any]:
    """The trajectory's steps: unchanged ones as they were, changed ones updated in place."""
    steps: list[Any] = []
    for m in t.messages:
        src = m.lines[0].obj if m.lines and isinstance(m.lines[0].obj, dict) else None
        if m.role == "tool":
            prev = steps[-1] if steps else None
            if prev is None:
                continue
            text = "\n".join(b.text for b in m.content if b.type == "tool_result")
            step = dict(prev)
            step["observation"] = text
            put_meta(step, m)
            steps[-1] = step
            continue
        if src is not None and not m.dirty:
            steps.append(src)
            continue
        step = dict(src) if src is not None else {}
        text = "\n".join(b.text for b in m.content if b.type == "text")
        call = next((b for b in m.content if b.type == "tool_call"), None)
        if m.role == "assistant":
            if text or "thought" in step:
                step["thought"] = text
            cmd = call.arguments.get("command") if call is not None and isinstance(call.arguments, dict) else None
            if isinstance(cmd, str):
                step["action"] = cmd
            elif src is None:
                step = {"thought": text, "action": "", "observation": "", "response": text}
        else:
            step = {**step, "thought": "", "action": "", "observation": text} if src is None else {**step, "observation": text}
        if m.role != "tool" and call is None:
            put_meta(step, m)
        steps.append(step)
    return steps


def with_trajectories(transcripts: Iterable[Transcript]) -> Iterator[Transcript]:
    """Each history transcript with its record's ``trajectory`` rebuilt from the trajectory
    transcript after it (transcripts of other layouts pass through)."""
    pending: Transcript | None = None
    for t in transcripts:
        if t.extra.get("layout") == TRAJECTORY:
            if pending is not None and pending.record is not None:
                steps = build_steps(t)
                before = pending.record.get("trajectory")
                if before != steps:
                    extra = {k: v for k, v in pending.extra.items() if k != "record_raw"}
                    pending = dataclasses.replace(pending, record={**pending.record, "trajectory": steps}, extra=extra)
                yield pending
                pending = None
            continue
        if pending is not None:
            yield pending
        pending = t
    if pending is not None:
        yield pending


FORMAT = SweAgentFormat()
