"""Issue 33, the rest: what Claude Code 2.1.x, Codex 0.147-0.153, ATIF v1.8 and Gemini CLI's
subagents write, read as it is.

Real files where one with a licence exists (the shared corpus, tests/data/PROVENANCE.md);
otherwise files built from the project's own sample to the shape the agent writes, each
test naming where that shape comes from. The CLI runs as a real process."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from conftest import SAMPLES, corpus_file
from io_pipes import run_ctxtool

from ctxtool import formats
from ctxtool.tokens.context import ContextSettings
from ctxtool.tokens.models import lookup

CLAUDE = SAMPLES / "claude_code_session.jsonl"


def ctx(tmp_path: Path, *args: str, ok: bool = True) -> Any:
    r = run_ctxtool(*args, cache=tmp_path / "cache")
    if ok:
        assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")
    return r


def ctx_json(tmp_path: Path, *args: str) -> Any:
    return json.loads(ctx(tmp_path, *args, "--json").stdout)


def lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def write(p: Path, objs: list[dict[str, Any]]) -> Path:
    p.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs))
    return p


def messages_of(src: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in src if o.get("type") in ("user", "assistant")]


# -- the window Claude Code runs a model with ------------------------------------------------------
def test_claude_code_window_is_200k_without_the_1m_suffix(tmp_path: Path) -> None:
    """The registry (litellm) lists claude-opus-4-6 at 1,000,000 tokens; Claude Code runs a
    Claude model with 200,000 unless it is named with ``[1m]`` (its model configuration docs)."""
    assert lookup("claude-opus-4-6").context_window == 1_000_000  # type: ignore[union-attr]
    t = next(formats.read(CLAUDE))
    w = ContextSettings().resolve(t)
    assert (w.window, w.source) == (200_000, "claude-code:no [1m] suffix")
    d = ctx_json(tmp_path, "stats", str(CLAUDE))
    assert d["transcripts"][0]["context"]["window"] == 200_000
    assert d["transcripts"][0]["context"]["percent"] == round(100 * d["transcripts"][0]["context"]["tokens"] / 200_000, 2)
    # a window the user names still wins
    assert ContextSettings(model="claude-opus-4-6").resolve(t).window == 1_000_000
    assert ContextSettings(window=50_000).resolve(t).window == 50_000


def test_claude_code_1m_suffix_and_prompts_over_200k(tmp_path: Path) -> None:
    src = lines(CLAUDE)
    one_m = [{**o, "message": {**o["message"], "model": o["message"]["model"] + "[1m]"}}
             if o.get("type") == "assistant" else o for o in src]
    t = next(formats.read(write(tmp_path / "1m.jsonl", one_m)))
    w = ContextSettings().resolve(t)
    assert w.window == 1_000_000 and w.model == "claude-opus-4-6[1m]"
    info = lookup("claude-sonnet-4-5[1m]")
    assert info is not None and info.context_window == 1_000_000
    assert info.input_price == lookup("claude-sonnet-4-5").input_price  # type: ignore[union-attr]
    # the suffix is not in the session file: a recorded prompt over 200,000 says the 1M window ran
    big = [dict(o) for o in src]
    last = max(i for i, o in enumerate(big) if o.get("type") == "assistant")
    m = dict(big[last]["message"])
    m["usage"] = {**m["usage"], "cache_read_input_tokens": 250_000}
    big[last] = {**big[last], "message": m}
    t = next(formats.read(write(tmp_path / "big.jsonl", big)))
    w = ContextSettings().resolve(t)
    assert (w.window, w.source) == (1_000_000, "transcript:prompt over 200,000")


# -- compact_boundary metadata of Claude Code 2.1 ----------------------------------------------------
def _compacted(tmp_path: Path) -> tuple[Path, list[str]]:
    """The sample compacted as Claude Code 2.1 writes it: a compact_boundary whose
    compactMetadata has preTokens, postTokens, durationMs, cumulativeDroppedTokens,
    preservedSegment and preservedMessages (the last two messages, kept verbatim), then the
    summary line, then one more turn. Field names and nesting as Claude Code 2.1.2xx session
    files hold them (the parsers of session viewers read the same keys)."""
    src = lines(CLAUDE)
    msgs = messages_of(src)
    kept = [msgs[-2]["uuid"], msgs[-1]["uuid"]]
    base = {k: msgs[0][k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch")}
    boundary = {"parentUuid": None, "logicalParentUuid": msgs[-1]["uuid"], **base, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                "timestamp": msgs[-1]["timestamp"], "uuid": "aaaaaaaa-1111-4111-8111-000000000001", "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": 187_000, "postTokens": 9_400, "durationMs": 41_749,
                                    "cumulativeDroppedTokens": 177_600,
                                    "preservedSegment": {"headUuid": kept[0], "anchorUuid": "aaaaaaaa-1111-4111-8111-000000000002",
                                                         "tailUuid": kept[1]},
                                    "preservedMessages": {"uuids": kept, "allUuids": kept}}}
    summary = {"parentUuid": boundary["uuid"], **base, "type": "user", "isCompactSummary": True,
               "isVisibleInTranscriptOnly": True, "uuid": "aaaaaaaa-1111-4111-8111-000000000002",
               "timestamp": msgs[-1]["timestamp"],
               "message": {"role": "user", "content": "This session is being continued from a previous conversation."}}
    after = {"parentUuid": summary["uuid"], **base, "type": "user", "uuid": "aaaaaaaa-1111-4111-8111-000000000003",
             "timestamp": msgs[-1]["timestamp"], "message": {"role": "user", "content": "and the tests?"}}
    return write(tmp_path / "compacted.jsonl", [*src, boundary, summary, after]), kept


def test_compact_boundary_metadata_in_compactions_and_context(tmp_path: Path) -> None:
    p, kept = _compacted(tmp_path)
    d = ctx_json(tmp_path, "compactions", str(p))
    (c,) = d["transcripts"][0]["compactions"]
    assert (c["tokens_before"], c["tokens_before_source"]) == (187_000, "recorded")
    assert (c["tokens_after"], c["tokens_after_source"]) == (9_400, "recorded")
    assert c["preserved_messages"] == 2 and c["cumulative_dropped_tokens"] == 177_600
    out = ctx(tmp_path, "compactions", str(p)).stdout.decode()
    assert "2 message(s) kept verbatim" in out and "177,600 tokens dropped" in out
    # the preserved messages stay in the current context
    from ctxtool.tokens.context import view

    t = next(formats.read(p))
    v = view(t)
    ids = {v.messages[i].id for i in v.indices}
    assert set(kept) <= ids and messages_of(lines(CLAUDE))[0]["uuid"] not in ids
    # and an identity convert keeps the line byte for byte
    same = tmp_path / "same.jsonl"
    ctx(tmp_path, "convert", str(p), "--to", "claude-code", "-o", str(same))
    assert same.read_bytes() == p.read_bytes()


def test_compact_boundary_uuids_relinked_after_window_and_restored(tmp_path: Path) -> None:
    p, kept = _compacted(tmp_path)
    out = tmp_path / "w.jsonl"
    ctx(tmp_path, "window", str(p), "--max-messages", "2", "--no-keep-first-user", "-o", str(out))
    objs = lines(out)
    present = {o.get("uuid") for o in objs}
    (b,) = [o for o in objs if o.get("subtype") == "compact_boundary"]
    md = b["compactMetadata"]
    assert all(u in present for u in md["preservedMessages"]["uuids"])
    assert all(u is None or u in present for u in md["preservedSegment"].values())
    assert b["ctxtool"]["compact_metadata_relinked_from"] == lines(p)[-3]["compactMetadata"]
    assert b["logicalParentUuid"] is None or b["logicalParentUuid"] in present
    cut = tmp_path / "c.jsonl"
    ctx(tmp_path, "cut", str(p), "--keep-recent", "2", "-o", str(cut))
    cobjs = lines(cut)
    cpresent = {o.get("uuid") for o in cobjs}
    for cb in (o for o in cobjs if o.get("subtype") == "compact_boundary"):
        assert all(u in cpresent for u in cb["compactMetadata"]["preservedMessages"]["uuids"])
    # restore gives the line its source metadata back (the messages window dropped stay dropped)
    back = tmp_path / "back.jsonl"
    ctx(tmp_path, "restore", str(out), "-o", str(back))
    (rb,) = [o for o in lines(back) if o.get("subtype") == "compact_boundary"]
    assert rb["compactMetadata"] == lines(p)[-3]["compactMetadata"]
    assert "compact_metadata_relinked_from" not in rb.get("ctxtool", {})


def test_sdk_stream_boundary_spelling_is_read() -> None:
    from ctxtool.formats.claude_code_lines import boundary_info

    b = boundary_info({"type": "system", "subtype": "compact_boundary", "logical_parent_uuid": "u1",
                       "compact_metadata": {"trigger": "manual", "pre_tokens": 22987, "post_tokens": 1943,
                                            "cumulative_dropped_tokens": 21044, "duration_ms": 33334,
                                            "preserved_messages": {"uuids": ["a", "b"]}}})
    assert (b.trigger, b.pre_tokens, b.post_tokens, b.cumulative_dropped_tokens, b.preserved, b.logical_parent) == (
        "manual", 22987, 1943, 21044, ("a", "b"), "u1")


# -- tool results saved to disk, images and documents -----------------------------------------------
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")).decode()
PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n").decode()


def _with_blocks(tmp_path: Path) -> Path:
    """The sample with, as Claude Code 2.1 writes them: a Read result over 50,000 characters
    saved to ``<session>/tool-results/<tool_use_id>.txt`` (the ``<persisted-output>`` notice
    and a 2 KB preview in the log), an image block and a document block in a user line (the
    block shapes of Anthropic's Messages API)."""
    src = lines(CLAUDE)
    i = next(k for k, o in enumerate(src) if o.get("type") == "user" and isinstance(o["message"]["content"], list)
             and o["message"]["content"][0].get("type") == "tool_result")
    res = dict(src[i]["message"]["content"][0])
    sid = src[i]["sessionId"]
    res["content"] = ("<persisted-output>\nOutput too large (52.3KB). Full output saved to: "
                      f"/home/dev/.claude/projects/-home-dev-projects-ledgerlite/{sid}/tool-results/{res['tool_use_id']}.txt"
                      "\n\nPreview (first 2KB):\n   1\timport decimal\n...\n</persisted-output>")
    src[i] = {**src[i], "message": {**src[i]["message"], "content": [res]}}
    first_user = next(k for k, o in enumerate(src) if o.get("type") == "user")
    blocks = [{"type": "text", "text": "the screenshot and the spec"},
              {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
              {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}}]
    src[first_user] = {**src[first_user], "message": {"role": "user", "content": blocks}}
    return write(tmp_path / "blocks.jsonl", src)


def test_saved_outputs_images_and_documents(tmp_path: Path) -> None:
    p = _with_blocks(tmp_path)
    d = ctx_json(tmp_path, "stats", str(p))["totals"]
    assert (d["saved_outputs"], d["images"], d["documents"]) == (1, 1, 1)
    text = ctx(tmp_path, "stats", str(p)).stdout.decode()
    assert "documents 1 · tool outputs the agent saved to files 1" in text
    md = tmp_path / "e.md"
    ctx(tmp_path, "export", str(p), "-o", str(md))
    body = md.read_text()
    assert "saved to /home/dev/.claude/projects/" in body and "(52.3KB)" in body
    assert "document ('spec.pdf', application/pdf" in body and "image (image/png" in body
    html = tmp_path / "e.html"
    ctx(tmp_path, "export", str(p), "-o", str(html))
    assert "data:image/png;base64," in html.read_text() and "data:application/pdf" not in html.read_text()
    for to, name in (("claude-code", "same.jsonl"),):
        same = tmp_path / name
        ctx(tmp_path, "convert", str(p), "--to", to, "-o", str(same))
        assert same.read_bytes() == p.read_bytes()
    # through another format and back, the blocks are the same objects
    conv, back = tmp_path / "a.json", tmp_path / "back.jsonl"
    ctx(tmp_path, "convert", str(p), "--to", "anthropic", "-o", str(conv))
    ctx(tmp_path, "convert", str(conv), "--to", "claude-code", "-o", str(back))
    got = [b for o in lines(back) if o.get("type") == "user" for b in (o["message"]["content"] if isinstance(o["message"]["content"], list) else [])]
    assert {"type": "document", "title": "spec.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}} in got
    assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}} in got


