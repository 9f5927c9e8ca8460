"""What a ref file is: its content compressed, checked against its sha256 whole on every
read (``show``, restore, ``verify`` share :func:`read_ref`).

New refs are one zstd frame (:func:`compress`, level 1: the size zlib's level 1 gives, in
less than half the time, and faster to read). Refs written by older versions are one zlib
stream; the first bytes tell them apart (zstd's magic number ``28 b5 2f fd``, which no zlib
header has), and both are read, verified, shown, restored and collected alike.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import IO, Any

COMPRESS_LEVEL = 1  # zstd's level 1: zlib level 1's size at a fraction of its time
CHUNK = 1 << 20
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


def read_ref(fh: IO[bytes], ref: str, *, keep: bool) -> bytes:
    """The content of the ref file open as ``fh``, checked; raises :class:`Corrupt`.

    The one check that ``show``, every read and ``verify`` share: a complete compressed
    stream (a zstd frame, or the zlib stream of an older version), nothing after it,
    content whose sha256 is ``ref``. ``keep=False`` only checks.
    """
    h = hashlib.sha256()
    out: list[bytes] = []
    chunk = fh.read(CHUNK)
    z, error = _decompressor(chunk)
    try:
        while chunk:
            if z.eof:
                raise Corrupt("bytes after the end of its compressed stream")
            part = z.decompress(chunk)
            h.update(part)
            if keep:
                out.append(part)
            chunk = fh.read(CHUNK)
        part = z.flush()
    except error as e:
        raise Corrupt("not a valid compressed stream") from e
    h.update(part)
    out.append(part)
    if not z.eof:
        raise Corrupt("its compressed stream is cut short")
    if z.unused_data:
        raise Corrupt("bytes after the end of its compressed stream")
    if h.hexdigest() != ref:
        raise Corrupt("its content does not match its sha256")
    return b"".join(out)


def line_count(data: bytes) -> int:
    if not data:
        return 0
    n = data.count(b"\n")
    return n if data.endswith(b"\n") else n + 1


def as_int(v: object, default: int = -1) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default
