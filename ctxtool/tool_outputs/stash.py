"""The message stash: each changed message's source lines and metadata, kept as a ref so
``restore`` puts back exactly what was read (the big texts already stored as refs are cut
out of the stash and put back from their refs)."""

from __future__ import annotations

from typing import Any

from ..cache import RefCache
from ..formats.base import make_exact, source_style
from ..io import jsonl as jsonio
from ..io import jsontext
from ..model import Message, Transcript
from .common import Change, Ctx, block_json

STASH_DEDUPE_CHARS = 256


def _escaped(text: str) -> str | None:
    """``text`` as it appears inside a JSON string written by orjson, JavaScript or serde."""
    try:
        return jsonio.dumps(text)[1:-1].decode("utf-8")
    except Exception:  # lone surrogates: keep the line whole
        return None


class _BigTexts:
    """The big texts of a message's changes and their refs, matched by equality as a dict
    would (a later equal text's ref wins), without hashing them: a dict hashes each text
    whole, many kilobytes apiece, once per cut."""

    __slots__ = ("pairs",)

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def add(self, text: str, ref: str) -> None:
        for k, (t, _) in enumerate(self.pairs):
            if len(t) == len(text) and (t is text or t == text):
                self.pairs[k] = (t, ref)
                return
        self.pairs.append((text, ref))

    def get(self, o: str) -> str | None:
        for t, ref in self.pairs:
            if len(t) == len(o) and (t is o or t == o):
                return ref
        return None


def _stash_refs(item: dict[str, Any], big: _BigTexts) -> None:
    """Take the texts already stored as refs out of a stashed source line, recording where
    they were (``cut``: raw offsets; ``refs_at``: paths into the object), so the stash does
    not hold every output twice. :func:`unstash_refs` puts them back exactly."""
    if "raw" in item:
        raw: str = item["raw"]
        cuts = []
        for text, ref in big.pairs:
            esc = _escaped(text)
            at = raw.find(esc) if esc else -1
            if esc and at >= 0:
                raw = raw[:at] + raw[at + len(esc) :]
                cuts.append({"at": at, "ref": ref})
        if cuts:
            item["raw"] = raw
            item["cut"] = cuts
        return
    found: list[list[Any]] = []
    obj = item.get("obj")
    flat = _flat_without(obj, big, found) if type(obj) is dict else None  # a dataset record's message: no walk
    if flat is not None:
        obj = flat
    else:
        with jsontext.deep():  # a source line nested as deeply as the readers accept
            obj = _without(obj, big, [], found)
    if found:
        item["obj"] = obj
        item["refs_at"] = found


def _flat_without(o: dict[str, Any], big: _BigTexts, found: list[list[Any]]) -> dict[str, Any] | None:
    """:func:`_without` of a dict none of whose values is a dict or a list (the same copy, the
    same paths appended to ``found``); None, ``found`` untouched, for any other dict."""
    hits = []
    for k, v in o.items():
        if isinstance(v, str):
            if len(v) >= STASH_DEDUPE_CHARS and (ref := big.get(v)) is not None:
                hits.append([k, ref])
        elif isinstance(v, (dict, list)):
            return None
    if not hits:
        return o
    found.extend(hits)
    new = dict(o)
    for k, _ in hits:
        new[k] = None
    return new


def _without(o: Any, big: _BigTexts, path: list[Any], found: list[list[Any]]) -> Any:
    """``o``, or a copy with the big texts taken out (None in their place); each one's path
    and ref appended to ``found``. (A function of its own, not a closure: a recursive closure
    is a reference cycle per call, left for the cyclic collector.)"""
    if isinstance(o, str):
        ref = big.get(o) if len(o) >= STASH_DEDUPE_CHARS else None
        if ref is not None:
            found.append([*path, ref])
            return None
        return o
    if isinstance(o, (dict, list)):
        new: Any = None  # the copy, made at the first child that changes
        for k, v in o.items() if isinstance(o, dict) else enumerate(o):
            path.append(k)
            w = _without(v, big, path, found)
            path.pop()
            if w is not v:
                if new is None:
                    new = dict(o) if isinstance(o, dict) else list(o)
                new[k] = w
        return o if new is None else new
    return o


def unstash_refs(item: dict[str, Any], cache: RefCache) -> dict[str, Any]:
    if "cut" in item:
        raw = item["raw"]
        for c in reversed(item["cut"]):
            esc = _escaped(cache.read_text(c["ref"])) or ""
            raw = raw[: c["at"]] + esc + raw[c["at"] :]
        item["raw"] = raw
    for entry in item.get("refs_at") or []:
        *path, ref = entry
        text = cache.read_text(ref)
        if not path:
            item["obj"] = text
            continue
        o = item["obj"]
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = text
    return item