# -- Codex ---------------------------------------------------------------------------------------
def _codex(tmp_path: Path, name: str, payloads: list[tuple[str, dict[str, Any]]]) -> Path:
    ts = "2026-09-01T10:00:00.000Z"
    head = [("session_meta", {"id": "019c0000-0000-7000-8000-000000000001", "cwd": "/w", "cli_version": "0.152.0"})]
    return write(tmp_path / name, [{"timestamp": ts, "type": typ, "payload": p} for typ, p in head + payloads])


def _user(text: str) -> tuple[str, dict[str, Any]]:
    return "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _assistant(text: str) -> tuple[str, dict[str, Any]]:
    return "response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _ev(**p: Any) -> tuple[str, dict[str, Any]]:
    return "event_msg", p


def test_codex_messages_as_events_items_or_both_counted_once(tmp_path: Path) -> None:
    """0.151-0.153 wrote a reply as a response_item, as events (``agent_message`` and
    ``item_completed`` with a PascalCase ``AgentMessage`` item, 0.147's serde names), or as
    both; no schema version says which. Each reply and prompt is one message."""
    both = _codex(tmp_path, "both.jsonl", [
        _ev(type="task_started", turn_id="t1"), _user("fix it"), _ev(type="user_message", message="fix it"),
        _ev(type="item_completed", turn_id="t1", item={"type": "UserMessage", "id": "u1", "content": [{"type": "text", "text": "fix it"}]}),
        _assistant("done"), _ev(type="agent_message", message="done"),
        _ev(type="item_completed", turn_id="t1", item={"type": "AgentMessage", "id": "a1", "content": [{"type": "Text", "text": "done"}]}),
    ])
    events_only = _codex(tmp_path, "events.jsonl", [
        _ev(type="task_started", turn_id="t1"), _ev(type="user_message", message="fix it"),
        _ev(type="item_completed", turn_id="t1", item={"type": "UserMessage", "id": "u1", "content": [{"type": "text", "text": "fix it"}]}),
        _ev(type="agent_message", message="done"),
        _ev(type="item_completed", turn_id="t1", item={"type": "AgentMessage", "id": "a1", "content": [{"type": "Text", "text": "done"}]}),
        _ev(type="task_started", turn_id="t2"), _ev(type="user_message", message="again"),
        _ev(type="item_completed", turn_id="t2", item={"type": "AgentMessage", "id": "a2", "content": [{"type": "Text", "text": "done"}]}),
    ])
    items_only = _codex(tmp_path, "items.jsonl", [_user("fix it"), _assistant("done")])
    for p, want in ((both, [("user", "fix it"), ("assistant", "done")]),
                    (events_only, [("user", "fix it"), ("assistant", "done"), ("user", "again"), ("assistant", "done")]),
                    (items_only, [("user", "fix it"), ("assistant", "done")])):
        t = next(formats.read(p))
        assert [(m.role, m.text()) for m in t.messages] == want, p.name
        assert not formats.unknown_records(t)
        same = tmp_path / f"same-{p.name}"
        ctx(tmp_path, "convert", str(p), "--to", "codex", "-o", str(same))
        assert same.read_bytes() == p.read_bytes()


