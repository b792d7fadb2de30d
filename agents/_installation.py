"""Is this ``agents`` package alone in its folder? OpenAI's ``openai-agents`` uses the same name.

doemu's distribution ships the top-level package ``agents``; OpenAI's Agents SDK (distribution
``openai-agents``) ships a top-level package ``agents`` too. pip installs both into one
``site-packages/agents/`` folder, each overwriting the other's files of the same name, and
``pip check`` reports nothing, since neither declares a conflict. What is left imports as
neither library: ``from agents import Runner`` fails, or this package's modules are replaced.

:func:`collision` finds that state without importing anything but the standard library, so it
can run first in ``agents/__init__.py`` and at ``doemu`` start-up (which loads this file by path:
importing ``agents`` there would run the very ``__init__`` another distribution may have
replaced). It looks for:

* a distribution ``openai-agents`` installed on ``sys.path`` (its ``*.dist-info`` or
  ``*.egg-info`` folder): the two cannot share an interpreter's ``import agents``;
* files in this ``agents`` folder that doemu's own ``RECORD`` does not list (a wheel install):
  another distribution wrote there, and :func:`collision` names it from the ``RECORD`` that
  lists them.

The directory listings and ``RECORD`` files are what ``importlib.metadata`` would read itself;
they are read by hand because importing ``importlib.metadata`` costs about 25 ms, on every
``import agents`` and every ``doemu dev`` start, for a check that almost always finds nothing
(a few ``listdir`` calls cost well under a millisecond). On Cloudflare (the package vendored
into a Worker) nothing of the kind is installed, and the check finds nothing.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

__all__ = ["OPENAI_AGENTS", "collision"]

#: The distribution whose top-level package is also named ``agents``.
OPENAI_AGENTS = "openai-agents"

_METADATA_DIR = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)-[^-]+\.(dist|egg)-info$")
_NOT_FILES = frozenset({"__pycache__"})

ADVICE = (
    "Keep them in separate virtual environments: one venv for the project that uses doemu "
    "(`python -m venv .venv`, then install doemu into it), another for code that uses the "
    "other library; or, if this project does not need the other one, `pip uninstall` it and "
    "install doemu again (`pip install --force-reinstall --no-deps <doemu>`), since it may "
    "have overwritten doemu's files."
)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata_dirs(folder: str) -> list[tuple[str, str]]:
    """``(normalised distribution name, folder name)`` of every dist-info/egg-info in ``folder``."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = []
    for entry in names:
        match = _METADATA_DIR.match(entry)
        if match is not None:
            found.append((_normal(match.group("name")), entry))
    return found


def _openai_agents_install() -> str | None:
    """Where ``openai-agents`` is installed on ``sys.path``, if anywhere."""
    for folder in dict.fromkeys(p or os.curdir for p in sys.path):
        for name, entry in _metadata_dirs(folder):
            if name == OPENAI_AGENTS:
                return os.path.join(folder, entry)
    return None


def _record_entries(record: Path) -> set[str]:
    """The first path part below ``agents/`` of every file a ``RECORD`` lists."""
    try:
        text = record.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    entries = set()
    for line in text.splitlines():
        path = line.rsplit(",", 2)[0].strip('"')
        parts = path.replace("\\", "/").split("/")
        if len(parts) >= 2 and parts[0] == "agents":
            entries.add(parts[1])
    return entries


def _foreign_files(agents_dir: Path) -> tuple[list[str], list[str]]:
    """Files of ``agents_dir`` that doemu's ``RECORD`` does not list, and who wrote them.

    Only for a wheel install (doemu's ``*.dist-info`` beside the folder, its ``RECORD`` listing
    ``agents/`` files): an editable install's ``agents`` is the source tree itself.
    """
    site = agents_dir.parent
    metadata = _metadata_dirs(str(site))
    ours = [entry for name, entry in metadata if name == "doemu"]
    if not ours:
        return [], []
    listed = _record_entries(site / ours[0] / "RECORD")
    if not listed:
        return [], []
    try:
        present = {p.name for p in agents_dir.iterdir() if p.name not in _NOT_FILES}
    except OSError:
        return [], []
    extra = sorted(present - listed)
    if not extra:
        return [], []
    owners = [
        name
        for name, entry in metadata
        if name != "doemu" and set(extra) & _record_entries(site / entry / "RECORD")
    ]
    return extra, sorted(set(owners))


def collision(agents_dir: Path) -> str | None:
    """What is wrong with the ``agents`` package in ``agents_dir``, or ``None``: a message
    saying what happened and how to separate the two libraries."""
    other = _openai_agents_install()
    if other is not None:
        return (
            f"doemu's `agents` package and OpenAI's `{OPENAI_AGENTS}` are installed in the same "
            f"environment ({other}), and both are imported as `agents`: pip merges them into "
            f"one folder ({agents_dir}), overwriting each other's files, and `pip check` does "
            f"not notice. Neither library works this way. {ADVICE}"
        )
    extra, owners = _foreign_files(agents_dir)
    if extra:
        who = f"another distribution ({', '.join(owners)})" if owners else "another distribution"
        shown = ", ".join(extra[:5]) + (", …" if len(extra) > 5 else "")
        return (
            f"the `agents` folder {agents_dir} holds files that doemu did not install ({shown}): "
            f"{who} also installs a top-level package named `agents`, and pip merged the two. "
            f"{ADVICE}"
        )
    return None


if __name__ == "agents._installation":  # imported by agents/__init__.py (doemu loads it by path)
    _problem = collision(Path(__file__).parent)
    if _problem is not None:
        raise ImportError(_problem, name="agents")
