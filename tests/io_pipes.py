"""Helpers for the I/O tests: run ctxtool as a real process, feed or drain a FIFO from a thread
(never blocking a test forever when the command does not open it)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def run_ctxtool(*args: str, cache: Path, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cache)}
    env.pop("CTXTOOL_DEBUG", None)
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], env=env, timeout=timeout, check=False, **kw)


def ctxtool_ok(*args: str, cache: Path, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    """:func:`run_ctxtool` that must exit 0 (its stderr shown when it does not)."""
    r = run_ctxtool(*args, cache=cache, **kw)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


class FifoReader(threading.Thread):
    """Drains a FIFO while a command writes to it. The FIFO is held open read-write, so the
    writer's open never blocks and nothing hangs if the command never opens it."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.data = bytearray()
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    self.data += os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    pass
                continue
            if self._done.is_set():
                return

    def finish(self) -> bytes:
        self._done.set()
        self.join(10)
        os.close(self.fd)
        return bytes(self.data)


class FifoWriter(threading.Thread):
    """Writes ``data`` into a FIFO once a reader opens it, then closes it (the reader's EOF)."""

    def __init__(self, path: Path, data: bytes) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.payload = data
        self.start()

    def run(self) -> None:
        try:
            with open(self.path, "wb") as fh:
                fh.write(self.payload)
        except OSError:  # the reader went away early
            pass

    def finish(self) -> None:
        """After the command ended: unblock a writer whose FIFO was never opened."""
        if self.is_alive():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                fd = -1
            self.join(5)
            if fd >= 0:
                os.close(fd)
        self.join(5)


def pipe_writer(fd: int, data: bytes) -> threading.Thread:
    """Write ``data`` into the write end ``fd`` of a pipe from a thread, then close it."""

    def run() -> None:
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# every command that reads a transcript file: its arguments, with {i} the input and {o} an output
FILE_COMMANDS: dict[str, list[str]] = {
    "stats": ["stats", "{i}", "--json"],
    "validate": ["validate", "{i}"],
    "convert": ["convert", "{i}", "--to", "ctxtool", "-o", "{o}"],
    "truncate": ["truncate", "{i}", "--max-lines", "2", "-o", "{o}"],
    "restore": ["restore", "{i}", "-o", "{o}"],
    "trim": ["trim", "{i}", "--budget", "100", "-o", "{o}"],
    "cut": ["cut", "{i}"],
    "check": ["check", "{i}"],
    "window": ["window", "{i}", "--max-messages", "3", "-o", "{o}"],
    "repair": ["repair", "{i}", "-o", "{o}"],
    "archive": ["archive", "{i}", "--cutoff", "1", "-o", "{o}"],
    "replay": ["replay", "{i}", "--context-window", "1000"],
    "compact": ["compact", "{i}", "--force", "-o", "{o}"],
    "compactions": ["compactions", "{i}", "--json"],
    "score": ["score", "{i}", str(SAMPLES / "pi_session.jsonl")],  # BEFORE from the input, AFTER a file
    "export": ["export", "{i}", "--to", "html", "--title", "t", "-o", "{o}"],
    "usage": ["usage", "{i}", "--json"],
    "redact": ["redact", "{i}", "-o", "{o}"],
}


def command_args(name: str, i: str | Path, o: str | Path) -> list[str]:
    return [a.format(i=i, o=o) for a in FILE_COMMANDS[name]]
