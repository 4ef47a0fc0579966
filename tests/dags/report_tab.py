"""Headless Chromium driven over the DevTools protocol, as a person uses the Airflow UI: log
in on the login page, open a DAG run, open its "Sitemaps report" tab (the plugin in
plugins/sitemaps_report.py) and read the report shown in the tab's iframe; a screenshot of
the page is kept as a test artifact.

Only Debian's /usr/bin/chromium and the `websockets` package (a dependency of Airflow's
api-server) are used: no browser automation library.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("SITEMAPS_CHROMIUM", "/usr/bin/chromium")
#: Where screenshots are kept (`SITEMAPS_TEST_ARTIFACTS`, default <repo>/test-artifacts/).
ARTIFACTS = Path(os.environ.get("SITEMAPS_TEST_ARTIFACTS")
                 or Path(__file__).resolve().parents[2] / "test-artifacts")


class Browser:
    """One headless Chromium and one page, over the DevTools protocol (flat sessions)."""

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--window-size=1400,1800", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        ws_url = None
        deadline = time.monotonic() + 60
        assert self.proc.stderr is not None
        while ws_url is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"chromium exited {self.proc.returncode}")
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            ws_url = m.group(1) if m else None
        assert ws_url, "chromium printed no DevTools URL"
        self._connection = connect(ws_url, max_size=None, open_timeout=30)
        self.ws = self._connection.__enter__()
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=self.session)
        # Out-of-process iframes (the plugin's tab) are attached as sessions of their own.
        self.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False,
                                           "flatten": True}, session=self.session)

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 60) -> dict[str, Any]:
        msg_id = next(self.ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression: str, session: str | None = None,
                 context: int | None = None) -> Any:
        params: dict[str, Any] = {"expression": expression, "returnByValue": True,
                                  "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        result = self.send("Runtime.evaluate", params, session=session or self.session)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=self.session)

    def wait(self, what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = probe()
            except AssertionError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    def type_into(self, selector: str, text: str) -> None:
        assert self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                             " if (!e) return false; e.focus(); return true; })()"), selector
        self.send("Input.insertText", {"text": text}, session=self.session)

    def frame_text(self, url_part: str) -> str | None:
        """The text of the page's iframe whose URL contains `url_part`, in process or not."""
        tree = self.send("Page.getFrameTree", session=self.session)["frameTree"]
        for child in tree.get("childFrames", []):
            frame = child["frame"]
            if url_part in frame.get("url", ""):
                world = self.send("Page.createIsolatedWorld",
                                  {"frameId": frame["id"], "worldName": "report-check"},
                                  session=self.session)["executionContextId"]
                return self.evaluate("document.body ? document.body.innerText : ''",
                                     context=world) or None
        for event in self.events:  # an out-of-process iframe: its own session
            info = event.get("params", {}).get("targetInfo", {})
            if event.get("method") == "Target.attachedToTarget" and \
                    info.get("type") == "iframe" and url_part in info.get("url", ""):
                return self.evaluate("document.body ? document.body.innerText : ''",
                                     session=event["params"]["sessionId"]) or None
        return None

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=self.session)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        try:
            self._connection.__exit__(None, None, None)
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def open_report_tab(base_url: str, password: str, dag_id: str, run_id: str, tmp: Path,
                    screenshot: str = "report-tab.png") -> tuple[str, Path]:
    """Log in as admin, open the DAG run, click its "Sitemaps report" tab; returns the text
    the tab shows and the screenshot's path (under ARTIFACTS)."""
    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError(f"{CHROMIUM} is not installed: the browser tests need it "
                             "(apt-get install -y chromium; `make test` installs it)")
    run_page = f"{base_url}/dags/{dag_id}/runs/{urllib.parse.quote(run_id, safe='')}"
    browser = Browser(tmp / "chromium")
    try:
        browser.goto(f"{base_url}/auth/login?next={urllib.parse.quote(run_page, safe='')}")
        browser.wait("the login form",
                     lambda: browser.evaluate("!!document.querySelector('input[name=password]')"))
        browser.type_into("input[name=username]", "admin")
        browser.type_into("input[name=password]", password)
        browser.evaluate("document.querySelector('button[type=submit]').click()")
        # Logged in: the UI sets its session cookie and goes on to the DAG run.
        browser.wait("the DAG run page after login", lambda: browser.evaluate(
            "location.pathname.includes('/runs/') && document.cookie.includes('_token')"))
        tab = browser.wait("the Sitemaps report tab", lambda: browser.evaluate(
            "(() => { const a = [...document.querySelectorAll('a, button')].find("
            "e => e.textContent.trim() === 'Sitemaps report'); if (!a) return null; "
            "a.click(); return a.tagName; })()"))
        assert tab
        text = browser.wait("the report in the tab", lambda: (
            lambda t: t if t and "Sitemaps report" in t else None)(
            browser.frame_text("sitemaps-report/")), timeout=90)
        time.sleep(1.0)  # the frame finishes painting (its charts are inline SVG) before the shot
        shot = browser.screenshot(ARTIFACTS / screenshot)
        return text, shot
    finally:
        browser.close()
        shutil.rmtree(tmp / "chromium", ignore_errors=True)


def fetch(url: str, token: str) -> tuple[int, str]:
    """GET with a bearer token (the plugin's endpoint outside the browser)."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
