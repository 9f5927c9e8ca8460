"""A private directory whose entries are opened without ever following a link: the root (the
user's choice) is reached as given; everything inside it is opened relative to the root's open
descriptor with ``O_NOFOLLOW``, files checked to be regular, replaced by a rename, never
appended to. Every failure is one line naming the path (``INPUT``, ``IO`` or not found)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO

from ..errors import CtxtoolError, Failure
from ..io.paths import sweep_leftovers, temp_prefix

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = os.O_NOFOLLOW
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted in place of a file must not block the open (fstat refuses it)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC

#: (device, inode) of each cache directory this process (or the parent it was forked from)
#: has swept: a directory is swept once per process, not at every open
_SWEPT: set[tuple[int, int]] = set()

LINK = "is a symbolic link; links inside the cache are never followed"
HARD_LINKS = "has other hard links: it may be a file outside the cache, refused"
_REASONS = {
    errno.ELOOP: LINK,
    errno.ENOTDIR: "is not a directory",
    errno.EISDIR: "is a directory, not a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
    errno.ENXIO: "is not a regular file",
}


_LAYOUT = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO})  # what sits there is wrong


def cache_error(e: OSError, path: str | Path, doing: str = "", *, writing: bool = False) -> CtxtoolError:
    """A one-line error naming ``path`` for an ``OSError`` met in the cache: exit 8 (``IO``)
    when a write failed for want of space, permission or a working disk, exit 3 when the
    cache is not laid out as ctxtool left it, 7 when a name is absent."""
    if e.errno == errno.ENOENT:
        return CtxtoolError(f"{doing}no such file or directory".strip(), path=str(path), kind=Failure.NOT_FOUND)
    reason = _REASONS.get(e.errno or 0) or (e.strerror or type(e).__name__).lower()
    kind = Failure.IO if writing and e.errno not in _LAYOUT else Failure.INPUT
    return CtxtoolError(f"{doing}{reason}", path=str(path), kind=kind)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(mode: int, want: str = "a regular file") -> str:
    """Why an entry of ``mode`` is refused where ``want`` belongs (``""``: it is one)."""
    if stat.S_ISLNK(mode):
        return LINK
    if (stat.S_ISDIR if want == "a directory" else stat.S_ISREG)(mode):
        return ""
    kind = _kind(mode)
    return f"is {kind}, not {want}" if kind.startswith("a ") else f"is not {want}"


class PrivateDir:
    """An open directory (mode 0700); names inside are single path components."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self._swept = False
        self.path = path

    # -- opening --------------------------------------------------------------------
    @classmethod
    def open_root(cls, path: str | Path, *, create: bool) -> PrivateDir | None:
        """The cache root (links in its own path are followed: the user named it).

        Created 0700 (parents as usual) when ``create``; ``None`` when absent and not ``create``.
        """
        p = Path(path)
        flags = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
        try:
            if create:
                p.parent.mkdir(parents=True, exist_ok=True)
                made = _mkdir(p)
            fd = os.open(p, flags)
        except FileNotFoundError:
            if create:
                raise CtxtoolError("cannot create the cache directory", path=str(p), kind=Failure.IO) from None
            return None
        except OSError as e:
            raise cache_error(e, p, "cannot open the cache directory: ", writing=create) from e
        if create and made:
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o700)
        d = cls(fd, p)
        if create:  # opened to write: what a killed run left here goes first
            d.sweep()
        return d

    def subdir(self, name: str, *, create: bool) -> PrivateDir | None:
        """``name`` inside this directory, never through a link; 0700 when created."""
        p = self.path / name
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
            except FileExistsError:
                pass  # another process made it, or a link appeared: the open below decides
            except OSError as e:
                raise cache_error(e, p, "cannot create: ", writing=True) from e
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
            except OSError as e:
                raise self._refused(e, name, "a directory") from e
        except OSError as e:
            raise self._refused(e, name, "a directory") from e
        d = PrivateDir(fd, p)
        if create:  # ours, reached without a link: private whatever made it
            with contextlib.suppress(OSError):
                if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
                    os.fchmod(fd, 0o700)
            d.sweep()
        return d

    def sweep(self) -> None:
        """Remove the temporaries here whose owner process is gone (a killed write), once per
        process and directory: ``refs/`` may hold many thousands of entries, and a run opens it
        in every worker (forked after the parent's own sweep, they inherit its record)."""
        if self._swept:
            return
        self._swept = True
        try:
            st = os.fstat(self.fd)
        except OSError:
            return
        key = (st.st_dev, st.st_ino)
        if key not in _SWEPT:
            _SWEPT.add(key)
            sweep_leftovers(self.path, dir_fd=self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def _refused(
        self, e: OSError, name: str, want: str = "a regular file", doing: str = "", *, writing: bool = False
    ) -> CtxtoolError:
        """The error for an open of ``name`` that failed: what sits there, when that is the reason."""
        if e.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS):
            try:
                why = not_regular(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode, want)
            except OSError:
                why = ""
            if why:
                return CtxtoolError(why, path=str(self.path / name), kind=Failure.INPUT)
        return cache_error(e, self.path / name, doing, writing=writing)

    # -- entries ---------------------------------------------------------------------
    def lstat(self, name: str) -> os.stat_result | None:
        """The entry itself (a link is not followed); ``None`` when absent."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise cache_error(e, self.path / name) from e

    def listdir(self) -> list[str]:
        try:
            return os.listdir(self.fd)
        except OSError as e:
            raise cache_error(e, self.path) from e

    def scan(self) -> list[tuple[str, bool]]:
        """Every entry's name, and whether it is a regular file (a link is not)."""
        try:
            with os.scandir(self.fd) as it:
                return [(e.name, e.is_file(follow_symlinks=False)) for e in it]
        except OSError as e:
            raise cache_error(e, self.path) from e

    def open_file(self, name: str, *, single_link: bool = False) -> int:
        """A descriptor on the regular file ``name`` (``FileNotFoundError`` when absent);
        ``single_link``: refuse a file with other hard links (content served unverified)."""
        p = self.path / name
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise self._refused(e, name) from e
        try:
            st = os.fstat(fd)
            why = not_regular(st.st_mode) or (HARD_LINKS if single_link and st.st_nlink != 1 else "")
            if why:
                raise CtxtoolError(why, path=str(p), kind=Failure.INPUT)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_reader(self, name: str) -> IO[bytes]:
        """The regular file ``name`` opened for reading (``FileNotFoundError`` when absent)."""
        return os.fdopen(self.open_file(name), "rb")

    def read_bytes(self, name: str, *, single_link: bool = False) -> bytes:
        fd = self.open_file(name, single_link=single_link)
        try:
            chunks: list[bytes] = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
        except OSError as e:
            raise cache_error(e, self.path / name, "cannot read: ") from e
        finally:
            os.close(fd)

    def write_atomic(self, name: str, data: bytes | bytearray, *, fsync: bool = False) -> None:
        """Replace ``name`` by ``data`` (0600): a fresh private file here, then a rename.

        The rename replaces whatever sits at ``name`` (a link is replaced, its target untouched);
        a directory there is refused. The temporary file carries this process's pid in its name
        (:func:`ctxtool.io.paths.temp_prefix`): the first write of a later run in this directory
        removes what a killed one left.
        """
        p = self.path / name
        self.sweep()
        tmp = f"{temp_prefix(name[:24])}{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=self.fd)
        except OSError as e:
            raise cache_error(e, p, "cannot write: ", writing=True) from e
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            if isinstance(e, OSError):
                raise cache_error(e, p, "cannot write: ", writing=True) from e
            raise

    def unlink(self, name: str) -> bool:
        """Remove the entry ``name`` (a link itself, never its target); False when absent."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise cache_error(e, self.path / name, "cannot delete: ", writing=True) from e
        return True


def _mkdir(p: Path) -> bool:
    """Make ``p`` with mode 0700; False when it existed."""
    try:
        os.mkdir(p, 0o700)
    except FileExistsError:
        return False
    return True
