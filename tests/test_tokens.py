"""Token counting: heuristic, exact tiktoken offline, registry, usage-aware estimate."""

from __future__ import annotations

import hashlib
import inspect
import math

import pytest

from ctxtool.model import Block, Message, Usage
from ctxtool.tokens import count as tokens
from ctxtool.tokens import models as registry
from ctxtool.tokens.bpe import OFFICIAL_BPE, _mergeable_ranks, bpe_cache_dir, install_bpe_files, load_encoding
from ctxtool.tokens.heuristic import IMAGE_TOKENS


def test_heuristic_is_ceil_chars_over_4() -> None:
    tok = tokens.get_tokenizer("heuristic")
    for s in ["", "a", "abcd", "abcde", "x" * 4001]:
        assert tok.count(s) == math.ceil(len(s) / 4)


def test_official_hashes_match_tiktoken_constants() -> None:
    from tiktoken_ext import openai_public

    src = inspect.getsource(openai_public)
    for url, sha in OFFICIAL_BPE.values():
        assert url in src and sha in src


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_bpe_files_installed_offline_and_verified(name: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    d = install_bpe_files([name])
    url, sha = OFFICIAL_BPE[name]
    f = d / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(f.read_bytes()).hexdigest() == sha
    assert (d.stat().st_mode & 0o777) == 0o700


def test_corrupted_cache_file_is_replaced(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path))
    d = install_bpe_files(["cl100k_base"])
    url, sha = OFFICIAL_BPE["cl100k_base"]
    f = d / hashlib.sha1(url.encode()).hexdigest()
    f.write_bytes(b"garbage")
    install_bpe_files(["cl100k_base"])
    assert hashlib.sha256(f.read_bytes()).hexdigest() == sha


def test_exact_counts_known_values() -> None:
    o200k = tokens.get_tokenizer("o200k_base")
    cl100k = tokens.get_tokenizer("cl100k_base")
    assert o200k.count("hello world") == 2
    assert cl100k.count("hello world") == 2
    texts = ["The quick brown fox jumps over the lazy dog."] * 20
    assert o200k.count_many(texts) == [o200k.count(texts[0])] * 20


def test_count_messages_covers_every_block_kind() -> None:
    m = Message(
        "assistant",
        [
            Block("text", text="abcd" * 10),
            Block("thinking", text="efgh" * 5),
            Block("tool_call", id="c1", name="read", arguments={"path": "a.py"}),
            Block("image", data={"url": "x"}),
        ],
    )
    heur = tokens.count_messages([m], tokens.get_tokenizer("heuristic"))[0]
    chars = 40 + 20 + len("read") + len('{"path":"a.py"}')
    assert heur == math.ceil(chars / 4) + IMAGE_TOKENS
    exact = tokens.count_messages([m], tokens.get_tokenizer("o200k_base"))[0]
    assert exact > IMAGE_TOKENS


def test_usage_aware_estimate_uses_last_usage_plus_trailing() -> None:
    msgs = [
        Message("user", [Block("text", text="x" * 400)]),
        Message("assistant", [Block("text", text="y" * 40)], usage=Usage(input=1000, output=50, cache_read=200)),
        Message("user", [Block("text", text="z" * 80)]),
    ]
    est = tokens.estimate_context(msgs)
    assert est.source == "usage"
    assert est.usage_tokens == 1250
    assert est.trailing_tokens == 20
    assert est.tokens == 1270
    # without usage: full heuristic over visible messages
    for m in msgs:
        m.usage = None
    est = tokens.estimate_context(msgs)
    assert est.source == "estimate" and est.tokens == 100 + 10 + 20


def test_hidden_messages_are_not_counted() -> None:
    from ctxtool.model import Metadata

    msgs = [Message("user", [Block("text", text="x" * 400)], metadata=Metadata(agent_visible=False))]
    assert tokens.estimate_context(msgs).tokens == 0


