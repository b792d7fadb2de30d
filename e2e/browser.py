"""The one headless Chromium the browser tests share: Debian's, driven by Playwright.

Playwright's own browser download is never used: ``executable_path`` points at the system's
Chromium (``/usr/bin/chromium``, or ``DOEMU_E2E_CHROMIUM``). Without it the tests skip, naming
what to install; ``.ci/run`` installs it and sets ``DOEMU_E2E_REQUIRE_BROWSER=1`` so that in CI a
missing browser fails instead of passing silently. A test module uses the fixture with
``from .browser import browser as browser``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

__all__ = ["CHROMIUM", "WITHIN_MS", "browser"]

CHROMIUM = os.environ.get("DOEMU_E2E_CHROMIUM", "/usr/bin/chromium")
#: Playwright ``expect``'s deadline: generous, since it only bounds a failing test.
WITHIN_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module (a launch costs ~1 s; pages are cheap)."""
    path = shutil.which(CHROMIUM)
    if path is None:
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set DOEMU_E2E_CHROMIUM)"
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
