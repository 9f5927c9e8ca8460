"""--agent-hint: truncate, trim and compact end each transcript with one short system note
naming the tools that read the cache, only when asked; restore takes it out again."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxtool import formats
from ctxtool.agent.tools import HINT, is_hint
from tests.conftest import SAMPLES, sample_files
from tests.io_pipes import run_ctxtool


def hints(p: Path) -> list[int]:
    """For each transcript of ``p``: how many notes it holds."""
    return [sum(1 for m in t.messages if is_hint(m)) for t in formats.read(p)]


@pytest.mark.parametrize("src", sample_files(), ids=lambda p: p.name)
def test_truncate_then_trim_with_the_hint_and_restore(tmp_path: Path, src: Path) -> None:
    cache = tmp_path / "cache"
    cut = tmp_path / f"cut{src.suffix}"
    trimmed = tmp_path / f"trimmed{src.suffix}"
    back = tmp_path / f"back{src.suffix}"
    plain = tmp_path / f"plain{src.suffix}"
    for args in (("truncate", str(src), "-o", str(cut), "--preset", "seed004", "--max-bytes", "300", "--agent-hint"),
                 ("trim", str(cut), "-o", str(trimmed), "--budget", "50", "--agent-hint"),
                 ("restore", str(trimmed), "-o", str(back)),
                 ("truncate", str(src), "-o", str(plain), "--preset", "seed004", "--max-bytes", "300")):
        r = run_ctxtool(*args, cache=cache)
        assert r.returncode == 0, r.stderr
    n = len(list(formats.read(src)))
    assert hints(cut) == [1] * n and hints(trimmed) == [1] * n  # once, however often asked
    assert hints(plain) == [0] * n  # only when asked
    assert back.read_bytes() == src.read_bytes()


def test_compact_with_the_hint(tmp_path: Path) -> None:
    src = SAMPLES / "claude_code_session.jsonl"
    out = tmp_path / "c.jsonl"
    r = run_ctxtool("compact", str(src), "-o", str(out), "--force", "--keep-recent-tokens", "500", "--agent-hint",
                    cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    t = next(formats.read(out))
    assert [m.text() for m in t.messages if is_hint(m)] == [HINT]
    assert is_hint(t.messages[-1])
    for tool in ("tool_output_cache(", "tool_output_cache_grep(", "transcript_search("):
        assert tool in HINT
