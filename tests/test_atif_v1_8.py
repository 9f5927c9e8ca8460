"""ATIF v1.8 (audio content parts) and ATIF written for harbor-style readers.

The v1.8 file (``tests/data/atif/trajectory_v1_8_audio.json``, provenance in
``tests/data/PROVENANCE.md``) is built to the published v1.8 model. The documents ctxtool
writes are checked against an independent model of the specification: the ``atif`` package
(Pydantic models of ATIF v1.8, strict like harbor's: unknown fields rejected, step ids
sequential from 1, results matching their step's calls), skipped cleanly where it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, corpus_file
from test_stores_newer import ctx

from ctxtool import formats
from ctxtool.errors import CtxtoolError

V18 = Path(__file__).parent / "data" / "atif" / "trajectory_v1_8_audio.json"
ATIF = SAMPLES / "atif_trajectory.json"


def harbor_errors(path: Path) -> list[str]:
    """What the independent ATIF v1.8 model rejects in a document (empty: valid)."""
    atif = pytest.importorskip("atif")
    try:
        atif.Trajectory.model_validate(json.loads(path.read_text()))
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        return str(e).splitlines()
    return []


def test_v1_8_file_is_valid_v1_8_and_not_v1_7() -> None:
    """The test file holds what v1.8 added: its model accepts it, and its audio parts are
    the difference (with them made text parts, the file is plain v1.7 content)."""
    assert harbor_errors(V18) == []
    doc = json.loads(V18.read_text())
    assert doc["schema_version"] == "ATIF-v1.8"
    parts = [p for s in doc["steps"] for c in [s.get("message")] + [r.get("content") for r in
             (s.get("observation") or {}).get("results", [])] if isinstance(c, list) for p in c]
    assert sorted(p["type"] for p in parts) == ["audio", "audio", "text", "text"]


def test_v1_8_audio_parts_read_as_named_text() -> None:
    """An audio part (a file beside the trajectory) reads as one line naming it, in a step's
    message and in an observation result; the rest of the trajectory reads as before."""
    (t,) = list(formats.read(V18))
    assert t.id == "run-2026-05-20-voice"
    user = [m for m in t.messages if m.role == "user"][0]
    assert [b.text for b in user.content] == ["File the task in this voice note.",
                                              "[audio audio/wav, 7.5 s: audio/note-0001.wav]"]
    tool = [m for m in t.messages if m.role == "tool"][1]
    assert tool.content[0].text == "spoken\n[audio audio/mpeg: audio/reply-0001.mp3]"
    assert [m.role for m in t.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sum(m.usage.input + m.usage.cache_read for m in t.messages if m.usage) == 909


def test_v1_8_round_trip_and_edits_keep_audio(tmp_path: Path) -> None:
    """Identity convert and convert through ctxtool's own format give the same bytes; window
    keeps the audio parts as they came, the version the input had and sequential ids; the
    result is still valid v1.8."""
    same, canon, back, win = (tmp_path / n for n in ("same.json", "c.jsonl", "back.json", "w.json"))
    ctx(tmp_path, "convert", str(V18), "--to", "atif", "-o", str(same))
    assert same.read_bytes() == V18.read_bytes()
    ctx(tmp_path, "convert", str(V18), "--to", "ctxtool", "-o", str(canon))
    ctx(tmp_path, "convert", str(canon), "--to", "atif", "-o", str(back))
    assert back.read_bytes() == V18.read_bytes()
    ctx(tmp_path, "window", str(V18), "--max-messages", "4", "-o", str(win))
    out = json.loads(win.read_text())
    assert out["schema_version"] == "ATIF-v1.8"
    assert [s["step_id"] for s in out["steps"]] == list(range(1, len(out["steps"]) + 1))
    src = json.loads(V18.read_text())
    assert out["steps"][1]["message"] == src["steps"][1]["message"]  # the first user step, kept
    assert out["steps"][-2]["observation"] == src["steps"][3]["observation"]
    assert harbor_errors(win) == []


def test_v1_8_audio_to_other_formats_and_back(tmp_path: Path) -> None:
    """Another format gets the line naming the audio file; made from ctxtool's own format,
    a document holding an audio part is tagged v1.8 (one without, v1.6)."""
    oa = tmp_path / "o.json"
    ctx(tmp_path, "convert", str(V18), "--to", "openai", "-o", str(oa))
    assert "[audio audio/wav, 7.5 s: audio/note-0001.wav]" in oa.read_text()
    canon = tmp_path / "c.jsonl"
    ctx(tmp_path, "convert", str(V18), "--to", "ctxtool", "-o", str(canon))
    rows = [json.loads(x) for x in canon.read_text().splitlines()]
    for r in rows:  # as if written by another tool: no source format to go back to
        r.get("extra", {}).pop("source_format", None)
    canon.write_text("".join(json.dumps(r) + "\n" for r in rows))
    made = tmp_path / "made.json"
    ctx(tmp_path, "convert", str(canon), "--to", "atif", "-o", str(made))
    doc = json.loads(made.read_text())
    assert doc["schema_version"] == "ATIF-v1.8"
    assert doc["steps"][1]["message"][1]["type"] == "audio"
    assert harbor_errors(made) == []
    plain = tmp_path / "plain.json"
    ctx(tmp_path, "convert", str(oa), "--to", "atif", "-o", str(plain))
    assert json.loads(plain.read_text())["schema_version"] == "ATIF-v1.6"


@pytest.mark.parametrize("bad", [{"type": "audio"}, {"type": "audio", "source": {"path": "a.wav"}},
                                 {"type": "audio", "source": {"media_type": "audio/wav", "path": 3}}])
def test_v1_8_audio_part_without_source_is_an_error(tmp_path: Path, bad: dict[str, Any]) -> None:
    """An audio part without a source naming its media type and path is an error naming the
    step (harbor's model rejects the document); ``validate`` reports it as a problem."""
    doc = json.loads(V18.read_text())
    doc["steps"][1]["message"][1] = bad
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(doc, indent=2) + "\n")
    with pytest.raises(CtxtoolError, match="step 1: audio content part needs a 'source' with 'media_type' and 'path'"):
        list(formats.read(src))
    r = ctx(tmp_path, "validate", str(src), "--json", ok=False)
    problems = json.loads(r.stdout)["problems"]
    assert [p["code"] for p in problems] == ["unreadable"] and "audio content part" in problems[0]["message"]


