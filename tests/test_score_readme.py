"""The README's score section (its console example is run by test_readme_examples): its table of the products' compactions is what bench/retention.py
measures on the corpus."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("### score\n"): text.index("### usage\n")]


def test_the_readme_table_is_what_the_bench_measures() -> None:
    from conftest import CORPUS

    if not (CORPUS / "pi" / "pi_before-compaction.jsonl").is_file():
        pytest.skip("the corpus is not present")
    sys.path.insert(0, str(ROOT))
    from bench.retention import readme_rows, table

    rows = readme_rows(table(CORPUS, log=lambda s: None))
    assert rows and all(r in _section() for r in rows), "\n".join(rows)
