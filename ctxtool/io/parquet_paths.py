"""Which paths are Parquet datasets (a ``.parquet`` file, a directory of shards in the Hugging
Face layout, or such a URL) and their shards: a module of its own so that every run can ask
without loading the reader, :mod:`ctxtool.io.parquet` (which keeps these names too)."""

from __future__ import annotations

import os
from pathlib import Path

from . import urls

SUFFIX = ".parquet"


def is_parquet_name(path: str) -> bool:
    return path.rstrip("/").lower().endswith(SUFFIX)


def is_parquet(path: str) -> bool:
    """A Parquet file (by its name) or a directory holding Parquet files."""
    if path == "-":
        return False
    return is_parquet_name(path) or is_parquet_dir(path)


def is_parquet_dir(path: str) -> bool:
    """A directory (local or URL) with Parquet files under it (the Hugging Face layout)."""
    if path == "-" or is_parquet_name(path) or urls.has_glob(path):
        return False
    if urls.is_url(path):
        if "." in path.rstrip("/").rsplit("/", 1)[-1]:
            return False  # a file name: not a directory of shards
        i = urls.info(path)
        return i is not None and i.get("type") == "directory" and bool(shard_files(path))
    return os.path.isdir(path) and bool(shard_files(path))


def shard_files(path: str) -> list[tuple[str, str]]:
    """The Parquet files of ``path`` (a file, or a directory searched recursively) with their
    names relative to it (an output keeps them), sorted."""
    if is_parquet_name(path) and not (os.path.isdir(path) if not urls.is_url(path) else False):
        return [(path, path.rstrip("/").rsplit("/", 1)[-1])]
    if urls.is_url(path):
        fs, root = urls.filesystem(path)
        try:
            found = sorted(p for p in fs.find(root) if p.lower().endswith(SUFFIX))
        except Exception as e:
            raise urls.url_error(e, path) from e
        base = root.rstrip("/") + "/"
        return [(urls.qualified(fs, p), p[len(base):] if p.startswith(base) else p.rsplit("/", 1)[-1]) for p in found]
    root_path = Path(path)
    return [(str(p), p.relative_to(root_path).as_posix())
            for p in sorted(root_path.rglob("*" + SUFFIX)) if p.is_file() and not p.name.startswith(".")]