def test_codex_inter_agent_messages(tmp_path: Path) -> None:
    """``inter_agent_communication_metadata`` (``{"trigger_turn": true}``) before an
    ``agent_message`` item (``author``, ``recipient``, ``content``), as Codex's multi-agent
    rollouts hold them: known, and the message read as the recipient's input."""
    p = _codex(tmp_path, "mail.jsonl", [
        ("inter_agent_communication_metadata", {"trigger_turn": True}),
        ("response_item", {"type": "agent_message", "author": "/root", "recipient": "/root/worker",
                           "content": [{"type": "input_text", "text": "Reply PONG-W"}]}),
        _assistant("PONG-W"),
    ])
    t = next(formats.read(p))
    assert [(m.role, m.text()) for m in t.messages] == [("user", "Reply PONG-W"), ("assistant", "PONG-W")]
    assert t.messages[0].extra["agent_message"] == {"author": "/root", "recipient": "/root/worker"}
    d = ctx_json(tmp_path, "stats", str(p))
    assert d["totals"]["unknown_types"] == {} and d["totals"]["messages"] == 2
    r = ctx(tmp_path, "stats", str(p))
    assert b"does not know" not in r.stderr


def test_codex_rate_limits_real_rollout(tmp_path: Path) -> None:
    src = corpus_file("codex", "localpush_redacted_rollout-2026-02-23T12-54-34-019c8a59.jsonl")
    d = ctx_json(tmp_path, "stats", str(src))
    rl = d["transcripts"][0]["rate_limits"]
    last = [json.loads(x)["payload"]["rate_limits"] for x in src.read_text().splitlines()
            if '"rate_limits":{' in x][-1]
    assert rl == last and rl["primary"]["window_minutes"] == 300
    text = ctx(tmp_path, "stats", str(src)).stdout.decode()
    assert f"rate limits at the last token count (Codex): primary {last['primary']['used_percent']:g}% used of a 300-minute window" in text


