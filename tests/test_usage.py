"""`ctxtool usage`: a fake home with Claude Code, Codex and pi session stores (samples and
corpus copies, a duplicated session, a resumed one, a forked one), totals checked against an
independent sum of the raw JSON, costs against hand-computed dollars, date and zone bounds,
every --by, and the JSON shape."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES
from jsonschema import Draft202012Validator
from terminal import terminal_screen
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError
from ctxtool.usage import usage_report
from ctxtool.usage.report import parse_day
from ctxtool.usage.stores import default_stores

runner = CliRunner()
SCHEMA = json.loads((SAMPLES.parent / "schemas" / "usage.schema.json").read_text("utf-8"))
CLAUDE = SAMPLES / "claude_code_session.jsonl"
CODEX = SAMPLES / "codex_rollout.jsonl"
PI = SAMPLES / "pi_session.jsonl"
CORPUS_CLAUDE = CORPUS / "claude_code" / "codemie_session-9eda1058.jsonl"
CORPUS_CODEX = CORPUS / "codex" / "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl"
CORPUS_PI = CORPUS / "pi" / "pi_before-compaction.jsonl"
needs_corpus = pytest.mark.skipif(not CORPUS_CLAUDE.is_file(), reason="../shared/corpus not present")


def lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in p.read_text("utf-8").splitlines() if x.strip()]


def write_lines(p: Path, objs: list[dict[str, Any]]) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(o) + "\n" for o in objs), "utf-8")
    return p


def resumed_claude(src: Path) -> list[dict[str, Any]]:
    """A resumed Claude Code session: a new file (new session id) repeating every line of
    ``src``, then one new API call on the next day."""
    objs = [dict(o, sessionId="resumed-0001") if "sessionId" in o else o for o in lines(src)]
    last = next(o for o in reversed(objs) if o.get("type") == "assistant")
    new = json.loads(json.dumps(last))
    new.update(uuid="aaaaaaaa-0000-4000-8000-000000000001", parentUuid=last["uuid"],
               timestamp="2026-03-05T09:00:00.000Z", requestId="req_resumed_new")
    new["message"].update(id="msg_resumed_new", usage={"input_tokens": 7, "output_tokens": 70,
                                                       "cache_creation_input_tokens": 700,
                                                       "cache_read_input_tokens": 7000})
    return [*objs, new]


def forked_pi(src: Path) -> list[dict[str, Any]]:
    """A pi fork: a new session header, the same entries (same ids and times)."""
    objs = lines(src)
    return [dict(objs[0], id="fork-0001"), *objs[1:]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    proj = h / ".claude" / "projects" / "-home-dev-projects-ledgerlite"
    proj.mkdir(parents=True)
    shutil.copy(CLAUDE, proj / "3b8f2c1d-7e4a-4c9b-a2d5-9f6e1b0c8a47.jsonl")
    shutil.copy(CLAUDE, h / ".claude" / "projects" / "copy-of-ledgerlite.jsonl")  # duplicated session
    write_lines(proj / "resumed-0001.jsonl", resumed_claude(CLAUDE))
    (proj / "notes.txt").write_text("not a session\n")
    codex = h / ".codex" / "sessions" / "2025" / "11" / "04"
    codex.mkdir(parents=True)
    shutil.copy(CODEX, codex / "rollout-2025-11-04T09-12-05-019a4f2c.jsonl")
    shutil.copy(CODEX, h / ".codex" / "sessions" / "rollout-copy.jsonl")  # duplicated
    pi = h / ".pi" / "agent" / "sessions" / "--home-dev-projects-tidewater--"
    pi.mkdir(parents=True)
    shutil.copy(PI, pi / "2025-11-05T14-02-11-208Z_5d0c7e3a.jsonl")
    write_lines(pi / "2025-11-05T15-00-00-000Z_fork.jsonl", forked_pi(PI))
    if CORPUS_CLAUDE.is_file():
        shutil.copy(CORPUS_CLAUDE, proj / CORPUS_CLAUDE.name)
        shutil.copy(CORPUS_CODEX, codex / CORPUS_CODEX.name)
        shutil.copy(CORPUS_PI, pi / CORPUS_PI.name)  # a session version 1 file: no entry ids
        write_lines(pi / "fork-of-corpus.jsonl", forked_pi(CORPUS_PI))
    return h


# -- an independent sum of the raw JSON ------------------------------------------------------
def raw_calls(root: Path) -> dict[Any, tuple[int, int, int, int]]:
    """Every API call under ``root`` once: (input, output, cache write, cache read) by an id
    read straight from the JSON (not through ctxtool's readers)."""
    calls: dict[Any, tuple[int, int, int, int]] = {}
    for p in sorted(root.rglob("*.jsonl")):
        prev_total = None
        for o in lines(p):
            if o.get("type") == "assistant" and isinstance(o.get("message", {}).get("usage"), dict):
                m = o["message"]
                u = m["usage"]
                fig = (u.get("input_tokens", 0), u.get("output_tokens", 0),
                       u.get("cache_creation_input_tokens", 0), u.get("cache_read_input_tokens", 0))
                key = ("claude", m["id"], o.get("requestId"))
                calls[key] = max(calls.get(key, fig), fig)
            elif o.get("type") == "event_msg" and o["payload"].get("type") == "token_count":
                info = o["payload"].get("info") or {}
                last, total = info.get("last_token_usage"), info.get("total_token_usage")
                if last and total != prev_total:
                    cached = last.get("cached_input_tokens", 0)
                    calls[("codex", json.dumps(total, sort_keys=True))] = (
                        last["input_tokens"] - cached, last["output_tokens"], 0, cached)
                prev_total = total
            elif o.get("type") == "message" and o["message"].get("role") == "assistant" and "usage" in o["message"]:
                u = o["message"]["usage"]
                calls[("pi", o.get("id"), o["timestamp"])] = (u["input"], u["output"], u["cacheWrite"], u["cacheRead"])
    return calls


def summed(calls: dict[Any, tuple[int, int, int, int]]) -> dict[str, int]:
    cols = list(zip(*calls.values(), strict=True)) or [(), (), (), ()]
    return {"input": sum(cols[0]), "output": sum(cols[1]), "cache_write": sum(cols[2]), "cache_read": sum(cols[3]),
            "messages": len(calls)}


def env_of(home: Path, **more: str) -> dict[str, str]:
    return {"HOME": str(home), "CLAUDE_CONFIG_DIR": "", "CODEX_HOME": "", "PI_CODING_AGENT_DIR": "",
            "CTXTOOL_MODELS": str(home / "no-models.json"), **more}


def run_json(*args: str, env: dict[str, str]) -> dict[str, Any]:
    r = runner.invoke(app, ["usage", *args, "--json"], env=env)
    assert r.exit_code == 0, (r.output, r.exception)
    d = json.loads(r.stdout)
    errs = [e.message for e in Draft202012Validator(SCHEMA).iter_errors(d)]
    assert errs == []
    return d


def test_default_stores_totals_equal_an_independent_sum(home: Path) -> None:
    d = run_json("-z", "UTC", env=env_of(home))
    want = summed(raw_calls(home))
    got = d["totals"]
    assert {k: got[k] for k in want} == want
    assert got["total"] == want["input"] + want["output"] + want["cache_write"] + want["cache_read"]
    assert sum(r["total"] for r in d["rows"]) == got["total"]
    # the copies, the resumed session's repeated lines and the fork are counted once
    assert d["duplicates"] == 8 + 8 + 5 + 6 + (summed(raw_calls(CORPUS_PI.parent))["messages"] if CORPUS_PI.is_file() else 0)
    assert {s["agent"] for s in d["stores"]} == {"claude-code", "codex", "pi"}
    assert d["skipped"] == []


def test_a_copy_adds_nothing(home: Path, tmp_path: Path) -> None:
    one = usage_report([str(CLAUDE)], timezone="UTC")
    many = tmp_path / "many"
    for i in range(3):
        (many / str(i)).mkdir(parents=True)
        shutil.copy(CLAUDE, many / str(i) / "s.jsonl")
    three = usage_report([str(many)], timezone="UTC")
    assert three.total.tokens == one.total.tokens and three.total.cost_usd == one.total.cost_usd
    assert three.duplicates == 2 * one.total.messages


def test_environment_overrides(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-claude"
    write_lines(other / "projects" / "p" / "s.jsonl", resumed_claude(CLAUDE))
    env = env_of(tmp_path / "empty", CLAUDE_CONFIG_DIR=f"{home / '.claude'},{other}",
                 CODEX_HOME=str(home / ".codex"), PI_CODING_AGENT_DIR=str(home / ".pi" / "agent"))
    stores = default_stores(env)
    assert [(s.agent, s.source) for s in stores] == [
        ("claude-code", "CLAUDE_CONFIG_DIR"), ("claude-code", "CLAUDE_CONFIG_DIR"),
        ("codex", "CODEX_HOME"), ("codex", "CODEX_HOME"), ("opencode", "default"), ("pi", "PI_CODING_AGENT_DIR")]
    assert [Path(s.path).name for s in stores if s.agent == "codex"] == ["sessions", "archived_sessions"]
    d = run_json("-z", "UTC", env=env)
    assert d["totals"]["messages"] == run_json("-z", "UTC", env=env_of(home))["totals"]["messages"]
    assert run_json(env=env_of(tmp_path / "nobody"))["files"] == 0


def test_cost_from_the_registry_prices(tmp_path: Path) -> None:
    """claude-opus-4-6: $5 in, $25 out, $6.25 cache write, $0.50 cache read per 1M tokens."""
    s = lines(CLAUDE)
    call = next(o for o in s if o.get("type") == "assistant")
    call["message"]["usage"] = {"input_tokens": 1000, "output_tokens": 2000, "cache_creation_input_tokens": 10000,
                                "cache_read_input_tokens": 100000}
    call["timestamp"] = "2026-03-04T05:00:00Z"
    f = write_lines(tmp_path / "one.jsonl", [call])
    d = run_json(str(f), "--by", "model", env=env_of(tmp_path))
    # 1000*5 + 2000*25 + 10000*6.25 + 100000*0.5 = 5000 + 50000 + 62500 + 50000 = $0.1675
    assert d["rows"][0]["key"] == "claude-opus-4-6"
    assert d["totals"]["cost_usd"] == pytest.approx(0.1675)

    # a user file overrides the price, with a dated price for one span of days
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"models": {"claude-opus-4-6": {
        "input_price": 1.0, "output_price": 2.0, "cache_write_price": 3.0, "cache_read_price": 0.25,
        "dated_prices": [{"from": "2026-03-01", "until": "2026-03-04", "input_price": 10.0, "output_price": 20.0}]}}}))
    env = env_of(tmp_path, CTXTOOL_MODELS=str(models))
    # the call is on 2026-03-04 (UTC): the dated span has ended, so the list prices apply
    # 1000*1 + 2000*2 + 10000*3 + 100000*0.25 = 1000 + 4000 + 30000 + 25000 = $0.06
    assert run_json(str(f), "-z", "UTC", env=env)["totals"]["cost_usd"] == pytest.approx(0.06)
    # in Pacific time the call was on 2026-03-03 (21:00): the dated span,
    # whose cache prices are its input price: (1000 + 10000 + 100000)*10 + 2000*20 = $1.15
    assert run_json(str(f), "-z", "America/Los_Angeles", env=env)["totals"]["cost_usd"] == pytest.approx(1.15)


