"""Outputs as ctxtool writes them (:func:`atomic_output`), never replacing what is not a regular
file: a file or new path through a temporary file renamed into place; a symlink's target replaced
(the link stays); a FIFO, device, ``/dev/stdout`` or ``/dev/fd/N`` written in place, streaming;
``.gz``/``.zst`` compressed; a URL written locally, checked, then uploaded whole. A failed write
is a :class:`CtxtoolError` naming the output (``IO``)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from ..errors import CtxtoolError, Failure
from ..text import lazyre
from . import urls
from .paths import BUFFER, make_temp, refuse_overwrite, remove_quietly, same_file


def output_error(e: OSError, path: str | Path | None) -> CtxtoolError:
    """An output that cannot be written, as one line naming it (exit code ``IO``)."""
    name = "<stdout>" if path is None or str(path) == "-" else str(path)
    return CtxtoolError(f"cannot write the output: {e.strerror or e}", path=name, kind=Failure.IO)


def check_file_output(path: str | Path) -> None:
    """Refuse now, before any work, a local output that can never be written as one file: a
    directory, a name ending in /, a symlink loop (the checks :func:`atomic_output` makes when
    it writes; for an output written at the end of a run, such as the event log)."""
    if str(path) != "-" and not urls.is_url(str(path)):
        _output_kind(urls.local(str(path)))


def refuse_log_clash(sources: str | Path | Iterable[str | Path], output: str | Path | None,
                     log: str | Path | None) -> None:
    """The event log (``--events``) is an output too: never one of the ``sources`` nor a file a
    source directory holds (:func:`ctxtool.io.paths.refuse_overwrite`), nor a name no file can
    have (:func:`check_file_output`), and never where the transcript goes (``output``): the
    same file, or both stdout (``-``), where one would replace or run into the other."""
    if log is None:
        return
    check_file_output(log)  # written at the end of the run: a name it can never have is refused first
    refuse_overwrite(sources, log)
    if output is not None and (str(output) == str(log) == "-" or same_file(output, log)):
        where = "stdout" if str(log) == "-" else "the same file"
        raise CtxtoolError(f"the event log (--events) and the transcript would both be written to {where}: "
                           "give each its own file", path=str(log), kind=Failure.USAGE)


def output_dir(path: str | Path) -> Path:
    """Make the output directory ``path`` (and its parents) if missing; one that cannot be made
    (a parent that is a file, no permission) is an output error naming it (exit code ``IO``)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_error(e, path) from e
    return p


class _Guarded(io.BufferedIOBase):
    """A writable stream whose failures name the output (a closed pipe stays a BrokenPipeError,
    which the CLI ends quietly)."""

    def __init__(self, inner: Any, path: str | Path | None) -> None:
        super().__init__()
        self._inner = inner
        self._path = path

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        try:
            n = self._inner.write(b)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise output_error(e, self._path) from e
        return len(b) if n is None else int(n)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise output_error(e, self._path) from e

    def close(self) -> None:  # the sink closes what it opened
        super().close()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_DESCRIPTOR = lazyre.compile(r"^/(?:dev/fd|proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd)/\d+$|^/dev/std(?:out|err)$")


def _names_a_descriptor(path: str) -> bool:
    """Does ``path`` (or a symlink on the way) name an open file descriptor: ``/dev/stdout``,
    ``/dev/fd/N``, ``/proc/self/fd/N``? Such an output is written in place even when the
    descriptor is a regular file (``-o /dev/stdout > file``)."""
    p = os.path.abspath(path)
    for _ in range(40):
        if _DESCRIPTOR.match(p):
            return True
        try:
            nxt = os.readlink(p)
        except OSError:
            return False
        if nxt.startswith(("pipe:", "socket:", "anon_inode:")):
            return True
        p = os.path.normpath(os.path.join(os.path.dirname(p), nxt))
    return False


