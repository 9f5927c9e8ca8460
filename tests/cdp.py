"""A headless Chromium driven through the DevTools protocol over a pipe (no network port, no
extra package): open a page, run script in it, click at a point as a mouse does, take a
screenshot. For the browser tests of the HTML export."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any


def browser_path() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


class Browser:
    """One headless Chromium with one page. Each call waits for its answer (``timeout`` s)."""

    def __init__(self, exe: str, profile: Path, width: int = 1280, height: int = 900, timeout: float = 60) -> None:
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        # copies above 4, so that neither dup2 below is a no-op (which would keep close-on-exec)
        cmd_fd, ans_fd = os.dup(to_chrome_r), os.dup(from_chrome_w)

        def fds() -> None:  # the child reads commands on fd 3 and answers on fd 4
            os.dup2(cmd_fd, 3)
            os.dup2(ans_fd, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            close_fds=False, preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_chrome_r, from_chrome_w, cmd_fd, ans_fd):
            os.close(fd)
        self.timeout = timeout
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                m = json.loads(raw)
                if m.get("id") == self._id:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return dict(m.get("result", {}))
                self.events.append(m)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(method)
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("the browser closed its pipe")
                self._buf += chunk

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError("page load")
            self.call("Runtime.evaluate", expression="1")

    def js(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def until(self, expression: str, want: Any = True, timeout: float = 15) -> Any:
        """The expression's value once it equals ``want`` (asked every 0.1 s, ``timeout`` s at
        most; then its last value, for the caller's assert). A click's effects land after the
        click's events return, and a busy machine makes them late; while a click navigates, an
        answer may be "target navigated": asked again."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while True:
            try:
                value = self.js(expression)
            except RuntimeError as e:
                if "navigated" not in str(e) and "context" not in str(e).lower():
                    raise
            else:
                if value == want:
                    return value
            if time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """A mouse click in the middle of the element's first line box (scrolled into view first)."""
        box = self.js(f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
                      "var r=e.getClientRects()[0];return [r.left+r.width/2,r.top+r.height/2];})()")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def console_errors(self) -> list[str]:
        return [json.dumps(e["params"])[:300] for e in self.events
                if e.get("method") in ("Runtime.exceptionThrown",) or
                (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # already gone
            pass
        for fd in (self._w, self._r):
            os.close(fd)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
