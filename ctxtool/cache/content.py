"""What a ref file is: its content zlib-compressed, checked against its sha256 whole on
every read (``show``, restore, ``verify`` share :func:`read_ref`)."""

from __future__ import annotations

import hashlib
import zlib
from typing import IO

COMPRESS_LEVEL = 1  # zlib's fastest: most of the saving, a fraction of the time
CHUNK = 1 << 20


class Corrupt(Exception):
    """A ref file that is not the compressed content its name promises."""


def read_ref(fh: IO[bytes], ref: str, *, keep: bool) -> bytes:
    """The content of the ref file open as ``fh``, checked; raises :class:`Corrupt`.

    The one check that ``show``, every read and ``verify`` share: a complete zlib stream,
    nothing after it, content whose sha256 is ``ref``. ``keep=False`` only checks.
    """
    h = hashlib.sha256()
    z = zlib.decompressobj()
    out: list[bytes] = []
    try:
        while chunk := fh.read(CHUNK):
            if z.eof:
                raise Corrupt("bytes after the end of its compressed stream")
            part = z.decompress(chunk)
            h.update(part)
            if keep:
                out.append(part)
        part = z.flush()
    except zlib.error as e:
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
