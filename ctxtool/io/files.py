"""Files as ctxtool opens them for reading: inputs that may be pipes, FIFOs, ``/dev/fd/N``
or compressed (gzip, zstd: detected by magic bytes). :mod:`ctxtool.io.jsonl` parses on top of
this; nothing here knows JSON. Outputs are :mod:`ctxtool.io.outputs`.

A URL (``s3://``, ``gs://``, ``memory://``: :mod:`ctxtool.io.urls`) is read through fsspec.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from ..errors import CtxtoolError, Failure
from . import urls
from .outputs import BOM, _writer
from .paths import BUFFER, make_temp, remove_quietly

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


# -- inputs ----------------------------------------------------------------------------------------


def check_input(path: str | Path) -> None:
    """Refuse an input that does not exist or is a directory; anything else that can be read
    (a regular file, FIFO, ``/dev/fd/N``, device) is accepted."""
    name = str(path)
    if name == "-":
        return
    if urls.is_url(name):
        i = urls.info(name)
        if i is None:
            raise CtxtoolError("no such file", kind=Failure.NOT_FOUND, path=name)
        if i.get("type") == "directory":
            raise CtxtoolError("is a directory", kind=Failure.USAGE, path=name)
        return
    name = urls.local(name)
    try:
        st = os.stat(name)
    except FileNotFoundError as e:
        raise CtxtoolError("no such file", kind=Failure.NOT_FOUND, path=name) from e
    except OSError as e:
        raise CtxtoolError(f"cannot open: {e.strerror or e}", kind=Failure.NOT_FOUND, path=name) from e
    if stat.S_ISDIR(st.st_mode):
        raise CtxtoolError("is a directory", kind=Failure.USAGE, path=name)


def input_size(path: str | Path) -> int | None:
    """The size in bytes of a regular file; None for stdin, a pipe or a device."""
    if str(path) == "-":
        return None
    if urls.is_url(str(path)):
        return urls.size(str(path))
    try:
        st = os.stat(urls.local(str(path)))
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def local_size(path: str | Path) -> int | None:
    """The size of a local regular file (one that can be read again, mapped, split); None for
    stdin, a URL, a pipe or a device."""
    name = str(path)
    return None if name == "-" or urls.is_url(name) else input_size(name)


def compression(head: bytes) -> str | None:
    """``"gz"`` or ``"zst"`` when ``head`` (the first bytes of a stream) starts with their magic."""
    if head.startswith(GZIP_MAGIC):
        return "gz"
    if head.startswith(ZSTD_MAGIC):
        return "zst"
    return None


def splittable(path: str | Path) -> bool:
    """Can ``path`` be cut into byte ranges read in parallel: a regular, uncompressed file?"""
    if str(path) == "-" or input_size(path) is None:
        return False
    try:
        with open_raw(str(path)) as fh:
            return compression(fh.read(4)) is None
    except (OSError, CtxtoolError):
        return False


def open_raw(path: str) -> IO[bytes]:
    """A regular file or URL opened for reading its bytes as they are (seekable, not
    decompressed): for byte ranges of a dataset file."""
    if urls.is_url(path):
        return urls.open_read(path)
    return open(urls.local(path), "rb", buffering=BUFFER)  # noqa: SIM115 - returned to the caller


class _Reader(io.RawIOBase):
    """A readable raw stream over a decompressor. Corrupt compressed data is bad input naming
    the file (not an internal error); closing it closes the file this module opened."""

    def __init__(self, inner: Any, path: str, owned: IO[bytes] | None) -> None:
        super().__init__()
        self._inner = inner
        self._path = path
        self._owned = owned

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._inner.read(len(b))
        except Exception as e:  # gzip.BadGzipFile, EOFError, zlib.error, zstandard.ZstdError
            if isinstance(e, OSError) and e.errno is not None:
                raise
            raise CtxtoolError(f"corrupt compressed data: {e or type(e).__name__}", path=self._path) from e
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
                if self._owned is not None:
                    self._owned.close()
            finally:
                super().close()


def _decompressed(fh: io.BufferedReader, path: str, owned: bool) -> IO[bytes]:
    kind = compression(fh.peek(4)[:4])
    if kind is None:
        return fh
    try:
        if kind == "gz":
            import gzip

            inner: Any = gzip.GzipFile(fileobj=fh, mode="rb")
        else:
            import zstandard

            inner = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True, closefd=False)
    except ImportError as e:  # pragma: no cover - zstandard is a dependency
        raise CtxtoolError(f"cannot read {kind} input: {e}", path=path) from e
    return io.BufferedReader(_Reader(inner, path, fh if owned else None), BUFFER)


#: inputs that can be read only once (a FIFO, ``<(...)``), opened to look at their first bytes:
#: the next :func:`open_input` of the same path gets the opened stream, with those bytes in it
_HANDED: dict[str, IO[bytes]] = {}


def hand_over(path: str | Path, fh: IO[bytes]) -> None:
    """Give ``fh`` (from :func:`open_input`, its head only peeked at) to the next open of ``path``."""
    old = _HANDED.pop(str(path), None)
    if old is not None:
        old.close()
    _HANDED[str(path)] = fh


#: the streams :func:`open_input` took a byte order mark off (:func:`had_bom`)
_WITHOUT_BOM: weakref.WeakSet[Any] = weakref.WeakSet()


def had_bom(fh: IO[bytes]) -> bool:
    """Whether ``fh`` (from :func:`open_input`) began with a UTF-8 byte order mark, taken off."""
    return fh in _WITHOUT_BOM


def open_input(path: str | Path) -> IO[bytes]:
    """Open ``path`` (``-``: stdin) for reading bytes: decompressed when it starts with the gzip
    or zstd magic, without a leading UTF-8 byte order mark. Streams: works on pipes and FIFOs.
    Closing the result never closes stdin."""
    name = str(path)
    handed = _HANDED.pop(name, None)
    if handed is not None:
        return handed
    if name == "-":
        if sys.stdin is None:  # started with stdin closed (`<&-`)
            raise CtxtoolError("stdin is closed", path="-")
        raw: Any = sys.stdin.buffer
        if not isinstance(raw, io.BufferedReader):  # e.g. replaced by a test harness
            raw = io.BufferedReader(cast(Any, raw), BUFFER)
        owned = False
    elif urls.is_url(name):
        check_input(name)
        raw = io.BufferedReader(cast(Any, urls.open_read(name)), BUFFER)
        owned = True
    else:
        name = urls.local(name)
        check_input(name)
        try:
            raw = open(name, "rb", buffering=BUFFER)  # noqa: SIM115 - returned to the caller
        except OSError as e:
            raise CtxtoolError(f"cannot open: {e.strerror or e}", kind=Failure.NOT_FOUND, path=name) from e
        owned = True
    try:
        fh = _decompressed(raw, name, owned)
        head = fh.peek(3)[:3] if isinstance(fh, io.BufferedReader) else b""
        if head == BOM:
            fh.read(3)
            _WITHOUT_BOM.add(fh)
    except BaseException:
        if owned:
            raw.close()
        raise
    return fh


@contextlib.contextmanager
def reopenable(path: str | Path) -> Iterator[str]:
    """A path that can be opened more than once: ``path`` itself for a regular file; for stdin,
    a FIFO or ``/dev/fd/N``, its content spooled ONCE to a private temporary file (removed
    afterwards). For commands that read their input twice."""
    name = str(path)
    if local_size(name) is not None:
        yield urls.local(name)
        return
    check_input(name)
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    try:
        fd, tmp = make_temp(tempfile.gettempdir(), "input")
    except OSError as e:
        raise CtxtoolError(f"cannot make a temporary copy: {e.strerror or e}", path=name, kind=Failure.IO) from e
    try:
        with _writer(fd) as out:
            src = sys.stdin.buffer if name == "-" else open_raw(name)
            try:
                shutil.copyfileobj(src, out, BUFFER)
                out.flush()
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    raise
                raise CtxtoolError(
                    f"cannot make a temporary copy in {tempfile.gettempdir()}: {e.strerror}", path=name, kind=Failure.IO
                ) from e
            finally:
                if src is not sys.stdin.buffer:
                    src.close()
        yield tmp
    finally:
        remove_quietly(tmp)