def test_codex_real_rollout_agent_message_events_not_double(tmp_path: Path) -> None:
    """codemie-code's rollout writes each reply as a response_item and an ``agent_message``
    event: the replies are counted once."""
    src = corpus_file("codex", "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl")
    t = next(formats.read(src))
    items = sum(1 for x in src.read_text().splitlines()
                if '"type":"response_item"' in x and '"role":"assistant"' in x and '"type":"message"' in x)
    assert sum(1 for m in t.messages if m.role == "assistant" and m.content and m.content[0].type == "text") == items


# -- ATIF v1.8 --------------------------------------------------------------------------------------
def test_atif_v1_8_step_fields_kept(tmp_path: Path) -> None:
    """Fields v1.8 writers put on steps (``reasoning_effort``, ``llm_call_count``) and on
    results (``extra``) are kept through window and an identity convert; v1.7's
    ``trajectory_id`` and embedded subagents still read."""
    doc = json.loads((SAMPLES / "atif_trajectory.json").read_text())
    doc["schema_version"] = "ATIF-v1.8"
    for s in doc["steps"]:
        if s.get("source") == "agent":
            s["reasoning_effort"] = "high"
            s["llm_call_count"] = 1
    src = tmp_path / "v18.json"
    src.write_text(json.dumps(doc, indent=2) + "\n")
    same, win = tmp_path / "same.json", tmp_path / "w.json"
    ctx(tmp_path, "convert", str(src), "--to", "atif", "-o", str(same))
    assert same.read_bytes() == src.read_bytes()
    ctx(tmp_path, "window", str(src), "--max-messages", "4", "-o", str(win))
    out = json.loads(win.read_text())
    agent = [s for s in out["steps"] if s.get("source") == "agent"]
    assert agent and all(s.get("reasoning_effort") == "high" and s.get("llm_call_count") == 1 for s in agent)
    assert [s["step_id"] for s in out["steps"]] == list(range(1, len(out["steps"]) + 1))
    assert [t.id for t in formats.read(src)][1] == "imports-check"  # the embedded subagent (v1.7)


