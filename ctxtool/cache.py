"""The tool output cache (seed 001 §1): content-addressed refs with a manifest.

Layout under the cache directory (``--cache-dir``, else ``$CTXTOOL_CACHE_DIR``, else
the user cache directory)::

    refs/<sha256>       the content, zlib-compressed (as git stores loose objects), mode 0600
    manifest.jsonl      one JSON line per stored ref: hash, size, lines, kind, source

Directories are 0700. A ref id is the 64-hex sha256 of its (uncompressed) content; sizes
in the manifest and in ``output_ref`` are of the content too. Tool outputs compress
several times over, so the cache takes a fraction of the space and, on disks where many
small writes are slow, of the time. Ids (or unique prefixes of at least
8 hex digits) are validated before any path is built, so a ref can never name a
file outside the cache; content is checked against its hash when read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import jsonio
from .errors import CtxtoolError, ExitCode

REF_RE = re.compile(r"^[0-9a-f]{64}$")
PREFIX_RE = re.compile(r"^[0-9a-f]{8,64}$")
REF_IN_TEXT_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
MANIFEST = "manifest.jsonl"
STASH_PREFIX = b'{"ctxtool_stash'  # a message's stash, or a transcript's pack of them


def default_dir(cache_dir: str | Path | None = None) -> Path:
    if cache_dir:
        return Path(cache_dir).expanduser()
    from .paths import cache_dir as user_cache

    return user_cache()


@dataclass(slots=True)
class RefInfo:
    """One stored ref: seed 001 ``ToolOutputRef`` (id, byte_size, line_count) plus provenance."""

    id: str
    byte_size: int
    line_count: int
    kind: str = "output"  # output | source (a message's original source lines)
    sources: list[dict[str, Any]] = field(default_factory=list)
    created: float | None = None
    present: bool = True
    new: bool = False  # written by this put (not already in the cache)

    def ref_json(self) -> dict[str, Any]:
        """The ``output_ref`` a message carries (seed 001 1.4)."""
        return {"id": self.id, "byte_size": self.byte_size, "line_count": self.line_count}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sha256": self.id,
            "byte_size": self.byte_size,
            "line_count": self.line_count,
            "kind": self.kind,
            "sources": self.sources,
            "created": self.created,
            "present": self.present,
        }


@dataclass(slots=True)
class ShowResult:
    ref: str
    offset: int
    limit: int | None
    total_lines: int
    lines: list[tuple[int, str]]

    def render(self) -> str:
        """Like a file reader: right-aligned line numbers, a tab, the line."""
        return "".join(f"{n:>6}\t{text}\n" for n, text in self.lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "offset": self.offset,
            "limit": self.limit,
            "total_lines": self.total_lines,
            "returned": len(self.lines),
            "lines": [{"n": n, "text": t} for n, t in self.lines],
        }


@dataclass(slots=True)
class GrepMatch:
    ref: str
    line: int
    text: str
    match: bool = True  # False for context lines

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.ref, "line": self.line, "text": self.text, "match": self.match}


@dataclass(slots=True)
class GrepResult:
    pattern: str
    refs_searched: int
    matches: list[GrepMatch]

    @property
    def match_count(self) -> int:
        return sum(1 for m in self.matches if m.match)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "refs_searched": self.refs_searched,
            "match_count": self.match_count,
            "matches": [m.to_json() for m in self.matches],
        }


@dataclass(slots=True)
class VerifyResult:
    checked: int = 0
    ok: int = 0
    corrupted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the manifest, no file
    unlisted: list[str] = field(default_factory=list)  # a file with no manifest entry
    stray: list[str] = field(default_factory=list)  # names that are not ref ids

    @property
    def clean(self) -> bool:
        return not self.corrupted and not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "corrupted": self.corrupted,
            "missing": self.missing,
            "unlisted": self.unlisted,
            "stray": self.stray,
            "clean": self.clean,
        }


@dataclass(slots=True)
class GcResult:
    referenced: int
    kept: int
    deleted: list[RefInfo]
    bytes_freed: int
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "referenced": self.referenced,
            "kept": self.kept,
            "deleted": [r.to_json() for r in self.deleted],
            "deleted_count": len(self.deleted),
            "bytes_freed": self.bytes_freed,
        }


COMPRESS_LEVEL = 1  # zlib's fastest: most of the saving, a fraction of the time


def _inflate(stored: bytes) -> bytes | None:
    """A ref file's content; ``None`` when it is not a complete zlib stream (corrupted)."""
    try:
        z = zlib.decompressobj()
        data = z.decompress(stored) + z.flush()
    except zlib.error:
        return None
    return data if z.eof and not z.unused_data else None


