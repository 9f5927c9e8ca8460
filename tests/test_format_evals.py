"""Eval-trajectory and API formats (issue 12): Inspect eval logs (.json, .eval archives),
Harbor ATIF trajectories, OpenAI Responses API item lists; read/write capabilities.

Real files: the shared corpus' Inspect logs, and ``tests/data/inspect/*.eval`` (see
``tests/data/PROVENANCE.md``). Every pairing figure below is counted independently, from
the files' JSON, never by ctxtool."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, ROOT, SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import round_trip_checks
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.errors import CtxtoolError
from ctxtool.history import validate

runner = CliRunner()
DATA = ROOT / "tests" / "data"
EVAL_ARCHIVE = DATA / "inspect" / "log_message_deduplication.eval"
INSPECT_LOGS = sorted((CORPUS / "trajectories" / "inspect_ai").glob("*.json"))
ATIF = SAMPLES / "atif_trajectory.json"
RESPONSES = SAMPLES / "responses_items.jsonl"
GEMINI = SAMPLES / "gemini_session.json"


def _pairs(ts: list[Any]) -> tuple[int, int]:
    """(calls, results) as ctxtool reads them, and whether every result answers a call."""
    calls = [b.id for t in ts for m in t.messages for b in m.content if b.type == "tool_call"]
    results = [b.id for t in ts for m in t.messages for b in m.content if b.type == "tool_result"]
    assert set(results) <= set(calls)
    return len(calls), len(results)


def _cli(*args: str) -> Any:
    r = runner.invoke(app, list(args))
    return r


def _round_trips(path: Path, fmt: str, tmp_path: Path, load: Any = json.loads) -> None:
    """To its own format and via canonical JSONL: JSON-equal to the input; truncate then
    restore: equal to the input, and the truncated file differs."""
    same, canon, back = tmp_path / ("same" + path.suffix), tmp_path / "c.jsonl", tmp_path / ("back" + path.suffix)
    assert _cli("convert", str(path), "--to", fmt, "-o", str(same)).exit_code == 0
    assert load(same.read_text()) == load(path.read_text())
    assert _cli("convert", str(path), "--to", "ctxtool", "-o", str(canon)).exit_code == 0
    r = _cli("convert", str(canon), "--to", fmt, "-o", str(back))
    assert r.exit_code == 0, r.output
    assert load(back.read_text()) == load(path.read_text())
    cut, restored = tmp_path / ("t" + path.suffix), tmp_path / ("r" + path.suffix)
    env_cache = tmp_path / "cache"
    r = runner.invoke(app, ["truncate", str(path), "--max-chars", "12", "--max-lines", "1", "-o", str(cut)],
                      env={"CTXTOOL_CACHE_DIR": str(env_cache)})
    assert r.exit_code == 0, r.output
    if any(b.type == "tool_result" for t in formats.read(path) for m in t.messages for b in m.content):
        assert load(cut.read_text()) != load(path.read_text())
    r = runner.invoke(app, ["restore", str(cut), "-o", str(restored)], env={"CTXTOOL_CACHE_DIR": str(env_cache)})
    assert r.exit_code == 0, r.output
    assert load(restored.read_text()) == load(path.read_text())


def _jsonl(text: str) -> list[Any]:
    return [json.loads(x) for x in text.split("\n") if x.strip()]


# -- capabilities -----------------------------------------------------------------------------
def test_formats_lists_reads_and_writes() -> None:
    r = _cli("formats", "--json")
    assert r.exit_code == 0
    rows = {f["name"]: f for f in json.loads(r.stdout)["formats"]}
    assert set(rows) == set(formats.format_names())
    assert rows["inspect-eval"]["writes"] is False and "inspect" in rows["inspect-eval"]["to"]
    assert all(rows[n]["writes"] for n in ("ctxtool", "openai", "inspect", "atif", "responses", "gemini"))
    assert all(f["reads"] for f in rows.values())
    text = _cli("formats").stdout
    assert re.search(r"^inspect-eval\s+read only", text, re.M)


def test_readme_format_table_matches_registry() -> None:
    section = (ROOT / "README.md").read_text().split("## Formats", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[1:-1] for ln in section.splitlines() if ln.startswith("| `")]
    table = {c[0].strip().strip("`"): [x.strip() for x in c[1:]] for c in rows}
    assert set(table) == set(formats.format_names())
    for name, (_what, reads, writes) in table.items():
        fmt = formats.get_format(name)
        assert reads == fmt.reads, name
        assert writes == ("yes" if fmt.writes else "no"), name


def test_read_only_format_names_what_it_can_become(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    for args in (["convert", str(EVAL_ARCHIVE), "--to", "inspect-eval", "-o", str(out)],
                 ["truncate", str(EVAL_ARCHIVE), "-o", str(out)]):
        r = _cli(*args)
        assert r.exit_code == 2
        assert r.stderr.count("\n") == 1 and "inspect-eval is read only" in r.stderr and "--to one of:" in r.stderr
        assert "inspect" in r.stderr.split("--to one of:")[1] and "Traceback" not in r.output
    assert not out.exists()
    with pytest.raises(CtxtoolError, match="read only"):
        formats.write(formats.read(EVAL_ARCHIVE), io.BytesIO())


# -- Inspect eval logs ------------------------------------------------------------------------
def _inspect_counts(doc: dict[str, Any]) -> tuple[int, int, int]:
    msgs = [m for s in doc.get("samples") or [] for m in s["messages"]]
    calls = sum(len(m.get("tool_calls") or []) for m in msgs)
    return len(msgs), calls, sum(1 for m in msgs if m["role"] == "tool")


@pytest.mark.parametrize("path", INSPECT_LOGS or [pytest.param(None, marks=pytest.mark.skip("no corpus"))],
                         ids=lambda p: p.name if p else "none")
def test_inspect_log_real_files(path: Path, tmp_path: Path) -> None:
    ts = list(formats.read(path))
    assert {t.format for t in ts} == {"inspect"}
    doc = json.loads(path.read_text())
    n, calls, results = _inspect_counts(doc)
    assert sum(len(t.messages) for t in ts) == n
    assert _pairs(ts) == (calls, results)
    assert not validate.check_transcript(ts[0])
    _round_trips(path, "inspect", tmp_path)


def test_inspect_browser_log_independent_count() -> None:
    path = CORPUS / "trajectories" / "inspect_ai" / "inspect_browser_gpt-4o-mini.json"
    if not path.exists():
        pytest.skip("no corpus")
    (t,) = formats.read(path)
    assert _pairs([t]) == (4, 4)  # four browser calls, four tool messages (counted by hand)
    assert [m.role for m in t.messages][:3] == ["user", "assistant", "tool"]


def test_inspect_attachments_resolved_on_reading_and_kept_on_writing(tmp_path: Path) -> None:
    long_out = "line of output\n" * 40
    doc = {
        "version": 2, "status": "success", "eval": {"task": "t", "model": "m"},
        "samples": [{
            "id": 1, "epoch": 1, "input": "attachment://aaa",
            "messages": [
                {"id": "u", "content": "attachment://aaa", "role": "user", "source": "input"},
                {"id": "a", "content": "", "role": "assistant", "tool_calls": [
                    {"id": "c1", "function": "bash", "arguments": {"cmd": "attachment://bbb"}, "type": "function"}]},
                {"id": "t", "content": "attachment://ccc", "role": "tool", "tool_call_id": "c1", "function": "bash"},
            ],
            "attachments": {"aaa": "Please list the files.", "bbb": "ls -la /srv", "ccc": long_out},
        }],
    }
    src = tmp_path / "log.json"
    src.write_text(json.dumps(doc, indent=2))
    (t,) = formats.read(src)
    assert t.messages[0].text() == "Please list the files."
    assert t.messages[1].content[0].arguments == {"cmd": "ls -la /srv"}
    assert t.messages[2].content[0].text == long_out
    # as another format, the text is there; back in Inspect, the references are
    oai = tmp_path / "o.jsonl"
    assert _cli("convert", str(src), "--to", "openai", "-o", str(oai)).exit_code == 0
    assert "ls -la /srv" in oai.read_text() and "attachment://" not in oai.read_text()
    _round_trips(src, "inspect", tmp_path)
    # a message written anew (its output truncated, then restored) gets its reference back
    t.messages[2].touch()
    t.messages[1].touch()
    buf = io.BytesIO()
    formats.write([t], buf)
    assert json.loads(buf.getvalue()) == doc


def test_inspect_eval_archive_real_file(tmp_path: Path) -> None:
    with zipfile.ZipFile(EVAL_ARCHIVE) as z:
        sample = json.loads(z.read("samples/0_epoch_1.json"))
        header = json.loads(z.read("header.json"))
        reductions = json.loads(z.read("reductions.json"))
    msgs = sample["messages"]
    calls = sum(len(m.get("tool_calls") or []) for m in msgs)
    results = sum(1 for m in msgs if m["role"] == "tool")
    assert (len(msgs), calls, results) == (12, 5, 5)  # independent count, by hand
    ts = list(formats.read(EVAL_ARCHIVE))
    assert [t.format for t in ts] == ["inspect-eval"]
    assert len(ts[0].messages) == 12 and _pairs(ts) == (5, 5)
    # converted to a .json log: the header's fields and the sample as they were
    out = tmp_path / "log.json"
    assert _cli("convert", str(EVAL_ARCHIVE), "--to", "inspect", "-o", str(out)).exit_code == 0
    log = json.loads(out.read_text())
    assert log["samples"] == [sample]
    # the header's fields, and the archive's reductions where a JSON log keeps them
    assert log["reductions"] == reductions
    assert {k: v for k, v in log.items() if k not in ("samples", "reductions")} == {k: v for k, v in header.items() if k != "samples"}
    # through canonical JSONL to the same log; and every command reads the archive
    canon, back = tmp_path / "c.jsonl", tmp_path / "back.json"
    assert _cli("convert", str(EVAL_ARCHIVE), "--to", "ctxtool", "-o", str(canon)).exit_code == 0
    assert _cli("convert", str(canon), "--to", "inspect", "-o", str(back)).exit_code == 0
    assert json.loads(back.read_text()) == log
    for cmd in (["stats"], ["validate"], ["check"]):
        r = _cli(*cmd, str(EVAL_ARCHIVE))
        assert r.exit_code == 0, r.output
    r = _cli("truncate", str(EVAL_ARCHIVE), "--max-chars", "10", "--to", "inspect", "-o", str(tmp_path / "t.json"))
    assert r.exit_code == 0, r.output


# -- ATIF -------------------------------------------------------------------------------------
def _atif_counts(doc: dict[str, Any]) -> tuple[int, int]:
    trajs = [doc, *(doc.get("subagent_trajectories") or [])]
    steps = [s for tr in trajs for s in tr["steps"]]
    calls = sum(len(s.get("tool_calls") or []) for s in steps)
    results = sum(len(s["observation"]["results"]) for s in steps if s.get("tool_calls") and s.get("observation"))
    return calls, results


def test_atif_sample(tmp_path: Path) -> None:
    doc = json.loads(ATIF.read_text())
    ts = list(formats.read(ATIF))
    assert [t.format for t in ts] == ["atif", "atif"] and [t.id for t in ts] == ["run-7f3a", "imports-check"]
    assert _pairs(ts) == _atif_counts(doc) == (5, 5)
    root = ts[0]
    assert root.messages[2].usage is not None and root.messages[2].usage.cache_read == 1024
    assert [m.role for m in root.messages][:4] == ["system", "user", "assistant", "tool"]
    # a result without source_call_id answers the call at its position
    (step5_result,) = [b for m in root.messages for b in m.content if b.type == "tool_result" and b.id == "call_5_1"]
    assert step5_result.text == "none"
    assert all(not validate.check_transcript(t) for t in ts)
    same = tmp_path / "same.json"
    assert _cli("convert", str(ATIF), "--to", "atif", "-o", str(same)).exit_code == 0
    assert same.read_bytes() == ATIF.read_bytes()
    _round_trips(ATIF, "atif", tmp_path)


def test_atif_changed_step_keeps_its_other_fields() -> None:
    ts = list(formats.read(ATIF))
    obs = ts[0].messages[5]  # the delegation's observation
    assert obs.role == "tool"
    obs.content[0].text = "short"
    obs.touch()
    buf = io.BytesIO()
    formats.write(ts, buf)
    doc, before = json.loads(buf.getvalue()), json.loads(ATIF.read_text())
    r = doc["steps"][3]["observation"]["results"][0]
    assert r["content"] == "short" and r["subagent_trajectory_ref"] == before["steps"][3]["observation"]["results"][0]["subagent_trajectory_ref"]
    before["steps"][3]["observation"]["results"][0]["content"] = "short"
    assert doc == before


# -- OpenAI Responses API items -----------------------------------------------------------------
def test_responses_sample(tmp_path: Path) -> None:
    items = _jsonl(RESPONSES.read_text())
    (t,) = formats.read(RESPONSES)
    assert t.format == "responses"
    calls = sum(1 for o in items if o.get("type") == "function_call")
    outputs = sum(1 for o in items if o.get("type") == "function_call_output")
    assert (calls, outputs) == (4, 4)  # independent count
    assert _pairs([t]) == (calls, outputs)
    assert len(t.messages) == len(items) - 1  # the compaction item is kept opaque, not a message
    assert [m.role for m in t.messages][:3] == ["system", "user", "assistant"]
    assert not validate.check_transcript(t)
    same = tmp_path / "same.jsonl"
    assert _cli("convert", str(RESPONSES), "--to", "responses", "-o", str(same)).exit_code == 0
    assert same.read_bytes() == RESPONSES.read_bytes()
    _round_trips(RESPONSES, "responses", tmp_path, _jsonl)
    # a request body: the items under "input", the other fields kept
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "gpt-5", "instructions": "be brief", "input": items, "store": False}, indent=2))
    (b,) = formats.read(body)
    assert b.format == "responses" and len(b.messages) == len(items) - 1
    _round_trips(body, "responses", tmp_path)


def test_chat_messages_are_not_responses() -> None:
    (t,) = formats.read(SAMPLES / "openai_chat.json")
    assert t.format == "openai"


# -- Gemini CLI sessions -------------------------------------------------------------------------
def test_gemini_session_sample(tmp_path: Path) -> None:
    doc = json.loads(GEMINI.read_text())
    (t,) = formats.read(GEMINI)
    assert t.format == "gemini"
    calls = sum(len(m.get("toolCalls") or []) for m in doc["messages"])
    answered = sum(1 for m in doc["messages"] for tc in m.get("toolCalls") or [] if "result" in tc)
    assert (calls, answered) == (2, 2)  # independent count
    assert _pairs([t]) == (calls, answered)
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant", "user"]  # the info record is kept, not a message
    assert t.messages[1].content[0].type == "thinking" and t.messages[1].usage is not None
    assert t.messages[2].content[1].text == "Python 3.10.12"
    assert not validate.check_transcript(t)
    same = tmp_path / "same.json"
    assert _cli("convert", str(GEMINI), "--to", "gemini", "-o", str(same)).exit_code == 0
    assert same.read_bytes() == GEMINI.read_bytes()
    _round_trips(GEMINI, "gemini", tmp_path)


# -- hypothesis: one round trip per format -----------------------------------------------------
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
call_ids = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8).map(lambda s: "call_" + s)


@st.composite
def turns(draw: Any) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """(user text, [(call id, command, output)]) turns; each call answered."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 3))
        ids = draw(st.lists(call_ids, min_size=n, max_size=n, unique=True))
        out.append((draw(text), [(c, draw(text), draw(text)) for c in ids]))
    return out


