"""Issue 33: the stores and datasets people keep, read as they are.

Each defect the issue lists has a test here, on a real file where one with a licence exists
(tests/data/PROVENANCE.md) or on a file built to the format's published schema. The CLI runs
as a real process (``io_pipes.run_ctxtool``)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SAMPLES, corpus_file
from io_pipes import run_ctxtool

from ctxtool import formats
from ctxtool.formats.walk import iter_paths

DATA = ROOT / "tests" / "data"
EVAL_ARCHIVE = DATA / "inspect" / "log_message_deduplication.eval"
ATIF = SAMPLES / "atif_trajectory.json"
GEMINI_REAL = DATA / "real" / "gemini_m-gemini_session-2025-12-12T21-46-7c761c30.json"
OPENHANDS_OLD = DATA / "openhands" / "resolver_output_old.jsonl"
CLAUDE = SAMPLES / "claude_code_session.jsonl"


def ctx(tmp_path: Path, *args: str, ok: bool = True, env: dict[str, str] | None = None, **kw: Any) -> Any:
    if env is not None:  # run_ctxtool's environment with these changes
        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            return ctx(tmp_path, *args, ok=ok, **kw)
        finally:
            os.environ.clear()
            os.environ.update(old)
    r = run_ctxtool(*args, cache=tmp_path / "cache", **kw)
    if ok:
        assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")
    return r


def ctx_json(tmp_path: Path, *args: str, **kw: Any) -> Any:
    return json.loads(ctx(tmp_path, *args, "--json", **kw).stdout)


def lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


# -- Inspect ------------------------------------------------------------------------------------
def test_inspect_eval_archive_in_stats(tmp_path: Path) -> None:
    with zipfile.ZipFile(EVAL_ARCHIVE) as z:
        n = len(json.loads(z.read("samples/0_epoch_1.json"))["messages"])
    for extra in ((), ("--format", "inspect-eval")):
        r = ctx(tmp_path, "stats", str(EVAL_ARCHIVE), *extra)
        assert b"plain text" not in r.stdout and b"1 transcript" in r.stdout
        d = ctx_json(tmp_path, "stats", str(EVAL_ARCHIVE), *extra)
        assert d["totals"]["messages"] == n == 12


def _inspect_log(tmp_path: Path, sample_patch: Any, log_usage: Any = None) -> Path:
    """A JSON log of the real archive's sample, changed by ``sample_patch``."""
    with zipfile.ZipFile(EVAL_ARCHIVE) as z:
        header = json.loads(z.read("header.json"))
        sample = json.loads(z.read("samples/0_epoch_1.json"))
    sample_patch(sample)
    if log_usage is not None:
        header["stats"]["model_usage"] = log_usage
    p = tmp_path / "log.json"
    p.write_text(json.dumps({**header, "samples": [sample]}, indent=2))
    return p


def test_inspect_usage_per_model_call_and_per_sample(tmp_path: Path) -> None:
    # Inspect's ModelUsage (inspect_ai/model/_model_output.py): input_tokens, output_tokens,
    # total_tokens, input_tokens_cache_write, input_tokens_cache_read, reasoning_tokens
    calls = []

    def per_call(s: dict[str, Any]) -> None:
        s["model_usage"] = {}
        for k, ev in enumerate(e for e in s["events"] if e.get("event") == "model"):
            u = {"input_tokens": 100 + k, "output_tokens": 10, "total_tokens": 110 + k + 5 + 20,
                 "input_tokens_cache_write": 5, "input_tokens_cache_read": 20}
            ev["output"]["usage"] = u
            calls.append(u)

    d = ctx_json(tmp_path, "stats", str(_inspect_log(tmp_path, per_call)))
    u = d["totals"]["usage"]
    assert calls and u["api_messages"] == len(calls)
    assert (u["input"], u["output"], u["cache_creation"], u["cache_read"]) == (
        sum(c["input_tokens"] for c in calls), 10 * len(calls), 5 * len(calls), 20 * len(calls))
    assert u["total"] == sum(c["total_tokens"] for c in calls)

    def per_sample(s: dict[str, Any]) -> None:  # no model events: the sample's model_usage
        s["events"] = []
        s["model_usage"] = {"openai/gpt-4o": {"input_tokens": 700, "output_tokens": 50, "total_tokens": 750,
                                              "input_tokens_cache_read": 300}}

    u = ctx_json(tmp_path, "stats", str(_inspect_log(tmp_path, per_sample)))["totals"]["usage"]
    # OpenAI's provider counts the cache reads inside input_tokens (total = input + output)
    assert (u["input"], u["output"], u["cache_read"], u["total"]) == (400, 50, 300, 750)

    def none(s: dict[str, Any]) -> None:
        s["events"], s["model_usage"] = [], {}

    log_usage = {"anthropic/claude-x": {"input_tokens": 9, "output_tokens": 8, "total_tokens": 17}}
    u = ctx_json(tmp_path, "stats", str(_inspect_log(tmp_path, none, log_usage)))["totals"]["usage"]
    assert (u["input"], u["output"], u["api_messages"]) == (9, 8, 1)


