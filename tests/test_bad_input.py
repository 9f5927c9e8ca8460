"""The bad-input suite (issue 10): 6,000 seeded mutations of the samples and the real corpus
(truncation, byte flips, BOM, CRLF, UTF-16, wrong types, NUL bytes, huge numbers, deep
nesting, line damage, empty files) through every command that reads a transcript.

No case may end as an internal error (exit 1) or show a traceback; a failure is one
``ctxtool: error:`` line naming the file; the input is never modified; a failed command
leaves nothing at its output path. The seed is fixed, so CI runs the same cases every time;
``CTXTOOL_BADINPUT_SEED``/``CTXTOOL_BADINPUT_CASES`` explore others (``python tests/badinput.py
--cases N --seed S`` by hand: seeds 9, 77, 4242 and 5150 found the last internal errors).
"""

from __future__ import annotations

import os

import badinput
import pytest

SEED = int(os.environ.get("CTXTOOL_BADINPUT_SEED", "20261123"))
CASES = int(os.environ.get("CTXTOOL_BADINPUT_CASES", "6000"))
CHUNKS = 16  # spread over the test workers
MANY = int(os.environ.get("CTXTOOL_BADINPUT_MANY", "24"))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_bad_input_chunk(chunk: int, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)  # no project config from the checkout
    size = -(-CASES // CHUNKS)
    tally = badinput.run(SEED, CASES, tmp_path / "cases", start=chunk * size, stop=(chunk + 1) * size)
    assert tally.cases > 0
    report = "\n".join(
        f"{f.case}: exit {f.code} {f.problems}: {(f.stderr.strip().splitlines() or [''])[-1][:300]}"
        for f in tally.failures[:20]
    )
    assert not tally.failures, f"{tally.summary()}\n{report}"


def test_mutations_change_the_input() -> None:
    """Each mutation really produces different bytes (a suite of no-ops would pass anything)."""
    import random

    data = (badinput.SAMPLES / "openai_dataset.jsonl").read_bytes()
    rng = random.Random(1)
    for name, mutate in badinput.MUTATIONS.items():
        assert any(mutate(data, rng) != data for _ in range(5)), name


def test_cases_cover_every_command_and_mutation() -> None:
    seen = {(c.split(":")[2], c.split(":")[3]) for c, *_ in badinput.cases(SEED, CASES)}
    commands = {c[0] for c in badinput.COMMANDS}
    assert {m for m, _ in seen} == set(badinput.MUTATIONS)
    assert {c for _, c in seen} == commands
    # every command meets every kind of mutation
    for cmd in commands:
        assert {m for m, c in seen if c == cmd} == set(badinput.MUTATIONS), cmd


def test_many_files_of_bad_input_give_the_same_outcome_on_every_core(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Directories of real files, half of them mutated, through the commands that read many
    files: whole files on worker processes (-j 2) end as one process (-j 1) ends, same exit
    status, stdout and stderr, and with the checks above."""
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXTOOL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    tally = badinput.Tally()
    for case, files, cmd in badinput.many_cases(SEED, MANY):
        badinput.run_many_case(case, files, cmd, tmp_path / "many", tally)
    assert tally.cases == MANY >= len(badinput.MANY_COMMANDS)
    report = "\n".join(f"{f.case}: exit {f.code} {f.problems}: {(f.stderr.strip().splitlines() or [''])[-1][:300]}"
                       for f in tally.failures[:20])
    assert not tally.failures, f"{tally.summary()}\n{report}"
