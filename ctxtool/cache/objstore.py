"""A cache directory on object storage or any fsspec filesystem (``s3://``, ``gs://``,
``memory://``) with the interface of :class:`ctxtool.cache.privdir.PrivateDir`, and
:func:`open_root`, which picks one for a root. Every write is one whole object (``pipe``), never
appended to: the ref manifest is one shard per task."""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path
from typing import IO, Any

from ..errors import CtxtoolError, Failure
from ..io import urls
from .privdir import PrivateDir


def _error(e: Exception, path: str, doing: str = "", *, writing: bool = False) -> CtxtoolError:
    if isinstance(e, CtxtoolError):
        return e
    kind = Failure.IO if writing else Failure.INPUT
    return CtxtoolError(f"{doing}{e}".strip() or type(e).__name__, path=path, kind=kind)


class ObjectDir:
    """A "directory" (key prefix) of an fsspec filesystem; names inside are single components."""

    def __init__(self, fs: Any, key: str, url: str) -> None:
        self.fs = fs
        self.key = key.rstrip("/")
        self.path = url.rstrip("/")

    @classmethod
    def open_root(cls, url: str, *, create: bool) -> ObjectDir | None:
        fs, key = urls.filesystem(url)
        d = cls(fs, key, url)
        if create:
            try:
                fs.makedirs(d.key, exist_ok=True)  # a no-op on object storage
            except Exception as e:
                raise _error(e, url, "cannot create the cache directory: ", writing=True) from e
            return d
        return d if d._exists() else None

    def _exists(self) -> bool:
        try:
            return bool(self.fs.exists(self.key))
        except Exception as e:
            raise _error(e, self.path, "cannot open the cache directory: ") from e

    def _k(self, name: str) -> str:
        return posixpath.join(self.key, name)

    def subdir(self, name: str, *, create: bool) -> ObjectDir | None:
        d = ObjectDir(self.fs, self._k(name), urls.join(self.path, name))
        if create:
            try:
                self.fs.makedirs(d.key, exist_ok=True)
            except Exception as e:
                raise _error(e, d.path, "cannot create: ", writing=True) from e
            return d
        return d if d._exists() else None

    def sweep(self) -> None:
        """Nothing to sweep: an object is written whole or not at all."""

    def close(self) -> None:
        pass

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            i = self.fs.info(self._k(name))
        except FileNotFoundError:
            return None
        except Exception as e:
            raise _error(e, urls.join(self.path, name)) from e
        mode = (stat.S_IFREG | 0o600) if i.get("type") == "file" else (stat.S_IFDIR | 0o700)
        return os.stat_result((mode, 0, 0, 1, 0, 0, int(i.get("size") or 0), 0, 0, 0))

    def scan(self) -> list[tuple[str, bool]]:
        try:
            entries = self.fs.ls(self.key, detail=True)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise _error(e, self.path) from e
        return [(posixpath.basename(e["name"].rstrip("/")), e.get("type") == "file") for e in entries]

    def listdir(self) -> list[str]:
        return [n for n, _ in self.scan()]

    def open_reader(self, name: str) -> IO[bytes]:
        """``name`` opened for reading (``FileNotFoundError`` when absent)."""
        try:
            return self.fs.open(self._k(name), "rb")
        except FileNotFoundError:
            raise
        except Exception as e:
            raise _error(e, urls.join(self.path, name), "cannot read: ") from e

    def read_bytes(self, name: str, *, single_link: bool = False) -> bytes:
        try:
            return self.fs.cat_file(self._k(name))
        except FileNotFoundError:
            raise
        except Exception as e:
            raise _error(e, urls.join(self.path, name), "cannot read: ") from e

    def write_atomic(self, name: str, data: bytes | bytearray, *, fsync: bool = False) -> None:
        """One whole object: nothing partial is ever visible under ``name``."""
        try:
            self.fs.pipe_file(self._k(name), data)
        except Exception as e:
            raise _error(e, urls.join(self.path, name), "cannot write: ", writing=True) from e

    def unlink(self, name: str) -> bool:
        try:
            self.fs.rm_file(self._k(name))
        except FileNotFoundError:
            return False
        except Exception as e:
            raise _error(e, urls.join(self.path, name), "cannot delete: ", writing=True) from e
        return True


CacheDir = PrivateDir | ObjectDir


def open_root(root: str | Path, *, create: bool) -> CacheDir | None:
    """The cache root: a :class:`PrivateDir` for a local path, an :class:`ObjectDir` for a URL."""
    if isinstance(root, str) and urls.is_url(root):
        return ObjectDir.open_root(root, create=create)
    return PrivateDir.open_root(root, create=create)


def cache_root(root: str | Path) -> str | Path:
    """A cache root as given: a URL stays a string, a local path (or ``file://``) a Path."""
    if isinstance(root, str) and urls.is_url(root):
        return root.rstrip("/")
    return Path(urls.local(str(root))).expanduser()


def sub(root: str | Path, *names: str) -> str | Path:
    return urls.join(root, *names) if isinstance(root, str) else root.joinpath(*names)