def test_unknown_model_is_reported_unpriced(tmp_path: Path) -> None:
    call = next(o for o in lines(CLAUDE) if o.get("type") == "assistant")
    call["message"]["model"] = "claude-imaginary-9"
    d = run_json(str(write_lines(tmp_path / "x.jsonl", [call])), env=env_of(tmp_path))
    assert d["unpriced_models"] == ["claude-imaginary-9"]
    # unknown, never $0.00: null in JSON, "unknown" in the table, a warning saying how to add it
    assert d["totals"]["unpriced_messages"] == 1 and d["totals"]["cost_usd"] is None
    assert d["rows"][0]["cost_usd"] is None
    r = runner.invoke(app, ["usage", str(tmp_path / "x.jsonl")], env=env_of(tmp_path))
    assert "unknown" in r.stdout and "$0.00" not in r.stdout
    assert "claude-imaginary-9" in r.stderr and "models.json" in r.stderr


def test_since_until_and_time_zone(tmp_path: Path) -> None:
    base = next(o for o in lines(CLAUDE) if o.get("type") == "assistant")

    def call(i: int, ts: str) -> dict[str, Any]:
        c = json.loads(json.dumps(base))
        c.update(timestamp=ts, requestId=f"req_{i}")
        c["message"]["id"] = f"msg_{i}"
        return c

    f = write_lines(tmp_path / "s.jsonl", [call(1, "2026-03-04T23:30:00Z"), call(2, "2026-03-05T12:00:00Z"),
                                          call(3, "2026-03-06T01:00:00Z")])
    env = env_of(tmp_path)

    def days(*args: str) -> dict[str, int]:
        return {r["key"]: r["messages"] for r in run_json(str(f), *args, env=env)["rows"]}

    assert days("-z", "UTC") == {"2026-03-04": 1, "2026-03-05": 1, "2026-03-06": 1}
    assert days("-z", "Asia/Tokyo") == {"2026-03-05": 2, "2026-03-06": 1}
    assert days("-z", "America/New_York") == {"2026-03-04": 1, "2026-03-05": 2}
    assert days("-z", "UTC", "--since", "2026-03-05") == {"2026-03-05": 1, "2026-03-06": 1}
    assert days("-z", "UTC", "--until", "2026-03-05") == {"2026-03-04": 1, "2026-03-05": 1}
    assert days("-z", "Asia/Tokyo", "--since", "2026-03-05", "--until", "2026-03-05") == {"2026-03-05": 2}
    d = run_json(str(f), "-z", "UTC", "--since", "2026-03-05", "--until", "2026-03-05", env=env)
    assert d["outside"] == 2 and (d["since"], d["until"]) == ("2026-03-05", "2026-03-05")
    assert days("-z", "UTC", "--by", "month") == {"2026-03": 3}
    # relative days, against a fixed now
    now = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)
    assert usage_report([str(f)], since="today", timezone="UTC", now=now).total.messages == 1
    assert usage_report([str(f)], since="yesterday", until="yesterday", timezone="UTC", now=now).total.messages == 1
    assert usage_report([str(f)], since="2d", timezone="UTC", now=now).total.messages == 2
    assert usage_report([str(f)], since="7d", timezone="UTC", now=now).total.messages == 3


