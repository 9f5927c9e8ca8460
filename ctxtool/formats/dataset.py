"""What the dataset formats share (``openai``, ``anthropic``, ``sharegpt``, ``responses``):
messages alone or inside dataset records, in every layout (``entries_jsonl``, ``entries_array``,
``records_jsonl``, ``records_array``, ``record_object``), read and written back as they came.

A subclass says what one item of its format is and how a record's ``system`` field becomes a
leading system message and back."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import CtxtoolError
from ..io.jsonl import UNREADABLE, Source
from ..model import Line, Message, Record, Transcript
from .base import RECORD_ERRORS, ErrorPolicy, Format, assign_positional_ids, placed

MESSAGE_KEYS = ("messages", "traj", "conversations", "conversation", "history", "trajectory", "chat", "dialog")
RECORD_ID_KEYS = ("id", "task_id", "instance_id", "conversation_id", "uuid")


def record_id(rec: dict[str, Any], i: int) -> str:
    """A record's id: its own id field, else its index in the file."""
    for k in RECORD_ID_KEYS:
        v = rec.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return f"{v}" if k != "task_id" else f"task-{v}-{i}"
    return str(i)


class DatasetFormat(Format):
    """A format whose transcripts are message lists, alone or inside dataset records."""

    #: record keys that may hold the messages, in order of preference
    keys: tuple[str, ...] = MESSAGE_KEYS
    #: prefix of the synthetic ids given to calls and results paired by position
    id_prefix = "call_"
    #: whether a file may hold bare messages (entries layouts), not only records
    entries = True
    #: what one item is called, and what it needs, for error messages
    item_word = "message"
    item_needs = "a message"
    #: the ``system`` field hint of a leading system message read from a record
    system_hint: str | None = None
    #: the hint of a system message read from an item of the list (stays an item)
    item_hint: str | None = None

    # -- what a subclass says ---------------------------------------------------------
    def is_item(self, o: Any) -> bool:
        raise NotImplementedError

    def score(self, items: list[Any], rec: dict[str, Any] | None = None, single: bool = False) -> int:
        """Confidence (0-100) that ``items`` (of record ``rec``, if any) are this format's."""
        raise NotImplementedError

    def decode(self, o: dict[str, Any], line: Line) -> Message | Record:
        """An item as a message, or as an opaque record kept in place (not a message)."""
        raise NotImplementedError

    def decode_system(self, system: Any, lineno: int | None) -> Message | None:
        """A record's ``system`` field as a leading system message (None: not this format's)."""
        return None

    def system_value(self, msgs: list[Message]) -> Any:
        """The ``system`` field for the leading system messages ``msgs``."""
        raise NotImplementedError

    def system_count(self, t: Transcript) -> int:
        """How many leading messages go to the record's ``system`` field on writing."""
        if self.system_hint is None:
            return 0
        n = 0
        for e in t.entries:
            if not (isinstance(e, Message) and e.role == "system" and not e.extra.get(self.item_hint or "")):
                break
            n += 1
        return n

    def owns_system(self, value: Any) -> bool:
        """Whether a record's ``system`` field is one this format reads as a message."""
        return value is not None

    # -- detection --------------------------------------------------------------------
    def messages_key(self, rec: Any) -> str | None:
        if not isinstance(rec, dict):
            return None
        for k in self.keys:
            v = rec.get(k)
            if isinstance(v, list) and v and self.is_item(v[0]):
                return k
        return None

    def _record_score(self, rec: Any, single: bool) -> int:
        key = self.messages_key(rec)
        return self.score(rec[key], rec, single) if key else 0

    def sniff(self, sample: list[Any], src: Source) -> int:
        if not sample:
            return 0
        if src.layout == "json":
            doc = sample[0]
            if isinstance(doc, list):
                if doc and self.entries and self.is_item(doc[0]):
                    return self.score(doc)
                return self._record_score(doc[0], single=False) if doc else 0
            return self._record_score(doc, single=True) if isinstance(doc, dict) else 0
        if self.entries and self.is_item(sample[0]):
            return self.score(sample)
        # the first record holding a message list decides (one without, a bad record, is
        # left to the error policy when read; none: 0)
        for rec in sample:
            key = self.messages_key(rec)
            if key is not None:
                return self.score(rec[key], rec, False) if key else 0
        return 0

    def records_per_line(self, src: Source) -> bool:
        if src.layout != "jsonl":
            return False
        for ln in src.peek:  # the first of src.sample() (asked twice per record by records.process)
            if ln.obj is not UNREADABLE:
                return self.messages_key(ln.obj) is not None
        return False

    # -- reading ----------------------------------------------------------------------
    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        if src.layout == "json":
            doc = src.doc
            if self.entries and isinstance(doc, list) and doc and self.is_item(doc[0]):
                t = self._transcript(doc, src, 0, None)
                t.extra["layout"] = "entries_array"
                if src.style is not None:
                    t.extra["source_style"] = src.style.to_json()
                yield t
                return
            yield from self.read_records(src, policy)
            return
        sample = src.sample()
        if not (self.entries and sample and self.is_item(sample[0])):
            yield from self.read_records(src, policy)
            return
        t = Transcript(self.name, path=src.path, index=0, lineno=1)
        for ln in src.lines(policy):
            if not self.is_item(ln.obj):
                policy.handle(CtxtoolError(f"not {self.item_needs}", path=src.path, line=ln.lineno))
                continue
            try:
                t.entries.append(self.decode(ln.obj, ln))
            except RECORD_ERRORS as e:
                policy.reject(e, src.path, ln.lineno)
        assign_positional_ids(t.messages, self.id_prefix)
        t.extra["layout"] = "entries_jsonl"
        yield t

    def _transcript(self, items: list[Any], src: Source, index: int, lineno: int | None) -> Transcript:
        t = Transcript(self.name, path=src.path, index=index, lineno=lineno)
        for i, o in enumerate(items):
            if not self.is_item(o):
                raise CtxtoolError(f"{self.item_word} {i} is not {self.item_needs}", path=src.path, line=lineno)
            try:
                t.entries.append(self.decode(o, Line(o, None, lineno)))
            except CtxtoolError as e:
                e.message = f"{self.item_word} {i}: {e.message}"
                raise placed(e, src.path, lineno) from None
        assign_positional_ids(t.messages, f"{self.id_prefix}{index}_")
        return t

    def _as_read(self, items: list[Any], src: Source, index: int, lineno: int | None) -> Transcript:
        """The transcript of ``items`` each kept as it came, not read into a message: an
        opaque :class:`Record` entry, written back as its source object (see
        :meth:`line_record`'s ``read``)."""
        return Transcript(self.name, path=src.path, index=index, lineno=lineno,
                          entries=[Record(Line(o, None, lineno), self.item_word) for o in items])

    def _record(self, rec: Any, src: Source, i: int, lineno: int | None, layout: str, read: bool = True) -> Transcript:
        key = self.messages_key(rec)
        if key is None and isinstance(rec, dict):
            key = next((k for k in self.keys if isinstance(rec.get(k), list) and not rec[k]), None)
        if key is None:
            raise CtxtoolError(
                f"record has no {self.item_word} list (looked for: {', '.join(self.keys)})",
                path=src.path,
                line=lineno,
            )
        t = (self._transcript if read else self._as_read)(rec[key], src, i, lineno)
        system = rec.get("system")
        if self.system_hint is not None and self.owns_system(system):
            m = self.decode_system(system, lineno)
            if m is not None:
                t.entries.insert(0, m)
        # the system field keeps its value in the record (rebuilt from the message on writing)
        t.record = {k: (None if k == key else v) for k, v in rec.items()}
        t.messages_key = key
        t.id = record_id(rec, i)
        t.extra["layout"] = layout
        t.extra["entries_count"] = len(t.entries)
        return t

    def line_record(self, ln: Line, src: Source, i: int, only: Sequence[int] | None = None,
                    read: bool = True) -> Transcript:
        """``only``: the positions in the record's message list of the messages to read; the
        others are dropped unread, as if read and then removed (the record is written
        changed). ``window``'s fast read (:mod:`ctxtool.stats.fast`).

        ``read`` False (with ``only``): the messages kept are not read into the model either,
        each kept as its source object (:meth:`_as_read`), for a caller that knows what they
        are without it and only drops some (``window``, from the record's tally, which
        accepts only items this format reads, each into one message of its own source
        object, and writes back unchanged). Written, the same bytes as read: a message read
        and left unchanged is written as its source object too (``entry_items``). Only
        where this format reads a list the way this class does and reads no ``system``
        field into a message (else they are read: ``_transcript`` overridden, a
        ``system_hint``)."""
        if only is None:
            return super().line_record(ln, src, i)
        key = self.messages_key(ln.obj)
        if key is None:
            raise CtxtoolError("no message list to read part of", path=src.path, line=ln.lineno)
        items = ln.obj[key]
        rec = {**ln.obj, key: [items[k] for k in only]}
        if read or self.system_hint is not None or type(self)._transcript is not DatasetFormat._transcript:
            t = super().line_record(Line(rec, ln.raw, ln.lineno), src, i)
        else:
            t = self._record(rec, src, i, ln.lineno, "records_jsonl", read=False)
            t.extra["record_raw"] = ln.raw  # as Format.line_record keeps it
        t.extra["entries_count"] = int(t.extra["entries_count"]) + len(items) - len(only)
        t.extra["record_obj"] = ln.obj
        return t

    def passed_record(self, ln: Line, src: Source, i: int) -> Transcript:
        """A JSON Lines record passed on with none of its messages read, written as it was
        (its bytes): for an operation that knows from the record's tally that it leaves it
        unchanged (``window``'s fast read)."""
        t = self.line_record(ln, src, i, ())
        t.extra["entries_count"] = 0  # none read, none removed: unchanged
        return t

    # -- writing ----------------------------------------------------------------------
    def build_record(self, t: Transcript) -> dict[str, Any]:
        """The record with its messages (and ``system`` field) rebuilt; other fields kept in order.

        Leading system messages go to the ``system`` field unless read from an item of the
        list; a new ``system`` field goes just before the messages. Numbers are as read (a
        writer of JSON Lines asks for exact ones: ``Format.changed_record``)."""
        n = self.system_count(t)
        rest = dataclasses.replace(t, entries=t.entries[n:]) if n else t
        items = [ln.obj for ln in self.output_items(rest)]
        key = t.messages_key or self.keys[0]
        rec: dict[str, Any] = dict(t.record) if t.record is not None else {}
        if not n:
            if self.system_hint is not None and self.owns_system(rec.get("system")):
                rec.pop("system")  # the system message was removed
            rec[key] = items
            return rec
        system = self.system_value(t.entries[:n])  # type: ignore[arg-type]
        if "system" in rec:
            rec["system"] = system
            rec[key] = items
            return rec
        out: dict[str, Any] = {}
        for k, v in rec.items():
            if k == key:
                out["system"] = system
            out[k] = v
        if key not in out:
            out["system"] = system
        out[key] = items
        return out