def apply_changes(ctx: Ctx, t: Transcript, msg: Message, changes: list[Change]) -> None:
    """Stash the message's source (once), record the refs, change the blocks, mark dirty."""
    md = msg.metadata
    if "source_ref" not in md.extra:
        changed_at = {c.index: c for c in changes}
        content = []
        for i, b in enumerate(msg.content):
            d = block_json(b)
            c = changed_at.get(i)
            if c is not None:  # the big field lives in its own ref
                d[c.field] = None
                d["restore_from"] = {"ref": c.entry["id"], "field": c.field, "json": bool(c.entry.get("json"))}
            content.append(d)
        # the big texts are in their own refs already: the stashed lines point at them
        big = _BigTexts()
        for c in changes:
            if c.field in ("text", "arguments"):
                txt = getattr(msg.content[c.index], c.field)
                if isinstance(txt, str) and len(txt) >= STASH_DEDUPE_CHARS:
                    big.add(txt, c.entry["id"])
        lines = []
        if any(jsontext.may_change(ln.obj) for ln in msg.lines):
            make_exact(t)  # a dataset record read fast: its message objects stashed with exact numbers
        preds = ctx.predecessors(t, msg) if len(msg.lines) > 1 else {}
        for ln in msg.lines:
            item: dict[str, Any] = {"lineno": ln.lineno}
            if preds:
                item["after"] = preds.get(id(ln), "")
            raw = None
            if ln.raw is not None:
                try:
                    raw = ln.raw.decode("utf-8")
                except UnicodeDecodeError:
                    raw = None
            if raw is not None:
                item["raw"] = raw
            else:
                item["obj"] = ln.obj
            if big:
                _stash_refs(item, big)
            lines.append(item)
        stash = {
            "ctxtool_stash": 1,
            "format": t.format,
            "message_id": msg.id,
            "transcript": t.index,
            "position": ctx.position(t, msg),
            "metadata": md.to_json(),
            "content": content,
            "lines": lines,
            "refs": sorted({c.entry["id"] for c in changes}),
        }
        md.extra["source_ref"] = ""  # set by flush_stashes, once per transcript
        ctx.stashes.append((msg, stash))
    entries = [e for e in (md.extra.get("output_refs") or []) if isinstance(e, dict)]
    for c in changes:
        entries = [e for e in entries if e.get("block") != c.index]
        entries.append(c.entry)
        msg.content[c.index] = c.block
    entries.sort(key=lambda e: e.get("block", 0))
    md.extra["output_refs"] = entries
    if entries:
        md.output_ref = {k: entries[0][k] for k in ("id", "byte_size", "line_count") if k in entries[0]}
    msg.touch()


def flush_stashes(ctx: Ctx, t: Transcript) -> None:
    """Store the transcript's message stashes: one ref for a single message; for several,
    one pack ref and ``source_ref`` = ``<ref>#<k>`` (a file per transcript, not per message)."""
    stashes, ctx.stashes = ctx.stashes, []
    if not stashes:
        return
    # how the source was written (separators, escaping, a document's layout), read from its
    # bytes now: the text that showed it may be the text cut, so restore could not tell
    style = source_style(t, document=True).to_json()
    for _, st in stashes:
        st["style"] = style
    if len(stashes) == 1:
        msg, stash = stashes[0]
        info = ctx.put(jsonio.dumps(stash), kind="source", source=ctx.source(t, msg, None, "message"))
        msg.metadata.extra["source_ref"] = info.id
        return
    pack = {"ctxtool_stash_pack": 1, "format": t.format, "transcript": t.index, "stashes": [st for _, st in stashes]}
    src = {**ctx.source(t, stashes[0][0], None, "messages"), "message_id": None, "line": None, "messages": len(stashes)}
    info = ctx.put(jsonio.dumps(pack), kind="source", source=src)
    for k, (msg, _) in enumerate(stashes):
        msg.metadata.extra["source_ref"] = f"{info.id}#{k}"


def read_stash(ctx: Ctx, src: str, packs: dict[str, Any]) -> Any:
    """The stash a ``source_ref`` names (``<ref>`` or ``<ref>#<k>`` into a pack)."""
    ref, sep, k = src.partition("#")
    ref = ctx.cache.resolve(ref)
    if not sep:
        return ctx.cache.read_json(ref)
    if ref not in packs:
        packs[ref] = ctx.cache.read_json(ref)
    pack = packs[ref]
    if not (isinstance(pack, dict) and pack.get("ctxtool_stash_pack") == 1 and k.isdigit()):
        return None
    stashes = pack.get("stashes") or []
    return stashes[int(k)] if int(k) < len(stashes) else None
