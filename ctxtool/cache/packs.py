"""Ref packs: the refs one task writes, many to a file (``packs/<task>.<random>.pack``), written
whole when a pack reaches :data:`PACK_BYTES` and when the task is flushed, before its output is
seen: a transcript never names a ref that is not stored. The file layout and why:
docs/architecture.md, "The caches on disk"."""

from __future__ import annotations

import io
import os
import re
import secrets
import struct
import time
from dataclasses import dataclass
from typing import IO, Any, cast

from ..errors import CtxtoolError
from ..io import jsonl as jsonio
from .ids import REF_RE

DIR = "packs"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,160}\.pack$")
MAGIC = b"ctxtool-pack-1\n"
_LEN = struct.Struct(">Q")
TAIL = _LEN.size + len(MAGIC)
#: refs gathered before a pack is written (and a worker's memory stays flat)
PACK_BYTES = 4 << 20
#: fewer new refs than this at the end of a task are written as ref files (a pack earns its
#: place when it replaces many files)
PACK_MIN = 16


class BadPack(Exception):
    """A pack whose frame or index cannot be read."""


@dataclass(frozen=True, slots=True)
class Loc:
    """Where one ref is in a pack: the pack's name, the entry's offset and length."""

    pack: str
    offset: int
    length: int


def pack_name(stem: str | None = None) -> str:
    """A new pack's name, never one that exists: the task's with a random suffix (a task
    run again under the same name must not replace the pack its first run wrote: the refs
    found there are not written again), else fresh (a pack gc writes)."""
    name = f"{stem}.{secrets.token_hex(4)}.pack" if stem else ""
    return name if NAME_RE.match(name) else f"{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(6)}.pack"


class PackBuilder:
    """A pack being gathered: its entries in one buffer (each stored ref copied in as it
    comes, so memory holds the pack's bytes once), and where each is."""

    def __init__(self) -> None:
        self.buf = bytearray(MAGIC)
        self.index: dict[str, tuple[int, int]] = {}  # ref -> (offset, length)

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, ref: object) -> bool:
        return ref in self.index

    @property
    def size(self) -> int:
        return len(self.buf) - len(MAGIC)

    def add(self, ref: str, blob: bytes) -> None:
        if ref not in self.index:
            self.index[ref] = (len(self.buf), len(blob))
            self.buf += blob

    def entries(self) -> list[tuple[str, bytes]]:
        """Each ref and its stored bytes (to write them as files instead)."""
        return [(ref, bytes(self.buf[at : at + n])) for ref, (at, n) in self.index.items()]

    def finish(self) -> tuple[bytearray, list[tuple[str, int, int]]]:
        """The whole pack (entries, index, trailer: handed over, never changed after), and
        its index; the builder starts a new pack."""
        index = [(ref, at, n) for ref, (at, n) in self.index.items()]
        idx = jsonio.dumps([list(e) for e in index])
        data = self.buf
        data += idx
        data += _LEN.pack(len(idx))
        data += MAGIC
        self.buf = bytearray(MAGIC)
        self.index = {}
        return data, index


def read_index(fh: IO[bytes]) -> list[tuple[str, int, int]]:
    """The index of the pack open as ``fh``, checked against the file's frame; :class:`BadPack`."""
    try:
        size = fh.seek(0, io.SEEK_END)
        if size < len(MAGIC) + TAIL:
            raise BadPack("too short to be a pack")
        fh.seek(0)
        if fh.read(len(MAGIC)) != MAGIC:
            raise BadPack("does not start as a pack")
        fh.seek(size - TAIL)
        tail = fh.read(TAIL)
        if tail[_LEN.size :] != MAGIC:
            raise BadPack("does not end as a pack (cut short?)")
        (n,) = _LEN.unpack(tail[: _LEN.size])
        end = size - TAIL - n
        if n <= 0 or end < len(MAGIC):
            raise BadPack("its index is out of bounds")
        fh.seek(end)
        raw = fh.read(n)
    except OSError as e:
        raise BadPack(f"cannot read: {e.strerror or e}") from e
    try:
        index = jsonio.loads(raw)
    except CtxtoolError:
        raise BadPack("its index is not JSON") from None
    out = []
    for item in index if isinstance(index, list) else [None]:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and REF_RE.match(item[0])):
            raise BadPack("its index is damaged")
        ref, at, length = item
        if not (type(at) is int and type(length) is int and len(MAGIC) <= at and 0 < length <= end - at):
            raise BadPack("its index is damaged")
        out.append((ref, at, length))
    return out


