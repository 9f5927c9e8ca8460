"""Pinned instructions (``compact --pin TEXT|@FILE``): standing rules kept verbatim beside the
summary in every compaction, each behind :data:`PIN_PREFIX` and recorded by the output format
(:meth:`ctxtool.formats.base.CompactionNote.pin_messages`). Pins in the removed part are pinned
again; after the rebuild and after the read-back every pin must be in what the agent sees
(:func:`missing`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import CtxtoolError, Failure, refuse_empty_option
from ..model import PINNED_PREFIX as PIN_PREFIX
from ..model import Block, Compaction, Message, Transcript


def load(values: Iterable[str]) -> list[str]:
    """The pins of ``--pin`` values: a text as is, ``@FILE`` the file's content (UTF-8);
    ``@@text`` a text starting with ``@``. Empty pins are refused."""
    out: list[str] = []
    for v in values:
        if v.startswith("@@"):
            text = v[1:]
        elif v.startswith("@"):
            refuse_empty_option("--pin @FILE", v[1:])
            p = Path(v[1:])
            try:
                text = p.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                kind = Failure.NOT_FOUND if isinstance(e, FileNotFoundError) else Failure.INPUT
                raise CtxtoolError(f"--pin {v}: cannot read {p}: {getattr(e, 'strerror', None) or e}",
                                   kind=kind, path=str(p)) from None
        else:
            text = v
        text = text.strip("\n")
        if not text.strip():
            raise CtxtoolError(f"--pin {v!r}: nothing to pin (empty)", kind=Failure.USAGE)
        if text not in out:
            out.append(text)
    return out


def pin_text(pin: str) -> str:
    """What the agent reads for one pin."""
    return f"{PIN_PREFIX}\n\n{pin}"


def pin_of(text: str) -> str | None:
    """The pin a text block carries, or None."""
    s = text.lstrip()
    if not s.startswith(PIN_PREFIX):
        return None
    return s[len(PIN_PREFIX):].lstrip("\n").rstrip("\n") or None


def found(msgs: Iterable[Message]) -> list[str]:
    """The pins recorded in ``msgs`` (in order, once each)."""
    out: list[str] = []
    for m in msgs:
        for b in m.content:
            if b.type == "text" and (p := pin_of(b.text)) is not None and p not in out:
                out.append(p)
    return out


def to_record(given: Sequence[str], removed: Iterable[Message], kept: Iterable[Message]) -> list[str]:
    """The pins a compaction records: those pinned in the part it removes, then the new ones
    (each once; none already in the kept part)."""
    there = found(kept)
    out = [p for p in found(removed) if p not in there]
    out += [p for p in given if p not in out and p not in there]
    return out


def recorded(t: Transcript) -> list[str]:
    """The pins a transcript records (as messages, or in a compaction entry's details)."""
    out = found(t.messages)
    for e in t.entries:
        if isinstance(e, Compaction):
            for x in e.details.get("pins") or ():
                if isinstance(x, str) and (p := pin_of(x)) is not None and p not in out:
                    out.append(p)
    return out


def _norm(s: str) -> str:
    return " ".join(s.split())


def missing_in(pins: Sequence[str], msgs: Iterable[Message]) -> list[str]:
    """The pins not present, verbatim (whitespace aside), in the texts of ``msgs``."""
    seen = _norm("\n".join(b.text for m in msgs for b in m.content if b.type == "text"))
    return [p for p in pins if _norm(p) not in seen]


def missing(pins: Sequence[str], t: Transcript) -> list[str]:
    """The pins not in what the agent of ``t`` (a transcript read back) sees: the messages
    after its last compaction and that compaction's summary."""
    # lazy: start-up (loaded only when this runs: ..tokens.count, .view)
    from ..tokens.count import get_tokenizer
    from .view import context_view

    if not pins:
        return []
    v = context_view(t, get_tokenizer("heuristic"))
    return missing_in(pins, [*v.effective, Message("user", [Block("text", text=v.previous_summary or "")])])


def error(lost: Sequence[str], path: str | None) -> CtxtoolError:
    first = lost[0].splitlines()[0][:80]
    return CtxtoolError(f"compacted output would lose {len(lost)} pinned instruction(s), first: {first!r}",
                        kind=Failure.INTERNAL, path=path)
