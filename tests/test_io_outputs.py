"""-o never replaces what is not a regular file: symlinks, FIFOs, devices, /dev/fd/N; the check
callback before commit; compressed outputs; a full disk is exit 8 naming the output."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from io_pipes import SAMPLES, FifoReader, run_ctxtool

from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.io.outputs import atomic_output

PI = SAMPLES / "pi_session.jsonl"  # converts to itself byte for byte


def test_a_symlink_is_followed_its_target_replaced_and_the_link_kept(tmp_path: Path) -> None:
    target = tmp_path / "real" / "target.jsonl"
    target.parent.mkdir()
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(link), cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == PI.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # replacing a file keeps its mode
    assert sorted(p.name for p in target.parent.iterdir()) == ["target.jsonl"]  # no temporary left


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "new.jsonl")
    with atomic_output(link) as out:
        out.write(b"{}\n")
    assert link.is_symlink() and (tmp_path / "new.jsonl").read_bytes() == b"{}\n"


def test_a_fifo_is_written_in_place_streaming(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    try:
        r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(fifo), cache=tmp_path / "c")
    finally:
        got = reader.finish()
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced"
    assert got == PI.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_character_device_is_written_in_place(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # our own /dev/null, in tmp_path
    try:
        with open(dev, "wb") as fh:
            fh.write(b"x")
    except OSError:
        pytest.skip("device nodes cannot be opened on this file system (nodev)")
    mode = stat.S_IMODE(os.stat(dev).st_mode)
    r = run_ctxtool("truncate", str(PI), "--json", "--max-lines", "2", "-o", str(dev), cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    st = os.stat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3) and stat.S_IMODE(st.st_mode) == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_dev_fd_output_is_the_inherited_descriptor(tmp_path: Path) -> None:
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxtool", "convert", str(PI), "--to", "pi", "-o", f"/dev/fd/{wfd}"],
            pass_fds=(wfd,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")},
        )
        os.close(wfd)
        wfd = -1
        with os.fdopen(rfd, "rb") as fh:
            rfd = -1
            got = fh.read()
        _, err = proc.communicate(timeout=60)
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
    assert proc.returncode == 0, err
    assert got == PI.read_bytes()


def test_the_check_runs_before_a_fifo_sees_anything(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    seen: list[bytes] = []
    reader = FifoReader(fifo)
    try:
        with atomic_output(fifo, lambda tmp: seen.append(Path(tmp).read_bytes())) as out:
            out.write(b"line 1\n")
            out.write(b"line 2\n")
        with pytest.raises(CtxtoolError), atomic_output(fifo, _refuse) as out:
            out.write(b"never delivered\n")
    finally:
        got = reader.finish()
    assert seen == [b"line 1\nline 2\n"]
    assert got == b"line 1\nline 2\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def _refuse(tmp: str) -> None:
    raise CtxtoolError("invalid output", kind=Failure.INTERNAL)


def test_a_failed_check_leaves_a_regular_file_untouched(tmp_path: Path) -> None:
    out_path = tmp_path / "out.jsonl"
    out_path.write_bytes(b"before\n")
    with pytest.raises(CtxtoolError), atomic_output(out_path, _refuse) as out:
        out.write(b"after\n")
    assert out_path.read_bytes() == b"before\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_a_symlink_loop_is_a_one_line_usage_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.symlink_to(b)
    b.symlink_to(a)
    r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(a), cache=tmp_path / "c")
    err = r.stderr.decode()
    assert r.returncode == ExitCode.USAGE, err
    assert err.count("\n") == 1 and str(a) in err and "symlink loop" in err and "Traceback" not in err


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_an_output_named_gz_or_zst_is_compressed(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"out.jsonl{suffix}"
    r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(out), cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    plain = gzip.decompress(data) if suffix == ".gz" else zstandard.ZstdDecompressor().stream_reader(data).read()
    assert plain == PI.read_bytes()
    # and read back transparently
    back = tmp_path / "back.jsonl"
    assert run_ctxtool("convert", str(out), "--to", "pi", "-o", str(back), cache=tmp_path / "c").returncode == 0
    assert back.read_bytes() == PI.read_bytes()


def test_a_compressed_output_gets_the_check_on_its_plain_bytes(tmp_path: Path) -> None:
    seen: list[bytes] = []
    out_path = tmp_path / "o.jsonl.gz"
    with atomic_output(out_path, lambda tmp: seen.append(Path(tmp).read_bytes())) as out:
        out.write(b"{}\n")
    assert seen == [b"{}\n"] and gzip.decompress(out_path.read_bytes()) == b"{}\n"


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, check=False)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_names_the_output_with_exit_code_8(tmp_path: Path, tiny_disk: Path) -> None:
    big = tmp_path / "big.jsonl"
    line = (SAMPLES / "openai_dataset.jsonl").read_bytes()
    big.write_bytes(line * 40)  # ~ 300 KB of canonical output, more than the 64 KB disk
    out = tiny_disk / "out.jsonl"
    r = run_ctxtool("convert", str(big), "--to", "ctxtool", "-o", str(out), cache=tmp_path / "c")
    err = r.stderr.decode()
    assert r.returncode == ExitCode.IO == 8, err
    assert err.count("\n") == 1 and str(out) in err and "No space left" in err and "Traceback" not in err
    assert os.listdir(tiny_disk) == []  # neither the output nor a temporary


def test_stdout_on_a_full_disk_is_exit_code_8(tmp_path: Path, tiny_disk: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes((SAMPLES / "openai_dataset.jsonl").read_bytes() * 40)
    with open(tiny_disk / "redirected.jsonl", "wb") as out:
        r = run_ctxtool("convert", str(big), "--to", "ctxtool", cache=tmp_path / "c", capture_output=False,
                        stdout=out, stderr=subprocess.PIPE)
    err = r.stderr.decode()
    assert r.returncode == ExitCode.IO, err
    assert err.count("\n") == 1 and "<stdout>" in err and "No space left" in err


def test_dev_fd_naming_a_regular_file_is_written_in_place(tmp_path: Path) -> None:
    target = tmp_path / "redirected.jsonl"
    with open(target, "wb") as fh:
        inode = os.fstat(fh.fileno()).st_ino
        r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", f"/dev/fd/{fh.fileno()}", cache=tmp_path / "c",
                        pass_fds=(fh.fileno(),))
    assert r.returncode == 0, r.stderr
    assert target.stat().st_ino == inode  # the descriptor's file, not a new one renamed over it
    assert target.read_bytes() == PI.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["redirected.jsonl"]


@pytest.mark.parametrize("checked", [True, False])
@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz", "fifo"])
def test_an_output_started_with_a_part_holds_the_part_then_the_block(tmp_path: Path, name: str, checked: bool) -> None:
    """atomic_output(start_with=part): the part (the first of a parallel run) begins the
    output and is consumed: moved into place for a plain file (the part's own inode, checked
    or not: truncate and window -o run without a check), copied for anything else."""
    part = tmp_path / "0.part"
    part.write_bytes(b'{"a": 1}\n')
    inode = part.stat().st_ino
    seen: list[bytes] = []
    if name == "fifo":
        out_path = tmp_path / "out.fifo"
        os.mkfifo(out_path)
        reader = FifoReader(out_path)
    else:
        out_path = tmp_path / name
    check = (lambda tmp: seen.append(Path(tmp).read_bytes())) if checked else None
    with atomic_output(str(out_path), check, start_with=str(part)) as out:
        out.write(b'{"b": 2}\n')
    data = reader.finish() if name == "fifo" else out_path.read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    assert data == b'{"a": 1}\n{"b": 2}\n'
    assert seen == ([data] if checked else [])
    assert not part.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [out_path.name]
    if name == "out.jsonl":
        assert out_path.stat().st_ino == inode  # moved, not copied