def _inspect_doc(ts: list[Any]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"id": "s", "content": "be careful", "role": "system"}]
    for i, (u, calls) in enumerate(ts):
        msgs.append({"id": f"u{i}", "content": u, "source": "input", "role": "user"})
        a: dict[str, Any] = {"id": f"a{i}", "content": f"step {i}", "source": "generate", "role": "assistant", "model": "m"}
        if calls:
            a["tool_calls"] = [{"id": c, "function": "bash", "arguments": {"cmd": cmd}, "type": "function"} for c, cmd, _ in calls]
        msgs.append(a)
        msgs += [{"id": f"t{c}", "content": o, "role": "tool", "tool_call_id": c, "function": "bash"} for c, _, o in calls]
    return {"version": 2, "status": "success", "eval": {"task": "x"}, "samples": [{"id": 1, "epoch": 1, "messages": msgs, "scores": {}}]}


def _atif_doc(ts: list[Any]) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"step_id": 1, "source": "system", "message": "be careful"}]
    for u, calls in ts:
        steps.append({"step_id": len(steps) + 1, "source": "user", "message": u})
        s: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent", "message": "ok"}
        if calls:
            s["tool_calls"] = [{"tool_call_id": c, "function_name": "bash", "arguments": {"cmd": cmd}} for c, cmd, _ in calls]
            s["observation"] = {"results": [{"source_call_id": c, "content": o} for c, _, o in calls]}
        steps.append(s)
    return {"schema_version": "ATIF-v1.5", "session_id": "s", "agent": {"name": "a", "version": "1"}, "steps": steps}