def test_parse_day() -> None:
    today = date(2026, 3, 6)
    assert parse_day("2026-01-02", today) == date(2026, 1, 2)
    assert parse_day("yesterday", today) == date(2026, 3, 5)
    assert parse_day("7d", today) == date(2026, 2, 28)
    for bad in ("0d", "last week", "2026-13-01"):
        with pytest.raises(CtxtoolError):
            parse_day(bad, today)


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    for args in (["--since", "someday"], ["-z", "Mars/Olympus"], ["--by", "fortnight"]):
        r = runner.invoke(app, ["usage", str(CLAUDE), *args])
        assert r.exit_code in (ExitCode.USAGE, 2), (args, r.output)
        assert "Traceback" not in r.output
    r = runner.invoke(app, ["usage", str(tmp_path / "missing")])
    assert r.exit_code == ExitCode.NOT_FOUND


def test_every_grouping(home: Path) -> None:
    env = env_of(home)
    by = {g: run_json("-z", "UTC", "--by", g, env=env)
          for g in ("day", "week", "month", "block", "session", "project", "model")}
    totals = {g: d["totals"] for g, d in by.items()}
    assert all(t == totals["day"] for t in totals.values())
    keys = {g: [r["key"] for r in d["rows"]] for g, d in by.items()}
    assert set(keys["session"]) >= {"3b8f2c1d-7e4a-4c9b-a2d5-9f6e1b0c8a47", "resumed-0001",
                                    "019a4f2c-7d31-7b90-a1c4-5e2f8b6d0e13", "5d0c7e3a-92b1-4f68-8a1e-c4f07b29d516"}
    # the resumed session holds only its new call: the others were counted in the first
    resumed = next(r for r in by["session"]["rows"] if r["key"] == "resumed-0001")
    assert (resumed["messages"], resumed["input"], resumed["output"]) == (1, 7, 70)
    assert set(keys["project"]) >= {"/home/dev/projects/ledgerlite", "/home/dev/projects/tidewater"}
    assert set(keys["model"]) >= {"claude-opus-4-6", "gpt-5-codex", "claude-sonnet-4-5"}
    assert keys["day"] == sorted(keys["day"]) and keys["month"] == sorted(keys["month"])
    assert all(k[4] == "-" and len(k) == 7 for k in keys["month"])
    assert keys["week"] == sorted(keys["week"]) and all(date.fromisoformat(k).weekday() == 0 for k in keys["week"])
    assert keys["block"] == sorted(keys["block"])
    # a session row names its project and its last activity
    first = next(r for r in by["session"]["rows"] if r["key"] == "3b8f2c1d-7e4a-4c9b-a2d5-9f6e1b0c8a47")
    assert first["projects"] == ["/home/dev/projects/ledgerlite"] and first["last"] is not None
    costs = [r["cost_usd"] for r in by["model"]["rows"]]
    assert costs == sorted(costs, reverse=True)


