"""The one headless Chromium the browser tests share: the system's, driven by Playwright.

Playwright's own browser download is never used: ``executable_path`` points at the system's
Chromium, found on the ``PATH`` by its common names (``chromium``, Debian's;
``chromium-browser``, Ubuntu's and others'), or ``DOEMU_E2E_CHROMIUM`` (a name or a path).
Without it the tests skip, naming what to install; ``.ci/run`` installs it and sets
``DOEMU_E2E_REQUIRE_BROWSER=1`` so that in CI a missing browser fails instead of passing
silently. A test module uses the fixture with ``from .browser import browser as browser``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

__all__ = ["CHROMIUM_NAMES", "WITHIN_MS", "browser", "find_chromium"]

#: The names Chromium is installed under, tried in order (``DOEMU_E2E_CHROMIUM`` first).
CHROMIUM_NAMES = ("chromium", "chromium-browser")
#: Playwright ``expect``'s deadline: generous, since it only bounds a failing test.
WITHIN_MS = 15_000


def find_chromium() -> str | None:
    """The Chromium executable: ``DOEMU_E2E_CHROMIUM`` if set, else the first of
    :data:`CHROMIUM_NAMES` on the ``PATH``."""
    wanted = os.environ.get("DOEMU_E2E_CHROMIUM")
    for name in (wanted,) if wanted else CHROMIUM_NAMES:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module (a launch costs ~1 s; pages are cheap)."""
    path = find_chromium()
    if path is None:
        names = os.environ.get("DOEMU_E2E_CHROMIUM") or " or ".join(CHROMIUM_NAMES)
        reason = f"no Chromium ({names}) (apt-get install chromium, or set DOEMU_E2E_CHROMIUM)"
        if os.environ.get("DOEMU_E2E_REQUIRE_BROWSER") == "1":
            pytest.fail(f"DOEMU_E2E_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    expect.set_options(timeout=WITHIN_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Dialogs:
    """A page's confirms: each message kept, each accepted unless told to refuse the next."""

    seen: list[str] = field(default_factory=list)
    refuse_next: bool = False

    def answer(self, dialog: Dialog) -> None:
        self.seen.append(dialog.message)
        if self.refuse_next:
            self.refuse_next = False
            dialog.dismiss()
        else:
            dialog.accept()


@contextmanager
def inspector_pages(
    browser: Browser, url: str, token: str, dialogs: Dialogs, ready: str
) -> Iterator[Callable[..., Page]]:
    """Opens the inspector at ``url`` (``open_page(width)``), connected to its event stream and
    showing ``ready``; every page's confirms go to ``dialogs``. On exit the pages close, and no
    page may have thrown a JavaScript error."""
    contexts: list[Any] = []
    errors: list[str] = []

    def open_page(width: int = 1280) -> Page:
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        new = context.new_page()
        new.set_default_timeout(WITHIN_MS)
        new.on("pageerror", lambda error: errors.append(str(error)))
        new.on("dialog", dialogs.answer)
        new.goto(f"{url}/__doemu/#token={token}")
        expect(new.locator("#stream")).to_have_text("events: connected")
        expect(new.locator(ready).first).to_be_visible()
        return new

    yield open_page
    for context in contexts:
        context.close()
    assert errors == [], errors
