"""Which refs transcripts name (what ``refs gc`` keeps)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import formats
from ..cache.ids import REF_IN_TEXT_RE
from ..formats.walk import iter_paths
from .common import block_text


def referenced_refs(paths: Iterable[str], fmt: str | None = None) -> set[str]:
    """Every ref a transcript names: metadata refs and ``ref=<sha256>`` in any text."""
    out: set[str] = set()
    for p in iter_paths(paths):
        for t in formats.read(p, fmt):
            for msg in t.iter_messages():
                md = msg.metadata
                if md.output_ref and isinstance(md.output_ref.get("id"), str):
                    out.add(md.output_ref["id"])
                for e in md.extra.get("output_refs") or []:
                    if isinstance(e, dict) and isinstance(e.get("id"), str):
                        out.add(e["id"])
                if isinstance(md.extra.get("source_ref"), str):
                    out.add(md.extra["source_ref"].partition("#")[0])
                for b in msg.content:
                    txt = block_text(b)
                    if "ref=" in txt or "sha256" in txt:
                        out.update(REF_IN_TEXT_RE.findall(txt))
    return out
