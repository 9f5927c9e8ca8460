"""Where ctxtool keeps its cache and reads its configuration."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


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
    """Do ``a`` and ``b`` name the same file (through links, or the same path)? ``-`` is stdin
    or stdout, never a file."""
    if not b or str(b) == "-" or str(a) == "-":
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return Path(a).resolve() == Path(b).resolve()


def refuse_overwrite(sources: str | Path | Iterable[str | Path], output: str | Path | None) -> None:
    """Inputs are never modified: refuse an ``output`` that is one of the ``sources``."""
    from .errors import CtxtoolError, ExitCode

    for src in [sources] if isinstance(sources, (str, Path)) else sources:
        if same_file(src, output):
            raise CtxtoolError(
                "the output would overwrite the input; inputs are never modified", path=str(output), code=ExitCode.USAGE
            )