# -- Gemini CLI subagents ------------------------------------------------------------------------------
def _gemini_session(tmp_path: Path) -> tuple[Path, Path]:
    """A Gemini CLI project's chats as its chatRecordingService lays them out (Apache-2.0,
    google-gemini/gemini-cli 5411f113ca, packages/core/src/services/chatRecordingService.ts):
    the session ``chats/session-<time>-<id8>.jsonl`` and its subagent's session
    ``chats/<parent sessionId>/<subagent sessionId>.jsonl`` (metadata ``kind: "subagent"``)."""
    chats = tmp_path / "gemini" / "tmp" / "ab12" / "chats"
    parent, child = "5b1e8c2a-7d0f-4e3b-9a61-2c4d8e0f1a23", "9f0e1d2c-3b4a-4596-8877-665544332211"
    (chats / parent).mkdir(parents=True)

    def msgs(prefix: str, tokens: int) -> list[dict[str, Any]]:
        return [{"id": f"{prefix}-1", "timestamp": "2026-09-01T10:00:00.000Z", "type": "user", "content": [{"text": "look at main.py"}]},
                {"id": f"{prefix}-2", "timestamp": "2026-09-01T10:00:05.000Z", "type": "gemini", "content": "It prints.",
                 "model": "gemini-2.5-pro", "tokens": {"input": tokens, "output": 20, "cached": 0, "thoughts": 5, "tool": 0, "total": tokens + 25}}]

    main = write(chats / f"session-2026-09-01T10-00-{parent[:8]}.jsonl", [
        {"sessionId": parent, "projectHash": "ab12", "startTime": "2026-09-01T10:00:00.000Z", "lastUpdated": "2026-09-01T10:00:05.000Z"},
        *msgs("m", 1000)])
    write(chats / parent / f"{child}.jsonl", [
        {"sessionId": child, "projectHash": "ab12", "startTime": "2026-09-01T10:00:01.000Z", "lastUpdated": "2026-09-01T10:00:04.000Z",
         "kind": "subagent", "directories": ["/w"]},
        *msgs("s", 400)])
    return main, chats