def _output_kind(path: str) -> tuple[str, str]:
    """``("file", real path)`` for a regular file or a new path (through symlinks), or
    ``("special", path)`` for a FIFO, device, open descriptor (``/dev/stdout``, ``/dev/fd/N``)
    or another non-regular file, written in place."""
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        if os.path.islink(path):  # a dangling symlink: its target is created, the link stays
            return "file", os.path.realpath(path)
        if path.endswith(("/", os.sep)):  # a directory's name: the file would lose the slash
            raise CtxtoolError("cannot write the output: it names a directory (it ends in /); this output is one file",
                               path=path, kind=Failure.USAGE) from None
        return "file", path
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CtxtoolError("cannot write the output: a symlink loop", path=path, kind=Failure.USAGE) from e
        raise output_error(e, path) from e
    if stat.S_ISDIR(st.st_mode):
        raise CtxtoolError("cannot write the output: it is a directory", path=path, kind=Failure.USAGE)
    if stat.S_ISREG(st.st_mode) and not _names_a_descriptor(path):
        return "file", os.path.realpath(path)
    return "special", path


#: a streamed output's bytes held at most (:class:`HeldOutput`)
HOLD_BYTES = 4 << 20


class HeldOutput:
    """A streamed output's bytes held back until ``ready`` has run, then passed on, about
    ``limit`` bytes at a time. ``ready`` stores what the bytes name (a run's refs, gathered
    into packs), so a reader of stdout or a FIFO never meets a ref that is not stored yet.
    :meth:`release` passes on the rest."""

    def __init__(self, out: IO[bytes], ready: Callable[[], None], limit: int = HOLD_BYTES) -> None:
        self._out, self._ready, self._limit = out, ready, limit
        self._held: list[bytes] = []
        self._size = 0

    def write(self, b: bytes) -> int:
        self._held.append(bytes(b))
        self._size += len(b)
        if self._size >= self._limit:
            self.release()
        return len(b)

    def release(self) -> None:
        self._ready()
        if self._held:
            self._out.write(b"".join(self._held))
            self._held, self._size = [], 0


#: the UTF-8 byte order mark
BOM = b"\xef\xbb\xbf"


class LikeSource:
    """An output written back in its source's format ending as the source did: a UTF-8 byte
    order mark when it began with one, ``\\r\\n`` lines when its lines were (every newline a
    JSON text holds is whitespace between values, never in a string), and, for JSON Lines, no
    final newline when it had none (a document's writer keeps its own: ``jsontext.Style``).
    The readers take all three off, so without this a file changed nothing in would change.
    ``src``: the :class:`ctxtool.io.jsonl.Source` being read, whose ending is not plain
    (:meth:`~ctxtool.io.jsonl.Source.plain_ending`; a pipe's final newline is known only once
    read to its end, before :meth:`finish`); ``same``: whether the output is in the source's
    format (asked at the first write, when the first transcript has been read)."""

    def __init__(self, out: IO[bytes], src: Any, same: Callable[[], bool]) -> None:
        self._out, self._src, self._same = out, src, same
        self._on: bool | None = None  # decided at the first write
        self._held = False  # a final newline not written yet: the source may have had none

    def write(self, b: Any) -> int:
        n = len(b)
        if not n:
            return 0
        out, src = self._out, self._src
        if self._on is None:
            self._on = self._same()
            if self._on and src.bom:
                out.write(BOM)
        if not self._on:
            out.write(b)
            return n
        nl = b"\r\n" if src.crlf else b"\n"
        if self._held:
            out.write(nl)
            self._held = False
        mv = memoryview(b)
        if src.layout == "jsonl" and mv[-1] == 10:  # a newline: held until the next write or the end
            mv, self._held = mv[:-1], True
        out.write(bytes(mv).replace(b"\n", nl) if src.crlf else mv)
        return n

    def finish(self) -> None:
        """The final newline, unless the source, now read to its end, ended without one."""
        if self._held:
            self._held = False
            if self._src.final_newline is not False:
                self._out.write(b"\r\n" if self._src.crlf else b"\n")


