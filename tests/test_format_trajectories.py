"""Eval trajectories (issue 12): SWE-agent ``.traj``, mini-swe-agent ``.traj.json``, OpenHands
event streams and ``output.jsonl``: detection, pairing against counts made here from the raw
JSON, byte-exact round trips, operations that never add an orphan, and repair's refusal."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.history.pairing import pair
from ctxtool.history.repair import repair
from ctxtool.io.jsonl import open_source
from ctxtool.model import Transcript
from ctxtool.tool_outputs import files as tools_ops
from ctxtool.tool_outputs.algorithms import Limits

runner = CliRunner()
TRAJ = CORPUS / "trajectories"
SWE = sorted((TRAJ / "swe-agent").glob("*.traj"))
MINI = sorted((TRAJ / "mini-swe-agent").glob("*"))
OH = sorted((TRAJ / "openhands").glob("*"))
ALL = [(p, "swe-agent") for p in SWE] + [(p, "mini-swe-agent") for p in MINI] + [(p, "openhands") for p in OH]
needs_corpus = pytest.mark.skipif(not TRAJ.is_dir(), reason="../shared/corpus not present")
TIGHT = Limits(max_lines=5, max_bytes=600, max_chars=800, spill_threshold=40_000, max_line_length=200)


def _ids(p: Path) -> str:
    return p.name


# -- independent counts, from the raw JSON --------------------------------------------------
def raw_pairs_swe(doc: dict[str, Any]) -> int:
    """Calls answered: ids in ``tool_calls`` that a later tool message lists in ``tool_call_ids``;
    without tool calls, an assistant ``action`` followed by a (non-demo) user observation."""
    h = doc["history"]
    if any(m.get("tool_calls") for m in h):
        open_ids: list[str] = []
        n = 0
        for m in h:
            open_ids += [tc["id"] for tc in m.get("tool_calls") or []]
            for i in m.get("tool_call_ids", []) if m["role"] == "tool" else []:
                if i in open_ids:
                    open_ids.remove(i)
                    n += 1
        return n
    return sum(
        1 for a, o in zip(h, h[1:], strict=False)
        if a["role"] == "assistant" and (a.get("action") or "").strip() and o["role"] == "user"
        and not o.get("is_demo") and o.get("message_type", "observation") == "observation"
    )


def raw_pairs_mini(msgs: list[dict[str, Any]]) -> int:
    return sum(
        1 for a, o in zip(msgs, msgs[1:], strict=False)
        if a["role"] == "assistant" and "```" in a["content"] and o["role"] == "user"
        and o["content"].lstrip().startswith("<returncode>")
    )


def raw_pairs_openhands(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if "observation" in e and "tool_call_metadata" in e)


def raw_docs(p: Path) -> list[Any]:
    raw = p.read_bytes()
    try:
        return [json.loads(raw)]
    except ValueError:
        return [json.loads(x) for x in raw.splitlines() if x.strip()]


def raw_steps_swe(doc: dict[str, Any]) -> list[int]:
    """The trajectory transcript's pairs: steps with an action and an observation (none
    without a step list)."""
    steps = doc.get("trajectory")
    if not isinstance(steps, list) or not steps:
        return []
    return [sum(1 for s in steps if (s.get("action") or "").strip() and isinstance(s.get("observation"), str))]


def expected_pairs(p: Path, fmt: str) -> list[int]:
    docs = raw_docs(p)
    if fmt == "swe-agent":
        return [n for d in docs for n in [raw_pairs_swe(d), *raw_steps_swe(d)]]
    if fmt == "mini-swe-agent":
        return [raw_pairs_mini(d if isinstance(d, list) else d["messages"]) for d in docs]
    return [raw_pairs_openhands(d if isinstance(d, list) else d["history"]) for d in docs]


def answered(t: Transcript) -> int:
    return sum(1 for _, _, ri in pair(t.messages).pairs if ri is not None)


def clean(t: Transcript) -> bool:
    p = pair(t.messages)
    return not (p.orphans or p.unanswered() or p.duplicate_results or p.duplicate_calls)


# -- the corpus --------------------------------------------------------------------------------
@needs_corpus
@pytest.mark.parametrize(("path", "fmt"), ALL, ids=[p.name for p, _ in ALL])
def test_detected_paired_and_round_tripped(path: Path, fmt: str, tmp_path: Path) -> None:
    src = open_source(str(path))
    assert formats.detect(src).name == fmt  # the most specific reading wins over openai's
    ts = list(formats.read(path))
    assert [answered(t) for t in ts] == expected_pairs(path, fmt)
    assert all(clean(t) for t in ts)
    assert sum(answered(t) for t in ts) > 0
    # to its own format: the same bytes (a JSON document without a final newline gains none)
    out = tmp_path / ("same" + path.suffix)
    assert runner.invoke(app, ["convert", str(path), "--to", fmt, "-o", str(out)]).exit_code == 0
    raw = path.read_bytes()
    assert out.read_bytes() == raw
    # every message re-rendered from the model: JSON-equal to the source
    for t in ts:
        for m in t.messages:
            m.touch()
    buf = tmp_path / ("dirty" + path.suffix)
    formats.write_path(ts, buf)
    assert raw_docs(buf) == raw_docs(path)


@needs_corpus
@pytest.mark.parametrize(("path", "fmt"), ALL, ids=[p.name for p, _ in ALL])
def test_truncate_reaches_observations_and_restores(path: Path, fmt: str, tmp_path: Path) -> None:
    short, back = tmp_path / ("short" + path.suffix), tmp_path / ("back" + path.suffix)
    rep = tools_ops.truncate_file(str(path), str(short), limits=TIGHT, cache=tmp_path / "c")
    assert rep.truncated > 0  # observations are tool outputs, in every generation of each format
    got = list(formats.read(short))
    assert [answered(t) for t in got] == expected_pairs(path, fmt)
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "c")
    assert raw_docs(back) == raw_docs(path)
    if fmt == "swe-agent":  # the steps' observations are cut too; every other field stays
        (a,), (b,) = raw_docs(short), raw_docs(path)
        assert a["info"] == b["info"] and a["history"] != b["history"]
        assert len(a["trajectory"]) == len(b["trajectory"])
        cut = [k for k, (x, y) in enumerate(zip(a["trajectory"], b["trajectory"], strict=True)) if x != y]
        assert cut
        for k in cut:
            x, y = a["trajectory"][k], b["trajectory"][k]
            assert len(x["observation"]) < len(y["observation"]) and "output_ref" in x["ctxtool"]
            assert {k: v for k, v in x.items() if k not in ("observation", "ctxtool")} == {
                k: v for k, v in y.items() if k != "observation"}


OPERATIONS = [
    ["window", "--max-messages", "6"],
    ["cut", "--keep-recent", "5"],
    ["trim", "--budget", "1500"],
    ["compact", "--force"],
    ["archive"],
    ["repair"],
]


@needs_corpus
@pytest.mark.parametrize(("path", "fmt"), ALL, ids=[p.name for p, _ in ALL])
def test_no_operation_introduces_an_orphan(path: Path, fmt: str, tmp_path: Path) -> None:
    for op in OPERATIONS:
        out = tmp_path / (op[0] + path.suffix)
        r = runner.invoke(app, [*op, str(path), "-o", str(out), "--cache-dir", str(tmp_path / "c")]
                          if op[0] in ("trim",) else [*op, str(path), "-o", str(out)])
        assert r.exit_code == 0, (op, r.output)
        got = list(formats.read(out))
        assert got and got[0].format == fmt, op
        assert all(clean(t) for t in got), op


@needs_corpus
def test_swe_agent_traj_was_misread_as_openai_and_repair_refuses_that_reading(tmp_path: Path) -> None:
    path = next(p for p in SWE if "function_calling" in p.name)
    (as_openai,) = formats.read(path, "openai")
    p = pair(as_openai.messages)
    assert len(p.orphans) == len(p.unanswered()) == 13  # what the openai reading sees: none of it real
    with pytest.raises(CtxtoolError) as e:
        repair(as_openai)
    assert e.value.kind == Failure.INVALID and "pairing cannot be trusted" in e.value.message
    out = tmp_path / "r.traj"
    r = runner.invoke(app, ["repair", str(path), "--format", "openai", "-o", str(out)])
    assert r.exit_code == ExitCode.INVALID and not out.exists()
    assert len(r.stderr.strip().splitlines()) == 1 and "not repaired" in r.stderr
    # read as what it is: nothing to repair, and the file comes back as it was
    r = runner.invoke(app, ["repair", str(path), "-o", str(out)])
    assert r.exit_code == 0 and json.loads(out.read_bytes()) == json.loads(path.read_bytes())
    r = runner.invoke(app, ["validate", str(path), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["problems"] == []


# -- generated trajectories ----------------------------------------------------------------
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
big = st.integers(0, 60).map(lambda n: "line of output\n" * n)


@st.composite
def swe_docs(draw: st.DrawFn) -> dict[str, Any]:
    fc = draw(st.booleans())
    h: list[dict[str, Any]] = [{"role": "system", "content": draw(text), "agent": "main"},
                               {"role": "user", "content": draw(text), "agent": "main"}]
    steps = []
    for k in range(draw(st.integers(0, 4))):
        act = draw(st.sampled_from(["ls -F", "open x.py", "submit"]))
        a: dict[str, Any] = {"role": "assistant", "content": draw(text), "thought": draw(text), "action": act, "agent": "main"}
        obs = draw(big)
        if fc:
            ids = [f"call_{k}_{j}" for j in range(draw(st.integers(1, 2)))]
            a["tool_calls"] = [{"function": {"arguments": json.dumps({"command": act}), "name": "bash"}, "id": i,
                                "type": "function"} for i in ids]
            a["message_type"] = "action"
            h += [a, {"role": "tool", "content": obs, "agent": "main", "message_type": "observation", "tool_call_ids": ids}]
        else:
            h += [a, {"role": "user", "content": obs, "agent": "main"}]
        steps.append({"action": act, "observation": obs, "thought": a["thought"], "state": "{}"})
    return {"environment": "swe_main", "trajectory": steps, "history": h, "info": {"exit_status": draw(text)}}


@st.composite
def mini_docs(draw: st.DrawFn) -> Any:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": draw(text)}, {"role": "user", "content": draw(text)}]
    for _ in range(draw(st.integers(0, 4))):
        msgs.append({"role": "assistant", "content": f"{draw(text)}\n\n```bash\nls\n```"})
        msgs.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{draw(big)}</output>"})
    if draw(st.booleans()):
        return {"info": {"exit_status": "Submitted"}, "messages": msgs, "trajectory_format": "mini-swe-agent-1"}
    return msgs


@st.composite
def openhands_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {"id": 0, "source": "environment", "observation": "agent_state_changed", "content": "", "extras": {}},
        {"id": 1, "source": "user", "message": "go", "action": "message", "args": {"content": draw(text)}},
    ]
    for k in range(draw(st.integers(0, 4))):
        tcm = {"function_name": "execute_bash", "tool_call_id": f"toolu_{k}",
               "model_response": {"id": f"r{k}", "model": "m", "usage": {"prompt_tokens": 10 + k, "completion_tokens": 3}}}
        ev.append({"id": len(ev), "source": "agent", "action": "run", "tool_call_metadata": tcm,
                   "args": {"command": "ls", "thought": draw(text)}, "message": "Running command: ls"})
        ev.append({"id": len(ev), "source": "agent", "observation": "run", "cause": len(ev) - 1, "tool_call_metadata": tcm,
                   "content": draw(big), "extras": {"command": "ls"}, "message": "ran"})
    ev.append({"id": len(ev), "source": "agent", "action": "finish", "args": {"outputs": {}, "thought": "done"},
               "tool_call_metadata": {"function_name": "finish", "tool_call_id": "toolu_end"}})
    return ev


def _check_generated(tmp_path: Path, name: str, data: bytes, fmt: str, expected: list[int]) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    ts = list(formats.read(path))
    assert ts[0].format == fmt
    assert [answered(t) for t in ts] == expected and all(clean(t) for t in ts)
    out, canon, back = tmp_path / ("o" + name), tmp_path / "c.jsonl", tmp_path / ("b" + name)
    assert runner.invoke(app, ["convert", str(path), "--to", fmt, "-o", str(out)]).exit_code == 0
    assert out.read_bytes() == data
    assert runner.invoke(app, ["convert", str(path), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
    assert runner.invoke(app, ["convert", str(canon), "--to", fmt, "-o", str(back)]).exit_code == 0
    assert raw_docs(back) == raw_docs(path)
    short = tmp_path / ("s" + name)
    tools_ops.truncate_file(str(path), str(short), limits=TIGHT, cache=tmp_path / "cache")
    assert [answered(t) for t in formats.read(short)] == expected
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "cache")
    assert raw_docs(back) == raw_docs(path)


HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@HYP
@given(doc=swe_docs())
def test_swe_agent_generated_round_trip(tmp_path: Path, doc: dict[str, Any]) -> None:
    data = (json.dumps(doc, indent=2) + "\n").encode()
    _check_generated(tmp_path, "x.traj", data, "swe-agent", [raw_pairs_swe(doc), *raw_steps_swe(doc)])


@HYP
@given(doc=mini_docs())
def test_mini_swe_agent_generated_round_trip(tmp_path: Path, doc: Any) -> None:
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    msgs = doc if isinstance(doc, list) else doc["messages"]
    _check_generated(tmp_path, "x.traj.json", data, "mini-swe-agent", [raw_pairs_mini(msgs)])


@HYP
@given(runs=st.lists(openhands_events(), min_size=1, max_size=3), jsonl=st.booleans())
def test_openhands_generated_round_trip(tmp_path: Path, runs: list[list[dict[str, Any]]], jsonl: bool) -> None:
    if jsonl:  # an evaluation output.jsonl: one instance per line, events under history
        data = b"".join(json.dumps({"instance_id": f"i{k}", "history": ev, "metrics": {}}).encode() + b"\n"
                        for k, ev in enumerate(runs))
        _check_generated(tmp_path, "output.jsonl", data, "openhands", [raw_pairs_openhands(ev) for ev in runs])
    else:
        data = (json.dumps(runs[0], indent=2) + "\n").encode()
        _check_generated(tmp_path, "events.json", data, "openhands", [raw_pairs_openhands(runs[0])])


def test_mini_swe_agent_text_protocol_is_not_written_twice(tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "look\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n" + "x\n" * 50 + "</output>"}]
    p = tmp_path / "t.traj.json"
    p.write_text(json.dumps(msgs))
    (t,) = formats.read(p)
    call = t.messages[1].tool_calls()[0]
    assert call.arguments is None and t.messages[2].role == "user"
    assert t.messages[2].content[0].type == "tool_result" and t.messages[2].content[0].id == call.id
    for m in t.messages:
        m.touch()
    out = tmp_path / "o.traj.json"
    formats.write_path([t], out)
    assert json.loads(out.read_bytes()) == msgs
    assert re.search(r'"tool_calls"|"tool_call_id"', out.read_text()) is None


@needs_corpus
def test_openhands_events_one_per_line(tmp_path: Path) -> None:
    """The same event stream as JSON Lines: non-message events stay records, bytes come back."""
    (events,) = raw_docs(TRAJ / "openhands" / "openhands_basic_gui_mode.json")
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    (t,) = formats.read(p)
    assert t.format == "openhands" and t.extra["layout"] == "entries_jsonl"
    assert len(t.entries) == len(events) and answered(t) == raw_pairs_openhands(events) and clean(t)
    out = tmp_path / "o.jsonl"
    formats.write_path([t], out)
    assert out.read_bytes() == p.read_bytes()
    short, back = tmp_path / "s.jsonl", tmp_path / "b.jsonl"
    assert tools_ops.truncate_file(str(p), str(short), limits=TIGHT, cache=tmp_path / "c").truncated > 0
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "c")
    assert back.read_bytes() == p.read_bytes()


def test_formats_names_swe_agent_steps_by_key_not_by_their_text(tmp_path: Path) -> None:
    """A SWE-agent step's ``action`` is the command and its ``observation`` the output: ``ctxtool
    formats`` counts steps under the key (a few types, not one a command); a value that is a name
    (OpenHands' ``run``, a role) still names its type."""
    doc = {"environment": "swe_main", "info": {"exit_status": "submitted"},
           "history": [{"role": "system", "content": "s", "agent": "main"}, {"role": "user", "content": "u", "agent": "main"}],
           "trajectory": [{"action": f"open x{k}.py\n", "observation": f"line of output {k}\n" * 3, "thought": "t",
                           "state": "{}"} for k in range(3)]}
    p = tmp_path / "run.traj"
    p.write_text(json.dumps(doc))
    r = runner.invoke(app, ["formats", "--json", str(p)])
    assert r.exit_code == 0, r.output
    types = {(x["type"], x["read_as"]): x["count"] for x in json.loads(r.stdout)["files"][0]["types"]}
    assert types[("action", "message (assistant)")] == 3 and types[("observation", "message (tool)")] == 3
    assert not any("open" in t or "output" in t for t, _ in types)
    r = runner.invoke(app, ["formats", str(p)])
    assert r.exit_code == 0 and max(map(len, r.stdout.splitlines()[1:])) < 60  # the type rows, under the file's line
    oh = tmp_path / "events.json"
    oh.write_text(json.dumps([{"id": 1, "action": "run", "args": {"command": "ls"}, "message": "Running ls"},
                              {"id": 2, "observation": "run", "content": "a.py", "extras": {"command": "ls"}, "cause": 1}]))
    r = runner.invoke(app, ["formats", "--json", "-f", "openhands", str(oh)])
    assert r.exit_code == 0, r.output
    assert {x["type"] for x in json.loads(r.stdout)["files"][0]["types"]} == {"action:run", "observation:run"}