def _responses_items(ts: list[Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "developer", "content": "be careful"}]
    for u, calls in ts:
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": u}]})
        items += [{"type": "function_call", "call_id": c, "name": "bash", "arguments": json.dumps({"cmd": cmd})} for c, cmd, _ in calls]
        items += [{"type": "function_call_output", "call_id": c, "output": o} for c, _, o in calls]
        items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})
    return items


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_inspect_round_trip_property(ts: list[Any]) -> None:
    round_trip_checks(json.dumps(_inspect_doc(ts), indent=2, ensure_ascii=False).encode(), ".json", "inspect", json.loads)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_atif_round_trip_property(ts: list[Any]) -> None:
    round_trip_checks(json.dumps(_atif_doc(ts), indent=2, ensure_ascii=False).encode(), ".json", "atif", json.loads)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_responses_round_trip_property(ts: list[Any]) -> None:
    data = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in _responses_items(ts)).encode()
    round_trip_checks(data, ".jsonl", "responses", _jsonl)


def _gemini_doc(ts: list[Any]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    for i, (u, calls) in enumerate(ts):
        msgs.append({"id": f"u{i}", "timestamp": "t", "type": "user", "content": u})
        g: dict[str, Any] = {"id": f"g{i}", "timestamp": "t", "type": "gemini", "content": "ok"}
        if calls:
            g["toolCalls"] = [{"id": c, "name": "shell", "args": {"command": cmd},
                               "result": [{"functionResponse": {"id": c, "name": "shell", "response": {"output": o}}}],
                               "status": "success", "timestamp": "t"} for c, cmd, o in calls]
        msgs.append(g)
    return {"sessionId": "s", "projectHash": "h", "startTime": "t", "lastUpdated": "t", "messages": msgs}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_gemini_round_trip_property(ts: list[Any]) -> None:
    round_trip_checks(json.dumps(_gemini_doc(ts), indent=2, ensure_ascii=False).encode(), ".json", "gemini", json.loads)
