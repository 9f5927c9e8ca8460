"""Where ctxtool keeps its cache and reads its configuration, which file names a directory's walk
reads as transcripts, and the checks that keep outputs off inputs."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..text import lazyre

BUFFER = 1 << 20  # bytes per read and per copy, inputs and outputs alike


# -- which files a directory walk reads as transcripts (ctxtool.formats.walk walks them) --------------

TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".traj", ".ndjson")
COMPRESSED_SUFFIXES = (".gz", ".zst")  # read decompressed (Codex compresses old rollouts to .jsonl.zst)
STORE_NAMES = ("opencode.db",)  # session stores a directory walk picks up by name


def transcript_name(name: str, suffixes: Sequence[str] = TRANSCRIPT_SUFFIXES) -> bool:
    """Whether a file name is a transcript's a directory walk picks up: one of ``suffixes``,
    compressed or not (``rollout.jsonl.zst``, ``session.json.gz``), or a session store
    (``opencode.db``)."""
    low = name.lower()
    if low in STORE_NAMES:
        return True
    if low.endswith(".meta.json"):  # a Claude Code subagent's description, beside its transcript
        return False
    for c in COMPRESSED_SUFFIXES:
        if low.endswith(c):
            low = low[: -len(c)]
            break
    return low.endswith(tuple(suffixes))


def walked(d: str | Path, path: str | Path) -> bool:
    """Whether a walk of directory ``d`` (:func:`ctxtool.formats.walk.walk_files`) reads
    ``path``: an existing regular file of a transcript's name under ``d`` (links resolved)."""
    return _walkable(path) and inside(path, d)


def _walkable(path: str | Path) -> bool:
    """Whether ``path`` is a file some directory's walk reads: an existing regular file (links
    followed) of a transcript's name."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
    except OSError:
        return False
    return transcript_name(os.path.basename(path))


def cache_dir() -> Path:
    """``$CTXTOOL_CACHE_DIR``, else the user cache directory (e.g. ~/.cache/ctxtool)."""
    env = os.environ.get("CTXTOOL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("ctxtool", appauthor=False))


def config_dir() -> Path:
    """``$CTXTOOL_CONFIG_DIR``, else the user config directory (e.g. ~/.config/ctxtool)."""
    env = os.environ.get("CTXTOOL_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("ctxtool", appauthor=False))


def ensure_private_dir(p: Path) -> Path:
    """Create ``p`` (and parents) with mode 0700."""
    p.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        os.chmod(p, 0o700)
    except OSError:
        pass
    return p


def same_file(a: str | Path, b: str | Path | None) -> bool:
    """Do ``a`` and ``b`` name the same regular file (through links, or the same path)? ``-``
    is stdin or stdout, never a file; a FIFO or device written in place replaces nothing."""
    if not b or str(b) == "-" or str(a) == "-":
        return False
    try:
        st_b = os.stat(b)
    except OSError:  # the output does not exist (yet), or is a symlink loop
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, RuntimeError):
            return False
    if not stat.S_ISREG(st_b.st_mode):
        return False
    try:
        st_a = os.stat(a)
    except OSError:
        return False
    return (st_a.st_dev, st_a.st_ino) == (st_b.st_dev, st_b.st_ino)


def refuse_overwrite(sources: str | Path | Iterable[str | Path], output: str | Path | None) -> None:
    """Inputs are never modified: refuse an ``output`` that is one of the ``sources``, or a file
    a source directory's walk reads (:func:`walked`)."""
    # lazy: start-up (loaded only when this runs: ..errors)
    from ..errors import CtxtoolError, Failure

    # only an existing transcript file can be one a directory's walk reads: asked once, not per source
    read = output if output is not None and str(output) != "-" and _walkable(output) else None
    for src in [sources] if isinstance(sources, (str, Path)) else sources:
        if same_file(src, output) or (read is not None and str(src) != "-" and os.path.isdir(src) and walked(src, read)):
            raise CtxtoolError(
                "the output would overwrite the input; inputs are never modified", path=str(output), kind=Failure.USAGE
            )


def inside(path: str | Path, directory: str | Path) -> bool:
    """Is ``path`` under ``directory`` (links resolved)?"""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))


def refuse_overwrite_any(sources: Iterable[str | Path], outputs: Iterable[str | Path]) -> None:
    """:func:`refuse_overwrite` for many outputs at once (a directory's files written into a
    directory), before any is written: an output that exists is refused when it is one of the
    ``sources`` (the same file, through links). Each path is looked at once."""
    # lazy: start-up (loaded only when this runs: ..errors)
    from ..errors import CtxtoolError, Failure

    ids = set()
    for src in sources:
        with contextlib.suppress(OSError):
            st = os.stat(src)
            ids.add((st.st_dev, st.st_ino))
    for out in outputs:
        try:
            st = os.stat(out)
        except OSError:  # not there yet: no input
            continue
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in ids:
            raise CtxtoolError("the output would overwrite the input; inputs are never modified", path=str(out),
                               kind=Failure.USAGE)


# -- temporary files next to outputs --------------------------------------------------------------
# Every temporary file or directory ctxtool makes beside an output is named
# ``.STEM.ctxtool-PID-RANDOM[.tmp]``: PID is its owner's. A run killed with SIGKILL cannot clean
# up, so the next run that makes a temporary in that directory removes those whose owner is gone.

_TEMP_RE = lazyre.compile(r"^\..*\.ctxtool-(\d+)-[A-Za-z0-9_]+(?:\.tmp)?$")


def temp_prefix(stem: str) -> str:
    """The name prefix of a temporary file or directory for ``stem`` owned by this process."""
    return f".{stem}.ctxtool-{os.getpid()}-"


def owner_pid(name: str) -> int | None:
    """The owner's pid in a temporary's name (see :func:`temp_prefix`), or None."""
    m = _TEMP_RE.match(name)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True


def sweep_leftovers(directory: str | Path, *, dir_fd: int | None = None) -> list[str]:
    """Remove the temporaries in ``directory`` whose owner process is gone; returns their paths.
    Never fails: a directory that cannot be listed or an entry that cannot go is left alone.
    With ``dir_fd`` (a directory opened without following links, as the caches are) the
    entries are listed and removed through it, so a link planted in place of the directory
    is never followed; only files are removed there."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(dir_fd if dir_fd is not None else directory))
    except OSError:
        return removed
    for entry in entries:
        if entry.name[:1] != ".":  # every temporary's name starts with a dot; refs do not
            continue
        pid = owner_pid(entry.name)
        if pid is None or pid_alive(pid):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():  # not ours (e.g. in /tmp)
                continue
            if dir_fd is not None:
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=dir_fd)
                    removed.append(os.path.join(str(directory), entry.name))
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.path)
        except OSError:
            pass
    return removed


def make_temp(directory: str | Path, stem: str, *, suffix: str = ".tmp") -> tuple[int, str]:
    """A new temporary file in ``directory`` named for ``stem`` and this process (mode 0600):
    ``(fd, path)``. Leftovers of dead owners in that directory are removed first."""
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    sweep_leftovers(directory)
    return tempfile.mkstemp(prefix=temp_prefix(stem), suffix=suffix, dir=directory)


def make_temp_dir(directory: str | Path, stem: str) -> str:
    """A new temporary directory in ``directory`` named for ``stem`` and this process (0700)."""
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    sweep_leftovers(directory)
    return tempfile.mkdtemp(prefix=temp_prefix(stem), dir=directory)


def remove_quietly(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
