"""``doemu init``: write a new project that ``doemu dev`` serves and ``pytest`` tests, unedited.

The project (the files under ``template/``, shipped as package data) uses Cloudflare's names
only, so the same folder deploys with ``pywrangler deploy``:

* ``wrangler.toml``: one SQLite-backed Durable Object class, its binding and its migration;
* ``src/entry.py``: the ``Counter`` object (SQL, an alarm) and a ``Default`` entry worker;
* ``tests/test_counter.py``: in-process tests on doemu's pytest fixtures;
* ``pyproject.toml``: the pytest settings the tests need (``src`` on ``pythonpath``) and doemu
  and pytest as a development dependency group, nothing else: doemu's plugin loads itself and
  runs ``async def`` tests;
* ``.gitignore``: doemu's state directory ``.doemu/`` and the secrets file ``.dev.vars``.

``doemu init --template chat`` writes an agent project instead: an ``AIChatAgent`` on the demo
model behind ``route_agent_request`` (``templates/chat/``), and ``--template agent-server`` an
agent server with one tool on an OpenAI-compatible model (``templates/agent-server/``, tested
against doemu's fake model server). They share ``pyproject.toml`` and ``.gitignore`` with the
Worker template; ``--with`` belongs to the Worker template.

The template is kept as real files (linted, and run by the tests that check ``doemu init``)
rather than strings; ``{{name}}`` and ``{{compatibility_date}}`` are filled in. ``doemu init
--with kv,d1,r2`` adds bindings: the lines between ``# {{with:kv}}`` and ``# {{end:kv}}`` (in
the config, the Worker and its tests) are kept for a chosen binding and dropped otherwise, so
the template with every block is itself a valid project. The dotfile is
stored as ``gitignore``, which every packaging tool copies.

Nothing is ever overwritten silently: a directory holding anything but hidden entries (``.git``,
``.venv``, …) is refused unless ``force`` is set, and even then only the template's own files
are written; the user's other files stay untouched, and an existing ``pyproject.toml`` or
``.gitignore`` is merged rather than replaced (:mod:`.merge`: doemu's missing parts appended).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from ..errors import DoemuError
from .merge import Merged, merge_gitignore, merge_pyproject

__all__ = [
    "BINDING_CHOICES",
    "BINDING_FILES",
    "TEMPLATES",
    "TEMPLATE_FILES",
    "InitError",
    "InitResult",
    "project_name",
    "write_project",
]

#: What ``doemu init --with`` can add (each a ``# {{with:NAME}}`` block of the template).
BINDING_CHOICES = ("kv", "d1", "r2")
#: Template files written only with a binding (template path → project path).
BINDING_FILES: dict[str, dict[str, str]] = {
    "d1": {"migrations/0001_create_notes.sql": "migrations/0001_create_notes.sql"},
}
_BLOCK = re.compile(r"^[ \t]*# \{\{(with|end):([a-z0-9]+)\}\}[ \t]*\n", re.M)

#: Template file (under ``template/``) → the path it is written to in the project.
TEMPLATE_FILES: dict[str, str] = {
    "wrangler.toml": "wrangler.toml",
    "src/entry.py": "src/entry.py",
    "tests/test_counter.py": "tests/test_counter.py",
    "pyproject.toml": "pyproject.toml",
    "gitignore": ".gitignore",
}

#: ``doemu init --template NAME`` → (package folder, template file → project path); the shared
#: files come from ``template/``.
TEMPLATES: dict[str, dict[str, str]] = {
    "worker": TEMPLATE_FILES,
    "chat": {
        "templates/chat/wrangler.toml": "wrangler.toml",
        "templates/chat/src/entry.py": "src/entry.py",
        "templates/chat/tests/test_chat.py": "tests/test_chat.py",
        "template/pyproject.toml": "pyproject.toml",
        "template/gitignore": ".gitignore",
    },
    "agent-server": {
        "templates/agent-server/wrangler.toml": "wrangler.toml",
        "templates/agent-server/src/entry.py": "src/entry.py",
        "templates/agent-server/tests/test_agent_server.py": "tests/test_agent_server.py",
        "template/pyproject.toml": "pyproject.toml",
        "template/gitignore": ".gitignore",
    },
}

#: Project files that hold the user's own content too: merged, never replaced (see .merge).
_MERGED = {"pyproject.toml": merge_pyproject, ".gitignore": merge_gitignore}


class InitError(DoemuError):
    """The target directory cannot take a new project (not empty, or not a directory)."""


@dataclass(frozen=True)
class InitResult:
    """What :func:`write_project` did: the project's root, its name, and the files written."""

    root: Path
    name: str
    written: tuple[str, ...]
    replaced: tuple[str, ...]
    #: Existing files merged rather than replaced (see :mod:`.merge`) → what the merge says.
    merged: dict[str, tuple[str, ...]] = field(default_factory=dict)


