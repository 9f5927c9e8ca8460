"""compact and bad records (issue 10 item 5): unreadable records are reported, an output is
rejected only for problems the compaction introduced, and with --on-error skip a record whose
output fails is written unchanged and reported, not the whole dataset failed. Plus the one
seed 000 archiver shared by `archive` and compaction's tool digest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS
from test_compact import opts, write_chat, write_dataset
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.compaction.plan import plan_compaction
from ctxtool.compaction.run import compact_file
from ctxtool.errors import CtxtoolError
from ctxtool.history import archive as ar

LLAMA = CORPUS / "messages_jsonl" / "llamafactory_reason_tool_use_demo_50.jsonl"


def trailing_call_record(i: int) -> dict[str, Any]:
    """A ShareGPT record (positional call ids) that already ends in an unanswered tool call."""
    conv: list[dict[str, str]] = []
    for k in range(6):
        conv.append({"from": "human", "value": f"step {k}: check the build of module {k} " + "please " * 40})
        conv.append({"from": "function_call", "value": json.dumps({"name": "bash", "arguments": {"command": f"make m{k}"}})})
        conv.append({"from": "observation", "value": f"built m{k}\n" + "ok\n" * 200})
        conv.append({"from": "gpt", "value": f"Module {k} builds."})
    conv.append({"from": "human", "value": "and the last one?"})
    conv.append({"from": "function_call", "value": json.dumps({"name": "bash", "arguments": {"command": f"make last{i}"}})})
    return {"id": f"t{i}", "conversations": conv}


def test_input_problem_is_not_blamed_on_the_output(tmp_path: Path) -> None:
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(trailing_call_record(i)) + "\n" for i in range(2)))
    out = tmp_path / "o.jsonl"
    rep = compact_file(src, out, options=opts(keep_recent_tokens=300))
    assert [r.status for r in rep.records] == ["compacted", "compacted"]
    for line, i in zip(out.read_text().splitlines(), range(2), strict=True):
        conv = json.loads(line)["conversations"]
        assert conv[0]["value"].startswith("[Previous conversation summary]")
        assert conv[-1] == trailing_call_record(i)["conversations"][-1]  # kept as the input had it


@pytest.mark.skipif(not LLAMA.is_file(), reason="corpus file not present")
def test_llamafactory_trailing_calls_compact_with_skip(tmp_path: Path) -> None:
    """Positional call ids are renumbered by the cut: the input's unanswered call is matched by code."""
    rep = compact_file(LLAMA, tmp_path / "o.jsonl", options=opts(keep_recent_tokens=200), on_error="skip")
    errors = [r.error or "" for r in rep.records if r.status == "error"]
    assert rep.count("compacted") >= 20 and not [e for e in errors if "invalid" in e]
    assert rep.records[41].status == "compacted"  # it ends in an unanswered call, as its input does


def test_skip_reports_unreadable_records(tmp_path: Path) -> None:
    good = write_dataset(tmp_path / "good.jsonl", n=3).read_text().splitlines()
    src = tmp_path / "d.jsonl"
    src.write_text("\n".join([good[0], '{"messages": [', good[1], good[2]]) + "\n")
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), on_error="skip")
    assert len(rep.records) == 3 and len(rep.skipped) == 1 and "d.jsonl:2" in rep.skipped[0]
    assert rep.to_json()["skipped"] == 1
    r = CliRunner().invoke(app, ["compact", str(src), "--force", "--keep-recent-tokens", "400", "--on-error", "skip",
                                 "-o", str(tmp_path / "o2.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["skipped"] == rep.skipped
    assert "skipped 1 unreadable record(s)" in r.stderr and "d.jsonl:2" in r.stderr
    with pytest.raises(CtxtoolError, match="invalid JSON"):
        compact_file(src, tmp_path / "o3.jsonl", options=opts())


def test_skip_leaves_a_record_with_an_invalid_output_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxtool.compaction import core

    src = write_dataset(tmp_path / "d.jsonl", n=3)
    real = core.rebuild

    def orphaning(t: Any, p: Any, *a: Any, **kw: Any) -> Any:
        built = real(t, p, *a, **kw)
        if t.index == 1:  # the second record loses a tool call: its result is an orphan
            call = next(e for e in built.transcript.entries if getattr(e, "role", None) == "assistant" and e.tool_calls())
            built.transcript.entries.remove(call)
        return built

    monkeypatch.setattr(core, "rebuild", orphaning)
    with pytest.raises(CtxtoolError, match="orphan_result"):
        compact_file(src, tmp_path / "o.jsonl", options=opts())
    assert not (tmp_path / "o.jsonl").exists()
    ev = tmp_path / "ev.jsonl"
    rep = compact_file(src, tmp_path / "o.jsonl", options=opts(), on_error="skip", events=ev)
    assert [r.status for r in rep.records] == ["compacted", "error", "compacted"]
    assert "orphan_result" in (rep.records[1].error or "")
    done = [json.loads(x) for x in ev.read_text().splitlines() if '"compaction"' in x]
    assert [e["transcript"] for e in done] == [rep.records[0].label, rep.records[2].label]  # no success logged for #1
    assert (tmp_path / "o.jsonl").read_bytes().splitlines()[1] == src.read_bytes().splitlines()[1]


# -- one seed 000 archiver -------------------------------------------------------------------------------------
def test_tool_digest_is_the_archivers_digest(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=8, filler=1200)
    o = opts(keep_recent_tokens=1500, tool_digest=True, tool_call_cutoff=2)
    compact_file(src, tmp_path / "o.json", options=o)
    written = json.loads((tmp_path / "o.json").read_text())
    p = plan_compaction(next(formats.read(src)), o)
    new, res = ar.archive_messages(p.keep, cutoff=2, strategy="heuristic", prefix=ar.DIGEST_PREFIX)
    assert written[-1]["content"] == new[-1].text() == res.summary
    assert res.summary.startswith(f"{ar.DIGEST_PREFIX} {res.archived_count} older tool results were archived")
    # the loop's archiving: the same digest but its own prefix
    _, loop = ar.archive_messages(p.keep, cutoff=2, strategy="heuristic")
    assert loop.summary == res.summary.replace(ar.DIGEST_PREFIX, ar.SUMMARY_PREFIX, 1)