class Packs:
    """The packs of one cache directory, as an index of ref -> where it is (read once,
    read again when a ref is not found: another process may have written a pack since)."""

    def __init__(self, opener: Any) -> None:
        self._open = opener  # (create: bool) -> the packs directory, or None when absent
        self.where: dict[str, list[Loc]] = {}
        self.bad: dict[str, str] = {}  # pack name -> why it cannot be read
        self._seen: set[str] = set()
        self._loaded = False

    def load(self, *, again: bool = False) -> dict[str, list[Loc]]:
        """ref -> its places in the packs (the packs not read yet are read now)."""
        if self._loaded and not again:
            return self.where
        self._loaded = True
        d = self._open(False)
        if d is None:
            return self.where
        for name in sorted(d.listdir()):
            if name in self._seen or not NAME_RE.match(name):
                continue
            try:
                fh = d.open_reader(name)
            except FileNotFoundError:
                continue  # removed by a gc meanwhile
            self._seen.add(name)
            try:
                with fh:
                    index = read_index(fh)
            except BadPack as e:
                self.bad[name] = str(e)
                continue
            for ref, at, length in index:
                self.where.setdefault(ref, []).append(Loc(name, at, length))
        return self.where

    def find(self, ref: str, *, again: bool = False) -> Loc | None:
        """Where ``ref`` is first packed; ``again``: on a miss, read the packs written since."""
        locs = self.load().get(ref) or (self.load(again=True).get(ref) if again else None)
        return locs[0] if locs else None

    def names(self) -> list[str]:
        """Every pack file's name, readable or not."""
        d = self._open(False)
        return sorted(n for n in d.listdir() if NAME_RE.match(n)) if d is not None else []

    def write(self, pack: PackBuilder, stem: str | None = None) -> str:
        """Write ``pack`` as one new pack file (and empty it); returns its name."""
        self.load()  # the packs there before this one
        d = self._open(True)
        name = pack_name(stem)
        data, index = pack.finish()
        d.write_atomic(name, data)
        self._seen.add(name)
        for ref, at, length in index:
            self.where.setdefault(ref, []).append(Loc(name, at, length))
        return name

    def open_entry(self, loc: Loc) -> IO[bytes]:
        """The stored bytes of one entry, to check with :func:`iter_ref` (``FileNotFoundError``
        when its pack is gone)."""
        d = self._open(False)
        if d is None:
            raise FileNotFoundError(loc.pack)
        fh = d.open_reader(loc.pack)
        try:
            fh.seek(loc.offset)
        except BaseException:
            fh.close()
            raise
        return cast(IO[bytes], _Slice(fh, loc.length))

    def remove(self, refs: set[str]) -> None:
        """Take ``refs`` out of the packs: each pack holding one is written again without
        them (a new pack, then the old one removed), or removed when nothing is left."""
        where = self.load(again=True)
        hit = {loc.pack for r in refs for loc in where.get(r, ())}
        d = self._open(False)
        if d is None or not hit:
            return
        for name in sorted(hit):
            with d.open_reader(name) as fh:
                keep = PackBuilder()
                for ref, at, length in read_index(fh):
                    if ref not in refs:
                        fh.seek(at)
                        keep.add(ref, fh.read(length))
            if len(keep):
                self.write(keep)
            d.unlink(name)
        self.where.clear()
        self.bad.clear()
        self._seen.clear()
        self._loaded = False


class _Slice(io.RawIOBase):
    """``length`` bytes of an open file from where it stands, read in pieces (an entry of a
    pack: a large one is never held whole)."""

    def __init__(self, fh: IO[bytes], length: int) -> None:
        self._fh = fh
        self._left = length

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0 or n > self._left:
            n = self._left
        data = self._fh.read(n)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()
        super().close()
