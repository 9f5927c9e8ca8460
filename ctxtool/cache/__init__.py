"""The tool output cache: content-addressed refs (sha256 of the content) with a manifest, under
``--cache-dir``, ``$CTXTOOL_CACHE_DIR`` or the user cache directory (a local path or an fsspec
URL, :mod:`ctxtool.cache.objstore`). Ids are validated before any path is built, content is
checked against its hash when read, and nothing inside the cache is reached through a link.
The layout on disk: docs/architecture.md, "The caches on disk"."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ..config import Config
from ..errors import CtxtoolError, Failure
from ..io import jsonl as jsonio
from ..io.paths import cache_dir as user_cache
from .content import Corrupt, as_int, compress, iter_ref, line_count
from .ids import PREFIX_RE, REF_RE, BadRefError
from .objstore import CacheDir, cache_root, open_root, sub
from .packs import DIR as PACKS_DIR
from .packs import PACK_BYTES, PACK_MIN, Loc, PackBuilder, Packs
from .privdir import cache_error
from .reading import Reading
from .results import RefInfo
from .upkeep import Upkeep

MANIFEST = "manifest.jsonl"  # the single manifest of older versions (read; gc rewrites it)
SHARDS = "manifest"  # manifest/<task>.jsonl: one per task
SHARD_RE = __import__("re").compile(r"^[A-Za-z0-9_.-]{1,120}\.jsonl$")


def default_dir(cache_dir: str | Path | None = None) -> Path | str:
    """The cache root: ``cache_dir`` (a path, or a URL kept as a string), else the user's."""
    if cache_dir:
        return cache_root(cache_dir)

    return user_cache()


def configured_dir(cache_dir: str | Path | None = None) -> str | Path | None:
    """The cache directory a command uses: ``cache_dir`` (its ``--cache-dir``), else the
    ``cache_dir`` setting (a config file or ``CTXTOOL_CACHE_DIR``), else None (the user's)."""
    return cache_dir or Config()["cache_dir"] or None


MANIFEST_BATCH = 4 << 20  # bytes of manifest lines buffered before a shard is written


def task_id() -> str:
    """A fresh manifest shard name stem: unique across processes and hosts."""
    return f"{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(6)}"


