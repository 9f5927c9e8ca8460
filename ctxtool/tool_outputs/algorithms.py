"""Tool output truncation: the pure algorithms of the Go agent, the tool-output cache spec and
adk-code, on ``str``, never splitting a character (a byte limit cuts at a UTF-8 boundary). In the
Go agent's order: spill past ``spill_threshold`` characters; each line cut at
``max_line_length``; lines (``head``, or ``head_tail`` around ``[... omitted X of Y lines ...]``);
then characters and bytes. A limit of 0 is off. Modes and presets are registries
(:data:`MODES`, :data:`PRESETS`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from ..errors import CtxtoolError, Failure
from ..registry import Registry
from .saved import SAVED_OPEN as SAVED_OPEN
from .saved import SavedOutput as SavedOutput
from .saved import saved_output as saved_output

MARKER = "[... omitted {omitted:,} of {total:,} lines ...]"
LINE_CUT = " [... {n:,} chars cut]"
# the names of the agent tools that read and search the cache (ctxtool.agent.tools), in the placeholders
READ = "tool_output_cache"
GREP = "tool_output_cache_grep"


# -- truncation modes: one class each, registered by name (the CLI's --mode choices) --------


class TruncationMode:
    """What a mode keeps: the lines of the line limit, and the text of a size limit."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def line_split(self, limits: Limits) -> tuple[int, int]:
        """(head, tail) lines kept by the line limit (``head_lines``/``tail_lines``, else ``max_lines``)."""
        raise NotImplementedError

    def cut_size(self, text: str, max_chars: int, max_bytes: int, total_lines: int, kept_lines: int) -> tuple[str, int]:
        """``text`` within ``max_chars`` characters and ``max_bytes`` bytes (both > 0);
        returns (text, whole original lines kept)."""
        raise NotImplementedError

    def cut_lines_bytes(self, text: str, split: tuple[int, int], max_bytes: int, total_lines: int,
                        kept_lines: int) -> tuple[str, int] | None:
        """What :meth:`cut_size` to ``max_bytes`` bytes (no character limit) gives for the text
        the line cut to ``split`` keeps of ``text``, read from ``text`` itself, where this mode
        can show that the two are the same and that the kept text is over ``max_bytes`` (so the
        byte cut runs): then the line cut's text is never built. None: build it."""
        return None


MODES: Registry[TruncationMode] = Registry("mode")
#: add a truncation mode (a class decorator): ``Limits(mode=cls.name)`` and ``--mode`` accept it
register_mode = MODES.register_instance_of


@register_mode
class Head(TruncationMode):
    """The Go agent and the tool-output cache spec: keep the start."""

    name = "head"
    description = "keep the first lines and characters"

    def line_split(self, limits: Limits) -> tuple[int, int]:
        return (limits.head_lines + limits.tail_lines if limits.head_lines or limits.tail_lines else limits.max_lines), 0

    def cut_size(self, text: str, max_chars: int, max_bytes: int, total_lines: int, kept_lines: int) -> tuple[str, int]:
        out = _prefix(text, max_chars, max_bytes)
        return out, min(kept_lines, out.count("\n"))

    def cut_lines_bytes(self, text: str, split: tuple[int, int], max_bytes: int, total_lines: int,
                        kept_lines: int) -> tuple[str, int] | None:
        # the byte cut reads the first max_bytes + 1 bytes; the kept lines hold more when fewer
        # than all of them end within that many characters
        if type(self).cut_size is not Head.cut_size or split[1] or split[0] <= 0:
            return None  # (a subclass that cuts otherwise: no claim)
        if text.count("\n", 0, max_bytes + 1) >= split[0]:
            return None
        return self.cut_size(text, _UNLIMITED, max_bytes, total_lines, kept_lines)


