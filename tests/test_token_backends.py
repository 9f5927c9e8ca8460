"""Exact token counting backends (ctxtool.tokens.backends.EXACT_BACKENDS): every installed backend
(tiktoken's own counter included) gives tiktoken's counts (``len(encode_ordinary(text))``) for o200k_base and cl100k_base, on
generated text and on every text of every sample and corpus file; the choice follows
CTXTOOL_TOKENS_BACKEND; stats figures do not depend on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import all_transcript_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool import formats
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.formats.base import ErrorPolicy
from ctxtool.stats.files import stats_files
from ctxtool.tokens import backends as token_backends
from ctxtool.tokens import count as tokens
from ctxtool.tokens.bpe import load_encoding

ENCODINGS = ("o200k_base", "cl100k_base")
INSTALLED = [name for name, b in token_backends.EXACT_BACKENDS.items() if b.available()]
OTHERS = [name for name in INSTALLED if name != "tiktoken"]


def reference(encoding: str, text: str) -> int:
    return len(load_encoding(encoding).encode_ordinary(text))


def test_the_backends_are_registered_and_tiktoken_is_always_there() -> None:
    assert token_backends.EXACT_BACKENDS.names()[-1] == "tiktoken" and "tiktoken" in INSTALLED
    assert "bpe-openai" in token_backends.EXACT_BACKENDS


# pieces where pre-tokenizers and BPE implementations part ways: whitespace runs before a
# word or at the end, \r\n, digits in threes, contractions in any case, letters with marks,
# titlecase and modifier letters, CJK, emoji with joiners and modifiers, lone surrogates,
# special-token text (ordinary text to encode_ordinary), long repeats of one character
PIECES = [
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", " \n", "\u00a0", "\u2028", "\u0085", "\u3000", "\x0b", "\x0c",
    "0", "7", "12", "123", "1234", "٣", "½", "²", "Ⅻ", "'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d",
    "’s", "'", "!", "?", ".", "/", "//", "\\", "-", "_", "#", "a", "Z", "é", "É", "e\u0301", "ß", "ǅ", "ʰ", "İ", "ı", "ﬁ",
    "中", "文字", "日本語", "한국어", "ا", "עברית", "ї", "Ω", "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "\U000e0001",
    "\U0010ffff", "\ud800", "\udfff", "\x00", "\x7f", "\u00ad", "\u200b", "\ufeff", "<|endoftext|>", "<|endofprompt|>",
    "the", "The", "THE", "tHe", "don't", "DON'T", "I'M", "hello", "World", "def f(x):\n    return x\n", '{"a": [1, 2]}',
]
PIECE = st.sampled_from(PIECES)
REPEAT = st.builds(lambda p, n: p * n, st.sampled_from(PIECES), st.integers(1, 300))
ANY_CHAR = st.characters(codec=None, exclude_categories=())  # every code point, lone surrogates included
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.lists(PIECE | REPEAT | SURROGATE | st.text(ANY_CHAR, max_size=8), max_size=30).map("".join) | st.text(ANY_CHAR)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_every_backend_counts_what_tiktoken_counts(text: str) -> None:
    for encoding in ENCODINGS:
        want = reference(encoding, text)
        for name in INSTALLED:
            assert token_backends.exact_counter(encoding, name).count(text) == want, (name, encoding)


def test_long_texts_and_edges() -> None:
    texts = ["", "a" * 200_000, " " * 100_001 + "x", "\n" * 50_000, "1" * 99_999, "😀" * 30_000, "\ud83d" * 10,
             "word " * 40_000, "<|endoftext|>" * 1000]
    for encoding in ENCODINGS:
        for name in INSTALLED:
            c = token_backends.exact_counter(encoding, name)
            assert [c.count(t) for t in texts] == [reference(encoding, t) for t in texts], (name, encoding)


def all_texts(path: Path) -> list[str]:
    out: list[str] = []
    for t in formats.read(str(path), policy=ErrorPolicy("skip")):
        for m in t.messages:
            out.extend(tokens.message_texts(m)[0])
    return out


@pytest.mark.parametrize("path", all_transcript_params())
def test_every_backend_agrees_on_every_text_of_every_file(path: Path) -> None:
    texts = all_texts(path)
    for encoding in ENCODINGS:
        want = [reference(encoding, t) for t in texts]
        for name in INSTALLED:
            c = token_backends.exact_counter(encoding, name).count
            assert [c(t) for t in texts] == want, (name, encoding)


def test_the_environment_picks_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(token_backends.BACKEND_ENV, "tiktoken")
    assert token_backends.exact_backend().name == "tiktoken"
    tok = tokens.get_tokenizer("o200k_base")
    assert isinstance(tok, tokens.TiktokenTokenizer) and tok.counter.backend == "tiktoken"
    monkeypatch.setenv(token_backends.BACKEND_ENV, "no-such-backend")
    with pytest.raises(CtxtoolError) as e:
        token_backends.exact_counter("o200k_base")
    assert e.value.kind == Failure.USAGE and "tiktoken" in str(e.value)
    monkeypatch.delenv(token_backends.BACKEND_ENV)
    assert token_backends.exact_backend().name == INSTALLED[0]  # the first one installed


def test_a_missing_backend_is_a_usage_error() -> None:
    b = token_backends._BpeOpenAI()
    b._module = False  # as when the package is not installed
    assert not b.available()
    with pytest.raises(CtxtoolError) as e:
        b.load("o200k_base")
    assert e.value.kind == Failure.USAGE and "fast-tokens" in str(e.value)
    assert token_backends._load_extension("ctxtool", "no_such_module") is None
    assert token_backends._load_extension("no_such_package_xyz", "_bindings") is None


@pytest.mark.skipif("bpe-openai" not in INSTALLED, reason="bpe-openai not installed")
def test_the_package_still_imports_after_its_module_was_loaded_alone() -> None:
    code = (
        "from ctxtool.tokens import backends as token_backends; n = token_backends.exact_counter('o200k_base', 'bpe-openai').count('hello world'); "
        "import bpe_openai; print(n, len(bpe_openai.get_encoding('o200k_base').encode('hello world')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "2"]


def test_import_ctxtool_loads_no_backend() -> None:
    code = "import sys, ctxtool.tokens.count, ctxtool.tokens.backends; print([m for m in sys.modules if m.startswith(('bpe_openai', 'tiktoken'))])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(not OTHERS, reason="no exact backend besides tiktoken installed")
def test_stats_figures_do_not_depend_on_the_backend(tmp_path: Path) -> None:
    records = [
        {"id": f"r{i}", "messages": [{"role": "user", "content": f"task {i} " + "héllo 😀 " * i},
                                     {"role": "assistant", "content": "  done\r\n" * (i % 5) + "don'T 12345"}]}
        for i in range(60)
    ]
    p = tmp_path / "ds.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    env = dict(os.environ)
    runs = {}
    for name in ("tiktoken", *OTHERS):
        env[token_backends.BACKEND_ENV] = name
        for jobs in ("1", "2"):
            out = subprocess.run([sys.executable, "-m", "ctxtool", "stats", "--json", "--tokenizer", "cl100k_base",
                                  "--jobs", jobs, str(p)], capture_output=True, text=True, env=env, check=True)
            runs[name, jobs] = out.stdout
    assert len(set(runs.values())) == 1
    assert stats_files([str(p)], tokenizer="o200k_base").to_json()["totals"]["tokens"] > 0


def test_long_texts_are_counted_once() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text.split())

    c = token_backends.ExactCounter("words", "o200k_base", count, releases_gil=False)
    prompt = "You are a careful agent. " * 10
    assert [c.count(prompt) for _ in range(5)] == [50] * 5 and seen == [prompt]
    assert [c.count("ab") for _ in range(3)] == [1] * 3 and len(seen) == 4  # short: counted each time
    big = "x " * (c.MEMO_CHARS // 2 + 1)
    c.count(big), c.count(big + " ")  # past the limit: what was remembered is forgotten
    c.count(prompt)
    assert seen.count(prompt) == 2
    # a real counter gives the same counts remembered or not
    real = token_backends.exact_counter("o200k_base")
    assert real.count(prompt) == real.count(prompt) == reference("o200k_base", prompt)
