"""Screenshot the MLflow chart view comparing the arm runs, as a new user would reach it.

Drives a headless Chromium over the DevTools protocol: open the runs page of the experiment in
chart mode with the arm runs filtered (``tags.`washexp.kind` = 'arm'``), show all of them (the
UI shows the first 10 by default), filter the charts to ``retention``, close the assistant
panel, and save a PNG. Usage (with ``washexp ui`` already serving):

    python docs/ui_screenshot.py URL OUT.png              # the chart view, as above
    python docs/ui_screenshot.py URL OUT.png --as-opened  # the page exactly as it opens (no clicks)

Needs Debian's ``chromium`` and the ``websockets`` package (installed with mlflow's deps).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

PORT = 9333


async def main(url: str, out: str, as_opened: bool = False) -> None:
    profile = tempfile.mkdtemp(prefix="washexp-chrome-")
    chrome = subprocess.Popen(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1600,1000",
            f"--remote-debugging-port={PORT}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = _page_ws()
        async with websockets.connect(page, max_size=None) as ws:
            ids = iter(range(1, 10**6))

            async def call(method: str, **params):
                n = next(ids)
                await ws.send(json.dumps({"id": n, "method": method, "params": params}))
                while True:
                    msg = json.loads(await ws.recv())
                    if msg.get("id") == n:
                        return msg.get("result", {})

            async def js(expr: str):
                r = await call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
                return r.get("result", {}).get("value")

            await call("Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False)
            await call("Page.navigate", url=url)
            await asyncio.sleep(8)
            if as_opened:
                await _save(call, out)
                return
            # every arm visible: the eye menu in the run list header -> "Show all runs"
            for _ in range(10):
                await js(PRESS % json.dumps("[data-testid='experiment-view-runs-visibility-column-header']"))
                await asyncio.sleep(1)
                if await js(SHOWN_ALL):
                    break
                await js(PRESS_TEXT % json.dumps("Show all runs"))
                await asyncio.sleep(1)
            else:
                raise SystemExit("could not switch the run list to 'Show all runs'")
            await call("Input.dispatchKeyEvent", type="keyDown", key="Escape", code="Escape", windowsVirtualKeyCode=27)
            await asyncio.sleep(1)
            # charts filtered to the primary cohort's retention and reduction
            await js(TYPE % (json.dumps("input[placeholder='Search metric charts']"), json.dumps("primary/re")))
            # close the assistant side panel
            await js(PRESS % json.dumps("[aria-label='Close']"))
            await asyncio.sleep(4)
            await _save(call, out)
    finally:
        chrome.terminate()
        chrome.wait(timeout=10)


PRESS = """(() => { const e = document.querySelector(%s); if (!e) return false;
  for (const t of ['pointerdown', 'mousedown', 'pointerup', 'mouseup'])
    e.dispatchEvent(new PointerEvent(t, {bubbles: true, pointerType: 'mouse', button: 0}));
  e.click(); return true; })()"""
"""A real press: the UI's menus open on pointer events, not on a bare click()."""
PRESS_TEXT = PRESS.replace(
    "document.querySelector(%s)",
    "[...document.querySelectorAll('[role=menuitemradio]')].find(x => x.textContent.trim() === %s)",
)
SHOWN_ALL = """[...document.querySelectorAll('[role=menuitemradio]')]
  .some(x => x.textContent.trim() === 'Show all runs' && x.getAttribute('aria-checked') === 'true')"""
TYPE = """(() => { const e = document.querySelector(%s); if (!e) return false;
  const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
  set.call(e, %s); e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()"""


async def _save(call, out: str) -> None:
    shot = await call("Page.captureScreenshot", format="png")
    with open(out, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


def _page_ws() -> str:
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/json/list", timeout=2) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.3)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], as_opened="--as-opened" in sys.argv[3:]))
