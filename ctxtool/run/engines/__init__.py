"""Engines: where the shards of a run are processed (``--engine``), each a registered
:class:`ctxtool.run.engines.base.Engine`: ``local`` (this host's process pool, the default) and
``ray`` (a Ray cluster through Ray Data, ``pip install 'ctxtool[ray]'``, imported only when
chosen). Both run the same shards through the same code, so their outputs are the same bytes;
a run on one: ``run_file(op, src, out, engine=Sharding(get_engine("ray")))``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import CtxtoolError, Failure
from ...registry import LazyEntry, Registry
from .base import Engine, Limiter, ThreadLimiter

if TYPE_CHECKING:
    from .jobs import Shard
    from .shards import ShardedRun, Sharding, run_shard

_SHARDS = ("Shard", "ShardedRun", "Sharding", "run_shard")


def __getattr__(name: str) -> Any:
    """The shard machinery, imported on first use (the CLI's start needs only the names)."""
    if name in _SHARDS:
        # lazy: start-up (`ctxtool --version` would load ctxtool.formats.base)
        from . import shards

        return getattr(shards, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Engine",
    "Limiter",
    "Shard",
    "ShardedRun",
    "Sharding",
    "ThreadLimiter",
    "ENGINES",
    "get_engine",
    "register_engine",
    "run_shard",
    "sharding",
]

DEFAULT = "local"

#: the engines by name, each module imported when chosen (``import ctxtool`` never imports Ray)
ENGINES: Registry[type[Engine]] = Registry("engine")
ENGINES.register(LazyEntry("ctxtool.run.engines.local:LocalEngine"), "local")
ENGINES.register(LazyEntry("ctxtool.run.engines.ray:RayEngine"), "ray")
#: add an engine (a :class:`Engine` subclass with a ``name``); usable as a decorator
register_engine = ENGINES.register


def get_engine(name: str = DEFAULT, **opts: Any) -> Engine:
    """An engine by name (``workers=``, ``address=``)."""
    return ENGINES.get(name)(**opts)


def sharding(
    engine: str | None, paths: list[str], output: str | None, *, address: str | None = None, join: bool = False,
    workers: int | None = None,
) -> Sharding | None:
    """How the CLI runs a file command: None for a plain run (the default engine, one input
    file, one output file: as before), else shards on the named engine. Shards are chosen by
    ``--engine ray``, ``--join``, an input glob or directory, or an output that is a directory
    (ends in ``/`` or exists as one)."""
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ...io import urls

    name = engine or DEFAULT
    if address and name == DEFAULT:
        raise CtxtoolError("--address joins a Ray cluster: use it with --engine ray", kind=Failure.USAGE)
    directory = output is not None and output != "-" and (output.endswith("/") or _is_dir(output))
    if join and directory:  # refused now, not when the joined file is opened after every shard ran
        raise CtxtoolError("cannot write the output: it names a directory; --join writes one file: give -o FILE",
                           path=output, kind=Failure.USAGE)
    tree = [p for p in paths if _is_transcript_dir(p)]
    if tree and output is not None and not (directory or join):
        raise CtxtoolError("a directory of transcripts is written as a directory: give -o DIR/ (or --join -o FILE)",
                           path=tree[0], kind=Failure.USAGE)
    if name == DEFAULT and not join and not directory and not tree and not any(urls.has_glob(p) for p in paths):
        return None
    # lazy: start-up (`ctxtool --version` would load ctxtool.formats.base)
    from .shards import Sharding

    return Sharding(get_engine(name, workers=workers, address=address), join=join)


def _is_transcript_dir(path: str) -> bool:
    """A local directory of transcript files (a directory of Parquet shards is one dataset)."""
    import os

    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ...io import urls
    from ...io.parquet_paths import is_parquet

    return not urls.is_url(path) and os.path.isdir(path) and not is_parquet(path)


def _is_dir(path: str) -> bool:
    # lazy: start-up (`ctxtool --version` would load ctxtool.io)
    from ...io import urls

    if urls.is_url(path):
        i = urls.info(path)
        return i is not None and i.get("type") == "directory"
    import os

    return os.path.isdir(path)