def test_atif_drift_counted_and_kept(tmp_path: Path) -> None:
    """A version newer than v1.8, a part type no version defines and step fields outside the
    v1.8 model are counted in stats (``--json`` too) and ``formats FILE``, warned about on
    one line, and kept: an identity convert gives the same bytes."""
    doc = json.loads(V18.read_text())
    doc["schema_version"] = "ATIF-v1.9"
    doc["steps"][1]["message"].append({"type": "video", "source": {"media_type": "video/mp4", "path": "v.mp4"}})
    doc["steps"][2]["confidence"] = 0.9
    doc["steps"][3]["confidence"] = 0.8
    src = tmp_path / "drift.json"
    src.write_text(json.dumps(doc, indent=2) + "\n")
    r = ctx(tmp_path, "stats", str(src), "--json")
    assert json.loads(r.stdout)["totals"]["unknown_types"] == {
        "step field confidence": 2, "schema_version ATIF-v1.9 (newer than ATIF-v1.8)": 1, "content part video": 1}
    warn = [x for x in r.stderr.decode().splitlines() if "does not know" in x]
    assert len(warn) == 1 and "step field confidence ×2" in warn[0] and "content part video ×1" in warn[0]
    survey = ctx(tmp_path, "formats", str(src)).stdout.decode()
    assert "step field confidence" in survey and "unknown field or part, kept verbatim" in survey
    same = tmp_path / "same.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(same))
    assert same.read_bytes() == src.read_bytes()
    quiet = ctx(tmp_path, "stats", str(V18), "--json")
    assert json.loads(quiet.stdout)["totals"]["unknown_types"] == {} and b"does not know" not in quiet.stderr


@pytest.mark.parametrize("name", ["openai_chat.json", "openai_dataset.jsonl", "pi_session.jsonl", "codex_rollout.jsonl",
                                  "claude_code_session.jsonl", "gemini_session.json", "responses_items.jsonl",
                                  "sharegpt_dataset.json"])