def test_jsonl_and_table(home: Path) -> None:
    env = env_of(home)
    r = runner.invoke(app, ["usage", "-z", "UTC", "--jsonl"], env=env)
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert out[-1]["type"] == "summary" and all(x["type"] == "row" for x in out[:-1])
    line = Draft202012Validator({**SCHEMA, "$ref": "#/$defs/line", "required": [], "properties": {},
                                 "additionalProperties": True, "type": "object"})
    assert all(not list(line.iter_errors(x)) for x in out)
    d = run_json("-z", "UTC", env=env)
    assert [{k: v for k, v in x.items() if k != "type"} for x in out[:-1]] == d["rows"]
    t = runner.invoke(app, ["usage", "-z", "UTC", "--by", "model"], env=env)
    assert t.exit_code == 0
    assert "claude-opus-4-6" in t.stdout and "cache write" in t.stdout and "$" in t.stdout
    assert "counted once" in t.stdout


def test_a_bad_file_is_skipped_with_its_line(tmp_path: Path) -> None:
    good = tmp_path / "s" / "good.jsonl"
    good.parent.mkdir()
    shutil.copy(CLAUDE, good)
    bad = tmp_path / "s" / "bad.jsonl"
    bad.write_text(CLAUDE.read_text("utf-8").splitlines()[1] + "\n{not json\n")
    r = runner.invoke(app, ["usage", str(tmp_path / "s"), "--json"], env=env_of(tmp_path))
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert [s["path"] for s in d["skipped"]] == [str(bad)]
    assert "bad.jsonl" in r.stderr and ":2" in r.stderr
    assert d["totals"]["messages"] == 8


