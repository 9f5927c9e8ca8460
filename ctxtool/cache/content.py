"""What a ref file is: its content compressed, checked against its sha256 whole on every read
(``show``, ``grep``, restore and ``verify`` share :func:`iter_ref`, which streams it). New refs
are one zstd frame (:func:`compress`); refs of older versions, one zlib stream, are told apart by
their first bytes and read alike (docs/architecture.md, "The caches on disk")."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterator
from typing import IO, Any

COMPRESS_LEVEL = 1  # zstd's level 1: zlib level 1's size at a fraction of its time
CHUNK = 1 << 20
ZSTD_IN = 1 << 10  # compressed bytes per zstd call: a piece of at most ~32 MiB, however it compresses
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_compressor: Any = None


class Corrupt(Exception):
    """A ref file that is not the compressed content its name promises."""


def compress(data: bytes) -> bytes:
    """What a new ref file holds: ``data`` as one zstd frame (its size recorded in it)."""
    global _compressor
    if _compressor is None:
        import zstandard

        _compressor = zstandard.ZstdCompressor(level=COMPRESS_LEVEL)
    out: bytes = _compressor.compress(data)
    return out


def _decompressor(head: bytes) -> tuple[Any, type[Exception]]:
    """A streaming decompressor for a ref file that starts with ``head``, and its error."""
    if head.startswith(ZSTD_MAGIC):
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj(), zstandard.ZstdError
    return zlib.decompressobj(), zlib.error


def iter_ref(fh: IO[bytes], ref: str) -> Iterator[bytes]:
    """The content of the ref file open as ``fh``, in decompressed pieces of about
    :data:`CHUNK` bytes, so that an output of any size is never held whole; raises
    :class:`Corrupt`. The one check that ``show``, every read and ``verify`` share.

    Read to its end, it has been checked: a complete compressed stream (a zstd frame, or the
    zlib stream of an older version), nothing after it, content whose sha256 is ``ref``;
    else :class:`Corrupt` is raised after the last piece. A reader that stops early (a page
    of a huge output) has not checked what it did not read.
    """
    h = hashlib.sha256()
    chunk = fh.read(CHUNK)
    z, error = _decompressor(chunk)
    bounded = error is zlib.error  # zlib takes an output bound; zstd does not
    try:
        while chunk:
            if bounded:
                pieces: Iterator[bytes] = _zlib_pieces(z, chunk)
            else:  # a zstd piece grows with its input (a long run: ~32,000x): small inputs
                pieces = (z.decompress(chunk[i:i + ZSTD_IN]) if not z.eof else _after_end()
                          for i in range(0, len(chunk), ZSTD_IN))
            for part in pieces:
                if part:
                    h.update(part)
                    yield part
            chunk = fh.read(CHUNK)
        part = z.flush()
    except error as e:
        raise Corrupt("not a valid compressed stream") from e
    h.update(part)
    if part:
        yield part
    if not z.eof:
        raise Corrupt("its compressed stream is cut short")
    if z.unused_data:
        raise Corrupt("bytes after the end of its compressed stream")
    if h.hexdigest() != ref:
        raise Corrupt("its content does not match its sha256")


def _after_end() -> bytes:
    raise Corrupt("bytes after the end of its compressed stream")


def _zlib_pieces(z: Any, chunk: bytes) -> Iterator[bytes]:
    """What ``chunk`` inflates to, in pieces of at most :data:`CHUNK` bytes."""
    if z.eof:
        _after_end()
    part = z.decompress(chunk, CHUNK)
    yield part
    while z.unconsumed_tail:
        yield z.decompress(z.unconsumed_tail, CHUNK)


def line_count(data: bytes) -> int:
    if not data:
        return 0
    n = data.count(b"\n")
    return n if data.endswith(b"\n") else n + 1


def as_int(v: object, default: int = -1) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default