def test_conversion_to_atif_is_valid_atif(tmp_path: Path, name: str) -> None:
    """Converted to ATIF, a transcript of another format is a document harbor-style readers
    take: a schema version and an agent (never the other format's record), tool arguments
    as objects (OpenAI's JSON text parsed), ctxtool's metadata in ``extra``, every embedded
    trajectory with a ``trajectory_id``, and each result in the step of its call (parallel
    calls written as one message each, Responses items and ShareGPT turns, are one step)."""
    out = tmp_path / "out.json"
    ctx(tmp_path, "convert", str(SAMPLES / name), "--to", "atif", "-o", str(out))
    assert harbor_errors(out) == []
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "ATIF-v1.6" and "messages" not in doc
    n_calls = sum(len(s.get("tool_calls") or []) for t in [doc, *doc.get("subagent_trajectories", [])] for s in t["steps"])
    assert n_calls == sum(1 for t in formats.read(SAMPLES / name) for m in t.messages for b in m.content
                          if b.type == "tool_call")


def test_sharegpt_parallel_calls_paired_in_one_step(tmp_path: Path) -> None:
    """ShareGPT's two ``function_call`` turns and their two observations: one step, each
    result answering its own call (not the second call answering the first's result)."""
    out = tmp_path / "out.json"
    ctx(tmp_path, "convert", str(SAMPLES / "sharegpt_dataset.json"), "--to", "atif", "-o", str(out))
    sub = json.loads(out.read_text())["subagent_trajectories"][0]
    (step,) = [s for s in sub["steps"] if s.get("tool_calls")]
    calls = {c["tool_call_id"]: c["function_name"] for c in step["tool_calls"]}
    got = {calls[r["source_call_id"]]: r["content"] for r in step["observation"]["results"]}
    assert got == {"convert_currency": '{"converted_amount": 40125.5, "currency": "JPY"}',
                   "get_exchange_rate": '{"rate": 1.0842}'}


def test_anthropic_images_through_atif(tmp_path: Path) -> None:
    """An inline image becomes an ATIF image part (media type, a data URL as its path) and
    comes back to Anthropic as the block it was; a document rides in an image part and
    comes back too; ATIF to ATIF is byte-exact."""
    src = SAMPLES / "anthropic_request.json"
    at, back, again = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(at))
    parts = json.loads(at.read_text())["steps"][1]["message"]
    img = next(p for p in parts if p["type"] == "image" and "path" in p["source"])
    assert img["source"]["media_type"] == "image/png" and img["source"]["path"].startswith("data:image/png;base64,")
    ctx(tmp_path, "convert", str(at), "--to", "anthropic", "-o", str(back))
    assert json.loads(back.read_text())["messages"][0] == json.loads(src.read_text())["messages"][0]
    ctx(tmp_path, "convert", str(at), "--to", "atif", "-o", str(again))
    assert again.read_bytes() == at.read_bytes()


@pytest.mark.parametrize("where", [("claude_code", "spotter_ae4a77f8_main.jsonl"),
                                   ("codex", "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl"),
                                   ("codex", "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl")])
def test_real_sessions_to_valid_atif(tmp_path: Path, where: tuple[str, str]) -> None:
    """Real sessions: Claude Code answering two parallel calls after the next reply's call
    (the late result goes to its call's step), a Codex web search (a call without an id:
    one is made), a Codex image (a URL as the image part's path)."""
    src = corpus_file(*where)
    out = tmp_path / "out.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(out))
    assert harbor_errors(out) == []


def test_atif_edits_are_valid_atif_and_restore(tmp_path: Path) -> None:
    """truncate puts its output references in a result's ``extra`` (harbor's models allow
    no field of ctxtool's own); the truncated document is valid and restores byte-exact."""
    tr, back = tmp_path / "t.json", tmp_path / "r.json"
    ctx(tmp_path, "truncate", str(ATIF), "--max-lines", "3", "-o", str(tr))
    assert harbor_errors(tr) == []
    assert '"output_ref"' in tr.read_text()
    ctx(tmp_path, "restore", str(tr), "-o", str(back))
    assert back.read_bytes() == ATIF.read_bytes()
    win = tmp_path / "w.json"
    ctx(tmp_path, "window", str(ATIF), "--max-messages", "4", "-o", str(win))
    assert harbor_errors(win) == []
