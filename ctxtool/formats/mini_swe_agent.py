"""mini-swe-agent trajectories (``.traj.json``): a bare message array or an ``info`` +
``messages`` record, both written back as they came.

Its text protocol (a fenced action, answered by a ``<returncode>`` user message) is read as a
call and its result paired by position, so ``truncate`` and ``trim`` reach the observations."""

from __future__ import annotations

from typing import Any

from ..io.jsonl import Source
from ..model import Line, Message, Transcript
from ..text import lazyre
from .dataset import DatasetFormat
from .openai import _is_message, _looks_openai, decode_message
from .swe_agent import pair_in_text, render_with_in_text

__all__ = ["FORMAT", "MiniSweAgentFormat"]

OBSERVATION = lazyre.compile(r"\s*<returncode>")
ACTION = lazyre.compile(r"```[\w-]*[ \t]*\n")  # the fenced action (bash, mswea_bash_command...)
SUFFIX = ".traj.json"


def _text(m: Message) -> str:
    return "\n".join(b.text for b in m.content if b.type == "text")


def _action(m: Message) -> str | None:
    return "bash" if ACTION.search(_text(m)) else None


def _observation(m: Message) -> bool:
    return bool(OBSERVATION.match(_text(m)))


class MiniSweAgentFormat(DatasetFormat):
    name = "mini-swe-agent"
    reads = "JSON array, `{messages, info, trajectory_format}`"
    description = "mini-swe-agent trajectories (.traj.json: messages with bash actions and <returncode> observations)"
    default_layout = "entries_array"
    keys = ("messages",)
    id_prefix = "mini_"
    item_needs = "a mini-swe-agent message (needs 'role' and 'content')"

    def is_item(self, o: Any) -> bool:
        return _is_message(o)

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        if rec is not None:  # a record names its format: asked first (the cheaper test)
            fmt = rec.get("trajectory_format")
            return 95 if isinstance(fmt, str) and fmt.startswith("mini-swe-agent") and _looks_openai(items) else 0
        if not _looks_openai(items):
            return 0
        observed = any(
            isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
            and OBSERVATION.match(m["content"])
            for m in items[:200]
        )
        return 80 if observed else 0  # above openai's 70 for plain messages

    def sniff(self, sample: list[Any], src: Source) -> int:
        s = super().sniff(sample, src)
        if s == 0 and src.layout == "json" and str(src.path).endswith(SUFFIX) and sample and isinstance(sample[0], list):
            s = 95 if sample[0] and all(_is_message(m) for m in sample[0][:50]) else 0
        return s

    def decode(self, o: dict[str, Any], line: Line) -> Message:
        return decode_message(o, line)

    def _transcript(self, items: list[Any], src: Any, index: int, lineno: int | None) -> Transcript:
        t = super()._transcript(items, src, index, lineno)
        pair_in_text(t.messages, _action, _observation, f"{self.id_prefix}{index}_")
        return t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        return render_with_in_text(msg)


FORMAT = MiniSweAgentFormat()
