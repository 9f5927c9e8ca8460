"""Shared test fixtures: the shared corpus (skipped when absent) and the project's samples."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed set of examples (HYPOTHESIS_PROFILE=ci, set by
# .ci/run), so a run is reproducible; elsewhere hypothesis explores new examples each run.
# No test is timed (speed lives in `make bench`): hypothesis's per-example deadline is off in
# every profile, so a loaded machine cannot fail a property test.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "dev")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CORPUS = ROOT.parent / "shared" / "corpus"

# corpus directory -> the format ctxtool should detect for its files
CORPUS_FORMATS = {
    "claude_code": "claude-code",
    "codex": "codex",
    "openai_chat": "openai",
    "messages_jsonl": "openai",
    "pi": "pi",
    "sharegpt": "sharegpt",
    "trajectories/inspect_ai": "inspect",
    "trajectories/swe-agent": "swe-agent",
    "trajectories/mini-swe-agent": "mini-swe-agent",
    "trajectories/openhands": "openhands",
}


def corpus_file(*parts: str) -> Path:
    """One file of the shared corpus, or a clean skip where the corpus is not present."""
    p = CORPUS.joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"../shared/corpus/{'/'.join(parts)} not present")
    return p


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for d in CORPUS_FORMATS for p in (CORPUS / d).glob("*") if p.is_file())


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.glob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))


def expected_format(p: Path) -> str:
    for d in (p.parent.name, f"{p.parent.parent.name}/{p.parent.name}"):
        if d in CORPUS_FORMATS:
            return CORPUS_FORMATS[d]
    # samples are named <format>_*.json(l)
    stem = p.name.split("_")[0].replace("claude", "claude-code").replace("canonical", "ctxtool")
    return stem


def corpus_params() -> list:  # type: ignore[type-arg]
    files = corpus_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/corpus not present"))]
    return [pytest.param(p, id=str(p.relative_to(CORPUS))) for p in files]


def real_files() -> list[Path]:
    """Small real files from public repositories, kept in the project (tests/data/real, named
    ``<format>_*``; provenance in tests/data/PROVENANCE.md)."""
    return sorted(p for p in (ROOT / "tests" / "data" / "real").glob("*") if p.suffix in (".json", ".jsonl"))


def all_transcript_params() -> list:  # type: ignore[type-arg]
    """Every sample, real file and corpus file."""
    params = [pytest.param(p, id=f"samples/{p.name}") for p in sample_files()]
    params += [pytest.param(p, id=f"data/real/{p.name}") for p in real_files()]
    return params + [p for p in corpus_params() if p.values[0] is not None]


def write_bytes(transcripts, fmt=None) -> bytes:  # type: ignore[no-untyped-def]
    from ctxtool import formats

    buf = io.BytesIO()
    formats.write(transcripts, buf, fmt)
    return buf.getvalue()


def json_items(data: bytes, layout_hint: str) -> list:  # type: ignore[type-arg]
    """Parse written output as a list of JSON values (JSONL lines, or one document)."""
    import json

    if layout_hint == "jsonl":
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    return [json.loads(data)]


def source_items(p: Path) -> tuple[list, str]:  # type: ignore[type-arg]
    import json

    raw = p.read_bytes()
    try:
        return [json.loads(raw)], "json"
    except ValueError:
        return [json.loads(line) for line in raw.splitlines() if line.strip()], "jsonl"


# The real-model tests (`make test-llm`) are collected only with CTXTOOL_TEST_LLM=1.
collect_ignore_glob = [] if __import__("os").environ.get("CTXTOOL_TEST_LLM") == "1" else ["llm/*"]