@needs_corpus
def test_corpus_codex_counts_every_token_count_event(tmp_path: Path) -> None:
    want = summed(raw_calls(CORPUS_CODEX.parent))
    got = usage_report([str(CORPUS_CODEX.parent)], timezone="UTC").total
    assert (got.tokens.input, got.tokens.output, got.tokens.cache_read, got.messages) == (
        want["input"], want["output"], want["cache_read"], want["messages"])


def test_progress_reports_each_file(home: Path) -> None:
    seen: list[tuple[int, int]] = []
    r = usage_report([str(home)], timezone="UTC", jobs=1, progress=lambda done, total, path: seen.append((done, total)))
    assert seen == [(i, r.files) for i in range(r.files + 1)]
    seen.clear()  # on worker processes a job's files are done together: from 0 to all, never back
    r = usage_report([str(home)], timezone="UTC", jobs=2, progress=lambda done, total, path: seen.append((done, total)))
    done = [d for d, _ in seen]
    assert done[0] == 0 and done[-1] == r.files and done == sorted(done) and {t for _, t in seen} == {r.files}


def test_many_files_on_every_core_give_the_serial_report(home: Path, tmp_path: Path) -> None:
    """Many small session files run on worker processes (manyfiles.run_files): the same rows,
    duplicates (first seen in file order) and skipped files as one process."""
    tree = tmp_path / "t"
    shutil.copytree(home, tree, symlinks=True)
    for i in range(20):  # enough bytes for the pool (manyfiles.FILES_MIN_BYTES); copies: duplicates
        shutil.copy(CLAUDE, tree / f"copy{i:02}.jsonl")
    (tree / "m_bad.jsonl").write_text(CLAUDE.read_text("utf-8").splitlines()[1] + "\n{not json\n")
    write_lines(tree / "n_resumed.jsonl", resumed_claude(CLAUDE))
    one = usage_report([str(tree)], by="session", timezone="UTC", jobs=1)
    two = usage_report([str(tree)], by="session", timezone="UTC", jobs=2)
    assert two.to_json() == one.to_json()
    assert one.duplicates > 0 and [s.path for s in one.skipped] == [str(tree / "m_bad.jsonl")]


