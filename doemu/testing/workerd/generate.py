"""A workerd ``config.capnp`` for a doemu project, from the project's own wrangler config.

The project is read exactly as ``doemu dev`` reads it (:func:`doemu.config.load_config`,
:func:`doemu.config.resolve_vars`), then turned into workerd's configuration in two steps:
:func:`plan_worker` decides what the Worker is (a :class:`WorkerPlan`: modules, namespaces,
bindings, flags — plain data that the unit tests check), and :func:`render_config` writes it
as Cap'n Proto text. :func:`write_worker` does both and copies the modules beside the config.

What the plan holds, and why:

* **modules**, pywrangler's layout: the main module (``src/entry.py`` → ``entry.py``) first,
  every other ``.py`` under its directory by its relative path, then the SDK and the vendored
  distributions under ``python_modules/`` (:mod:`.vendor`). A main module without ``Default``
  gets the generated router as the main module instead (:mod:`.router`);
* **compatibility**: the project's date clamped to :data:`MAX_COMPATIBILITY_DATE` (the newest
  this workerd binary knows), and the project's flags plus :data:`REQUIRED_FLAGS` (Python
  Workers, the ``dev`` Pyodide bundle read from disk, and the snapshot-release flag that keeps
  workerd from picking a release it has no bundle for);
* **Durable Object namespaces** for every class the migrations leave (``new_sqlite_classes``
  → ``enableSql = true``, ``new_classes`` → ``false``) under doemu's unique key
  ``<worker>-<Class>``, so workerd's files land where :mod:`doemu.persist` expects them, and a
  binding per ``[[durable_objects.bindings]]``;
* **vars**: ``[vars]`` < ``.dev.vars`` < the caller's ``vars``; strings as ``text`` bindings,
  other JSON values as ``json`` bindings (what wrangler does);
* **storage**: ``localDisk`` in the persist directory (SQLite files, fsynced: survives SIGKILL);
* **outbound**: a ``network`` service allowing ``public``, ``private`` and ``local`` addresses as
  ``globalOutbound``, so ``workers.fetch`` reaches servers on loopback (workerd's default
  ``internet`` service refuses them).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ...config import WorkerConfig, resolve_vars
from ...persist import unique_key
from .locate import WorkerdError
from .router import ROUTER_MODULE, defines_default, router_source
from .vendor import Module, vendored_modules

__all__ = [
    "MAX_COMPATIBILITY_DATE",
    "REQUIRED_FLAGS",
    "SOCKET_NAME",
    "Binding",
    "Namespace",
    "WorkerPlan",
    "capnp_string",
    "clamp_date",
    "plan_worker",
    "render_config",
    "write_worker",
]

#: The newest compatibility date the pinned workerd (1.20260822.1) accepts.
MAX_COMPATIBILITY_DATE = "2026-08-29"
#: Flags Python Workers need on this workerd (see pyworkerd's README).
REQUIRED_FLAGS = ("python_workers", "python_workers_development", "no_python_workers_20250116")
#: The socket's name in the config (``workerd serve --socket-fd http=FD``).
SOCKET_NAME = "http"
#: The services the config defines besides the Worker.
_DISK_SERVICE = "doemu-disk"
_NETWORK_SERVICE = "doemu-outbound"
_KINDS = {True: "pythonModule", False: "data"}


@dataclass(frozen=True)
class Namespace:
    """A Durable Object namespace: the class, its storage key, SQLite or KV-only."""

    class_name: str
    unique_key: str
    sql: bool


@dataclass(frozen=True)
class Binding:
    """One ``env`` binding: ``kind`` is ``text``, ``json`` or ``durableObjectNamespace``."""

    name: str
    kind: str
    value: str


@dataclass(frozen=True)
class WorkerPlan:
    """Everything the generated config says about the Worker (plain data)."""

    name: str
    compatibility_date: str
    compatibility_flags: tuple[str, ...]
    modules: tuple[Module, ...]
    namespaces: tuple[Namespace, ...]
    bindings: tuple[Binding, ...]
    persist_dir: Path
    #: Sources generated for this run (the router), by module name.
    generated: Mapping[str, str] = field(default_factory=dict)

    @property
    def main_module(self) -> str:
        return self.modules[0].name


def _user_modules(worker: WorkerConfig) -> tuple[Path, list[Module]]:
    main = worker.main_path
    if main is None:
        raise WorkerdError(
            f"{worker.source_name}: main = {worker.main!r} is a module name; workerd needs "
            'the main module\'s file (main = "src/entry.py")'
        )
    if not main.is_file():
        raise WorkerdError(f"{worker.source_name}: main module {main} does not exist")
    root = main.parent
    rest = [
        Module(str(PurePosixPath(*path.relative_to(root).parts)), path)
        for path in sorted(root.rglob("*.py"))
        if path != main
        and path.is_file()
        and not any(p == "__pycache__" or p.startswith(".") for p in path.relative_to(root).parts)
    ]
    return main, [Module(main.name, main), *rest]


def clamp_date(date: str | None) -> str:
    """The project's date, or the newest this workerd knows when it has none or a later one."""
    return MAX_COMPATIBILITY_DATE if date is None else min(date, MAX_COMPATIBILITY_DATE)