@register_mode
class HeadTail(TruncationMode):
    """The Go agent and adk-code: keep the start and the end around ``[... omitted X of Y lines ...]``."""

    name = "head_tail"
    description = "keep the first and the last lines around an omission marker"

    def line_split(self, limits: Limits) -> tuple[int, int]:
        if limits.head_lines or limits.tail_lines:
            return limits.head_lines, limits.tail_lines
        if limits.max_lines < 4:  # the Go agent: marker only when limit >= 4
            return limits.max_lines, 0
        head = limits.max_lines // 2
        return head, limits.max_lines - head

    def cut_size(self, text: str, max_chars: int, max_bytes: int, total_lines: int, kept_lines: int) -> tuple[str, int]:
        # on line boundaries when possible
        mark = "\n" + marker(total_lines, total_lines) + "\n"  # the widest the marker can be
        room_c = max_chars - len(mark)
        room_b = max_bytes - utf8_len(mark)
        if room_c < 2 or room_b < 8:
            return MODES.get("head").cut_size(text, max_chars, max_bytes, total_lines, kept_lines)
        head, tail = _head_tail(text, room_c, room_b)
        return _joined(text, head, tail, total_lines, kept_lines)

    def cut_lines_bytes(self, text: str, split: tuple[int, int], max_bytes: int, total_lines: int,
                        kept_lines: int) -> tuple[str, int] | None:
        # The line cut keeps KH (the first ``head`` lines) + its marker line + KT (the last
        # ``tail`` lines). The byte cut of that reads its first room_b // 2 + 1 bytes and its
        # last R bytes (R = room_b less the head kept), and the character before those: all of
        # them inside KH and KT, the same bytes as in ``text``, when fewer than all of KH's line
        # ends fall in that many first characters and fewer than ``tail`` line ends in the last R.
        # The kept text's length, bounded below from the same counts, shows it is over max_bytes.
        head_n, tail_n = split
        mark = "\n" + marker(total_lines, total_lines) + "\n"
        room_b = max_bytes - utf8_len(mark)
        first = room_b // 2 + 1
        if type(self).cut_size is not HeadTail.cut_size or not head_n or not tail_n or room_b < 8:
            return None  # (a subclass that cuts otherwise: no claim)
        in_first = text.count("\n", 0, first)
        if in_first >= head_n:
            return None
        head, tail = _head_tail(text, _UNLIMITED - len(mark), room_b)
        start = max(0, len(text) - (room_b - utf8_len(head)))
        in_last = text.count("\n", start)
        if in_last >= tail_n:
            return None
        # KH: the first characters and at least one more for each of its line ends after them;
        # KT: the last characters and each of its line ends before them (it holds tail - 1 of
        # them, or tail with a final newline)
        kept_at_least = (first + head_n - in_first + len(marker(total_lines - head_n - tail_n, total_lines))
                         + 1 + len(text) - start + tail_n - 1 + text.endswith("\n") - in_last)
        if kept_at_least <= max_bytes:
            return None
        return _joined(text, head, tail, total_lines, kept_lines)