def call_at(base: dict[str, Any], i: int, ts: str, model: str = "claude-opus-4-6") -> dict[str, Any]:
    c = json.loads(json.dumps(base))
    c.update(timestamp=ts, requestId=f"req_{i}")
    c["message"].update(id=f"msg_{i}", model=model)
    return c


def test_five_hour_blocks(tmp_path: Path) -> None:
    """Blocks as ccusage counts them: from the hour of the first call, 5 hours long; a call
    after the block's end, or after a 5-hour gap, starts the next."""
    base = next(o for o in lines(CLAUDE) if o.get("type") == "assistant")
    f = write_lines(tmp_path / "s.jsonl", [
        call_at(base, 1, "2026-03-04T09:17:00Z"), call_at(base, 2, "2026-03-04T13:59:00Z"),  # one block 09:00-14:00
        call_at(base, 3, "2026-03-04T14:00:00Z"),  # the block has ended: a new one at 14:00
        call_at(base, 4, "2026-03-05T02:30:00Z")])  # after a gap: 02:00
    d = run_json(str(f), "-z", "UTC", "--by", "block", env=env_of(tmp_path))
    assert [(r["key"], r["messages"]) for r in d["rows"]] == [
        ("2026-03-04 09:00", 2), ("2026-03-04 14:00", 1), ("2026-03-05 02:00", 1)]
    assert d["rows"][0]["ends"] == "2026-03-04T14:00:00+00:00"
    # the same blocks in another zone, named by their local start
    d = run_json(str(f), "-z", "Asia/Tokyo", "--by", "block", env=env_of(tmp_path))
    assert [r["key"] for r in d["rows"]] == ["2026-03-04 18:00", "2026-03-04 23:00", "2026-03-05 11:00"]


def test_breakdown_per_model(tmp_path: Path) -> None:
    base = next(o for o in lines(CLAUDE) if o.get("type") == "assistant")
    f = write_lines(tmp_path / "s.jsonl", [
        call_at(base, 1, "2026-03-04T09:00:00Z"), call_at(base, 2, "2026-03-04T10:00:00Z", "claude-sonnet-4-5"),
        call_at(base, 3, "2026-03-04T11:00:00Z", "claude-imaginary-9")])
    d = run_json(str(f), "-z", "UTC", "--by", "week", "--breakdown", env=env_of(tmp_path))
    (row,) = d["rows"]
    assert row["key"] == "2026-03-02"  # the Monday
    subs = {b["key"]: b for b in row["breakdown"]}
    assert set(subs) == {"claude-opus-4-6", "claude-sonnet-4-5", "claude-imaginary-9"}
    assert sum(b["messages"] for b in subs.values()) == row["messages"] == 3
    assert subs["claude-imaginary-9"]["cost_usd"] is None
    assert row["cost_usd"] == pytest.approx(subs["claude-opus-4-6"]["cost_usd"] + subs["claude-sonnet-4-5"]["cost_usd"])
    t = runner.invoke(app, ["usage", str(f), "-z", "UTC", "--by", "week", "--breakdown"], env=env_of(tmp_path))
    assert "└ claude-sonnet-4-5" in t.stdout or "└ sonnet-4-5" in t.stdout
    assert "≥$" in t.stdout  # the row's cost: the priced calls, at least


