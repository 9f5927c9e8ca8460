"""Paths anywhere: the one place that turns a path string into something to open. A local path
(or ``file://`` URL) stays local (:mod:`ctxtool.io.files`, no fsspec import); anything else with a
``scheme://`` prefix is an fsspec URL (``s3fs`` for ``s3://``: ``pip install 'ctxtool[s3]'``).
An output to object storage is uploaded whole when complete, so it is atomic there too."""

from __future__ import annotations

import posixpath
from typing import IO, Any

from ..errors import CtxtoolError, Failure
from ..text import lazyre

_SCHEME = lazyre.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
GLOB_CHARS = frozenset("*?[")


def scheme(path: str) -> str | None:
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def is_url(path: object) -> bool:
    """Does ``path`` name something fsspec opens (a ``scheme://`` other than ``file://``)?"""
    return isinstance(path, str) and scheme(path) not in (None, "file")


def local(path: str) -> str:
    """A ``file://`` URL as a local path; anything else unchanged."""
    return path[len("file://"):] if scheme(path) == "file" else path


def join(base: str, *names: str) -> str:
    """``base`` / ``names`` for a URL or a local path."""
    if is_url(base):
        return posixpath.join(base.rstrip("/") + "/", *names)
    import os

    return os.path.join(base, *names)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem serving ``url`` and the path inside it."""
    try:
        from fsspec.core import url_to_fs
    except ImportError as e:  # pragma: no cover - fsspec is a dependency
        raise CtxtoolError("fsspec is needed to open URLs: pip install fsspec", path=url, kind=Failure.USAGE) from e
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as e:
        hint = " (pip install 'ctxtool[s3]')" if scheme(url) in ("s3", "s3a") else ""
        raise CtxtoolError(f"cannot open this URL: {e}{hint}", path=url, kind=Failure.USAGE) from e


def qualified(fs: Any, path: str) -> str:
    """An fsspec path with its filesystem's scheme put back (``bucket/key`` -> ``s3://bucket/key``)."""
    proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return fs.unstrip_protocol(path) if proto != "memory" else f"memory://{path.removeprefix('/')}"


def url_error(e: Exception, url: str, doing: str = "cannot open") -> CtxtoolError:
    if isinstance(e, CtxtoolError):
        return e
    if isinstance(e, FileNotFoundError):
        return CtxtoolError("no such file", kind=Failure.NOT_FOUND, path=url)
    return CtxtoolError(f"{doing}: {e}", kind=Failure.IO, path=url)


def info(url: str) -> dict[str, Any] | None:
    """fsspec's info about ``url`` (``size``, ``type``); None when it does not exist."""
    fs, p = filesystem(url)
    try:
        return dict(fs.info(p))
    except FileNotFoundError:
        return None
    except Exception as e:  # botocore, aiohttp...: one line naming the URL
        raise url_error(e, url) from e


def size(url: str) -> int | None:
    i = info(url)
    return int(i["size"]) if i is not None and i.get("type") == "file" and i.get("size") is not None else None


def open_read(url: str) -> IO[bytes]:
    """``url`` opened for reading bytes (seekable: byte ranges read only their part)."""
    fs, p = filesystem(url)
    try:
        return fs.open(p, "rb")
    except Exception as e:
        raise url_error(e, url) from e


def read_bytes(url: str) -> bytes:
    fs, p = filesystem(url)
    try:
        return fs.cat_file(p)
    except Exception as e:
        raise url_error(e, url, "cannot read") from e


def put_bytes(url: str, data: bytes) -> None:
    """Write ``data`` as the whole object ``url`` (one request: atomic on object storage)."""
    _write(url, lambda fs, p: fs.pipe_file(p, data))


def put_file(local_path: str, url: str) -> None:
    """Upload the finished local file ``local_path`` as ``url`` (whole: atomic there)."""
    _write(url, lambda fs, p: fs.put_file(local_path, p))


def _write(url: str, write: Any) -> None:
    fs, p = filesystem(url)
    try:
        parent = posixpath.dirname(p)
        if parent and not fs.exists(parent):
            fs.makedirs(parent, exist_ok=True)  # a local or memory filesystem; a no-op on S3
        write(fs, p)
    except Exception as e:
        raise url_error(e, url, "cannot write the output") from e


def has_glob(path: str) -> bool:
    """Is ``path`` a pattern to expand? It has ``*``, ``?`` or ``[``, and is not a local
    file or directory of that very name (``run[1].jsonl`` names the file when it exists)."""
    if GLOB_CHARS.isdisjoint(path):
        return False
    if is_url(path):
        return True
    import os

    return not os.path.lexists(local(path))


def expand(pattern: str) -> list[str]:
    """Input names matching ``pattern`` (a URL or local path with ``*``, ``?``, ``[...]``,
    ``**``), sorted; a name without glob characters is returned as it is."""
    if not has_glob(pattern):
        return [pattern]
    if is_url(pattern):
        fs, p = filesystem(pattern)
        try:
            found = [qualified(fs, m) for m in sorted(fs.glob(p)) if fs.isfile(m)]
        except Exception as e:
            raise url_error(e, pattern, "cannot list") from e
    else:
        # lazy: start-up (loaded only when this runs: glob)
        import glob as _glob

        found = sorted(f for f in _glob.glob(local(pattern), recursive=True) if not _isdir(f))
    if not found:
        raise CtxtoolError("no file matches", path=pattern, kind=Failure.NOT_FOUND)
    return found


def _isdir(path: str) -> bool:
    import os

    return os.path.isdir(path)


def listdir(url: str) -> list[str]:
    """The names (not paths) of the files directly under ``url``; [] when it does not exist."""
    fs, p = filesystem(url)
    try:
        entries = fs.ls(p, detail=True)
    except FileNotFoundError:
        return []
    except Exception as e:
        raise url_error(e, url, "cannot list") from e
    return sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "file")


def remove(url: str) -> bool:
    fs, p = filesystem(url)
    try:
        fs.rm_file(p)
    except FileNotFoundError:
        return False
    except Exception as e:
        raise url_error(e, url, "cannot delete") from e
    return True