def plan_worker(
    worker: WorkerConfig,
    persist_dir: Path,
    *,
    sdk: Path | None,
    vendor: Iterable[str] = (),
    vars: Mapping[str, str] | None = None,
) -> WorkerPlan:
    """What workerd should run for ``worker`` (see the module docstring)."""
    main, user = _user_modules(worker)
    flags = [*worker.compatibility_flags]
    flags += [flag for flag in REQUIRED_FLAGS if flag not in flags]
    class_names = list(worker.classes)
    class_names += [b.class_name for b in worker.bindings if b.class_name not in class_names]
    # persist.unique_key refuses a key that could not be a directory name (workerd's localDisk
    # names a directory after it, as doemu does).
    namespaces = tuple(
        Namespace(name, unique_key(worker.name, name), worker.sql_enabled(name))
        for name in class_names
    )
    bindings = [Binding(b.name, "durableObjectNamespace", b.class_name) for b in worker.bindings]
    for key, value in resolve_vars(worker, vars).values.items():
        if isinstance(value, str):
            bindings.append(Binding(key, "text", value))
        else:
            bindings.append(Binding(key, "json", json.dumps(value)))
    generated: dict[str, str] = {}
    modules: list[Module] = []
    if not defines_default(main):
        source = router_source(main.stem, class_names, [b.name for b in worker.bindings])
        generated[ROUTER_MODULE] = source
        modules.append(Module(ROUTER_MODULE, Path(ROUTER_MODULE)))
    modules += user
    taken = {module.name for module in modules}
    modules += [m for m in vendored_modules(sdk, vendor) if m.name not in taken]
    return WorkerPlan(
        name=worker.name,
        compatibility_date=clamp_date(worker.compatibility_date),
        compatibility_flags=tuple(flags),
        modules=tuple(modules),
        namespaces=namespaces,
        bindings=tuple(bindings),
        persist_dir=persist_dir.absolute(),
        generated=generated,
    )


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def capnp_string(text: str) -> str:
    """``text`` as a Cap'n Proto text-format string literal (UTF-8, C-style escapes)."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _list(items: Sequence[str], indent: str) -> str:
    if not items:
        return "[]"
    inner = f",\n{indent}  ".join(items)
    return f"[\n{indent}  {inner},\n{indent}]"


def render_config(plan: WorkerPlan, embeds: Mapping[str, str], address: str) -> str:
    """The ``config.capnp`` text; ``embeds`` maps each module name to its file, relative to
    the config file; ``address`` is the socket's (``--socket-fd`` overrides it)."""
    q = capnp_string
    modules = [
        f"(name = {q(m.name)}, {_KINDS[m.python]} = embed {q(embeds[m.name])})"
        for m in plan.modules
    ]
    namespaces = [
        f"(className = {q(ns.class_name)}, uniqueKey = {q(ns.unique_key)}, "
        f"enableSql = {'true' if ns.sql else 'false'})"
        for ns in plan.namespaces
    ]
    bindings = [f"(name = {q(b.name)}, {b.kind} = {q(b.value)})" for b in plan.bindings]
    flags = ", ".join(q(flag) for flag in plan.compatibility_flags)
    return f"""# Generated by doemu.testing.workerd for {plan.name!r}: test plumbing only.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "{_DISK_SERVICE}", disk = (path = {q(str(plan.persist_dir))}, writable = true)),
    (name = "{_NETWORK_SERVICE}", network = (
      allow = ["public", "private", "local"],
      tlsOptions = (trustBrowserCas = true),
    )),
  ],
  sockets = [(name = "{SOCKET_NAME}", address = {q(address)}, http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = {_list(modules, "  ")},
  compatibilityDate = {q(plan.compatibility_date)},
  compatibilityFlags = [{flags}],
  durableObjectNamespaces = {_list(namespaces, "  ")},
  durableObjectStorage = (localDisk = "{_DISK_SERVICE}"),
  globalOutbound = "{_NETWORK_SERVICE}",
  bindings = {_list(bindings, "  ")},
);
"""


def write_worker(plan: WorkerPlan, build_dir: Path, address: str) -> Path:
    """Copy the plan's modules into ``build_dir`` (emptied first), write ``config.capnp`` beside
    them (mode 0600: ``.dev.vars`` secrets are in it) and return its path."""
    if build_dir.exists():
        shutil.rmtree(build_dir)
    files = build_dir / "modules"
    files.mkdir(parents=True)
    embeds: dict[str, str] = {}
    for index, module in enumerate(plan.modules):
        # A numbered file per module: module names are paths of the Worker, never of this disk.
        target = files / f"{index:05d}{PurePosixPath(module.name).suffix}"
        if module.name in plan.generated:
            target.write_text(plan.generated[module.name], encoding="utf-8")
        else:
            shutil.copyfile(module.source, target)
        embeds[module.name] = f"modules/{target.name}"
    plan.persist_dir.mkdir(parents=True, exist_ok=True)
    config = build_dir / "config.capnp"
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(render_config(plan, embeds, address))
    return config
