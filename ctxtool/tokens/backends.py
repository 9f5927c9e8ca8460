"""Exact token counting backends: what tiktoken's ``Encoding.encode_ordinary`` returns, counted
by the fastest backend installed (:data:`EXACT_BACKENDS`, in order of preference: ``bpe-openai``
of the ``fast-tokens`` extra, else tiktoken; ``CTXTOOL_TOKENS_BACKEND`` names one), loaded once
per process. The tests hold every backend to tiktoken's counts; one that differs anywhere is not
registered."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import CtxtoolError, Failure
from ..registry import Registry
from .bpe import OFFICIAL_BPE, TOKENIZERS, load_encoding

#: the environment variable that picks a backend by name (default: the first one installed)
BACKEND_ENV = "CTXTOOL_TOKENS_BACKEND"


class ExactCounter:
    """One encoding's exact counter (``count(text)``), with whether its backend releases the
    GIL while it counts (threads help) or not (only processes do).

    Texts of at least :attr:`MEMO_MIN` characters are remembered with their counts (up to
    :attr:`MEMO_CHARS` characters, then forgotten at once): datasets repeat the same system
    prompt and tool schemas in every record, and a dictionary look-up costs a hundredth of
    counting the text again."""

    __slots__ = ("backend", "encoding", "releases_gil", "_count", "_memo", "_memo_chars")
    MEMO_MIN = 64
    MEMO_CHARS = 1 << 22

    def __init__(self, backend: str, encoding: str, count: Callable[[str], int], releases_gil: bool) -> None:
        self.backend = backend
        self.encoding = encoding
        self.releases_gil = releases_gil
        self._count = count
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    def count(self, text: str) -> int:
        if len(text) < self.MEMO_MIN:
            return self._count(text)
        n = self._memo.get(text)
        if n is None:
            n = self._count(text)
            if self._memo_chars > self.MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
            self._memo[text] = n
            self._memo_chars += len(text)
        return n


class ExactBackend(Protocol):
    name: str

    def available(self) -> bool: ...

    def load(self, encoding: str) -> ExactCounter: ...


EXACT_BACKENDS: Registry[ExactBackend] = Registry("token counting backend", fold=str.lower)  # in order of preference


def _utf8(text: str) -> str:
    """What tiktoken encodes for a text with lone surrogates (``encode_ordinary``'s own fallback)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _BpeOpenAI:
    """GitHub's ``bpe-openai`` crate (PyPI ``bpe-openai``, the ``fast-tokens`` extra): its
    encodings are embedded (no file, no network), it loads in a few hundredths of a second and
    counts without building the token list, about twice as fast as tiktoken on one core. It
    holds the GIL: ctxtool's worker processes are what use every core.

    Only its compiled module is loaded: the package's ``__init__`` spends half a second on a
    model table ctxtool does not use."""

    name = "bpe-openai"

    def __init__(self) -> None:
        self._module: Any = None

    def _bindings(self) -> Any:
        if self._module is None:
            import sys

            mod = sys.modules.get("bpe_openai._bindings")
            if mod is None:
                mod = _load_extension("bpe_openai", "_bindings")
            self._module = mod or False
        return self._module

    def available(self) -> bool:
        return bool(self._bindings())

    def load(self, encoding: str) -> ExactCounter:
        mod = self._bindings()
        if not mod:
            raise CtxtoolError(
                f"{BACKEND_ENV}={self.name}: the package bpe-openai is not installed (pip install 'ctxtool[fast-tokens]')",
                kind=Failure.USAGE,
            )
        raw = mod.tokenizer_for_encoding(encoding).count

        def count(text: str) -> int:
            try:
                return int(raw(text))
            except UnicodeEncodeError:  # lone surrogates: encoded as tiktoken encodes them
                return int(raw(_utf8(text)))

        return ExactCounter(self.name, encoding, count, releases_gil=False)


class _Tiktoken:
    """tiktoken itself (always installed): the reference. Counts come from its Rust core's
    ``encode_to_tiktoken_buffer`` with no special token allowed, the same encoding as
    ``encode_ordinary`` (one regex pass over the whole text, the same merges), returned as
    one buffer instead of a list of ints: the GIL is released for all of it, so threads help."""

    name = "tiktoken"

    def available(self) -> bool:
        return True

    def load(self, encoding: str) -> ExactCounter:
        enc = load_encoding(encoding)
        to_buffer = getattr(getattr(enc, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
        if to_buffer is None:  # another tiktoken: its public call
            encode = enc.encode_ordinary

            def count(text: str) -> int:
                return len(encode(text))
        else:
            none: frozenset[str] = frozenset()

            def count(text: str) -> int:
                try:
                    return memoryview(to_buffer(text, none)).nbytes >> 2  # 4-byte ranks
                except UnicodeEncodeError:  # lone surrogates: as encode_ordinary encodes them
                    return memoryview(to_buffer(_utf8(text), none)).nbytes >> 2

        return ExactCounter(self.name, encoding, count, releases_gil=True)


def _load_extension(package: str, module: str) -> Any:
    """``package.module``, a compiled module, loaded without running the package's
    ``__init__`` (and registered under its name, so a later ``import package`` finds it);
    None when the package or the module is not installed."""
    import importlib.machinery
    import importlib.util
    import sys

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    full = f"{package}.{module}"
    for loc in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(loc, module + suffix)
            if os.path.isfile(path):
                ext = importlib.util.spec_from_file_location(full, path)
                if ext is None or ext.loader is None:
                    return None
                mod = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(mod)
                sys.modules[full] = mod
                return mod
    return None


EXACT_BACKENDS.register(_BpeOpenAI())
EXACT_BACKENDS.register(_Tiktoken())


def exact_backend(name: str | None = None) -> ExactBackend:
    """The backend called ``name``, else the one ``CTXTOOL_TOKENS_BACKEND`` names, else the
    first registered one installed (bpe-openai when its extra is installed, else tiktoken)."""
    name = name or os.environ.get(BACKEND_ENV) or None
    if name is None:
        return next(b for b in EXACT_BACKENDS.values() if b.available())
    if name not in EXACT_BACKENDS:
        raise CtxtoolError(f"{BACKEND_ENV}: {EXACT_BACKENDS.unknown(name).message}", kind=Failure.USAGE)
    return EXACT_BACKENDS.get(name)


_lock = threading.Lock()
_counters: dict[tuple[str, str], ExactCounter] = {}


def exact_counter(encoding: str, backend: str | None = None) -> ExactCounter:
    """The exact counter of an official encoding (see :func:`exact_backend`), loaded once per
    process: a runner operation loads it in ``prepare``, before its worker processes fork,
    and they share it."""
    if encoding not in OFFICIAL_BPE:
        raise CtxtoolError(f"unknown tokenizer {encoding!r}; choose one of: {', '.join(TOKENIZERS)}", kind=Failure.USAGE)
    b = exact_backend(backend)
    key = (b.name, encoding)
    with _lock:
        c = _counters.get(key)
    if c is None:
        c = b.load(encoding)
        with _lock:
            c = _counters.setdefault(key, c)
    return c
