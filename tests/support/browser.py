"""Open an HTML file in headless Chromium with networking disabled: a screenshot, the page's images, its requests.

Debian's `chromium` (scripts/ensure-chromium.sh installs it; EPG_CHROMIUM names another executable)
is driven through Playwright over the DevTools protocol. No traffic can leave: every request other than
the page's own file is recorded and aborted before it reaches the network, the host resolver maps
every name to nothing, and the proxy is a closed loopback port. `requests` lists what the page asked
for, so a test can prove a page needs no network.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

NO_NETWORK_ARGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",  # the discard port: nothing listens, nothing leaves the host
    "--proxy-bypass-list=<-loopback>",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
)


class BrowserUnavailable(RuntimeError):
    """No Chromium executable to run (the message says how to install one)."""


@dataclass(frozen=True, slots=True)
class ImageBox:
    """An <img> of the page: its id, where it is drawn (CSS pixels, page coordinates), its PNG's own size, loaded or not."""

    id: str
    x: float
    y: float
    width: float
    height: float
    natural_width: int
    natural_height: int
    loaded: bool


@dataclass(frozen=True, slots=True)
class PageCapture:
    screenshot: bytes  # PNG of the whole page at device scale factor 1
    images: tuple[ImageBox, ...]
    requests: tuple[str, ...]  # every URL requested besides the page itself (data: URLs are no request)
    console_errors: tuple[str, ...]


def chromium_executable() -> str:
    """Return the Chromium executable. Raises BrowserUnavailable when there is none."""
    named = os.environ.get("EPG_CHROMIUM")
    for candidate in ([named] if named else ["chromium", "chromium-browser"]):
        found = shutil.which(candidate)
        if found:
            return found
    raise BrowserUnavailable("no Chromium executable: run scripts/ensure-chromium.sh (make test does) or set EPG_CHROMIUM")


def capture_page(page: Path, *, width: int, height: int, timeout_s: float = 60.0) -> PageCapture:
    """Open page (a local HTML file) in a viewport of width x height CSS pixels; screenshot the full page.

    Raises BrowserUnavailable when no Chromium is installed, and Playwright's errors when it cannot run.
    """
    from playwright.sync_api import sync_playwright

    executable = chromium_executable()
    url = page.resolve().as_uri()
    requests: list[str] = []
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=list(NO_NETWORK_ARGS),
                                             timeout=timeout_s * 1000)
        try:
            context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1,
                                          service_workers="block")

            def route(request_route) -> None:
                if request_route.request.url == url:
                    request_route.continue_()
                else:
                    requests.append(request_route.request.url)
                    request_route.abort()

            context.route("**/*", route)
            tab = context.new_page()
            tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            tab.goto(url, wait_until="load", timeout=timeout_s * 1000)
            boxes = tab.evaluate(
                """() => Array.from(document.images).map(img => {
                    const r = img.getBoundingClientRect();
                    return {id: img.id, x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height,
                            natural_width: img.naturalWidth, natural_height: img.naturalHeight,
                            loaded: img.complete && img.naturalWidth > 0};
                })"""
            )
            screenshot = tab.screenshot(full_page=True, type="png", timeout=timeout_s * 1000)
        finally:
            browser.close()
    return PageCapture(screenshot=screenshot, images=tuple(ImageBox(**box) for box in boxes), requests=tuple(requests),
                       console_errors=tuple(errors))