def project_name(directory: Path) -> str:
    """A Worker name from the directory's name: lowercase letters, digits and ``-`` only
    (what Cloudflare accepts); ``my-worker`` when nothing usable is left."""
    name = re.sub(r"[^a-z0-9-]+", "-", directory.resolve().name.lower()).strip("-")
    return name[:63].strip("-") or "my-worker"


def _visible_entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def select_blocks(text: str, chosen: Sequence[str]) -> str:
    """``text`` with the ``# {{with:NAME}}`` blocks of ``chosen`` kept (markers removed) and
    every other block dropped."""
    out: list[str] = []
    position = 0
    skipping: str | None = None
    for match in _BLOCK.finditer(text):
        if skipping is None:
            out.append(text[position : match.start()])
        kind, name = match.group(1), match.group(2)
        if kind == "with" and name not in chosen:
            skipping = name
        elif kind == "end" and skipping == name:
            skipping = None
        position = match.end()
    if skipping is None:
        out.append(text[position:])
    return "".join(out)


def write_project(
    directory: Path,
    *,
    force: bool = False,
    today: datetime | None = None,
    with_bindings: Sequence[str] = (),
    template_name: str = "worker",
) -> InitResult:
    """Write the template into ``directory`` (created if missing); see the module docstring."""
    if template_name not in TEMPLATES:
        raise InitError(f"--template {template_name}: doemu init can write {', '.join(TEMPLATES)}")
    if with_bindings and template_name != "worker":
        raise InitError(
            f"--with adds bindings to the worker template; --template {template_name} takes none"
        )
    unknown = [b for b in with_bindings if b not in BINDING_CHOICES]
    if unknown:
        raise InitError(
            f"--with {','.join(unknown)}: doemu init can add {', '.join(BINDING_CHOICES)}"
        )
    if directory.exists() and not directory.is_dir():
        raise InitError(f"{directory} exists and is not a directory")
    if directory.is_dir():
        visible = _visible_entries(directory)
        if visible and not force:
            shown = ", ".join(visible[:5]) + (", …" if len(visible) > 5 else "")
            raise InitError(
                f"{directory} is not empty ({shown}); pick an empty or new directory, or pass "
                "--force to write the project's files there anyway (other files are kept)"
            )
    name = project_name(directory)
    date = (today or datetime.now(UTC)).strftime("%Y-%m-%d")
    package = resources.files(__package__)
    template = package.joinpath("template") if template_name == "worker" else package
    files = dict(TEMPLATES[template_name])
    for binding in with_bindings:
        files.update(BINDING_FILES.get(binding, {}))
    for target in files.values():  # check all before writing any
        if (directory / target).is_dir():
            raise InitError(f"{directory / target} is a directory; the project needs a file there")
    replaced = [t for t in files.values() if (directory / t).exists() and t not in _MERGED]
    merged: dict[str, tuple[str, ...]] = {}
    written: list[str] = []
    for source, target in files.items():
        text = select_blocks(template.joinpath(source).read_text(encoding="utf-8"), with_bindings)
        text = text.rstrip("\n") + "\n"  # a dropped last block leaves no blank lines behind
        text = text.replace("{{name}}", name).replace("{{compatibility_date}}", date)
        path = directory / target
        if target in _MERGED and path.exists():
            result: Merged = _MERGED[target](path.read_text(encoding="utf-8"), text)
            merged[target] = result.notes
            if result.text is None:
                continue
            text = result.text
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(target)
    return InitResult(directory, name, tuple(written), tuple(replaced), merged)
