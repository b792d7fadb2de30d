"""What loading a worker leaves for start-up to do, and what it leaves for the next load.

Which of the modules a load imported are the user's (and so dropped by the next load) is decided
in two steps: the cheap part at load time, the check against installed library directories
(sysconfig's paths) only when the next load needs the answer. A project whose own ``.venv`` sits
under its root is the case that check exists for: its installed packages must survive a reload.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from doemu.config import load_config
from doemu.loader import load_worker, modules, unload_user_modules

CONFIG = """\
name = "startup-loader"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Counter"]
"""

ENTRY = """\
import helpers_startup_xyz
import installed_startup_xyz
from workers import DurableObject, Response

class Counter(DurableObject):
    async def fetch(self, request):
        return Response("ok")
"""


@pytest.fixture(autouse=True)
def _forget_user_code() -> Iterator[None]:
    unload_user_modules()
    path = list(sys.path)
    yield
    unload_user_modules()
    sys.path[:] = path
    sys.modules.pop("installed_startup_xyz", None)


def test_a_projects_own_installed_packages_survive_a_reload_checked_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. A project with a sibling module and, in its own ``.venv`` under its root, an installed
    one. 2. The first load does not consult the library directories at all. 3. The second load
    does, once: the sibling module is imported afresh, the installed one is kept."""
    root = tmp_path / "project"
    site = root / ".venv" / "lib" / "site-packages"
    for path, text in {
        root / "src" / "entry.py": ENTRY,
        root / "src" / "helpers_startup_xyz.py": "",
        site / "installed_startup_xyz.py": "",
    }.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "wrangler.toml").write_text(CONFIG)
    monkeypatch.syspath_prepend(str(site))
    real = modules.library_dirs
    calls: list[int] = []

    def library_dirs() -> list[str]:
        calls.append(1)
        return [*real(), str(site) + "/"]

    monkeypatch.setattr(modules, "library_dirs", library_dirs)
    config = load_config(root / "wrangler.toml")
    load_worker(config)
    helper, installed = sys.modules["helpers_startup_xyz"], sys.modules["installed_startup_xyz"]
    assert calls == []
    load_worker(config)
    assert calls == [1]
    assert sys.modules["installed_startup_xyz"] is installed  # a library: kept
    assert sys.modules["helpers_startup_xyz"] is not helper  # the user's: imported again
