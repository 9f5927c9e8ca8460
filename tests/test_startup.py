"""Start-up imports what the work needs (issue 16): a real ``python -m ctxtool`` process is run
and the modules it holds at exit are checked. A data command does not import rich unless it
renders on a terminal, imports only the formats its input may be (the registry's detection hints),
no TOML parser without a config file, no zip reader without an archive; ``--version`` imports
no transcript machinery. And the hints themselves: each is a necessary condition of its
format's ``sniff``, so detection answers what it answered when it asked every format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, all_transcript_params

from ctxtool import formats
from ctxtool.errors import CtxtoolError
from ctxtool.io.jsonl import open_source

# Runs the CLI as ``python -m ctxtool`` does, then prints the names of the modules it imported.
PROBE = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n"))
sys.argv = ["ctxtool", *sys.argv[1:]]
runpy.run_module("ctxtool", run_name="__main__", alter_sys=True)
"""

FORMAT_MODULES = {f"ctxtool.formats.{m}" for m in (
    "canonical", "openai", "anthropic", "claude_code", "codex", "pi", "sharegpt", "cline", "responses", "inspect_log",
    "atif", "gemini", "gemini_jsonl", "swe_agent", "mini_swe_agent", "openhands",
)}


def modules(*args: str, cwd: Path) -> set[str]:
    """The modules a ``ctxtool ARGS`` process imported (run in ``cwd``: no config file found)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert line.startswith("MODULES "), proc.stderr
    return set(line.split()[1:])


def test_stats_json_imports_no_renderer_and_only_its_formats(tmp_path: Path) -> None:
    mods = modules("stats", "--json", str(SAMPLES / "openai_dataset.jsonl"), cwd=tmp_path)
    assert "ctxtool.formats.openai" in mods and "ctxtool.stats.transcript" in mods  # imports made by import_module are seen
    assert not {m for m in mods if m == "rich" or m.startswith("rich.")}
    # a dataset record with "messages" may only be one of the dataset formats that keep messages there
    assert not mods & (FORMAT_MODULES - {f"ctxtool.formats.{m}" for m in (
        "openai", "anthropic", "sharegpt", "responses", "mini_swe_agent", "swe_agent")})
    assert not mods & {"tomllib", "zipfile", "importlib.resources"}  # no config file, no archive, no --model
    # one small file runs here: no process pool (ctxtool.run.manyfiles.run_files imports it for many files)
    assert not mods & {"ctxtool.run.parallel", "ctxtool.run.pool", "multiprocessing", "concurrent.futures.process"}


# what stats leaves for the runs that need it: temporary files and glob patterns (outputs,
# pipes), the Parquet reader (which paths are Parquet is ctxtool.io.parquet_paths), the
# truncation algorithms (saved outputs are ctxtool.tool_outputs.saved)
STATS_LEAVES = {"tempfile", "glob", "ctxtool.io.parquet", "ctxtool.tool_outputs.algorithms"}


def test_stats_imports_no_temporary_files_parquet_reader_or_truncation(tmp_path: Path) -> None:
    mods = modules("stats", "--json", str(SAMPLES / "openai_dataset.jsonl"), cwd=tmp_path)
    assert {"ctxtool.io.parquet_paths", "ctxtool.tool_outputs.saved"} <= mods
    assert not mods & STATS_LEAVES


def test_stats_of_a_session_with_a_model_reads_the_registry_without_importlib_resources(tmp_path: Path) -> None:
    mods = modules("stats", "-j", "1", str(SAMPLES / "claude_code_session.jsonl"), cwd=tmp_path)
    assert "ctxtool.tokens.models" in mods  # the model it records is looked up
    assert not mods & {"importlib.resources", "importlib.readers", "zipfile"}
    assert not mods & (STATS_LEAVES - {"tempfile"})  # platformdirs (the user's model file) imports tempfile


def test_import_ctxtool_imports_no_typing() -> None:
    """``import ctxtool`` alone (the library's names come on first use) loads no typing: the CLI
    imports it later, with the cyclic collector paused (ctxtool.cli)."""
    code = "import sys, ctxtool; print(' '.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "typing" not in proc.stdout.split()


def test_stats_tables_into_a_pipe_import_no_rich(tmp_path: Path) -> None:
    """Into a pipe rich prints its tables as plain text; ctxtool.cli.table writes that text
    itself (tests/test_cli_table.py holds it to rich's)."""
    mods = modules("stats", str(SAMPLES / "openai_dataset.jsonl"), cwd=tmp_path)
    assert "ctxtool.cli.table" in mods
    assert not {m for m in mods if m == "rich" or m.startswith("rich.")}
    assert "ctxtool.formats.claude_code" not in mods
    assert "ctxtool.tokens.models" not in mods  # no model recorded: no registry to ask (common.warn_unknown_models)


def test_truncate_imports_one_entries_format(tmp_path: Path) -> None:
    mods = modules("truncate", "--preset", "head-tail", "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "o.jsonl"),
                   str(SAMPLES / "claude_code_session.jsonl"), cwd=tmp_path)
    assert "ctxtool.formats.claude_code" in mods
    assert not mods & {f"ctxtool.formats.{m}" for m in ("openai", "codex", "gemini_jsonl", "inspect_log", "atif", "cline")}
    assert not {m for m in mods if m == "rich" or m.startswith("rich.")}
    assert (tmp_path / "o.jsonl").is_file()


def test_convert_of_a_json_document_imports_no_jsonl_formats(tmp_path: Path) -> None:
    mods = modules("convert", "--to", "ctxtool", "-o", str(tmp_path / "c.jsonl"), str(SAMPLES / "gemini_session.json"),
                   cwd=tmp_path)
    assert "ctxtool.formats.gemini" in mods
    assert not mods & {f"ctxtool.formats.{m}" for m in ("claude_code", "codex", "pi", "gemini_jsonl", "inspect_log", "atif")}
    assert not mods & {"hashlib", "zipfile"}


def test_version_imports_no_transcript_machinery(tmp_path: Path) -> None:
    mods = modules("--version", cwd=tmp_path)
    assert "typer" in mods
    assert not mods & {"ctxtool.io.jsonl", "ctxtool.model", "ctxtool.formats.base", "ctxtool.io.files", "orjson", "rich"}
    assert not mods & FORMAT_MODULES


# -- the detection hints ------------------------------------------------------------------------------
def _sniffs(sample: list[Any], src: Any) -> dict[str, int]:
    out = {}
    for name in formats.FORMAT_NAMES:
        try:
            out[name] = formats.get_format(name).sniff(sample, src)
        except (KeyError, TypeError, AttributeError, IndexError):
            out[name] = 0
    return out


@pytest.mark.parametrize("path", all_transcript_params())
def test_hints_never_rule_out_a_format_whose_sniff_says_yes(path: Path) -> None:
    src = open_source(path)
    try:
        sample = src.sample()
        heads = formats._heads(sample, src.layout)
        for name, score in _sniffs(sample, src).items():
            entry = formats.FORMATS.entry(name)
            assert isinstance(entry, formats.Lazy)
            if score > 0:
                assert entry.may_sniff(src.layout, heads), f"{name}'s hints rule out {path.name} (its sniff says {score})"
    finally:
        src.close()


def test_hints_rule_out_by_layout_and_keys() -> None:
    gemini, openai, cline = (formats.FORMATS.entry(n) for n in ("gemini", "openai", "cline"))
    assert isinstance(gemini, formats.Lazy) and isinstance(openai, formats.Lazy) and isinstance(cline, formats.Lazy)
    record = {"messages": [{"role": "user", "content": "hi"}]}
    assert openai.may_sniff("jsonl", formats._heads([record], "jsonl"))
    assert openai.may_sniff("json", formats._heads([[record]], "json"))  # a JSON array of records
    assert not gemini.may_sniff("jsonl", formats._heads([record], "jsonl"))  # a JSON document format
    assert not cline.may_sniff("jsonl", formats._heads([record], "jsonl"))  # messages alone, never in records
    assert not openai.may_sniff("zip", frozenset())


def test_a_format_registered_by_module_name_is_always_asked(tmp_path: Path) -> None:
    formats.register("ctxtool.formats.openai", "openai-again")
    try:
        entry = formats.FORMATS.entry("openai-again")
        assert isinstance(entry, formats.Lazy) and entry.may_sniff("zip", frozenset())
        src = tmp_path / "x.jsonl"
        src.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
        with pytest.raises(CtxtoolError, match="ambiguous"):  # both say yes: asked, not ruled out
            formats.detect(open_source(src))
    finally:
        formats.FORMATS.unregister("openai-again")


def test_the_process_ends_flushed_with_its_exit_handlers_run(tmp_path: Path) -> None:
    """``ctxtool`` ends its process without tearing the interpreter down (cli.entry): the
    output is whole, the exit handlers ran, and a thread still running is joined first."""
    sample = str(SAMPLES / "openai_dataset.jsonl")
    code = ("import atexit, sys; from ctxtool.cli import entry; "
            "atexit.register(lambda: sys.stderr.write('handlers ran\\n')); "
            f"sys.argv = ['ctxtool', 'stats', '--json', {sample!r}]; entry()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["command"] == "stats" and proc.stderr.endswith("handlers ran\n")
    marker = tmp_path / "joined"
    code = ("import sys, threading, time; from ctxtool.cli import entry; "
            f"threading.Thread(target=lambda: (time.sleep(0.3), open({str(marker)!r}, 'w').write('x'))).start(); "
            "sys.argv = ['ctxtool', 'stats', '--nonsense']; entry()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and marker.read_text() == "x", proc.stderr


def test_a_profiled_run_still_prints_its_profile(tmp_path: Path) -> None:
    """Under ``python -m cProfile -m ctxtool`` the interpreter ends as usual: the profile,
    written at exit, is printed."""
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-s", "tottime", "-m", "ctxtool", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ctxtool ") and "function calls" in proc.stdout