class RefCache(Upkeep, Reading):
    """A content-addressed store of tool outputs and message source stashes.

    ``task``: the name of this writer's manifest shard (``manifest/<task>.jsonl``; default:
    fresh and unique). An engine gives a shard of work a stable name, so that a re-run of
    it replaces its manifest shard instead of adding another.

    ``pack``: gather new refs and write them as packs (:mod:`ctxtool.cache.packs`) at
    :meth:`flush`, instead of a file each as they come; for a task whose output is not
    visible before its ``flush`` (a worker of a parallel run)."""

    def __init__(self, root: str | Path | None = None, *, task: str | None = None, pack: bool = False) -> None:
        self.root = default_dir(root)
        self.refs_dir = sub(self.root, "refs")
        self.manifest_path = sub(self.root, MANIFEST)
        self.task = task or task_id()
        self._shards_written = 0
        self._ready = False  # ensure() has made refs/ and manifest/
        self._pending: list[bytes] = []  # manifest lines not yet written
        self._pending_bytes = 0
        self._known: set[str] = set()
        self._root_dir: CacheDir | None = None
        self._refs_dir: CacheDir | None = None
        self._open_lock = threading.Lock()
        self._pack = pack
        self._batch = PackBuilder()  # new refs not written yet (``pack``)
        self._packs_written = 0
        self._packs_dir: CacheDir | None = None
        self.packs = Packs(self._open_packs)

    # -- setup ----------------------------------------------------------------------
    def _dirs(self, create: bool) -> tuple[CacheDir, CacheDir] | None:
        """The open root and ``refs/`` (made 0700 when ``create``); ``None`` when absent."""
        with self._open_lock:
            if self._root_dir is None:
                self._root_dir = open_root(self.root, create=create)
                if self._root_dir is None:
                    return None
            if self._refs_dir is None:
                self._refs_dir = self._root_dir.subdir("refs", create=create)
                if self._refs_dir is None:
                    return None
            return self._root_dir, self._refs_dir

    def _refs(self, create: bool = False) -> CacheDir | None:
        d = self._dirs(create)
        return d[1] if d else None

    def _shards(self, create: bool = False) -> CacheDir | None:
        d = self._dirs(create)
        return d[0].subdir(SHARDS, create=create) if d else None

    def _open_packs(self, create: bool) -> CacheDir | None:
        if self._packs_dir is None:
            d = self._dirs(create)
            self._packs_dir = d[0].subdir(PACKS_DIR, create=create) if d else None
        return self._packs_dir

    def ensure(self) -> None:
        """Create the cache (0700) with ``refs/`` and ``manifest/`` if needed, so that a hostile
        layout is an error before anything is written."""
        d = self._shards(True)
        assert d is not None
        d.close()
        self._ready = True

    def flush(self) -> None:
        """Write the gathered refs (a pack; a few: a file each), then the buffered manifest
        entries as this task's shard (a further batch of a very large task: a further
        shard), whole, never appended to."""
        self._write_batch(last=True)
        if not self._pending:
            return
        d = self._shards(True)
        assert d is not None
        data = b"".join(self._pending)
        name = f"{self.task}.jsonl" if not self._shards_written else f"{self.task}.{self._shards_written}.jsonl"
        try:
            d.write_atomic(name, data)
        finally:
            d.close()
        self._pending.clear()
        self._pending_bytes = 0
        self._shards_written += 1

    def close(self) -> None:
        try:
            self.flush()
        finally:
            with self._open_lock:
                for d in (self._packs_dir, self._refs_dir, self._root_dir):
                    if d is not None:
                        d.close()
                self._packs_dir = self._refs_dir = self._root_dir = None

    def __del__(self) -> None:  # descriptors only: pending refs and manifest lines need close()
        for name in ("_packs_dir", "_refs_dir", "_root_dir"):
            d = getattr(self, name, None)
            if d is not None:
                d.close()

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
            raise BadRefError(f"invalid ref {ref!r}: a ref is a sha256 (64 hex digits) or a prefix of at least 8")
        hits = [n for n in self._names() if n.startswith(r)]
        if not hits:
            raise CtxtoolError(f"no ref {ref} in the cache", path=str(self.root), kind=Failure.NOT_FOUND)
        if len(hits) > 1:
            raise CtxtoolError(f"ambiguous ref prefix {ref} ({len(hits)} refs)", kind=Failure.USAGE)
        return hits[0]

    def path_for(self, ref: str) -> Any:
        """Where ``ref`` is stored, a Path (a URL string for a cache on object storage); for
        messages: the cache itself never opens this path."""
        if not REF_RE.match(ref):
            raise BadRefError(f"invalid ref {ref!r}: expected 64 hex digits")
        return sub(self.refs_dir, ref)

    def exists(self, ref: str) -> bool:
        """Is ``ref`` stored, as a regular file (a link or a directory does not count) or in
        a pack?"""
        if not REF_RE.match(ref):
            return False
        if ref in self._batch:
            return True
        refs = self._refs()
        st = refs.lstat(ref) if refs is not None else None
        return (st is not None and stat.S_ISREG(st.st_mode)) or self.packs.find(ref) is not None

    def _entries(self) -> tuple[list[str], list[str]]:
        """Ref-named entries of ``refs/``: (regular files, anything else), each sorted."""
        refs = self._refs()
        if refs is None:
            return [], []
        files: list[str] = []
        odd: list[str] = []
        for name, regular in refs.scan():
            if REF_RE.match(name):
                (files if regular else odd).append(name)
        return sorted(files), sorted(odd)

    def _names(self) -> list[str]:
        """Every stored ref: the regular files and the refs in packs."""
        files = self._entries()[0]
        packed = self.packs.load(again=True)
        return sorted(set(files).union(packed)) if packed else files

    def put(self, data: bytes | str, *, kind: str = "output", source: dict[str, Any] | None = None) -> RefInfo:
        """Store ``data`` (if not there yet) and record where it came from."""
        b = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        return self._put(b, hashlib.sha256(b).hexdigest(), line_count(b), kind, source)

    def _put(self, b: bytes, ref: str, lines: int, kind: str, source: dict[str, Any] | None) -> RefInfo:
        info = RefInfo(ref, len(b), lines, kind, [source] if source else [], time.time())
        if ref not in self._known:
            if not self._ready:
                self.ensure()
            refs = self._refs(True)
            assert refs is not None
            st = refs.lstat(ref)
            # a regular, non-empty file is kept (a damaged one is for `refs verify` to find);
            # anything else at the name (a link, a FIFO) is replaced by the rename, never followed
            if st is None and self.packs.find(ref) is not None:
                pass  # in a pack already
            elif st is None and self._pack:  # gathered, written as a pack at flush()
                self._batch.add(ref, compress(b))
                info.new = True
                if self._batch.size >= PACK_BYTES:
                    self._write_batch(last=False)
            elif st is None or not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                if st is not None and stat.S_ISDIR(st.st_mode):
                    raise CtxtoolError(
                        "is a directory where a ref file belongs (run ctxtool refs verify)",
                        path=str(sub(self.refs_dir, ref)),
                        kind=Failure.INPUT,
                    )
                refs.write_atomic(ref, compress(b))
                info.new = True
            self._known.add(ref)
        self._append_manifest(info)
        return info

    def _write_batch(self, *, last: bool) -> None:
        """Write the gathered refs: a pack, or (``last``, fewer than :data:`PACK_MIN`, no pack
        written by this task yet) a file each."""
        if not len(self._batch):
            return
        if last and len(self._batch) < PACK_MIN and not self._packs_written:
            refs = self._refs(True)
            assert refs is not None
            for ref, blob in self._batch.entries():
                refs.write_atomic(ref, blob)
            self._batch = PackBuilder()
        else:
            self.packs.write(self._batch, self.task)
            self._packs_written += 1

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
        line = jsonio.dumps(entry) + b"\n"  # a copy of its own size (orjson's buffer is larger)
        self._pending.append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= MANIFEST_BATCH:
            self.flush()

    def _load(self, ref: str, *, keep: bool = True) -> bytes:
        """The checked content of the full id ``ref`` (see :func:`iter_ref`): its file, else
        its first place in a pack."""
        return b"".join(part for part in self._stream(ref) if keep)

    def _load_packed(self, ref: str, loc: Loc, *, keep: bool) -> bytes:
        return b"".join(part for part in self._stream_packed(ref, loc) if keep)

    def _stream(self, ref: str) -> Iterator[bytes]:
        """The content of the full id ``ref`` in pieces (:func:`iter_ref`), checked when read
        to its end: its file, else its first place in a pack."""
        if ref in self._batch:
            self._write_batch(last=False)
        refs = self._refs()
        try:
            if refs is None:
                raise FileNotFoundError
            fh = refs.open_reader(ref)
        except FileNotFoundError:
            loc = self.packs.find(ref, again=True)
            if loc is None:
                raise CtxtoolError(f"ref {ref} is not in the cache", path=str(self.root), kind=Failure.NOT_FOUND) from None
            yield from self._stream_packed(ref, loc)
            return
        yield from self._checked(fh, ref, sub(self.refs_dir, ref))

    def _stream_packed(self, ref: str, loc: Loc) -> Iterator[bytes]:
        p = sub(self.root, PACKS_DIR, loc.pack)
        try:
            fh = self.packs.open_entry(loc)
        except FileNotFoundError:
            raise CtxtoolError(f"ref {ref} is not in the cache", path=str(self.root), kind=Failure.NOT_FOUND) from None
        except OSError as e:
            raise cache_error(e, p, "cannot read: ") from e
        yield from self._checked(fh, ref, p)

    @staticmethod
    def _checked(fh: IO[bytes], ref: str, p: Any) -> Iterator[bytes]:
        try:
            with fh:
                yield from iter_ref(fh, ref)
        except Corrupt as e:
            raise CtxtoolError(f"ref {ref} is corrupted: {e} (run ctxtool refs verify)", path=str(p)) from None
        except OSError as e:
            raise cache_error(e, p, "cannot read: ") from e

    def stream(self, ref: str) -> Iterator[bytes]:
        """The content of a ref (an id or a unique prefix, validated as :meth:`resolve` does)
        in pieces of about a megabyte: an output of any size in flat memory, checked against
        its sha256 when read to its end."""
        return self._stream(self.resolve(ref))

    def read_bytes(self, ref: str) -> bytes:
        return self._load(self.resolve(ref))

    def read_text(self, ref: str) -> str:
        data = self.read_bytes(ref)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as e:
            raise CtxtoolError(f"ref {ref} is not UTF-8 text", kind=Failure.INPUT) from e

    def read_json(self, ref: str) -> Any:
        return jsonio.loads(self.read_bytes(ref), path=f"ref:{ref}")

    # -- the manifest -----------------------------------------------------------------
    def _manifest_files(self) -> list[tuple[CacheDir, str]]:
        """Where manifest lines are: the single manifest of older versions, then every shard."""
        d = self._dirs(False)
        if d is None:
            return []
        out: list[tuple[CacheDir, str]] = []
        if d[0].lstat(MANIFEST) is not None:
            out.append((d[0], MANIFEST))
        shards = d[0].subdir(SHARDS, create=False)
        if shards is not None:
            out.extend((shards, n) for n in sorted(shards.listdir()) if SHARD_RE.match(n))
        return out

    def _manifest_lines(self) -> Iterable[bytes]:
        for d, name in self._manifest_files():
            try:
                fh = d.open_reader(name)
            except FileNotFoundError:
                continue  # removed by a gc meanwhile
            try:
                with fh:
                    yield from fh
            except OSError as e:
                raise cache_error(e, sub(d.path, name), "cannot read: ") from e

    def manifest(self) -> dict[str, RefInfo]:
        """Manifest entries merged by ref (duplicates tolerated; sources accumulated)."""
        self.flush()
        out: dict[str, RefInfo] = {}
        for raw in self._manifest_lines():
            raw = raw.strip()
            if not raw:
                continue
            try:
                e = jsonio.loads(raw)
            except CtxtoolError:
                continue  # a torn line: the refs themselves are the truth
            if not isinstance(e, dict) or not isinstance(e.get("id"), str) or not REF_RE.match(e["id"]):
                continue
            ref = e["id"]
            info = out.get(ref)
            if info is None:
                created = e.get("created")
                info = out[ref] = RefInfo(
                    ref,
                    as_int(e.get("byte_size"), 0),
                    as_int(e.get("line_count"), 0),
                    str(e.get("kind", "output")),
                    [],
                    float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None,
                )
            src = e.get("source")
            if isinstance(src, dict) and src not in info.sources:
                info.sources.append(src)
        return out

    def rewrite_manifest(self, keep: set[str]) -> None:
        """Drop manifest lines of refs not in ``keep``: the kept ones in one manifest file
        (atomic replace), then the shards they came from removed."""
        self.flush()
        d = self._dirs(False)
        files = self._manifest_files()
        if d is None or not files:
            return
        lines = []
        for raw in self._manifest_lines():
            try:
                e = jsonio.loads(raw)
            except CtxtoolError:
                continue
            if isinstance(e, dict) and e.get("id") in keep:
                lines.append(raw.rstrip(b"\n") + b"\n")
        d[0].write_atomic(MANIFEST, b"".join(lines))
        for sd, name in files:
            if name != MANIFEST:
                sd.unlink(name)
