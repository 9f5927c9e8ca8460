"""ctxtool in a real terminal: a pseudo-terminal of a given width, as a person sees it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def terminal_screen(args: list[str], env: dict[str, str] | None = None, columns: int = 80,
                    ok: tuple[int, ...] = (0,)) -> str:
    """What ``ctxtool ARGS`` shows in a terminal ``columns`` wide (colours removed); its exit
    status must be one of ``ok``."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full = {**os.environ, **(env or {}), "COLUMNS": str(columns), "TERM": "xterm", "NO_COLOR": "1"}
    full.pop("FORCE_COLOR", None)
    p = subprocess.Popen([sys.executable, "-m", "ctxtool", *args], stdin=subprocess.DEVNULL, stdout=follower,
                         stderr=subprocess.DEVNULL, env=full)
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert p.wait(timeout=120) in ok, args
    return ANSI.sub("", out.decode("utf-8")).replace("\r\n", "\n")