def test_gemini_session_with_its_subagents(tmp_path: Path) -> None:
    main, chats = _gemini_session(tmp_path)
    for arg in (main, chats):
        d = ctx_json(tmp_path, "stats", str(arg))
        assert len(d["transcripts"]) == 2 and d["totals"]["messages"] == 4
    by = json.loads(ctx(tmp_path, "usage", str(main), "--by", "agent", "--json").stdout)
    rows = {r["key"]: r for r in by["rows"]}
    assert set(rows) == {"main", "subagent (9f0e1d2c-3b4a-4596-8877-665544332211)"}
    md = tmp_path / "e.md"
    ctx(tmp_path, "export", str(main), "-o", str(md))
    assert md.read_text().count("It prints.") == 2


def test_saved_output_in_a_real_claude_code_subagent(tmp_path: Path) -> None:
    """codemie-code's Claude Code 2.1 subagent fixture (Apache-2.0, tests/data/PROVENANCE.md's
    corpus list) holds a Read result Claude Code saved to its session's tool-results/."""
    src = corpus_file("claude_code", "codemie_incremental-subagents_turn-2_agent-a485154.jsonl")
    d = ctx_json(tmp_path, "stats", str(src))["totals"]
    assert d["saved_outputs"] == 1
    md = tmp_path / "e.md"
    ctx(tmp_path, "export", str(src), "-o", str(md))
    assert "tool-results/toolu_bdrk_01CaTZ658VzFpoM9YptVLjGg.txt, 126.7KB" in md.read_text()
