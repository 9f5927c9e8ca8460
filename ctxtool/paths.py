"""Where ctxtool keeps its cache and reads its configuration."""

from __future__ import annotations

import os
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