def seen_at_end(path: str | Path | None) -> bool:
    """Whether an output's bytes reach a reader only when :func:`atomic_output` ends: a
    regular file or a new path (renamed into place), a URL (uploaded whole); not stdout
    (``None``, ``-``), a FIFO or a device, written as they come (what a run stores beside
    such an output is stored chunk by chunk: :class:`HeldOutput`)."""
    if path is None or str(path) == "-":
        return False
    if urls.is_url(str(path)):
        return True
    try:
        return _output_kind(urls.local(str(path)))[0] == "file"
    except CtxtoolError:  # a directory or a symlink loop: atomic_output says so
        return False


def _compressed_name(name: str | None) -> bool:
    return (name or "").lower().endswith((".gz", ".zst"))


def _compressor(name: str | None, raw: Any) -> Any:
    """A stream compressing into ``raw`` when ``name`` ends in .gz or .zst, else None."""
    low = (name or "").lower()
    if low.endswith(".gz"):
        import gzip

        return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0)
    if low.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    return None


@contextlib.contextmanager
def _writer(fd: int) -> Iterator[IO[bytes]]:
    """A buffered writer on ``fd``. When the block fails, it is closed without flushing again:
    a full disk is reported once, as the error that ended the block."""
    fh = os.fdopen(fd, "wb", BUFFER)  # a record a write call: whole megabytes a system call, not two calls a record
    try:
        yield fh
    except BaseException:
        with contextlib.suppress(OSError):
            fh.close()
        raise
    fh.close()


@contextlib.contextmanager
def _sink(path: str | Path | None, start_with: str | None = None) -> Iterator[IO[bytes]]:
    """Where the bytes of an output go, committed when the block ends without an exception
    (``start_with``: as :func:`atomic_output`'s, moved to be a regular file's temporary file
    when it can be, else copied first)."""
    if path is None or str(path) == "-":
        out = cast(IO[bytes], _Guarded(sys.stdout.buffer, path))
        _copy_start(start_with, out)
        yield out
        try:
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise output_error(e, path) from e
        return
    name = str(path)
    kind, real = _output_kind(name)
    if kind == "special":  # written in place, streaming: never replaced
        try:
            raw: Any = open(name, "wb")  # noqa: SIM115
        except OSError as e:
            raise output_error(e, path) from e
        try:
            comp = _compressor(name, raw)
            out = cast(IO[bytes], _Guarded(comp or raw, path))
            _copy_start(start_with, out)
            yield out
            try:
                if comp is not None:
                    comp.close()
                raw.flush()
            except BrokenPipeError:
                raise
            except OSError as e:
                raise output_error(e, path) from e
        finally:
            with contextlib.suppress(OSError):
                raw.close()
        return
    target = Path(real)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = make_temp(target.parent, target.name)
    except OSError as e:
        raise output_error(e, path) from e
    try:
        if start_with is not None and not _compressed_name(name) and (moved := _move_start(start_with, tmp, fd)) is not None:
            fd, start_with = moved, None  # the first part of a parallel run: not copied again
        try:
            mode = os.stat(target).st_mode & 0o7777  # replacing a file keeps its mode
        except OSError:
            mode = 0o666 & ~_umask()  # mkstemp makes 0600; a new output gets the usual mode
        os.chmod(tmp, mode)
        with _writer(fd) as fh:
            comp = _compressor(name, fh)
            out = cast(IO[bytes], _Guarded(comp or fh, path))
            _copy_start(start_with, out)  # not moved (compressed, or another file system): copied
            yield out
            try:
                if comp is not None:
                    comp.close()
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as e:  # e.g. the disk is full
                raise output_error(e, path) from e
        try:
            os.replace(tmp, target)
        except OSError as e:
            raise output_error(e, path) from e
    except BaseException:
        remove_quietly(tmp)
        raise