def test_registry_lookup_and_user_override(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert registry.lookup("gpt-4o").context_window == 128000  # type: ignore[union-attr]
    # dated snapshots resolve to their family only when listed as an alias
    assert registry.lookup("claude-3-7-sonnet-20250219").name == "claude-3-7-sonnet"  # type: ignore[union-attr]
    assert registry.lookup("anthropic/claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"  # type: ignore[union-attr]
    assert registry.lookup("claude-opus-4-6-20260101") is None
    assert registry.lookup("gpt-4-o") is None and registry.lookup("gpt-4oo") is None
    assert registry.lookup("no-such-model") is None
    f = tmp_path / "models.json"
    f.write_text('{"models": {"my-model": {"context_window": 4096, "encoding": "cl100k_base"}, "gpt-4o": {"context_window": 1000}}}')
    monkeypatch.setenv("CTXTOOL_MODELS", str(f))
    assert registry.lookup("my-model").context_window == 4096  # type: ignore[union-attr]
    assert registry.lookup("gpt-4o").context_window == 1000  # type: ignore[union-attr]


def test_registry_entries_made_on_lookup_are_those_made_at_once(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A lookup makes only the entry it asks for (start-up): every entry, made so, is the one
    made from its fields directly, and every name answers with its entry; a bad entry of the
    user's file is an error on any lookup, as when every entry was made as the file was read."""
    from ctxtool.errors import CtxtoolError, Failure

    f = tmp_path / "models.json"
    f.write_text('{"models": {"my-model": {"context_window": 4096, "aliases": ["mine"]}, "gpt-4o": {"context_window": 1000}}}')
    monkeypatch.setenv("CTXTOOL_MODELS", str(f))
    reg = registry._load(str(f))
    assert set(reg._made) == {"my-model", "gpt-4o"}  # the user's entries only, as the file is read
    assert registry.lookup("mine") == registry._entry("my-model", reg.specs["my-model"])
    everything = registry.models()
    assert list(everything) == list(reg.specs)
    for name, info in everything.items():
        assert info == registry._entry(name, reg.specs[name])
        assert all(registry.lookup(a) == everything[registry._names(str(f))[a]] for a in (name, *info.aliases))
    bad = tmp_path / "bad.json"
    bad.write_text('{"models": {"broken": {"context_window": "wide"}}}')
    monkeypatch.setenv("CTXTOOL_MODELS", str(bad))
    with pytest.raises(CtxtoolError, match="model registry: broken") as e:
        registry.lookup("gpt-4o")
    assert e.value.kind == Failure.INPUT and e.value.path == str(bad)


def test_require_suggests_the_closest_names() -> None:
    import pytest

    from ctxtool.errors import CtxtoolError, Failure


    for bad in ("gpt-4-o", "gpt-4oo"):
        with pytest.raises(CtxtoolError) as e:
            registry.require(bad)
        assert e.value.kind == Failure.USAGE
        assert "gpt-4o" in str(e.value) and "did you mean" in str(e.value)
    assert registry.require("claude-3-7-sonnet-20250219").context_window == 200_000


def test_encoding_from_the_marshal_copy_is_tiktokens_own(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    import tiktoken

    enc = load_encoding("o200k_base")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(bpe_cache_dir()))
    ref = tiktoken.get_encoding("o200k_base")
    assert (enc.name, enc._pat_str, enc._special_tokens) == (ref.name, ref._pat_str, ref._special_tokens)
    assert enc._mergeable_ranks == ref._mergeable_ranks
    text = "def f(x):\n    return x  # <|endoftext|> héllo 🙂"
    assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
    # a copy that is missing, cut short or not a table is rebuilt from the verified BPE file
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path))
    d = install_bpe_files(["cl100k_base"])
    first = _mergeable_ranks("cl100k_base", d)
    (copy,) = d.glob("cl100k_base-*.ranks")
    assert oct(os.stat(copy).st_mode & 0o777) == "0o600"
    for bad in (copy.read_bytes()[:1000], b"", b"\xe9not marshal"):
        copy.write_bytes(bad)
        assert _mergeable_ranks("cl100k_base", d) == first
    assert _mergeable_ranks("cl100k_base", d) == first
