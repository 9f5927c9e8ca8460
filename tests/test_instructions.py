"""instructions (seed 004 AGENTS.md hierarchy): levels, project root, merge order, 32 KiB cap."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxtool.agent.instructions import PROJECT_MARKERS, clip_utf8, find_project_root, load_instructions
from ctxtool.errors import CtxtoolError


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    cfg = tmp_path / "config"
    cfg.mkdir()
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(cfg))
    monkeypatch.delenv("CTXTOOL_CONFIG", raising=False)
    monkeypatch.delenv("CTXTOOL_INSTRUCTIONS_MAX_BYTES", raising=False)
    proj = tmp_path / "proj"
    work = proj / "src" / "pkg"
    work.mkdir(parents=True)
    (proj / ".git").mkdir()
    (cfg / "AGENTS.md").write_text("GLOBAL: be brief.\n")
    (proj / "AGENTS.md").write_text("PROJECT: use pytest.\n\n")
    (work / "AGENTS.md").write_text("WORKDIR: money is Decimal.")
    return {"cfg": cfg, "proj": proj, "work": work}


def test_merges_three_levels_in_order(tree: dict[str, Path]) -> None:
    r = load_instructions(tree["work"])
    assert [s.level for s in r.sources if s.found] == ["global", "project", "workdir"]
    assert r.merged == "GLOBAL: be brief.\n\nPROJECT: use pytest.\n\nWORKDIR: money is Decimal.\n"
    assert r.merged.index("GLOBAL") < r.merged.index("PROJECT") < r.merged.index("WORKDIR")
    assert r.bytes == len(r.merged.encode()) and not r.truncated
    assert r.project_root == str(tree["proj"].resolve())
    assert r.num_sources == 3 and r.tokens == -(-len(r.merged) // 4)
    assert r.sources[0].path == str(tree["cfg"] / "AGENTS.md")


def test_missing_levels(tree: dict[str, Path]) -> None:
    (tree["cfg"] / "AGENTS.md").unlink()
    (tree["proj"] / "AGENTS.md").unlink()
    r = load_instructions(tree["work"])
    assert [s.found for s in r.sources] == [False, False, True]
    assert r.merged == "WORKDIR: money is Decimal.\n"


def test_workdir_is_project_root_read_once(tree: dict[str, Path]) -> None:
    r = load_instructions(tree["proj"])
    assert r.merged.count("PROJECT") == 1
    assert r.sources[2].same_as == "project" and r.num_sources == 2


def test_no_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(tmp_path / "nocfg"))
    d = tmp_path / "loose"
    d.mkdir()
    if find_project_root(d) is not None:
        pytest.skip("a project marker above the temporary directory")
    r = load_instructions(d)
    assert r.project_root is None and r.merged == "" and r.bytes == 0 and r.tokens == 0
    assert r.sources[1].path == ""


@pytest.mark.parametrize("marker", PROJECT_MARKERS)
def test_project_markers(tmp_path: Path, marker: str) -> None:
    root = tmp_path / "root"
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    m = root / marker
    if marker.startswith("."):
        m.mkdir()
    else:
        m.write_text("{}")
    assert find_project_root(deep) == root.resolve()


def test_nearest_root_wins(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "packages" / "inner"
    inner.mkdir(parents=True)
    (outer / ".git").mkdir()
    (inner / "package.json").write_text("{}")
    assert find_project_root(inner / ".") == inner.resolve()


def test_cap_cuts_at_utf8_boundary(tree: dict[str, Path]) -> None:
    (tree["work"] / "AGENTS.md").write_text("é" * 40_000)  # 80,000 bytes of 2-byte characters
    r = load_instructions(tree["work"])
    assert r.truncated and r.bytes <= 32 * 1024 and r.total_bytes > 80_000
    assert "\ufffd" not in r.merged
    assert r.merged.encode("utf-8") == r.merged.encode()  # valid text
    assert r.sources[0].included_bytes == r.sources[0].bytes  # earlier levels survive whole
    assert 0 < r.sources[2].included_bytes < r.sources[2].bytes


def test_cap_from_config_and_argument(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXTOOL_INSTRUCTIONS_MAX_BYTES", "20")
    r = load_instructions(tree["work"])
    assert r.max_bytes == 20 and r.bytes <= 20 and r.truncated
    r = load_instructions(tree["work"], max_bytes=10_000)
    assert not r.truncated


def test_bad_directory(tmp_path: Path) -> None:
    with pytest.raises(CtxtoolError):
        load_instructions(tmp_path / "nope")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(CtxtoolError):
        load_instructions(f)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200), limit=st.integers(0, 900))
def test_clip_utf8_never_splits(text: str, limit: int) -> None:
    data = text.encode("utf-8")
    out = clip_utf8(data, limit)
    assert len(out) <= limit or len(data) <= limit
    assert data.startswith(out)
    out.decode("utf-8")  # never ends inside a character
    assert len(data) - len(out) <= len(data) and (len(data) <= limit or limit - len(out) < 4)