@contextlib.contextmanager
def atomic_output(
    path: str | Path | None, check: Callable[[str], None] | None = None, *, start_with: str | None = None
) -> Iterator[IO[bytes]]:
    """Write an output (``None`` or ``-``: stdout) so that a failure leaves nothing half-done
    and nothing but a regular file is ever replaced (see the module's doc).

    ``check`` gets a finished temporary file holding the (uncompressed) output before it is
    committed: if it raises, nothing is written, to stdout or a FIFO either.

    ``start_with``: a file of ours (it is consumed) whose bytes begin the output, before what
    the block writes: moved to be the temporary file when it can be (the first part of a
    parallel run: not copied again), else copied."""
    if path is not None and urls.is_url(str(path)):
        with _url_output(str(path), check) as out:
            _copy_start(start_with, out)
            yield out
        return
    if path is not None:
        path = urls.local(str(path))
    if check is None:
        with _sink(path, start_with) as out:
            yield out
        return
    direct = path is not None and str(path) != "-" and not _compressed_name(str(path))
    kind, real = _output_kind(str(path)) if direct else ("special", "")
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    where = Path(real).parent if kind == "file" else Path(tempfile.gettempdir())
    stem = Path(real).name if kind == "file" else "output"
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = make_temp(where, stem)
    except OSError as e:
        raise output_error(e, path) from e
    try:
        if start_with is not None and (moved := _move_start(start_with, tmp, fd)) is not None:
            fd, start_with = moved, None
        with _writer(fd) as fh:
            _copy_start(start_with, fh)  # not moved (another file system): copied
            yield cast(IO[bytes], _Guarded(fh, path))
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as e:
                raise output_error(e, path) from e
        check(tmp)
        if kind == "file":  # a plain regular file: the checked temporary is the output
            try:
                mode = os.stat(real).st_mode & 0o7777
            except OSError:
                mode = 0o666 & ~_umask()
            try:
                os.chmod(tmp, mode)
                os.replace(tmp, real)
            except OSError as e:
                raise output_error(e, path) from e
        else:
            with _sink(path) as out, open(tmp, "rb") as src:
                shutil.copyfileobj(src, out, BUFFER)
    finally:
        remove_quietly(tmp)


def _move_start(start: str, tmp: str, fd: int) -> int | None:
    """Move ``start`` to be the temporary file ``tmp`` (open on ``fd``, then closed): the
    descriptor of the moved file, opened to append; None when it cannot be moved (another
    file system)."""
    try:
        os.replace(start, tmp)
    except OSError:
        return None
    os.close(fd)  # the empty temporary file it was (now replaced)
    return os.open(tmp, os.O_WRONLY | os.O_APPEND)


def _copy_start(start: str | None, out: IO[bytes]) -> None:
    if start is not None:
        with open(start, "rb") as src:
            shutil.copyfileobj(src, out, BUFFER)
        remove_quietly(start)


@contextlib.contextmanager
def _url_output(url: str, check: Callable[[str], None] | None) -> Iterator[IO[bytes]]:
    """An output URL: written to a private local temporary file, checked, compressed for
    .gz/.zst, then uploaded whole: nothing appears under ``url`` before it is complete."""
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    fd, tmp = make_temp(tempfile.gettempdir(), "url-output")
    done = tmp
    try:
        with _writer(fd) as fh:
            yield cast(IO[bytes], _Guarded(fh, url))
        if check is not None:
            check(tmp)
        if _compressed_name(url):
            fd, done = make_temp(tempfile.gettempdir(), "url-output")
            with _writer(fd) as fh, open(tmp, "rb") as src:
                comp = _compressor(url, fh)
                shutil.copyfileobj(src, comp, BUFFER)
                comp.close()
        urls.put_file(done, url)
    finally:
        remove_quietly(tmp)
        remove_quietly(done)