def big_home(tmp_path: Path) -> Path:
    """Sessions with large numbers and long model names, as months of use give."""
    base = next(o for o in lines(CLAUDE) if o.get("type") == "assistant")
    calls = []
    for i, (day, model) in enumerate([("2026-03-02", "claude-opus-4-6"), ("2026-03-03", "claude-sonnet-4-5-20250929"),
                                      ("2026-03-10", "claude-opus-4-6"), ("2026-03-11", "claude-haiku-4-5-20251001")]):
        c = call_at(base, i, f"{day}T10:00:00Z", model)
        c["message"]["usage"] = {"input_tokens": 125_843_221 // (i + 1), "output_tokens": 9_876_543,
                                 "cache_creation_input_tokens": 45_123_456, "cache_read_input_tokens": 1_234_567_890}
        calls.append(c)
    proj = tmp_path / "home" / ".claude" / "projects" / "-home-dev-projects-a-rather-long-project-name"
    write_lines(proj / "0b6f6f0e-1111-4c9b-a2d5-9f6e1b0c8a47.jsonl", calls)
    return tmp_path / "home"


@pytest.mark.parametrize("args", [[], ["--by", "week", "--breakdown"], ["--by", "session"], ["--by", "block"],
                                  ["--by", "model"]])
def test_fits_an_80_column_terminal(tmp_path: Path, args: list[str]) -> None:
    """In an 80-column terminal every line fits, the key column and every number shown whole
    (never cut with …), and cost is there; a session row shows its project and last activity."""
    home = big_home(tmp_path)
    env = env_of(home)
    d = run_json("-z", "UTC", *args, env=env)
    screen = terminal_screen(["usage", "-z", "UTC", *args], env)
    rows = [ln for ln in screen.splitlines() if ln.startswith("│")]
    assert all(len(ln) <= 80 for ln in screen.splitlines()), screen
    assert "…" not in screen, screen
    assert "cost" in screen and "$" in screen
    text = screen.replace("│", " ")
    for r in d["rows"]:
        assert f"{r['input']:,}" in text and f"{r['output']:,}" in text, screen
        assert f"${r['cost_usd']:,.2f}" in text, screen
    assert f"{d['totals']['input']:,}" in text
    assert len(rows) >= len(d["rows"])
    if args == ["--by", "session"]:  # the project (its name folded onto lines) and the last activity
        project = d["rows"][0]["projects"][0].rsplit("/", 1)[-1]
        assert "project" in screen and project[:8] in screen and "03-11 10:00" in screen
    if "--breakdown" in args:
        assert "└" in screen
    if "models" in screen:  # each model's short name whole on one line (several: one a line), never folded
        for name in ("opus-4-6", "sonnet-4-5", "haiku-4-5"):
            if name in json.dumps(d):
                assert name in screen, screen


def test_a_pipe_gets_the_full_table(tmp_path: Path) -> None:
    """Into a pipe (as wide as 120 columns) the whole table: cache columns too."""
    env = env_of(big_home(tmp_path))
    r = runner.invoke(app, ["usage", "-z", "UTC", "--by", "month"], env={**env, "COLUMNS": "250"})
    assert "cache read" in r.stdout and "calls" in r.stdout and "claude-sonnet-4-5-20250929" in r.stdout
