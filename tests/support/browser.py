"""A real headless Chromium, driven over the Chrome DevTools Protocol: what the dashboard's
browser tests, `make screenshots` and the dashboard benchmark use.

    with Chromium.launch() as browser:              # skips nothing: raises BrowserUnavailable
        page = browser.page()
        page.navigate("http://127.0.0.1:8790/")
        page.wait_for("document.querySelectorAll('.gpu').length > 0")
        page.evaluate("document.title")
        page.screenshot(Path("map.png"))

Why the protocol itself and not Selenium: it is one WebSocket (websocket-client, already a
dependency of the `kubernetes` client) and three methods (navigate, evaluate, screenshot), so a
driver and its version matching are one more part that could break without adding anything.
Debian's `chromium` package is the browser (hack/install-system-deps.sh installs it as root).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import websocket

__all__ = ["BrowserUnavailable", "Chromium", "Page", "chromium_binary"]

_CANDIDATES: Final = ("chromium", "chromium-browser", "google-chrome")
_START_TIMEOUT_S: Final = 30.0


class BrowserUnavailable(Exception):
    """No Chromium on this machine (the reason says what to install)."""


def chromium_binary() -> str | None:
    """The Chromium to drive: $CHROMIUM, else the first of the usual names on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit
    return next((found for name in _CANDIDATES if (found := shutil.which(name))), None)


class Page:
    """One tab. Not thread-safe."""

    def __init__(self, ws_url: str) -> None:
        self._ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self._ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One protocol command; its result. Raises RuntimeError with the browser's error."""
        call = next(self._ids)
        self._ws.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") != call:
                continue  # an event: nothing here subscribes to any
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')} {result['result']}")
        return result["result"].get("value")

    def navigate(self, url: str, *, timeout: float = 30.0) -> None:
        """Open `url` and wait until its document has loaded."""
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", timeout=timeout)

    def wait_for(self, expression: str, *, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """Poll until `expression` is truthy; its value. Raises TimeoutError naming it."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"not true within {timeout:g} s: {expression} (last value {value!r})")
            time.sleep(interval)

    def screenshot(self, path: Path, *, full_page: bool = False) -> None:
        """A PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": metrics["width"], "height": metrics["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            self._ws.close()


class Chromium:
    """A headless Chromium process with its own profile directory."""

    def __init__(self, process: subprocess.Popen[bytes], profile: Path, port: int) -> None:
        self._process = process
        self._profile = profile
        self.port = port
        self._pages: list[Page] = []

    @classmethod
    @contextlib.contextmanager
    def launch(cls, *, width: int = 1440, height: int = 900) -> Iterator[Chromium]:
        """Start one; raises BrowserUnavailable when there is none, RuntimeError when it does
        not start. Stopped (and its profile removed) on leaving the block."""
        binary = chromium_binary()
        if binary is None:
            raise BrowserUnavailable("no chromium on PATH (Debian: apt-get install chromium; as root, make test does)")
        profile = Path(tempfile.mkdtemp(prefix="tessera-chromium-"))
        args = [
            binary,
            "--headless=new",
            "--no-sandbox",  # root in CI and containers: the sandbox needs user namespaces
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        browser = None
        try:
            port = _wait_port(profile / "DevToolsActivePort", process)
            browser = cls(process, profile, port)
            yield browser
        finally:
            if browser is not None:
                for page in browser._pages:
                    page.close()
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            shutil.rmtree(profile, ignore_errors=True)

    def page(self) -> Page:
        """A new tab."""
        with urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT"), timeout=10
        ) as response:
            target = json.load(response)
        page = Page(target["webSocketDebuggerUrl"])
        self._pages.append(page)
        return page


def _wait_port(path: Path, process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before it listened")
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(path.read_text().splitlines()[0])
        time.sleep(0.05)
    raise RuntimeError(f"chromium did not write {path} within {_START_TIMEOUT_S:g} s")
