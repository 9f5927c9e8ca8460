"""Hypothesis: reading and writing back is lossless, directly and through canonical JSONL."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool import formats
from ctxtool.io.jsonl import Source

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
ids = st.text(alphabet="abcdef0123456789", min_size=4, max_size=8).map(lambda s: "call_" + s)
extra_fields = st.dictionaries(st.sampled_from(["name", "weight", "x_note", "timestamp"]), st.one_of(text, st.integers(-(2**63), 2**63 - 1), st.booleans()), max_size=2)


@st.composite
def openai_conversation(draw):  # type: ignore[no-untyped-def]
    msgs = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text)})
    for _ in range(draw(st.integers(1, 6))):
        msgs.append({"role": "user", "content": draw(st.one_of(text, st.lists(st.builds(lambda t: {"type": "text", "text": t}, text), max_size=2)))})
        n_calls = draw(st.integers(0, 3))
        call_ids = draw(st.lists(ids, min_size=n_calls, max_size=n_calls, unique=True))
        a = {"role": "assistant", "content": draw(st.one_of(st.none(), text))}
        if call_ids:
            a["tool_calls"] = [
                {"id": c, "type": "function", "function": {"name": draw(st.sampled_from(["read", "bash", "grep"])), "arguments": json.dumps({"q": draw(text)})}}
                for c in call_ids
            ]
        a.update(draw(extra_fields))
        msgs.append(a)
        for c in call_ids:
            msgs.append({"role": "tool", "tool_call_id": c, "content": draw(text)})
    return msgs


def _roundtrip(src_bytes: bytes, fmt: str | None = None) -> tuple[list, bytes, bytes]:  # type: ignore[type-arg]
    import tempfile

    from ctxtool.io.jsonl import open_source

    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        f.write(src_bytes)
        name = f.name
    ts = list(formats.read_source(open_source(name), fmt))
    same = io.BytesIO()
    formats.write(ts, same)
    canon = io.BytesIO()
    formats.write(ts, canon, "ctxtool")
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        f.write(canon.getvalue())
        cname = f.name
    back = io.BytesIO()
    formats.write(list(formats.read(cname)), back, fmt or ts[0].format)
    Path(name).unlink()
    Path(cname).unlink()
    return ts, same.getvalue(), back.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_conversation())
def test_openai_messages_jsonl_round_trip(msgs) -> None:  # type: ignore[no-untyped-def]
    src = b"".join(json.dumps(m, ensure_ascii=False).encode() + b"\n" for m in msgs)
    ts, same, back = _roundtrip(src, "openai")
    assert same == src  # unchanged lines are byte-identical
    assert [json.loads(x) for x in back.splitlines()] == msgs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(openai_conversation(), min_size=1, max_size=4), st.sampled_from(["messages", "traj", "history"]))
def test_openai_dataset_round_trip(convs, key) -> None:  # type: ignore[no-untyped-def]
    recs = [{"id": i, key: c, "reward": i * 0.5} for i, c in enumerate(convs)]
    src = b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    ts, same, back = _roundtrip(src, "openai")
    assert len(ts) == len(recs)
    assert same == src
    assert [json.loads(x) for x in back.splitlines()] == recs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(openai_conversation())
def test_rerendered_messages_read_back_equal(msgs) -> None:  # type: ignore[no-untyped-def]
    """A changed message is rendered from the model: reading the rendering gives the same model."""
    import tempfile

    src = b"".join(json.dumps(m).encode() + b"\n" for m in msgs)
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        f.write(src)
    ts = list(formats.read(f.name))
    for m in ts[0].messages:
        m.touch()
    out = io.BytesIO()
    formats.write(ts, out)
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as g:
        g.write(out.getvalue())
    again = list(formats.read(g.name, "openai"))
    a = [(m.role, [b.to_json() for b in m.content]) for m in ts[0].messages]
    b = [(m.role, [b.to_json() for b in m.content]) for m in again[0].messages]
    assert a == b


def test_source_sample_for_detection() -> None:
    s = Source("x", "jsonl")
    assert s.sample() == []


# -- Cline / Roo Code task histories ---------------------------------------------------------
# words a parameter or an output may hold: anything but the tag brackets a call is read from
plain = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>"), max_size=40)
output = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=8).map("\n".join)
ENV = "<environment_details>\n# Current Mode\nACT MODE\n</environment_details>"


@st.composite
def cline_history(draw):  # type: ignore[no-untyped-def]
    """A Cline ``api_conversation_history.json``: a task, then turns of an assistant message
    with one tool tag (``<tool><param>v</param></tool>``, text around it) answered by a user
    message headed ``[tool for 'arg'] Result:`` (output in the same block or the next one)."""
    ts = draw(st.booleans())
    msgs = [{"role": "user", "content": [{"type": "text", "text": f"<task>\n{draw(plain)}\n</task>"},
                                         {"type": "text", "text": ENV}]}]
    for k in range(draw(st.integers(1, 5))):
        tool = draw(st.sampled_from(["read_file", "execute_command", "search_files", "write_to_file"]))
        params = draw(st.dictionaries(st.sampled_from(["path", "command", "regex", "content"]), plain, min_size=1, max_size=2))
        body = "".join(f"<{p}>{v}</{p}>\n" for p, v in params.items())
        before = draw(st.sampled_from(["", "<thinking>\nLook first.\n</thinking>\n\n", "I'll check.\n"]))
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"{before}<{tool}>\n{body}</{tool}>"}]})
        # Cline trims a parameter's value before it names the call in the result's header
        head = f"[{tool} for '{next(iter(params.values())).strip()}'] Result:"
        out = draw(output)
        if draw(st.booleans()):
            blocks = [{"type": "text", "text": head}, {"type": "text", "text": out or "(no output)"}]
        else:
            blocks = [{"type": "text", "text": f"{head}\n{out}"}]
        msgs.append({"role": "user", "content": [*blocks, {"type": "text", "text": ENV}]})
        if ts:
            msgs[-2]["ts"], msgs[-1]["ts"] = 1748852000000 + 2 * k, 1748852000001 + 2 * k
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "<attempt_completion>\n<result>done</result>\n</attempt_completion>"}]})
    return msgs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cline_history(), st.booleans())
def test_cline_history_round_trip(msgs, compact) -> None:  # type: ignore[no-untyped-def]
    from strategies import round_trip_checks

    from ctxtool.history.pairing import pair

    data = (json.dumps(msgs, ensure_ascii=False, separators=(",", ":")) if compact
            else json.dumps(msgs, ensure_ascii=False, indent=2) + "\n").encode()
    round_trip_checks(data, ".json", "cline", json.loads)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        f.write(data)
    t = next(formats.read(f.name))
    Path(f.name).unlink()
    same = io.BytesIO()
    formats.write([t], same)
    assert same.getvalue() == data  # byte for byte, one line or indented
    p = pair(t.messages)
    calls = sum(1 for m in msgs[1:-1] if m["role"] == "assistant")
    assert len([1 for _, _, r in p.pairs if r is not None]) == calls  # every tag answered by its header
    assert not p.orphans