def test_inspect_eval_to_json_keeps_inline_text_inline(tmp_path: Path) -> None:
    """A message whose text is also an attachment's, written inline in the archive, stays
    inline when converted (only what the source referred to goes back to a reference)."""
    with zipfile.ZipFile(EVAL_ARCHIVE) as z:
        names = {n: z.read(n) for n in z.namelist()}
    sample = json.loads(names["samples/0_epoch_1.json"])
    text = sample["messages"][0]["content"]
    assert isinstance(text, str)
    sample["attachments"]["0123456789abcdef0123456789abcdef"] = text  # the same text, as an attachment too
    names["samples/0_epoch_1.json"] = json.dumps(sample).encode()
    arch = tmp_path / "a.eval"
    with zipfile.ZipFile(arch, "w") as z:
        for n, b in names.items():
            z.writestr(n, b)
    out = tmp_path / "log.json"
    ctx(tmp_path, "truncate", str(arch), "--max-chars", "5", "--to", "inspect", "-o", str(out))
    log = json.loads(out.read_text())
    assert log["samples"][0]["messages"][0]["content"] == text
    assert "reductions" in log


# -- ATIF ---------------------------------------------------------------------------------------
def _sequential(doc: dict[str, Any]) -> bool:
    """harbor's Trajectory model: step ids sequential from 1, in every (sub)trajectory."""
    return all([s["step_id"] for s in tr["steps"]] == list(range(1, len(tr["steps"]) + 1))
               for tr in [doc, *(doc.get("subagent_trajectories") or [])])


def test_atif_window_and_cut_number_steps_from_one(tmp_path: Path) -> None:
    assert _sequential(json.loads(ATIF.read_text()))
    win, cut = tmp_path / "w.json", tmp_path / "c.json"
    ctx(tmp_path, "window", str(ATIF), "--max-messages", "4", "-o", str(win))
    d = json.loads(win.read_text())
    assert len(d["steps"]) < len(json.loads(ATIF.read_text())["steps"]) and _sequential(d)
    ctx(tmp_path, "cut", str(ATIF), "--keep-recent", "2", "-o", str(cut))
    assert _sequential(json.loads(cut.read_text()))


def _parse_error_doc() -> dict[str, Any]:
    """An ATIF document with an agent step whose observation answers no call: the notice a
    harness sends back when it could not parse the model's reply (ATIF RFC: "results from
    tool calls, non-tool actions"), and a later agent step."""
    doc = json.loads(ATIF.read_text())
    doc.pop("subagent_trajectories")
    steps = doc["steps"][:3]
    steps.append({"step_id": 4, "source": "agent", "message": "I will run: ls",
                  "observation": {"results": [{"content": "ERROR: no valid JSON found in your reply; answer with one JSON object."}]}})
    steps.append({"step_id": 5, "source": "agent", "message": "Done."})
    doc["steps"] = steps
    return doc


