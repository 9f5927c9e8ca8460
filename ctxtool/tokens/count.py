"""Token counting: the ceil(chars / 4) heuristic, exact tiktoken encodings (offline, :mod:`ctxtool.tokens.bpe`),
and the usage-aware context estimate."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

from ..model import Message
from ..registry import LazyEntry, Registry
from .bpe import OFFICIAL_BPE, load_encoding
from .heuristic import estimate

#: a message's recorded usage (None: none recorded)
USAGE = attrgetter("usage")

if TYPE_CHECKING:
    from .backends import ExactCounter

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


@functools.cache
def _cpus() -> int:
    """The cores of this machine, asked once (``os.cpu_count`` reads /sys each time, ~6 µs:
    a tokenizer is made per task, one per record with ``records.process``)."""
    return os.cpu_count() or 1


class TiktokenTokenizer:
    """An official tiktoken encoding, loaded offline on first use. It counts with the fastest
    exact backend installed (:func:`ctxtool.tokens.backends.exact_counter`: the same counts as
    tiktoken's ``encode_ordinary``); :attr:`encoding` is tiktoken's own, for token ids."""

    def __init__(self, name: str, threads: int | None = None) -> None:
        self.name = name
        self.threads = threads or _cpus()
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
            # lazy: start-up (`ctxtool --help` would load ctxtool.tokens.backends)
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


#: every name ``--tokenizer`` takes, each with what builds it: the tokenizers, and the estimate
#: calibrated to recorded usage (:mod:`ctxtool.calibration`, built on the counting here: imported when named)
ESTIMATORS: Registry[Callable[[], Tokenizer]] = Registry("tokenizer", fold=str.lower)
ESTIMATORS.register(HeuristicTokenizer, "heuristic")
for _encoding in OFFICIAL_BPE:
    ESTIMATORS.register(partial(TiktokenTokenizer, _encoding), _encoding)
ESTIMATORS.register(LazyEntry("ctxtool.calibration.accuracy:CalibratedTokenizer"), "calibrated")


def model_and_tokenizer(model: str | None, tokenizer: str | None) -> tuple[Any, str]:
    """The model registry's entry for ``model`` (None without one) and the tokenizer to use:
    ``tokenizer`` if given, else the encoding the model implies, else the heuristic. The model
    name is strict: an unknown one is a usage error naming the closest registered names."""
    info = None
    if model:
        # lazy: start-up (the model registry and its tables load only when a model is named)
        from .models import require

        info = require(model)
    return info, tokenizer or (info.encoding if info is not None else None) or "heuristic"


def get_tokenizer(name: str | None = "heuristic") -> Tokenizer:
    return ESTIMATORS.get(name or "heuristic")()


def for_transcript(tok: Tokenizer, t: Any) -> Tokenizer:
    """The tokenizer to count ``t`` with: a calibrated one fitted to ``t``'s recorded usage
    (:meth:`ctxtool.calibration.accuracy.CalibratedTokenizer.fitted`), any other as it is."""
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
    """The Go agent and pi-style compaction: last provider usage plus an estimate of what came after it."""

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
    return ContextEstimate(*context_tokens(msgs, tok, counts, indices, trust_from, extra_tokens))


def context_tokens(msgs: Sequence[Message], tok: Tokenizer | None = None, counts: Sequence[int] | None = None,
                   indices: Sequence[int] | None = None, trust_from: int = 0, extra_tokens: int = 0,
                   any_usage: bool | None = None) -> tuple[int, int, int, str]:
    """:func:`estimate_context`'s figures (tokens, usage tokens, trailing tokens, source), for a
    caller that puts them in a result of its own (``any_usage``: whether any of ``msgs``
    records usage, if the caller knows)."""
    tok = tok or HeuristicTokenizer()
    if indices is None:
        indices = [i for i, m in enumerate(msgs) if m.agent_visible]
    if counts is None:
        counts = count_messages(msgs, tok)
    last = None
    if any(map(USAGE, msgs)) if any_usage is None else any_usage:  # a Usage is always true: most datasets record none
        for i in reversed(indices):
            if i < trust_from:
                break
            m = msgs[i]
            if m.usage is not None and m.role == "assistant" and m.usage.total > 0:
                last = i
                break
    if last is None:
        # what the file does not hold (system prompt, tool schemas), when the tokenizer knows it
        # every message in the context (the usual case): all of them, summed at once
        in_context = sum(counts) if len(indices) == len(counts) else sum(counts[i] for i in indices)
        total = extra_tokens + in_context + int(getattr(tok, "overhead", 0))
        return total, 0, total, "estimate"
    usage_tokens = msgs[last].usage.total  # type: ignore[union-attr]
    # Claude Code splits one API message over several messages sharing a usage key.
    key = msgs[last].usage_key
    trailing = sum(counts[i] for i in indices if i > last and not (key is not None and msgs[i].usage_key == key))
    return usage_tokens + trailing, usage_tokens, trailing, "usage"
