"""Compaction triggers of every seed: ctxtool.policies and ctxtool.policies.check."""

from __future__ import annotations

import pytest

from ctxtool.config import Config
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.model import Block, Message, Usage
from ctxtool.policies import POLICIES
from ctxtool.policies.check import check_messages
from ctxtool.policies.settings import PolicySettings as TriggerSettings


def convo(tokens: int, n_msgs: int = 2) -> list[Message]:
    """Messages whose heuristic estimate is exactly ``tokens``."""
    msgs = [Message("user", [Block("text", text="x" * (4 * tokens))])]
    msgs += [Message("assistant", [Block("text", text="")]) for _ in range(n_msgs - 1)]
    return msgs


def verdicts(tokens: int, **kw) -> dict:
    s = TriggerSettings(**kw)
    res = check_messages(convo(tokens), s, policy="effective-limit")
    return {v.policy: v for v in res.verdicts}


def test_reserve_policy_is_strictly_greater():
    v = verdicts(100_000 - 16_384, context_window=100_000)["reserve"]
    assert v.limit == 83_616 and v.status == "ok"
    assert verdicts(83_617, context_window=100_000)["reserve"].status == "compact"


def test_seed000_reaches_the_effective_limit():
    assert verdicts(83_616, context_window=100_000)["effective-limit"].status == "compact"
    assert verdicts(83_615, context_window=100_000)["effective-limit"].status == "ok"


def test_seed000_falls_back_to_max_tokens_then_max_messages():
    v = verdicts(8000)["effective-limit"]
    assert v.limit == 8000 and v.rule == "tokens >= max_tokens" and v.status == "compact"
    assert verdicts(7999)["effective-limit"].status == "ok"
    s = TriggerSettings(max_tokens=0, max_messages=3)
    res = check_messages(convo(10, n_msgs=3), s)
    assert res.verdict.unit == "messages" and res.verdict.status == "compact"
    assert check_messages(convo(10, n_msgs=2), s).verdict.status == "ok"


def test_seed000_auto_compact_off():
    assert verdicts(10**6, auto_compact=False)["effective-limit"].status == "disabled"


def test_ratio_policy_at_exactly_80_percent():
    assert verdicts(80_000, context_window=100_000)["ratio"].status == "compact"
    assert verdicts(79_999, context_window=100_000)["ratio"].status == "ok"


def test_ratio_is_strict_without_a_window():
    assert verdicts(10)["ratio"].status == "error"  # reported, not raised, when not selected
    with pytest.raises(CtxtoolError) as e:
        check_messages(convo(10), TriggerSettings(), policy="ratio")
    assert e.value.kind == Failure.USAGE


def test_seed004_thresholds():
    v = verdicts(69_999, context_window=100_000)["hard-stop"]
    assert v.status == "ok" and v.limit == 70_000 and v.hard_limit == 95_000
    assert verdicts(70_000, context_window=100_000)["hard-stop"].status == "compact"
    v = verdicts(95_000, context_window=100_000)["hard-stop"]
    assert v.status == "hard_limit" and v.compact


def test_no_window_disables_seed003():
    v = verdicts(10**6)["reserve"]
    assert v.status == "no_limit" and not v.compact


def test_usage_aware_estimate():
    msgs = convo(10)
    msgs[1].usage = Usage(input=50_000, output=1000)
    msgs.append(Message("user", [Block("text", text="y" * 400)]))
    res = check_messages(msgs, TriggerSettings(context_window=60_000), policy="reserve")
    assert res.context.tokens_source == "usage"
    assert res.context.tokens == 51_000 + 100
    assert res.compact  # 51,100 > 60,000 - 16,384


def test_settings_from_config(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctxtool.toml").write_text("[compaction]\nreserve_tokens = 1000\ncontext_window = 50000\n")
    monkeypatch.setenv("CTXTOOL_COMPACTION_THRESHOLD_RATIO", "0.5")
    s = TriggerSettings.from_config(Config({"compaction.max_messages": 7}))
    assert s.reserve_tokens == 1000 and s.context_window == 50_000 and s.window_source.startswith("file:")
    assert s.threshold_ratio == 0.5 and s.max_messages == 7
    assert s.effective_limit() == (49_000, "context_window - reserve_tokens")


def test_json_lists_every_policy():
    res = check_messages(convo(100), TriggerSettings(context_window=1000), policy="hard-stop")
    d = res.to_json()
    assert set(d["verdicts"]) == set(POLICIES.names())
    assert d["policy"] == "hard-stop" and d["used_tokens"] == 100 and d["percent"] == 10.0


def test_unknown_policy():
    with pytest.raises(CtxtoolError):
        check_messages(convo(1), policy="nope")


def test_a_new_policy_is_one_class_and_one_registry_line(monkeypatch, tmp_path):
    """A policy with a setting of its own: registered once, then check, replay, the config,
    the registry's thresholds and the transform all know it."""
    from ctxtool import policies
    from ctxtool.agent.transform import make_transform
    from ctxtool.config import Setting
    from ctxtool.model import Transcript
    from ctxtool.policies.base import NO_LIMIT, Limits, Policy, Threshold
    from ctxtool.policies.check import check_transcript
    from ctxtool.replay import core as replay

    class Half(Policy):
        name, seeds, help = "half", "-", "tokens >= window x half.share"
        keys = ("half.share",)
        settings = (Setting("half.share", 0.5, float, "share of the window"),)

        def limits(self, window, s):
            if not window:
                return Limits((), "tokens >= window x share", NO_LIMIT, "no window")
            return Limits((Threshold("half", "tokens", int(window * s["half.share"]), "half", "-"),),
                          "tokens >= window x share")

    policies.register(Half)  # the one registry line
    try:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("CTXTOOL_HALF_SHARE", "0.25")
        cfg = Config()
        assert cfg["half.share"] == 0.25
        t = Transcript("ctxtool", entries=convo(300))
        res = check_transcript(t, TriggerSettings.from_config(cfg, context_window=1000), policy="half")
        assert res.verdict.status == "compact" and res.verdict.limit == 250
        assert "half" in replay.replay(t, context_window=1000, cfg=cfg).policies
        assert "half" in [th.name for th in policies.thresholds(1000, TriggerSettings.from_config(cfg))]
        tr = make_transform(context_window=1000, policy="half", max_messages=None, max_chars=None)
        assert tr.policy.name == "half"
    finally:
        policies.POLICIES.unregister("half")
    assert "half" not in policies.POLICIES.names()


def test_chars_policy_is_seed002():
    from ctxtool.policies import POLICIES
    from ctxtool.policies.base import Measure

    s = TriggerSettings(warning_chars=10, critical_chars=20)
    assert [POLICIES.get("chars").evaluate(Measure(0, n), s).status for n in (9, 10, 20)] == ["ok", "warning", "critical"]
    assert POLICIES.get("chars").evaluate(Measure(0, 20), s).compact