def test_atif_observation_without_a_call_is_kept(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text(json.dumps(_parse_error_doc(), indent=2) + "\n")
    notice = "ERROR: no valid JSON found"
    (t,) = formats.read(src)
    assert any(notice in m.text() for m in t.messages)
    d = ctx_json(tmp_path, "stats", str(src))
    assert d["totals"]["chars"] >= sum(len(m.text()) for m in t.messages) > 0
    # as it came (byte for byte), in conversion and in export
    same, oai, md = tmp_path / "same.json", tmp_path / "o.json", tmp_path / "e.md"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(same))
    assert same.read_bytes() == src.read_bytes()
    ctx(tmp_path, "convert", str(src), "--to", "openai", "-o", str(oai))
    assert notice in oai.read_text()
    ctx(tmp_path, "export", str(src), "-o", str(md))
    assert notice in md.read_text()
    # a changed step keeps its observation where it was
    (t,) = formats.read(src)
    step = next(m for m in t.messages if m.id == "4")
    step.content[0].text = "I will run: ls -la"
    step.touch()
    out = tmp_path / "changed.json"
    formats.write_path([t], out)
    want = _parse_error_doc()
    want["steps"][3]["message"] = "I will run: ls -la"
    assert json.loads(out.read_text()) == want


def test_atif_one_line_numeric_arrays_kept(tmp_path: Path) -> None:
    """harbor writes token ids and logprobs one array a line; an identity convert and a
    no-op repair write the document as it came."""
    doc = json.loads(ATIF.read_text())
    for s in doc["steps"]:
        if s["source"] == "agent":
            s.setdefault("metrics", {}).update(completion_token_ids=list(range(1000, 1300)), logprobs=[-0.5, -1e-05, 0.0])
    text = json.dumps(doc, indent=2)
    import re

    text = re.sub(r"\[\s*(-?[0-9][^\[\]{}\"]*?)\s*\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    src = tmp_path / "inline.json"
    src.write_text(text + "\n")
    assert '"completion_token_ids": [1000, 1001' in text
    same, rep = tmp_path / "same.json", tmp_path / "rep.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(same))
    ctx(tmp_path, "repair", str(src), "-o", str(rep))
    assert same.read_bytes() == src.read_bytes() == rep.read_bytes()
    # a changed document keeps them on one line too
    win = tmp_path / "w.json"
    ctx(tmp_path, "window", str(src), "--max-messages", "4", "-o", str(win))
    assert '"completion_token_ids": [1000, 1001' in win.read_text()


def test_atif_context_summary_step_is_a_compaction(tmp_path: Path) -> None:
    d = ctx_json(tmp_path, "compactions", str(ATIF))
    (root,) = [t for t in d["transcripts"] if t["compactions"]]
    assert len(root["compactions"]) == 1


# -- usage that read as 0 -------------------------------------------------------------------------
def test_gemini_thoughts_and_tool_tokens_counted(tmp_path: Path) -> None:
    doc = json.loads(GEMINI_REAL.read_text())
    toks = [m["tokens"] for m in doc["messages"] if isinstance(m.get("tokens"), dict)]
    assert sum(t["thoughts"] for t in toks) > 0
    u = ctx_json(tmp_path, "stats", str(GEMINI_REAL))["totals"]["usage"]
    assert u["total"] == sum(t["total"] for t in toks)  # Gemini CLI's own total, call by call
    assert u["output"] == sum(t["output"] + t["thoughts"] for t in toks)


def test_mini_swe_agent_response_usage(tmp_path: Path) -> None:
    """mini-swe-agent 1.x keeps each model response (litellm's, OpenAI's usage shape) in the
    assistant message's ``extra.response``."""
    usage = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280,
             "prompt_tokens_details": {"cached_tokens": 1000}}
    doc = {"info": {"exit_status": "Submitted"}, "trajectory_format": "mini-swe-agent-1", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```",
         "extra": {"response": {"id": "chatcmpl-1", "model": "gpt-5-mini", "usage": usage}}},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    ]}
    p = tmp_path / "x.traj.json"
    p.write_text(json.dumps(doc, indent=2))
    d = ctx_json(tmp_path, "stats", str(p))
    assert d["transcripts"][0]["format"] == "mini-swe-agent"
    u = d["totals"]["usage"]
    assert (u["input"], u["output"], u["cache_read"], u["total"]) == (200, 80, 1000, 1280)


# -- OpenHands ------------------------------------------------------------------------------------
def test_openhands_older_output_jsonl(tmp_path: Path) -> None:
    recs = lines(OPENHANDS_OLD)
    assert all("source" not in e for r in recs for e in r["history"])
    ts = list(formats.read(OPENHANDS_OLD))
    assert [t.format for t in ts] == ["openhands"] * len(recs)
    # independent count: every action but message/finish is a call, answered by the next event
    for t, r in zip(ts, recs, strict=True):
        acts = [e for e in r["history"] if "action" in e and e["action"] != "message"]
        obs = [e for e in r["history"] if "observation" in e]
        calls = [b for m in t.messages for b in m.content if b.type == "tool_call"]
        results = [b for m in t.messages for b in m.content if b.type == "tool_result"]
        assert (len(calls), len(results)) == (len(acts), len(obs))
    assert ctx_json(tmp_path, "validate", str(OPENHANDS_OLD))["problems"] == []
    same = tmp_path / "same.jsonl"
    ctx(tmp_path, "convert", str(OPENHANDS_OLD), "--to", "openhands", "-o", str(same))
    assert same.read_bytes() == OPENHANDS_OLD.read_bytes()
    # a truncated observation keeps the event's other fields, and comes back
    cut, back = tmp_path / "t.jsonl", tmp_path / "r.jsonl"
    ctx(tmp_path, "truncate", str(OPENHANDS_OLD), "--max-lines", "2", "-o", str(cut))
    changed = [e for r in lines(cut) for e in r["history"] if "observation" in e]
    assert all("source" not in e and "observation" in e for e in changed)
    ctx(tmp_path, "restore", str(cut), "-o", str(back))
    assert lines(back) == recs


def test_openhands_finish_is_a_call_everywhere(tmp_path: Path) -> None:
    recs = lines(OPENHANDS_OLD)
    finishes = sum(1 for r in recs for e in r["history"] if e.get("action") == "finish")
    assert finishes == 2
    d = ctx_json(tmp_path, "stats", str(OPENHANDS_OLD))
    assert d["tool_calls_by_name"]["finish"] == finishes
    assert ctx_json(tmp_path, "validate", str(OPENHANDS_OLD))["problems"] == []  # no result expected
    oai = tmp_path / "o.jsonl"
    ctx(tmp_path, "convert", str(OPENHANDS_OLD), "--to", "openai", "-o", str(oai))
    names = [tc["function"]["name"] for r in lines(oai) for m in r["history"] for tc in m.get("tool_calls") or []]
    assert names.count("finish") == finishes


# -- Claude Code ----------------------------------------------------------------------------------
def test_claude_code_window_drops_progress_of_dropped_turns(tmp_path: Path) -> None:
    src = corpus_file("claude_code", "spotter_ae4a77f8_main.jsonl")
    out = tmp_path / "w.jsonl"
    ctx(tmp_path, "window", str(src), "--max-messages", "12", "-o", str(out))
    kept = lines(out)
    uuids = {o.get("uuid") for o in kept}
    progress = [o for o in kept if o.get("type") == "progress"]
    assert all(o.get("parentUuid") in uuids or o.get("parentUuid") is None for o in progress)
    assert out.stat().st_size < src.stat().st_size / 10  # was 1.17 MB of progress lines for 12 messages


def _with_boundary(tmp_path: Path) -> Path:
    """The sample with a compact_boundary after its messages, its logicalParentUuid the
    sample's first message (as Claude Code 2.1 writes one)."""
    src = lines(CLAUDE)
    first = next(o for o in src if o.get("type") in ("user", "assistant"))
    last = src[-1]
    boundary = {"parentUuid": None, "logicalParentUuid": first["uuid"], "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                "timestamp": last.get("timestamp"), "uuid": "11111111-2222-4333-8444-555555555555", "level": "info",
                "compactMetadata": {"trigger": "manual", "preTokens": 1000}, "sessionId": first.get("sessionId")}
    after = {**first, "parentUuid": boundary["uuid"], "uuid": "11111111-2222-4333-8444-666666666666",
             "message": {"role": "user", "content": "and now?"}}
    p = tmp_path / "b.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in [*src, boundary, after]))
    return p


def test_claude_code_logical_parent_follows_the_kept_lines(tmp_path: Path) -> None:
    src = _with_boundary(tmp_path)
    out = tmp_path / "w.jsonl"
    ctx(tmp_path, "window", str(src), "--max-messages", "3", "--no-keep-first-user", "-o", str(out))
    kept = lines(out)
    uuids = {o.get("uuid") for o in kept}
    (b,) = [o for o in kept if o.get("subtype") == "compact_boundary"]
    assert b["logicalParentUuid"] is None or b["logicalParentUuid"] in uuids
    assert b["logicalParentUuid"] != lines(src)[-2]["logicalParentUuid"]


# -- Gemini ---------------------------------------------------------------------------------------
def test_gemini_info_and_error_records_in_export(tmp_path: Path) -> None:
    doc = json.loads(GEMINI_REAL.read_text())
    notes = [m["content"] for m in doc["messages"] if m["type"] in ("info", "error", "warning")]
    assert len(notes) == 3
    md, html = tmp_path / "e.md", tmp_path / "e.html"
    ctx(tmp_path, "export", str(GEMINI_REAL), "-o", str(md))
    ctx(tmp_path, "export", str(GEMINI_REAL), "-o", str(html))
    for n in notes:
        assert n.splitlines()[0] in md.read_text()
    assert "fetch failed sending request" in html.read_text()


# -- detection and walks --------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [["convert", "--to", "openai"], ["truncate", "--max-chars", "5"], ["trim", "--budget", "10"],
                                 ["restore"], ["cut", "--keep-recent", "1"], ["archive", "--strategy", "heuristic"],
                                 ["repair"], ["compact", "--force"]])
def test_detection_looks_past_a_bad_first_record(tmp_path: Path, cmd: list[str]) -> None:
    good = [{"messages": [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]}
            for i in range(3)]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(o) + "\n" for o in [{"messages": "not a list"}, *good]))
    out = tmp_path / "o.jsonl"
    r = ctx(tmp_path, cmd[0], str(src), *cmd[1:], "--on-error", "skip", "-o", str(out))
    assert b"cannot detect" not in r.stderr
    assert len(lines(out)) == 3
    r = ctx(tmp_path, cmd[0], str(src), *cmd[1:], "-o", str(tmp_path / "o2.jsonl"), ok=False)
    assert r.returncode != 0 and b":1: record has no message list" in r.stderr


def test_usage_of_a_directory_with_a_fifo(tmp_path: Path) -> None:
    d = tmp_path / "store"
    d.mkdir()
    (d / "s.jsonl").write_bytes(CLAUDE.read_bytes())
    os.mkfifo(d / "pipe.jsonl")
    r = ctx(tmp_path, "usage", str(d), "--json", timeout=60)
    assert json.loads(r.stdout)["files"] == 1
    assert ctx_json(tmp_path, "stats", str(d))["totals"]["transcripts"] == 1


def test_compressed_rollouts_and_archived_sessions_are_found(tmp_path: Path) -> None:
    codex = tmp_path / "codex-home"
    rollout = (SAMPLES / "codex_rollout.jsonl").read_bytes()
    live = codex / "sessions" / "2026" / "05" / "01"
    archived = codex / "archived_sessions"
    live.mkdir(parents=True)
    archived.mkdir(parents=True)
    (live / "rollout-a.jsonl").write_bytes(rollout)
    import zstandard

    (archived / "rollout-b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(rollout.replace(b"\"id\":\"", b"\"id\":\"b")))
    (archived / "rollout-c.jsonl.gz").write_bytes(gzip.compress(rollout))
    found = list(iter_paths([str(codex)]))
    assert sorted(Path(f).name for f in found) == ["rollout-a.jsonl", "rollout-b.jsonl.zst", "rollout-c.jsonl.gz"]
    assert ctx_json(tmp_path, "stats", str(codex))["totals"]["transcripts"] == 3
    env = {**os.environ, "HOME": str(tmp_path / "nobody"), "CODEX_HOME": str(codex)}
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("PI_CODING_AGENT_DIR", None)
    d = json.loads(ctx(tmp_path, "usage", "--json", env=env).stdout)
    assert d["files"] == 3
    assert [s["path"] for s in d["stores"]] == [str(codex / "sessions"), str(codex / "archived_sessions")]


# -- loud about drift -----------------------------------------------------------------------------
def _drifted(tmp_path: Path) -> Path:
    """The Claude Code sample with lines of two invented types among its own."""
    src = lines(CLAUDE)
    sid = next(o["sessionId"] for o in src if "sessionId" in o)
    new = [{"type": "turn-budget", "sessionId": sid, "remaining": 12000}, {"type": "turn-budget", "sessionId": sid, "remaining": 9000},
           {"type": "memory-digest", "sessionId": sid, "digest": "x"}]
    p = tmp_path / "drift.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in [*src[:5], *new[:2], *src[5:], new[2]]))
    return p


def _validate(schema: str, obj: Any) -> None:
    from jsonschema import Draft202012Validator

    v = Draft202012Validator(json.loads((ROOT / "schemas" / f"{schema}.schema.json").read_text()))
    assert not [e.message for e in v.iter_errors(obj)]


def test_unknown_line_types_counted_and_warned(tmp_path: Path) -> None:
    p = _drifted(tmp_path)
    r = ctx(tmp_path, "stats", str(p), "--json")
    d = json.loads(r.stdout)
    _validate("stats", d)
    assert d["totals"]["unknown_types"] == {"turn-budget": 2, "memory-digest": 1}
    assert d["transcripts"][0]["unknown_types"] == {"turn-budget": 2, "memory-digest": 1}
    warn = [ln for ln in r.stderr.decode().splitlines() if "does not know" in ln]
    assert len(warn) == 1 and "turn-budget ×2" in warn[0] and "memory-digest ×1" in warn[0] and str(p) in warn[0]
    # the known files say nothing; the lines are kept verbatim
    assert "does not know" not in ctx(tmp_path, "stats", str(CLAUDE)).stderr.decode()
    same = tmp_path / "same.jsonl"
    ctx(tmp_path, "convert", str(p), "--to", "claude-code", "-o", str(same))
    assert same.read_bytes() == p.read_bytes()
    # two files on the worker pool: one line each
    q = tmp_path / "two" / "b.jsonl"
    q.parent.mkdir()
    q.write_bytes(p.read_bytes())
    (q.parent / "a.jsonl").write_bytes(p.read_bytes())
    r = ctx(tmp_path, "stats", str(q.parent), "--jobs", "2")
    assert sum("does not know" in ln for ln in r.stderr.decode().splitlines()) == 2


def test_records_without_messages_is_an_error_naming_types(tmp_path: Path) -> None:
    p = tmp_path / "only.jsonl"
    p.write_text('{"type":"file-history-snapshot","messageId":"a","snapshot":{}}\n{"type":"frame-link","uuid":"x"}\n'
                 '{"type":"frame-link","uuid":"y"}\n')
    r = ctx(tmp_path, "stats", str(p), ok=False)
    err = r.stderr.decode()
    assert r.returncode == 3 and "0 turns" not in err
    assert "no messages" in err and "frame-link ×2" in err and "file-history-snapshot ×1" in err


def test_formats_file_lists_line_types_and_version(tmp_path: Path) -> None:
    p = _drifted(tmp_path)
    out = ctx(tmp_path, "formats", str(p)).stdout.decode()
    version = next(o["version"] for o in lines(CLAUDE) if "version" in o)
    assert f"written by {version}" in out
    rows = {tuple(ln.split(None, 1)[0:1]) + (ln.rsplit("  ", 1)[-1].strip(),) for ln in out.splitlines()[1:]}
    assert ("turn-budget", "unknown type, kept verbatim") in rows
    assert ("file-history-snapshot", "record, kept verbatim") in rows
    d = ctx_json(tmp_path, "formats", str(p), str(ATIF))
    _validate("formats", d)
    (cc, atif) = d["files"]
    assert {(x["type"], x["read_as"]): x["count"] for x in cc["types"]}[("turn-budget", "unknown type, kept verbatim")] == 2
    assert sum(x["count"] for x in cc["types"]) == len(lines(p))  # every line told
    assert atif["tool_version"] is not None and atif["transcripts"] == 2


# -- opencode's SQLite store ----------------------------------------------------------------------
def _store(tmp_path: Path) -> Path:
    from opencode_store import build

    d = tmp_path / "share" / "opencode"
    d.mkdir(parents=True)
    return build(d / "opencode.db")


def test_opencode_store_stats_usage_export_convert(tmp_path: Path) -> None:
    from opencode_store import CALLS

    db = _store(tmp_path)
    before = (db.read_bytes(), db.stat().st_mtime_ns, sorted(p.name for p in db.parent.iterdir()))
    d = ctx_json(tmp_path, "stats", str(db))
    assert [t["id"] for t in d["transcripts"]] == ["ses_main", "ses_sub"]
    u = d["totals"]["usage"]
    assert u["api_messages"] == len(CALLS)
    assert (u["input"], u["output"], u["cache_creation"], u["cache_read"]) == (
        sum(c[1] for c in CALLS), sum(c[2] + c[3] for c in CALLS), sum(c[5] for c in CALLS), sum(c[4] for c in CALLS))
    assert d["totals"]["tool_calls"] == 2 and d["totals"]["tool_errors"] == 1
    # usage reads it as a file, from a directory, and as a default store (XDG_DATA_HOME)
    by_session = json.loads(ctx(tmp_path, "usage", str(db), "--by", "session", "--json").stdout)
    assert {r["key"]: r["messages"] for r in by_session["rows"]} == {"ses_main": 2, "ses_sub": 1}
    env = {**os.environ, "HOME": str(tmp_path / "nobody"), "XDG_DATA_HOME": str(tmp_path / "share")}
    for k in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "PI_CODING_AGENT_DIR"):
        env.pop(k, None)
    d = json.loads(ctx(tmp_path, "usage", "--json", env=env).stdout)
    assert d["files"] == 1 and d["totals"]["messages"] == len(CALLS)
    # export and conversion to a format ctxtool writes
    md, cc = tmp_path / "e.md", tmp_path / "cc.jsonl"
    ctx(tmp_path, "export", str(db), "-o", str(md))
    assert "Rounding happens too early" in md.read_text() and "File not found" in md.read_text()
    ctx(tmp_path, "convert", str(db), "--to", "claude-code", "-o", str(cc))
    assert ctx_json(tmp_path, "validate", str(cc))["problems"] == []
    assert ctx_json(tmp_path, "compactions", str(db))["transcripts"][0]["count"] == 1
    r = ctx(tmp_path, "convert", str(db), "--to", "opencode", "-o", str(tmp_path / "x.db"), ok=False)
    assert r.returncode != 0 and b"read only" in r.stderr
    # the store is read, never written (no journal, no WAL files beside it)
    assert (db.read_bytes(), db.stat().st_mtime_ns, sorted(p.name for p in db.parent.iterdir())) == before


def test_opencode_store_not_plain_text_nor_a_pipe(tmp_path: Path) -> None:
    db = _store(tmp_path)
    r = ctx(tmp_path, "stats", str(db))
    assert b"plain text" not in r.stdout
    r = ctx(tmp_path, "stats", "-", ok=False, stdin=db.open("rb"))
    assert r.returncode != 0 and b"not a pipe" in r.stderr


# -- Claude Code subagents: part of their session -------------------------------------------------
def _session_with_subagent(tmp_path: Path) -> tuple[Path, Path]:
    """A Claude Code 2.1 project directory: the sample session ``<id>.jsonl`` and, as Claude
    Code keeps it, one subagent ``<id>/subagents/agent-<aid>.jsonl`` with its ``.meta.json``
    (agentType, description, spawnDepth: as parsers of these stores read it). The subagent's
    lines are the sample's, marked as a sidechain with their own message and request ids."""
    src = lines(CLAUDE)
    sid = next(o["sessionId"] for o in src if "sessionId" in o)
    proj = tmp_path / "projects" / "-home-dev-app"
    sub = proj / sid / "subagents"
    sub.mkdir(parents=True)
    main = proj / f"{sid}.jsonl"
    main.write_bytes(CLAUDE.read_bytes())
    agent = []
    for o in src:
        o = copy.deepcopy(o)
        o["isSidechain"], o["agentId"] = True, "a485154"
        if isinstance(o.get("message"), dict) and isinstance(o["message"].get("id"), str):
            o["message"]["id"] += "_sub"
        if isinstance(o.get("requestId"), str):
            o["requestId"] += "_sub"
        agent.append(o)
    (sub / "agent-a485154.jsonl").write_text("".join(json.dumps(o) + "\n" for o in agent))
    (sub / "agent-a485154.meta.json").write_text(json.dumps({"agentType": "Explore", "description": "Map the code", "spawnDepth": 1}))
    return main, proj


def test_claude_code_session_with_its_subagents(tmp_path: Path) -> None:
    main, proj = _session_with_subagent(tmp_path)
    alone = ctx_json(tmp_path, "stats", str(CLAUDE))["totals"]
    # the session file named alone brings its subagent: one unit, each file once
    for arg in (main, proj):
        d = ctx_json(tmp_path, "stats", str(arg))
        assert len(d["transcripts"]) == 2
        assert d["totals"]["messages"] == 2 * alone["messages"]
        assert d["totals"]["usage"]["total"] == 2 * alone["usage"]["total"]
    md = tmp_path / "e.md"
    ctx(tmp_path, "export", str(main), "-o", str(md))
    assert md.read_text().count("claude-code transcript") == 2 or "agent-a485154" in md.read_text()
    assert len(ctx_json(tmp_path, "compactions", str(main))["transcripts"]) == 2
    # usage: the session counts its subagent's calls, and --by agent breaks them down
    by = json.loads(ctx(tmp_path, "usage", str(main), "--by", "agent", "--json").stdout)
    rows = {r["key"]: r for r in by["rows"]}
    assert set(rows) == {"main", "Explore (a485154)"}
    assert rows["main"]["total"] == rows["Explore (a485154)"]["total"] == alone["usage"]["total"]
    by_session = json.loads(ctx(tmp_path, "usage", str(proj), "--by", "session", "--json").stdout)
    assert len(by_session["rows"]) == 1 and by_session["rows"][0]["total"] == 2 * alone["usage"]["total"]


def test_atif_v1_8_document_without_session_id(tmp_path: Path) -> None:
    """ATIF v1.7 made ``session_id`` optional beside ``trajectory_id`` and embedded subagents;
    v1.8 documents read alike (a writer of v1.8: harbor-style adapters found with the library)."""
    doc = json.loads(ATIF.read_text())
    doc["schema_version"] = "ATIF-v1.8"
    doc.pop("session_id")
    doc["trajectory_id"] = "traj-main"
    src = tmp_path / "v18.json"
    src.write_text(json.dumps(doc, indent=2) + "\n")
    ts = list(formats.read(src))
    assert [t.id for t in ts] == ["traj-main", "imports-check"]
    same, win = tmp_path / "same.json", tmp_path / "w.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(same))
    assert same.read_bytes() == src.read_bytes()
    ctx(tmp_path, "window", str(src), "--max-messages", "3", "-o", str(win))
    out = json.loads(win.read_text())
    assert out["schema_version"] == "ATIF-v1.8" and "session_id" not in out and _sequential(out)


def test_claude_code_real_session_with_subagent(tmp_path: Path) -> None:
    """codemie-code's fixture of a Claude Code 2.1.7 session and its subagent, laid out as
    Claude Code keeps them (``<id>.jsonl``, ``<id>/subagents/agent-a485154.jsonl``)."""
    main_src = corpus_file("claude_code", "codemie_incremental-subagents_turn-2.jsonl")
    sub_src = corpus_file("claude_code", "codemie_incremental-subagents_turn-2_agent-a485154.jsonl")
    sid = "e9fb405b-169f-40eb-9396-7e75076f045d"
    proj = tmp_path / "projects" / "-home-dev-app"
    (proj / sid / "subagents").mkdir(parents=True)
    main = proj / f"{sid}.jsonl"
    main.write_bytes(main_src.read_bytes())
    (proj / sid / "subagents" / "agent-a485154.jsonl").write_bytes(sub_src.read_bytes())
    one = ctx_json(tmp_path, "stats", str(main_src))["totals"]
    two = ctx_json(tmp_path, "stats", str(sub_src))["totals"]
    d = ctx_json(tmp_path, "stats", str(main))["totals"]
    assert d["messages"] == one["messages"] + two["messages"]
    assert d["usage"]["total"] == one["usage"]["total"] + two["usage"]["total"]
    by = json.loads(ctx(tmp_path, "usage", str(main), "--by", "agent", "--json").stdout)
    rows = {r["key"]: r["total"] for r in by["rows"]}
    assert set(rows) == {"main", "subagent (a485154)"} and sum(rows.values()) == by["totals"]["total"]
