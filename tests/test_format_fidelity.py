"""Lossless numbers and source styles (issue 10 item 3).

Numbers keep their source text through every path that writes (conversion to canonical
JSONL and back, operations on dataset records), and a changed dataset record is written in
its source's style so that the unchanged messages inside it stay byte-identical.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import tempfile
from pathlib import Path

from conftest import corpus_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.io import jsonl as jsonio
from ctxtool.io import jsontext

ROOT = Path(__file__).resolve().parent.parent
BIG = "123456789012345678901234567891"
runner = CliRunner()


def _lines(p: Path) -> list[bytes]:
    return p.read_bytes().splitlines()


# -- numbers -------------------------------------------------------------------------
def test_numbers_keep_their_text() -> None:
    src = b'{"a": 0.000005, "b": 1.50, "c": 1e5, "d": ' + BIG.encode() + b', "e": -0, "f": [1E-7, 2.0], "g": 0.5}'
    obj = jsonio.loads(src)
    assert obj["d"] == int(BIG) and isinstance(obj["d"], int)
    assert jsonio.dumps(obj, jsontext.Style(", ", ": ")) == src
    assert isinstance(obj["a"], float) and obj["a"] == 5e-6
    # pickled (parallel workers) and copied values keep their text
    assert jsonio.dumps(pickle.loads(pickle.dumps(obj)), jsontext.Style(", ", ": ")) == src


def test_plain_documents_take_the_fast_path() -> None:
    assert not jsontext.needs_exact(b'{"a": 0.5, "b": 12, "c": "0.000005 1e5", "d": [1, 2.5]}')
    assert jsontext.needs_exact(b'{"a": 0.000005}')
    assert jsontext.needs_exact(b'{"a": [1, 1.50]}')
    assert jsontext.needs_exact(b'{"a": ' + BIG.encode() + b"}")


def test_lone_surrogates_are_written_escaped() -> None:
    src = b'{"a":"x\\ud800y","b":0.000005}'
    assert jsonio.dumps(jsonio.loads(src)) == src  # valid UTF-8 out, as JavaScript writes it


def test_integers_beyond_python_digit_limit() -> None:
    huge = "9" * 5000
    obj = jsonio.loads(f'{{"n": {huge}, "m": -{huge}}}')
    assert jsonio.dumps(obj) == f'{{"n":{huge},"m":-{huge}}}'.encode()
    assert f"{obj['n']}" == huge


def test_pi_session_round_trips_through_canonical_byte_for_byte(tmp_path: Path) -> None:
    src = corpus_file("pi", "pi_before-compaction.jsonl")
    canon, back = tmp_path / "c.jsonl", tmp_path / "b.jsonl"
    assert runner.invoke(app, ["convert", str(src), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
    assert runner.invoke(app, ["convert", str(canon), "--to", "pi", "-o", str(back)]).exit_code == 0
    a, b = _lines(src), _lines(back)
    assert len(a) == len(b)
    assert [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y] == []


def test_big_integers_survive_convert_and_dataset_operations(tmp_path: Path) -> None:
    rec = {
        "id": "r1",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "question " * 200},
            *(
                m
                for k in range(3)
                for m in (
                    {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"c{k}", "content": "file " * 300},
                )
            ),
            {"role": "assistant", "content": "answer " * 200},
            {"role": "user", "content": "again " * 200},
            {"role": "assistant", "content": "done"},
        ],
    }
    line = json.dumps(rec)[:-1] + f', "seed": {BIG}, "lr": 0.000005}}'
    src = tmp_path / "d.jsonl"
    src.write_text(line + "\n")
    canon = tmp_path / "c.jsonl"
    assert runner.invoke(app, ["convert", str(src), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
    assert BIG in canon.read_text() and "0.000005" in canon.read_text()
    back = tmp_path / "b.jsonl"
    assert runner.invoke(app, ["convert", str(canon), "--to", "openai", "-o", str(back)]).exit_code == 0
    assert back.read_bytes() == src.read_bytes()
    for i, cmd in enumerate(
        (
            ["window", "--max-messages", "2"],
            ["cut", "--keep-recent-tokens", "50"],
            ["archive", "--cutoff", "0"],
            ["compact", "--force", "--summarizer", "heuristic", "--keep-recent-tokens", "50"],
        )
    ):
        out = tmp_path / f"w{i}.jsonl"
        r = runner.invoke(app, [cmd[0], str(src), *cmd[1:], "-o", str(out)])
        assert r.exit_code == 0, (cmd, r.output)
        text = out.read_text()
        assert text != src.read_text(), cmd  # the record changed
        assert f'"seed": {BIG}' in text and '"lr": 0.000005' in text, cmd


# -- styles --------------------------------------------------------------------------
STYLES = {
    "python": {},  # json.dumps defaults: ", " / ": ", \uXXXX escapes
    "python-utf8": {"ensure_ascii": False},
    "compact-ascii": {"separators": (",", ":")},
    "compact-utf8": {"separators": (",", ":"), "ensure_ascii": False},
}
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
number = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.000005, 1e-7, 123456.0, 1e22]),
)
extra = st.dictionaries(st.sampled_from(["name", "weight", "x_score"]), st.one_of(text, number, st.booleans()), max_size=2)


@st.composite
def records(draw):  # type: ignore[no-untyped-def]
    msgs = []
    for i in range(draw(st.integers(2, 6))):
        m = {"role": "user" if i % 2 == 0 else "assistant", "content": draw(text)}
        m.update(draw(extra))
        msgs.append(m)
    rec = {"id": draw(text), "messages": msgs}
    rec.update(draw(st.dictionaries(st.sampled_from(["meta", "score", "tags"]), st.one_of(text, number, st.lists(number, max_size=3)), max_size=3)))
    return rec


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.sampled_from(sorted(STYLES)), st.data())
def test_changed_record_keeps_its_style(rec, style, data) -> None:  # type: ignore[no-untyped-def]
    kw = STYLES[style]
    line = json.dumps(rec, **kw).encode()
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        f.write(line + b"\n" + line + b"\n")
        name = f.name
    ts = list(formats.read(name, "openai"))
    k = data.draw(st.integers(0, len(rec["messages"]) - 1))
    m = ts[0].messages[k]
    m.content[0].text = "changed ✓ \u00e9"
    m.touch()
    out = io.BytesIO()
    formats.write(ts, out)
    first, second = out.getvalue().split(b"\n")[:2]
    assert second == line  # the unchanged record as it was
    want = json.loads(line)
    want["messages"][k]["content"] = "changed ✓ \u00e9"
    assert json.loads(first) == want
    # every other message (and every number) is byte-identical to the source
    pos = 0
    for j, msg in enumerate(rec["messages"]):
        if j != k:
            text = json.dumps(msg, **kw).encode()
            assert text in line
            pos = first.index(text, pos) + len(text)
    if not line.isascii() or re.search(rb"\\u(?!00[0-7])", line):
        # the style could be told from the source: the whole record is the source text with
        # only that message's content replaced
        assert first == json.dumps(want, **kw).encode()


def test_json_documents_keep_their_indentation_and_escaping(tmp_path: Path) -> None:
    """taubench's file was written by Python's json.dump(indent=2): \\uXXXX escapes."""
    for src, fmt in (
        (corpus_file("openai_chat", "taubench_gpt-4o-airline.json"), "openai"),
        (corpus_file("sharegpt", "llamafactory_glaive_toolcall_en_demo.json"), "sharegpt"),
    ):
        same, canon, back = tmp_path / "same.json", tmp_path / "c.jsonl", tmp_path / "back.json"
        assert runner.invoke(app, ["convert", str(src), "--to", fmt, "-o", str(same)]).exit_code == 0
        assert same.read_bytes() == src.read_bytes(), src
        assert runner.invoke(app, ["convert", str(src), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
        assert runner.invoke(app, ["convert", str(canon), "--to", fmt, "-o", str(back)]).exit_code == 0
        assert back.read_bytes() == src.read_bytes(), src
    doc = [{"messages": [{"role": "user", "content": "caf\u00e9"}, {"role": "assistant", "content": "ok"}]}]
    src = tmp_path / "four.json"
    src.write_text(json.dumps(doc, indent=4, ensure_ascii=False) + "\n")
    out = tmp_path / "out.json"
    assert runner.invoke(app, ["convert", str(src), "--to", "openai", "-o", str(out)]).exit_code == 0
    assert out.read_bytes() == src.read_bytes()


_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True)
            | st.text() | st.sampled_from([jsontext.FloatText("1.50"), jsontext.IntText("-0"), "\x7f\u2028é\ud800"]))
_values = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
                       max_leaves=20)


def _exact(obj: object, style: jsontext.Style, indent: int | None) -> bytes:
    """What the exact (Python) encoder writes, with no fast path."""
    parts: list[str] = []
    enc = jsontext._Encoder(style, indent, parts)
    enc.value(obj, 0)
    text = "".join(parts)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return jsontext._SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(_values, st.sampled_from([",", ", "]), st.sampled_from([":", ": "]), st.booleans(), st.sampled_from([None, 1, 2, 4]))
def test_the_c_encoder_path_writes_what_the_exact_encoder_writes(obj, item_sep, key_sep, ascii, indent) -> None:  # type: ignore[no-untyped-def]
    """Styles orjson cannot write (spaced separators, ASCII escaping, other indents) go through
    the standard library's C encoder when the values are plain, else the exact encoder."""
    style = jsontext.Style(item_sep, key_sep, ascii)
    fast = jsontext._c_encoded(obj, style, indent)
    assert fast is None or fast == _exact(obj, style, indent)


def test_remembered_integers_never_take_a_fast_path() -> None:
    for style, indent in ((jsontext.COMPACT, None), (jsontext.Style(",", ":", False), 2), (jsontext.Style(", ", ": ", True), None)):
        assert b"-0" in jsontext.encode({"n": jsontext.IntText("-0")}, style, indent)