def _line_count(data: bytes) -> int:
    if not data:
        return 0
    n = data.count(b"\n")
    return n if data.endswith(b"\n") else n + 1


MANIFEST_BATCH = 256 * 1024  # bytes of manifest lines buffered before one append


class RefCache:
    """A content-addressed store of tool outputs and message source stashes."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = default_dir(root)
        self.refs_dir = self.root / "refs"
        self._refs = str(self.refs_dir)
        self.manifest_path = self.root / MANIFEST
        self._manifest_fd: int | None = None
        self._pending: list[bytes] = []  # manifest lines not yet appended
        self._pending_bytes = 0
        self._known: set[str] = set()
        self._ensured = False

    # -- setup ----------------------------------------------------------------------
    def ensure(self) -> None:
        if self._ensured:
            return
        from .paths import ensure_private_dir

        try:
            ensure_private_dir(self.root)
            ensure_private_dir(self.refs_dir)
        except OSError as e:
            raise CtxtoolError(f"cannot create the cache directory: {e.strerror}", path=str(self.root), code=ExitCode.ERROR) from e
        self._ensured = True

    def flush(self) -> None:
        """Append the buffered manifest entries (one write per batch of whole lines)."""
        if not self._pending:
            return
        if self._manifest_fd is None:
            self.ensure()
            self._manifest_fd = os.open(self.manifest_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        view = memoryview(data)
        while view:
            view = view[os.write(self._manifest_fd, view) :]

    def close(self) -> None:
        self.flush()
        if self._manifest_fd is not None:
            os.close(self._manifest_fd)
            self._manifest_fd = None

    def __enter__(self) -> RefCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- refs -----------------------------------------------------------------------
    def resolve(self, ref: str) -> str:
        """A full ref id from an id or unique prefix; refuses anything that is not hex."""
        r = ref.strip().lower()
        if r.startswith("ref="):
            r = r[4:]
        r = r.split("#", 1)[0]  # a source_ref names one stash of a pack: <ref>#<k>
        if REF_RE.match(r):
            return r
        if not PREFIX_RE.match(r):
            raise CtxtoolError(
                f"invalid ref {ref!r}: a ref is a sha256 (64 hex digits) or a prefix of at least 8", code=ExitCode.USAGE
            )
        hits = [n for n in self._names() if n.startswith(r)]
        if not hits:
            raise CtxtoolError(f"no ref {ref} in the cache", path=str(self.root), code=ExitCode.NOT_FOUND)
        if len(hits) > 1:
            raise CtxtoolError(f"ambiguous ref prefix {ref} ({len(hits)} refs)", code=ExitCode.USAGE)
        return hits[0]

    def path_for(self, ref: str) -> Path:
        if not REF_RE.match(ref):
            raise CtxtoolError(f"invalid ref {ref!r}: expected 64 hex digits", code=ExitCode.USAGE)
        p = self.refs_dir / ref
        # belt and braces: the path must stay inside the refs directory
        if p.parent != self.refs_dir:  # pragma: no cover - the regex already guarantees it
            raise CtxtoolError(f"ref {ref!r} escapes the cache", code=ExitCode.USAGE)
        return p

    def exists(self, ref: str) -> bool:
        return REF_RE.match(ref) is not None and self.path_for(ref).is_file()

    def _names(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.refs_dir) if REF_RE.match(n))
        except FileNotFoundError:
            return []

    def put(self, data: bytes | str, *, kind: str = "output", source: dict[str, Any] | None = None) -> RefInfo:
        """Store ``data`` (if not there yet) and record where it came from."""
        b = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        return self._put(b, hashlib.sha256(b).hexdigest(), _line_count(b), kind, source)

    def _put(self, b: bytes, ref: str, lines: int, kind: str, source: dict[str, Any] | None) -> RefInfo:
        info = RefInfo(ref, len(b), lines, kind, [source] if source else [], time.time())
        if ref not in self._known:
            self.ensure()
            p = os.path.join(self._refs, ref)  # ref is 64 hex digits: always inside refs/
            try:
                present = os.stat(p).st_size > 0  # a zlib stream is never empty
            except FileNotFoundError:
                present = False
            if not present:  # (a damaged file is for `refs verify` to find)
                self._write_new(p, zlib.compress(b, COMPRESS_LEVEL))
                info.new = True
            self._known.add(ref)
        self._append_manifest(info)
        return info

    def _write_new(self, path: str, data: bytes) -> None:
        """Write a ref atomically: a private temporary file in refs/, then a rename."""
        tmp = os.path.join(self._refs, f".tmp-{os.path.basename(path)}-{os.getpid()}-{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def put_json(self, obj: Any, *, kind: str = "source", source: dict[str, Any] | None = None) -> RefInfo:
        return self.put(jsonio.dumps(obj), kind=kind, source=source)

    def _append_manifest(self, info: RefInfo) -> None:
        entry = {
            "id": info.id,
            "sha256": info.id,
            "byte_size": info.byte_size,
            "line_count": info.line_count,
            "kind": info.kind,
            "created": round(info.created or time.time(), 3),
        }
        if info.sources:
            entry["source"] = info.sources[0]
        line = jsonio.dumps(entry) + b"\n"
        self._pending.append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= MANIFEST_BATCH:
            self.flush()

    def read_bytes(self, ref: str, *, verify: bool = True) -> bytes:
        ref = self.resolve(ref)
        p = self.path_for(ref)
        try:
            data = _inflate(p.read_bytes())
        except FileNotFoundError:
            raise CtxtoolError(f"ref {ref} is not in the cache", path=str(self.root), code=ExitCode.NOT_FOUND) from None
        except OSError as e:
            raise CtxtoolError(f"cannot read ref {ref}: {e.strerror}", path=str(p), code=ExitCode.INPUT) from e
        if data is None or (verify and hashlib.sha256(data).hexdigest() != ref):
            raise CtxtoolError(
                f"ref {ref} is corrupted: its content does not match its sha256 (run ctxtool refs verify)",
                path=str(p),
                code=ExitCode.INPUT,
            )
        return data

    def read_text(self, ref: str) -> str:
        data = self.read_bytes(ref)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as e:
            raise CtxtoolError(f"ref {ref} is not UTF-8 text", code=ExitCode.INPUT) from e

    def read_json(self, ref: str) -> Any:
        return jsonio.loads(self.read_bytes(ref), path=f"ref:{ref}")

    # -- the manifest -----------------------------------------------------------------
    def manifest(self) -> dict[str, RefInfo]:
        """Manifest entries merged by ref (duplicates tolerated; sources accumulated)."""
        self.flush()
        out: dict[str, RefInfo] = {}
        try:
            fh = self.manifest_path.open("rb")
        except FileNotFoundError:
            return out
        with fh:
            for raw in fh:
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    e = jsonio.loads(raw)
                except CtxtoolError:
                    continue  # a torn line: the refs themselves are the truth
                if not isinstance(e, dict) or not REF_RE.match(str(e.get("id", ""))):
                    continue
                ref = e["id"]
                info = out.get(ref)
                if info is None:
                    info = out[ref] = RefInfo(
                        ref,
                        int(e.get("byte_size", 0)),
                        int(e.get("line_count", 0)),
                        str(e.get("kind", "output")),
                        [],
                        e.get("created"),
                    )
                src = e.get("source")
                if isinstance(src, dict) and src not in info.sources:
                    info.sources.append(src)
        return out

    def list_refs(self) -> list[RefInfo]:
        """Every ref: manifest entries (marked absent when the file is gone) and unlisted files."""
        man = self.manifest()
        names = set(self._names())
        out = []
        for ref, info in man.items():
            info.present = ref in names
            out.append(info)
        for ref in sorted(names - set(man)):
            p = self.path_for(ref)
            data = _inflate(p.read_bytes())
            out.append(RefInfo(ref, -1 if data is None else len(data), -1, "unknown", [], p.stat().st_mtime))
        return out

    def verify(self) -> VerifyResult:
        res = VerifyResult()
        man = self.manifest()
        names = set(self._names())
        try:
            stray = [n for n in os.listdir(self.refs_dir) if not REF_RE.match(n) and not n.startswith(".tmp-")]
        except FileNotFoundError:
            stray = []
        res.stray = sorted(stray)
        for ref in sorted(names):
            res.checked += 1
            h = hashlib.sha256()
            z = zlib.decompressobj()
            try:
                with self.path_for(ref).open("rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):  # noqa: B023
                        h.update(z.decompress(chunk))
                h.update(z.flush())
                complete = z.eof
            except zlib.error:
                complete = False
            if complete and h.hexdigest() == ref:
                res.ok += 1
            else:
                res.corrupted.append(ref)
            if ref not in man:
                res.unlisted.append(ref)
        res.missing = sorted(set(man) - names)
        return res

    def delete(self, refs: Iterable[str]) -> None:
        for ref in refs:
            with contextlib.suppress(FileNotFoundError):
                self.path_for(ref).unlink()

    def rewrite_manifest(self, keep: set[str]) -> None:
        """Drop manifest lines of refs not in ``keep`` (atomic replace)."""
        self.close()
        if not self.manifest_path.exists():
            return
        lines = []
        with self.manifest_path.open("rb") as fh:
            for raw in fh:
                try:
                    e = jsonio.loads(raw)
                except CtxtoolError:
                    continue
                if isinstance(e, dict) and e.get("id") in keep:
                    lines.append(raw.rstrip(b"\n") + b"\n")
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=self.root)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.writelines(lines)
        os.replace(tmp, self.manifest_path)

    # -- reading (seed 001 1.8) ---------------------------------------------------------
    def show(self, ref: str, offset: int = 1, limit: int | None = 2000) -> ShowResult:
        """Lines ``offset`` (1-based) to ``offset + limit - 1`` of a ref, numbered."""
        if offset < 1:
            raise CtxtoolError("--offset is 1-based: it must be >= 1", code=ExitCode.USAGE)
        if limit is not None and limit < 0:
            raise CtxtoolError("--limit must be >= 0", code=ExitCode.USAGE)
        full = self.resolve(ref)
        text = self.read_text(full)
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        if not text:
            lines = []
        end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
        return ShowResult(full, offset, limit, len(lines), [(i + 1, lines[i]) for i in range(offset - 1, end)])

    def grep(
        self,
        pattern: str,
        refs: list[str] | None = None,
        *,
        context: int = 0,
        ignore_case: bool = False,
        fixed: bool = False,
        max_matches: int | None = None,
    ) -> GrepResult:
        """Search one ref, several, or (``refs=None``) every ref in the cache."""
        flags = re.IGNORECASE if ignore_case else 0
        try:
            rx = re.compile(re.escape(pattern) if fixed else pattern, flags)
        except re.error as e:
            raise CtxtoolError(f"invalid pattern {pattern!r}: {e}", code=ExitCode.USAGE) from e
        targets = [self.resolve(r) for r in refs] if refs is not None else [
            r.id for r in self.list_refs() if r.present and r.kind != "source"
        ]
        out: list[GrepMatch] = []
        n_match = 0
        for ref in targets:
            text = self.read_text(ref)
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
            shown = -1
            hits = [i for i, ln in enumerate(lines) if rx.search(ln)]
            hitset = set(hits)
            for i in hits:
                lo = max(0, i - context, shown + 1)
                for j in range(lo, min(len(lines), i + context + 1)):
                    if j <= shown:
                        continue
                    if j > i and j in hitset:
                        break
                    out.append(GrepMatch(ref, j + 1, lines[j], j == i))
                    shown = j
                n_match += 1
                if max_matches is not None and n_match >= max_matches:
                    break
            if max_matches is not None and n_match >= max_matches:
                break
        return GrepResult(pattern, len(targets), out)

    # -- garbage collection (seed 001 1.9) ------------------------------------------------
    def closure(self, roots: Iterable[str]) -> set[str]:
        """``roots`` plus every ref named inside the stashes they reach (refs of refs)."""
        seen: set[str] = set()
        todo = [r for r in roots if REF_RE.match(r)]
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            p = self.path_for(r)
            if not p.is_file():
                continue
            data = _inflate(p.read_bytes()) or b""
            if data.startswith(STASH_PREFIX):  # a message's source stash: may name older refs
                for m in REF_IN_TEXT_RE.findall(data.decode("utf-8", "replace")):
                    if m not in seen:
                        todo.append(m)
        return seen

    def gc(self, referenced: Iterable[str], *, dry_run: bool = True) -> GcResult:
        keep = self.closure(referenced)
        present = [r for r in self.list_refs() if r.present]
        doomed = [r for r in present if r.id not in keep]
        freed = sum(r.byte_size for r in doomed)
        if not dry_run:
            self.delete(r.id for r in doomed)
            self.rewrite_manifest(keep)
        return GcResult(len(keep), len(present) - len(doomed), doomed, freed, dry_run)
