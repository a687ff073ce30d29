"""Open a page in headless Chromium (Debian's ``chromium``) and ask it what it rendered.

The browser is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-terminated JSON messages, commands on fd 3, replies and events on fd 4). The pipe,
not stderr: Chromium's stderr carries its own noise (D-Bus, GPU) in the same format as a
page's console lines, while the protocol reports each console call, uncaught exception
and browser-logged error (a resource that failed to load, a bad data: URI) as an event of
its own. Hand-written, about 100 lines: the Python DevTools clients speak the WebSocket
transport and the browser drivers (Playwright, pyppeteer) bring browsers of their own;
the pipe transport needs neither a port nor a library.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

ERROR_CONSOLE_TYPES = {"error", "assert"}


def _high(fd: int) -> int:
    """``fd`` moved to a descriptor number above 9 (the old one closed)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return new


class Browser:
    """One headless Chromium; ``open(url)`` loads a page and returns a ``Page``."""

    def __init__(self, exe: str | None = None, timeout: float = 60.0):
        self.exe = exe or shutil.which("chromium")
        if self.exe is None:
            raise FileNotFoundError("chromium")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="spigap-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        # the child's ends above 9, so that putting one on fd 3 cannot overwrite the other
        cmd_r, res_w = (_high(fd) for fd in (cmd_r, res_w))
        args = [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                "about:blank"]
        # the protocol's fds are 3 (commands) and 4 (replies): bash puts the pipes there (dash takes
        # no descriptor above 9)
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{res_w}', "bash", *args],
                                     pass_fds=(cmd_r, res_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    # ------------------------------------------------------------ the protocol
    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit {self.proc.poll()})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and wait for its reply (events that come first are kept)."""
        self._id += 1
        msg: dict = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_event(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        seen = 0
        while True:
            for m in self.events[seen:]:
                if m.get("method") == method and m.get("sessionId") == session:
                    return m
            seen = len(self.events)
            self.events.append(self._read(deadline))

    # ------------------------------------------------------------ pages
    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return Page(self, session)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            os.close(self._cmd_w)
            os.close(self._res_r)
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str):
        """The value of a JavaScript expression (awaited when it is a promise)."""
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"the page's script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def errors(self) -> list[str]:
        """Every console error, uncaught exception and browser-logged error of the page so far."""
        out = []
        for m in self.browser.events:
            if m.get("sessionId") != self.session:
                continue
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ERROR_CONSOLE_TYPES:
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                  for a in p.get("args", [])))
            elif m.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails"))[:500])
            elif m.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                out.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}")
        return out