def _head_tail(text: str, room_c: int, room_b: int) -> tuple[str, str]:
    """:class:`HeadTail`'s ends of ``text``: a head of at most half the room ending at a line's
    end when it holds one, and a tail of the room left starting at a line's start when it can."""
    head = _prefix(text, room_c // 2, room_b // 2)
    if "\n" in head and not head.endswith("\n"):
        head = head[: head.rindex("\n") + 1]
    tail = _suffix(text, room_c - len(head), room_b - utf8_len(head))
    if tail and not _starts_line(text, len(text) - len(tail)):
        j = tail.find("\n")
        if -1 < j < len(tail) - 1:
            tail = tail[j + 1 :]
    return head, tail


def _joined(text: str, head: str, tail: str, total_lines: int, kept_lines: int) -> tuple[str, int]:
    """``head`` and ``tail`` of ``text`` around the omission marker, and the whole original lines they keep."""
    head_whole = head.count("\n")
    tail_whole = count_lines(tail)
    if tail and not _starts_line(text, len(text) - len(tail)):
        tail_whole -= 1
    # markers already in the kept text (an output cut before): none without a "["
    markers = (head + tail).count("[... omitted ") if "[" in head or "[" in tail else 0
    whole = max(0, min(kept_lines, head_whole + tail_whole - markers))
    head_part = head if head.endswith("\n") or not head else head + "\n"
    return head_part + marker(total_lines - whole, total_lines) + "\n" + tail, whole


@dataclass(frozen=True, slots=True)
class Limits:
    """The Go agent ``ToolOutputLimits`` plus the tool-output cache spec's line length and adk-code's head/tail split."""

    max_lines: int = 2000
    max_bytes: int = 50 * 1024
    max_chars: int = 200 * 1024
    spill_threshold: int = 200 * 1024
    mode: str = "head_tail"
    max_line_length: int = 0
    head_lines: int = 0
    tail_lines: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise MODES.unknown(self.mode)
        for k in ("max_lines", "max_bytes", "max_chars", "spill_threshold", "max_line_length", "head_lines", "tail_lines"):
            if getattr(self, k) < 0:
                raise CtxtoolError(f"{k.replace('_', '-')} must be >= 0", kind=Failure.USAGE)

    def line_split(self, mode: TruncationMode | None = None) -> tuple[int, int] | None:
        """(head, tail) lines kept by the line limit, or None when there is no line limit
        (``mode``: this one's mode, when the caller has looked it up already)."""
        if not (self.head_lines or self.tail_lines or self.max_lines):
            return None
        return (mode or MODES.get(self.mode)).line_split(self)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: the presets (``--preset``): former names still accepted (scripts and configs written before the
#: rename), never listed
PRESETS: Registry[Limits] = Registry("preset", fold=str.lower)
# the Go agent's ToolOutputLimits defaults: 2,000 lines, 50 KiB, 200K characters; spill above 200K
PRESETS.register(Limits(), "spill", aliases=("seed000", "000"))
# the tool-output cache spec's in-context view: lines cut at 2,000 characters, stop at 50 KiB
PRESETS.register(Limits(max_lines=0, max_bytes=50 * 1024, max_chars=0, spill_threshold=0, mode="head", max_line_length=2000),
                 "view", aliases=("seed001", "001"))
# adk-code's head+tail: first 128 + last 128 lines, max 10 KiB
PRESETS.register(Limits(max_lines=256, max_bytes=10 * 1024, max_chars=0, spill_threshold=0, mode="head_tail", head_lines=128,
                        tail_lines=128), "head-tail", aliases=("seed004", "004", "headtail", "head_tail"))

#: what each preset is, for help and listings
PRESET_HELP = {
    "spill": "the Go agent's: 2,000 lines, 50 KiB, 200K characters; the whole output to the cache above 200K",
    "view": "the tool-output cache spec's in-context view: first 50 KiB, lines cut at 2,000 characters",
    "head-tail": "adk-code's: first 128 and last 128 lines, 10 KiB",
}

def limits_with(base: Limits, **overrides: Any) -> Limits:
    """``base`` with the given (non-None) fields replaced."""
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


#: the limits the ``tool_output.*`` settings give (``ctxtool truncate`` without ``--preset``)
SETTING_FIELDS = ("max_lines", "max_bytes", "max_chars", "spill_threshold", "mode", "max_line_length", "head_lines",
                  "tail_lines")


def limits_for(preset: str | None = None, config: Any = None, **flags: Any) -> Limits:
    """The limits ``ctxtool truncate`` cuts by: a preset's exactly, else the ``tool_output.*``
    settings of ``config`` (a :class:`ctxtool.config.Config`; None: the user's); then each
    flag given (a field of :class:`Limits`, None: not given). First or last lines asked for
    without a mode keep both ends (``head_tail``)."""
    if preset:
        base = PRESETS.get(preset)
    else:
        if config is None:
            # lazy: start-up (`ctxtool --help` would load ctxtool.config)
            from ..config import Config

            config = Config()
        base = Limits(**{k: config[f"tool_output.{k}"] for k in SETTING_FIELDS})
    over = {k: v for k, v in flags.items() if v is not None}
    if (flags.get("head_lines") or flags.get("tail_lines")) and flags.get("mode") is None:
        over["mode"] = "head_tail"
    return limits_with(base, **over)


@dataclass(slots=True)
class Cut:
    """What :func:`truncate_text` did to one output."""

    text: str  # the kept text (without any notice); "" when spilled
    truncated: bool = False
    spilled: bool = False
    reasons: list[str] = field(default_factory=list)  # spill, line_length, lines, chars, bytes
    orig_lines: int = 0
    orig_chars: int = 0
    orig_bytes: int = 0
    kept_lines: int = 0  # lines kept whole
    long_lines_cut: int = 0

    @property
    def omitted_lines(self) -> int:
        return self.orig_lines - self.kept_lines

    @property
    def changed(self) -> bool:
        return self.truncated or self.spilled

    def to_json(self) -> dict[str, Any]:
        return {
            "truncated": self.truncated,
            "spilled": self.spilled,
            "reasons": self.reasons,
            "orig_lines": self.orig_lines,
            "orig_chars": self.orig_chars,
            "orig_bytes": self.orig_bytes,
            "kept_lines": self.kept_lines,
            "omitted_lines": self.omitted_lines,
            "long_lines_cut": self.long_lines_cut,
            "chars": len(self.text),
            "bytes": utf8_len(self.text),
        }


# -- helpers ------------------------------------------------------------------------


def utf8_len(s: str) -> int:
    if s.isascii():
        return len(s)
    return len(s.encode("utf-8", "surrogatepass"))


def count_lines(s: str) -> int:
    """Lines separated by ``\\n``; a trailing newline does not start a new line; "" has 0."""
    if not s:
        return 0
    n = s.count("\n")
    return n if s.endswith("\n") else n + 1


def split_lines(s: str) -> list[str]:
    """Lines with their ``\\n`` kept (the last may have none)."""
    if not s:
        return []
    parts = s.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _prefix_bytes(s: str, n: int) -> str:
    """The longest prefix of ``s`` of at most ``n`` UTF-8 bytes, on a character boundary."""
    if n <= 0:
        return ""
    if s.isascii():
        return s[:n]
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= n:
        return s
    i = n
    while i > 0 and (b[i] & 0xC0) == 0x80:  # b[i] is a continuation byte: its lead is before i
        i -= 1
    return b[:i].decode("utf-8", "surrogatepass")


def _suffix_bytes(s: str, n: int) -> str:
    """The longest suffix of ``s`` of at most ``n`` UTF-8 bytes, on a character boundary."""
    if n <= 0:
        return ""
    if s.isascii():
        return s[-n:]
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= n:
        return s
    i = len(b) - n
    while i < len(b) and (b[i] & 0xC0) == 0x80:
        i += 1
    return b[i:].decode("utf-8", "surrogatepass")


def marker(omitted: int, total: int) -> str:
    return MARKER.format(omitted=omitted, total=total)


# -- the steps ----------------------------------------------------------------------


def _cut_line_length(text: str, width: int) -> tuple[str, int]:
    if not width:
        return text, 0
    lines = split_lines(text)
    if all(len(ln) <= width + 1 for ln in lines):
        if not any(len(ln.rstrip("\n")) > width for ln in lines):
            return text, 0
    out = []
    cut = 0
    for ln in lines:
        nl = "\n" if ln.endswith("\n") else ""
        body = ln[:-1] if nl else ln
        if len(body) > width:
            cut += 1
            out.append(body[:width] + LINE_CUT.format(n=len(body) - width) + nl)
        else:
            out.append(ln)
    return "".join(out), cut


def _cut_lines(text: str, split: tuple[int, int], total: int) -> tuple[str, int]:
    """Keep ``head`` first and ``tail`` last lines; returns (text, lines kept)."""
    head, tail = split
    if total <= head + tail:
        return text, total
    # only the kept lines are split off (an output can have millions of lines)
    kept_head = "\n".join(text.split("\n", head)[:head]) + "\n" if head else ""
    if not tail:
        return kept_head, head
    nl = text.endswith("\n")  # the last line's newline: kept, not a line of its own
    last = text.rsplit("\n", tail + nl)[-tail - nl :]
    kept_tail = text[len(text) - (sum(map(len, last)) + tail - 1 + nl) :]
    if kept_head and not kept_head.endswith("\n"):
        kept_head += "\n"
    return kept_head + marker(total - head - tail, total) + "\n" + kept_tail, head + tail


_UNLIMITED = 1 << 62


def _prefix(s: str, c: int, b: int) -> str:
    """The longest prefix of at most ``c`` characters and ``b`` bytes."""
    return _prefix_bytes(s[: max(c, 0)], b) if b < _UNLIMITED else s[: max(c, 0)]


def _suffix(s: str, c: int, b: int) -> str:
    s = s[-c:] if c > 0 else ""
    return _suffix_bytes(s, b) if b < _UNLIMITED else s


def _cut_size(text: str, max_chars: int, max_bytes: int, mode: TruncationMode, total_lines: int,
              kept_lines: int) -> tuple[str, int]:
    """Fit ``text`` in ``max_chars`` characters and ``max_bytes`` bytes (0: no limit), as
    ``mode`` keeps it; returns (text, whole original lines kept)."""
    return mode.cut_size(text, max_chars or _UNLIMITED, max_bytes or _UNLIMITED, total_lines, kept_lines)


def _starts_line(text: str, pos: int) -> bool:
    return pos == 0 or text[pos - 1] == "\n"


def truncate_text(text: str, limits: Limits) -> Cut:
    """Apply ``limits`` to one tool output (see the module docstring for the order)."""
    n_chars = len(text)
    total = count_lines(text)
    n_bytes = utf8_len(text)
    cut = Cut(text, orig_lines=total, orig_chars=n_chars, orig_bytes=n_bytes, kept_lines=total)
    if limits.spill_threshold and n_chars > limits.spill_threshold:
        cut.text = ""
        cut.spilled = True
        cut.kept_lines = 0
        cut.reasons.append("spill")
        return cut
    cur = text
    mode = MODES.get(limits.mode)  # once an output (a registry lookup costs as much as a short output's cut)
    if limits.max_line_length:
        cur, n = _cut_line_length(cur, limits.max_line_length)
        if n:
            cut.long_lines_cut = n
            cut.kept_lines -= n
            cut.reasons.append("line_length")
    split = limits.line_split(mode)
    if split is not None and total > split[0] + split[1]:
        both = None  # the line cut and the byte cut read from cur at once (the kept lines not built)
        if limits.max_bytes and not limits.max_chars:
            both = mode.cut_lines_bytes(cur, split, limits.max_bytes, total,
                                        min(cut.kept_lines, split[0] + split[1]))
        if both is not None:
            cut.reasons += ("lines", "bytes")
            cut.text, cut.kept_lines = both
            cut.truncated = True
            return cut
        cur, kept = _cut_lines(cur, split, total)
        cut.kept_lines = min(cut.kept_lines, kept)
        cut.reasons.append("lines")
    if limits.max_chars and len(cur) > limits.max_chars:
        cur, cut.kept_lines = _cut_size(cur, limits.max_chars, 0, mode, total, cut.kept_lines)
        cut.reasons.append("chars")
    if limits.max_bytes and utf8_len(cur) > limits.max_bytes:
        # the byte cut keeps the character limit too (a different split could exceed it)
        cur, cut.kept_lines = _cut_size(cur, limits.max_chars, limits.max_bytes, mode, total, cut.kept_lines)
        cut.reasons.append("bytes")
    cut.text = cur
    cut.truncated = bool(cut.reasons)
    return cut


# -- notices ------------------------------------------------------------------------


def truncation_notice(cut: Cut, ref: str, tokens: int) -> str:
    """The Go agent's stats notice / the tool-output cache spec's continuation note: what was cut and where the rest is."""
    what = []
    if "line_length" in cut.reasons:
        what.append(f"{cut.long_lines_cut:,} long line{'s' if cut.long_lines_cut != 1 else ''} cut")
    kept_bytes = utf8_len(cut.text)
    return (
        f"[ctxtool: tool output truncated ({', '.join(cut.reasons)}): original {cut.orig_lines:,} lines, "
        f"{cut.orig_bytes:,} bytes, ~{tokens:,} tokens; kept {cut.kept_lines:,} whole lines, {kept_bytes:,} bytes"
        + (f"; {'; '.join(what)}" if what else "")
        + f". Full output: ref={ref} ({READ} or ctxtool refs show {ref[:12]})]"  # as long as it was before the tool
    )


def spill_notice(cut: Cut, ref: str, tokens: int) -> str:
    """The Go agent's spill notice: the output moved out of the context, with its checksum."""
    return (
        f"[ctxtool: tool output too large for the context ({cut.orig_chars:,} characters > spill threshold): "
        f"{cut.orig_lines:,} lines, {cut.orig_bytes:,} bytes, ~{tokens:,} tokens saved to the tool output cache; "
        f"ref={ref} sha256={ref}. Read it with the {READ} tool, or: ctxtool refs show {ref[:12]} --offset 1 "
        f"--limit 200; search it with the {GREP} tool, or: ctxtool refs grep {ref[:12]} PATTERN]"
    )


def trim_placeholder(ref: str) -> str:
    """The tool-output cache spec placeholder, naming the tool that expands it (the tool-output cache spec)."""
    return f"[tool output trimmed; ref={ref}; read it with {READ}]"


def with_notice(body: str, notice: str) -> str:
    if not body:
        return notice
    return body + ("\n" if body.endswith("\n") else "\n\n") + notice
