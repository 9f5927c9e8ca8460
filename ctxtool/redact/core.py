"""Redaction of one transcript, in place, in two passes over every string it holds (raw records
and model): the first finds the secrets and gives each a placeholder, the second replaces every
known secret in every form wherever it is; a changed source line is written again in its own
style, every other byte kept. Binary images and signatures are not scanned: docs/architecture.md,
"Commands, in more detail"."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..formats import get_format
from ..formats.base import exact_obj, make_exact
from ..io import jsonl as jsonio
from ..io import jsontext
from ..model import Compaction, Message, Transcript, source_lines, transcript_json
from .detect import MIN_SECRET, PLACEHOLDER, Detector, RedactOptions, Secrets

#: keys holding an encrypted or signed blob, dropped wherever they are (Codex and Responses
#: reasoning and compaction, Gemini's and pi's thinking signatures)
DROP_KEYS = frozenset({"encrypted_content", "thoughtSignature", "thought_signature", "thinkingSignature"})
#: keys dropped from a block of a type: Anthropic's thinking signature and redacted thinking
DROP_BY_TYPE = {"thinking": "signature", "redacted_thinking": "data"}
#: keys whose base64 value is an image's or a document's bytes
BINARY_KEYS = frozenset({"data", "file_data", "bytes", "b64_json", "blob"})
MEDIA_KEYS = ("media_type", "mimeType", "mime_type", "mediaType")
BINARY_TYPES = frozenset({"base64", "image", "document", "input_image", "input_file", "file"})
#: a base64 value at least this long under a binary key is binary even without a media type
BINARY_MIN = 1024
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-\n\r")


@dataclass(slots=True)
class Finding:
    """One secret replaced: its kind, its placeholder and where (never the secret)."""

    kind: str
    placeholder: str
    file: str
    line: int | None
    message: int | None
    field: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "placeholder": self.placeholder, "file": self.file, "line": self.line,
                "message": self.message, "field": self.field}


@dataclass(slots=True)
class BinaryItem:
    """A base64 image or document: not scanned; ``dropped``: replaced by ``placeholder``."""

    kind: str
    media_type: str | None
    bytes: int
    file: str
    line: int | None
    message: int | None
    field: str
    dropped: bool
    placeholder: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "media_type": self.media_type, "bytes": self.bytes, "file": self.file,
                "line": self.line, "message": self.message, "field": self.field, "dropped": self.dropped,
                "placeholder": self.placeholder}


@dataclass(slots=True)
class TranscriptRedaction:
    """What redaction did to one transcript."""

    transcript: str
    path: str
    index: int
    id: str | None
    format: str
    findings: list[Finding] = field(default_factory=list)
    binaries: list[BinaryItem] = field(default_factory=list)
    signatures_dropped: int = 0
    lines_changed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**transcript_json(self), "format": self.format, "findings": [f.to_json() for f in self.findings],
                "binaries": [b.to_json() for b in self.binaries], "signatures_dropped": self.signatures_dropped,
                "lines_changed": self.lines_changed}


class Redactor:
    """One run of redaction: the detector, the run's table of secrets (the same secret gets
    the same placeholder in every transcript and file of the run). A context manager (the
    detector's settings hold while it is open)::

        with Redactor(RedactOptions(deny=(r"acme-[0-9]+",))) as r:
            for t in formats.read("session.jsonl"):
                result = r.redact(t)
    """

    def __init__(self, options: RedactOptions | None = None) -> None:
        self.options = options or RedactOptions()
        self.detector = Detector(self.options)
        self.secrets = Secrets()
        self._blobs: dict[bytes, str] = {}

    def __enter__(self) -> Redactor:
        self.detector.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.detector.__exit__(*exc)

    def redact(self, t: Transcript) -> TranscriptRedaction:
        """Find and replace every secret of ``t``, in place (its raw lines and its model)."""
        make_exact(t)  # a dataset record's values as its bytes hold them, before any is changed
        res = TranscriptRedaction(t.label, t.path, t.index, t.id, t.format)
        with jsontext.deep():
            _Pass(self, res, learn=True).transcript(t)
            done = _Pass(self, res, learn=False)
            done.transcript(t)
        raw = t.extra.get("record_raw")
        if done.record_changed and isinstance(raw, bytes):
            # the dataset record written again from its redacted values (the writer's own way)
            t.extra["record_raw"] = get_format(t.format).changed_record(t)
        return res

    def blob_placeholder(self, kind: str, value: str) -> str:
        key = hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()
        ph = self._blobs.get(key)
        if ph is None:
            n = self.secrets.numbers.get(kind, 0) + 1
            self.secrets.numbers[kind] = n
            ph = self._blobs[key] = f"{PLACEHOLDER}{kind}#{n}]"
        return ph


class _Pass:
    """One pass over a transcript: ``learn`` finds secrets, else each known one is replaced
    (and reported, where the report places it)."""

    def __init__(self, r: Redactor, res: TranscriptRedaction, *, learn: bool) -> None:
        self.r, self.res, self.learn = r, res, learn
        self.keep = r.options.keep_signatures
        self.seen: set[str] = set()
        self.path: list[str] = []
        self.line: int | None = None
        self.message: int | None = None
        self.reporting = True
        self.changes = 0
        self.record_changed = False
        #: containers this pass changed: a line that shares one with another (a record and its
        #: versions) changed too, though its own walk finds nothing left to replace
        self.touched: set[int] = set()

    # -- the transcript ------------------------------------------------------------
    def transcript(self, t: Transcript) -> None:
        k = 0
        for e in t.entries:
            idx = None
            if isinstance(e, Message):
                idx, k = k, k + 1
            lines = source_lines(e)
            for ln in lines:
                self.at(ln.lineno if ln.lineno is not None else t.lineno, idx, True)
                before = self.changes
                obj = exact_obj(ln)
                new = self.value(obj)
                if new is not obj:
                    ln.obj = new
                if self.changes != before:
                    self.record_changed = True
                    self.res.lines_changed += 1
                    if ln.raw is not None:
                        ln.raw = jsonio.dumps(ln.obj, jsontext.Style.detect(ln.raw))
            self.at(lines[0].lineno if lines else t.lineno, idx, not lines)
            if isinstance(e, Message):
                self.message_model(e)
            elif isinstance(e, Compaction):
                e.summary = self.named("summary", e.summary)
                self.named("details", e.details)
        self.at(t.lineno, None, True)
        before = self.changes
        if t.record is not None:
            self.value(t.record)
        if self.changes != before:
            self.record_changed = True
        self.at(t.lineno, None, False)
        for key, v in t.extra.items():
            if not isinstance(v, bytes):
                nv = self.named(key, v)
                if nv is not v:
                    t.extra[key] = nv

    def at(self, line: int | None, message: int | None, reporting: bool) -> None:
        self.line, self.message, self.reporting, self.path = line, message, reporting, []

    def message_model(self, m: Message) -> None:
        for j, b in enumerate(m.content):
            self.path.append(f"content[{j}]")
            if b.text:
                b.text = self.named("text", b.text)
            if b.arguments is not None:
                b.arguments = self.named("arguments", b.arguments)
            if b.data is not None:
                b.data = self.named("data", b.data)
            if b.extra:
                if b.type == "thinking":
                    self.drop_signatures(b.extra, b.extra.get("anthropic_type") or "thinking")
                b.extra = self.named("extra", b.extra)
            self.path.pop()
        md = m.metadata
        if md.output_ref is not None:
            md.output_ref = self.named("metadata.output_ref", md.output_ref)
        if md.extra:
            self.named("metadata", md.extra)
        if m.extra:
            self.named("extra", m.extra)

    def named(self, key: str, v: Any) -> Any:
        self.path.append(key)
        try:
            return self.value(v)
        finally:
            self.path.pop()

    # -- values ----------------------------------------------------------------------
    def value(self, o: Any) -> Any:
        if isinstance(o, str):
            if o.startswith("data:") and ";base64," in o[:120]:
                media = o[5 : o.index(";")]
                return self.binary(o, media)
            return self.text(o)
        if isinstance(o, dict):
            self.obj(o)
            return o
        if isinstance(o, list):
            if id(o) in self.touched:
                self.changes += 1
            for i, v in enumerate(o):
                self.path.append(f"[{i}]")
                nv = self.value(v)
                self.path.pop()
                if nv is not v:
                    o[i] = nv
                    self.touched.add(id(o))
            return o
        if type(o) is tuple:
            items = [self.value(v) for v in o]
            return o if all(a is b for a, b in zip(items, o, strict=True)) else tuple(items)
        return o

    def obj(self, d: dict[Any, Any]) -> None:
        if id(d) in self.touched:
            self.changes += 1
        typ = d.get("type")
        self.drop_signatures(d, typ)
        media = next((d[k] for k in MEDIA_KEYS if isinstance(d.get(k), str)), None)
        for k in list(d):
            v = d[k]
            self.path.append(f".{k}" if isinstance(k, str) else f".{k!r}")
            if k in DROP_KEYS or (isinstance(typ, str) and DROP_BY_TYPE.get(typ) == k):
                pass  # kept (--keep-signatures): an opaque blob, not scanned
            elif (isinstance(v, str) and k in BINARY_KEYS and len(v) >= 64
                  and (media is not None or typ in BINARY_TYPES or len(v) >= BINARY_MIN) and _is_base64(v)):
                nv = d[k] = self.binary(v, media)
                if nv is not v:
                    self.touched.add(id(d))
            else:
                nv = self.value(v)
                if nv is not v:
                    d[k] = nv
                    self.touched.add(id(d))
                if self.learn and isinstance(v, str) and isinstance(k, str) and len(v) >= MIN_SECRET:
                    self.learn_field(k, v)
            self.path.pop()
        if not self.learn and self.r.secrets.placeholder:
            renamed = [(self.text(k) if isinstance(k, str) else k, v) for k, v in d.items()]
            if any(a is not b for (a, _), b in zip(renamed, d, strict=True)):
                d.clear()
                d.update(renamed)
                self.touched.add(id(d))

    def drop_signatures(self, d: dict[Any, Any], typ: Any) -> None:
        if self.keep or self.learn:
            return
        doomed = [k for k in d if k in DROP_KEYS or (isinstance(typ, str) and DROP_BY_TYPE.get(typ) == k)]
        for k in doomed:
            del d[k]
        if doomed:
            self.touched.add(id(d))
            self.changes += len(doomed)
            if self.reporting:
                self.res.signatures_dropped += len(doomed)

    def text(self, s: str) -> str:
        if len(s) < MIN_SECRET:
            return s
        if self.learn:
            self.learn_text(s)
            return s
        new, put = self.r.secrets.sub(s)
        if put:
            self.changes += len(put)
            if self.reporting:
                where = "".join(self.path).lstrip(".")
                kinds = self.r.secrets.kind_of
                self.res.findings.extend(
                    Finding(kinds[ph], ph, self.res.path, self.line, self.message, where) for ph in put)
        return new

    def learn_field(self, key: str, v: str) -> None:
        """A value under a key that names a secret (``"db_password": "…"``): scanned as the
        line a config or JSON file would hold, so the keyword plugin sees the key."""
        if len(key) <= 64 and self.r.detector.names_secret(key):
            self.learn_text(json.dumps({key: v}, ensure_ascii=False)[1:-1])

    def learn_text(self, s: str) -> None:
        if s in self.seen:
            return
        self.seen.add(s)
        for kind, v in self.r.detector.find(s):
            self.r.secrets.add(kind, v)
        if s[:1] in "{[" and s[-1:] in "}]":  # JSON inside a string (OpenAI's arguments): its strings too
            try:
                inner = orjson.loads(s)
            except orjson.JSONDecodeError:
                return
            stack = [inner]
            while stack:
                o = stack.pop()
                if isinstance(o, str):
                    if len(o) >= MIN_SECRET:
                        self.learn_text(o)
                elif isinstance(o, dict):
                    stack.extend(o.values())
                    for k, v in o.items():
                        if isinstance(k, str) and isinstance(v, str) and len(v) >= MIN_SECRET:
                            self.learn_field(k, v)
                elif isinstance(o, list):
                    stack.extend(o)

    def binary(self, v: str, media: str | None) -> str:
        if self.learn:
            return v
        kind = "image" if media and media.startswith("image/") else "document" if media else "binary"
        drop = self.r.options.drop_binary
        ph = self.r.blob_placeholder(kind, v) if drop else None
        if self.reporting:
            body = v.split(",", 1)[1] if v.startswith("data:") else v
            self.res.binaries.append(BinaryItem(kind, media, len(body) * 3 // 4, self.res.path, self.line,
                                                self.message, "".join(self.path).lstrip("."), drop, ph))
        if ph is None:
            return v
        self.changes += 1
        return ph


def _is_base64(v: str) -> bool:
    return all(c in _B64_CHARS for c in v[:256]) and all(c in _B64_CHARS for c in v[-64:])
