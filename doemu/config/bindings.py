"""The bindings beyond Durable Objects: ``kv_namespaces``, ``d1_databases``, ``r2_buckets``,
``services``, ``[triggers] crons`` and ``[assets]``, read as wrangler reads them.

:func:`check_resources` validates the decoded sections key by key (with wrangler's texts where it
has them) into a :class:`WorkerResources`, which :mod:`doemu.bindings` turns into ``env``
entries. What each binding stores and where is not decided here: a binding only names its
resource (a namespace id, a database id, a bucket name), and :mod:`doemu.persist` derives the
files from that name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .checker import Checker, show, unexpected

if TYPE_CHECKING:
    from .workbindings import AiBinding, QueueConsumer, QueueProducer, WorkflowBinding

__all__ = [
    "EMULATED_KEYS",
    "HTML_HANDLING",
    "NOT_FOUND_HANDLING",
    "AiBinding",
    "AssetsConfig",
    "D1DatabaseBinding",
    "HtmlHandling",
    "KvNamespaceBinding",
    "NotFoundHandling",
    "QueueConsumer",
    "QueueProducer",
    "R2BucketBinding",
    "ServiceBinding",
    "WorkerResources",
    "WorkflowBinding",
    "check_resources",
]

HtmlHandling = Literal["auto-trailing-slash", "force-trailing-slash", "drop-trailing-slash", "none"]
NotFoundHandling = Literal["none", "404-page", "single-page-application"]
HTML_HANDLING: tuple[HtmlHandling, ...] = (
    "auto-trailing-slash",
    "force-trailing-slash",
    "drop-trailing-slash",
    "none",
)
NOT_FOUND_HANDLING: tuple[NotFoundHandling, ...] = ("none", "404-page", "single-page-application")

#: The config keys whose bindings doemu emulates (the others are warned about and ignored).
EMULATED_KEYS = frozenset(
    {
        "kv_namespaces", "d1_databases", "triggers", "r2_buckets", "services", "assets",
        "workflows", "queues", "ai",
    }
)  # fmt: skip

#: The keys :mod:`doemu.config.workbindings` reads (see :func:`check_resources`).
_WORK_KEYS = ("workflows", "queues", "ai")
#: Its binding types, re-exported here on first use (PEP 562) rather than imported with this module.
_WORK_TYPES = frozenset({"AiBinding", "QueueConsumer", "QueueProducer", "WorkflowBinding"})


def __getattr__(name: str) -> Any:
    if name not in _WORK_TYPES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import workbindings

    value = getattr(workbindings, name)
    globals()[name] = value
    return value


#: wrangler's default ``migrations_dir`` and ``migrations_table`` for D1.
DEFAULT_MIGRATIONS_DIR = "migrations"
DEFAULT_MIGRATIONS_TABLE = "d1_migrations"


@dataclass(frozen=True)
class KvNamespaceBinding:
    """``env.<binding>`` is a KV namespace; its data is keyed by ``id`` (else the binding)."""

    binding: str
    id: str | None = None

    @property
    def resource(self) -> str:
        """The name the namespace's data is stored under (two bindings with one id share it)."""
        return self.id or self.binding


@dataclass(frozen=True)
class D1DatabaseBinding:
    """``env.<binding>`` is a D1 database; ``migrations_dir`` is absolute."""

    binding: str
    database_name: str | None = None
    database_id: str | None = None
    migrations_dir: Path = Path(DEFAULT_MIGRATIONS_DIR)
    migrations_table: str = DEFAULT_MIGRATIONS_TABLE

    @property
    def resource(self) -> str:
        """The name the database's file is stored under: its id, else its name, else the
        binding."""
        return self.database_id or self.database_name or self.binding

    def matches(self, name: str) -> bool:
        """Whether ``name`` (what ``wrangler d1 … NAME`` takes) names this database."""
        return name in (self.binding, self.database_name, self.database_id)


@dataclass(frozen=True)
class R2BucketBinding:
    """``env.<binding>`` is an R2 bucket; its objects are stored under ``bucket_name``."""

    binding: str
    bucket_name: str | None = None

    @property
    def resource(self) -> str:
        return self.bucket_name or self.binding


@dataclass(frozen=True)
class ServiceBinding:
    """``env.<binding>`` is a service binding to ``service`` (its ``entrypoint`` class, or its
    ``Default``). ``local`` is false for another Worker, which doemu does not run."""

    binding: str
    service: str
    entrypoint: str | None = None
    local: bool = True


@dataclass(frozen=True)
class AssetsConfig:
    """``[assets]``: static files served before the Worker (``directory`` is absolute)."""

    directory: Path
    binding: str | None = None
    html_handling: HtmlHandling = "auto-trailing-slash"
    not_found_handling: NotFoundHandling = "none"
    #: ``True``/``False``, or wrangler's route patterns (``"/api/*"``, negated with ``!``).
    run_worker_first: bool | tuple[str, ...] = False


@dataclass(frozen=True)
class WorkerResources:
    """Every non-Durable-Object binding of the Worker, and its cron triggers."""

    kv: tuple[KvNamespaceBinding, ...] = ()
    d1: tuple[D1DatabaseBinding, ...] = ()
    r2: tuple[R2BucketBinding, ...] = ()
    services: tuple[ServiceBinding, ...] = ()
    crons: tuple[str, ...] = ()
    assets: AssetsConfig | None = None
    #: ``[[workflows]]``, ``[[queues.producers]]``, ``[[queues.consumers]]`` and ``[ai]``.
    workflows: tuple[WorkflowBinding, ...] = ()
    producers: tuple[QueueProducer, ...] = ()
    consumers: tuple[QueueConsumer, ...] = ()
    ai: AiBinding | None = None
    #: Which of the sections above the file set (what the bindings replace in the warnings).
    present: frozenset[str] = field(default_factory=frozenset)

    def names(self) -> list[tuple[str, str]]:
        """``(binding name, kind)`` for every binding, in file order per kind."""
        names = [(b.binding, "KV Namespace") for b in self.kv]
        names += [(b.binding, "D1 Database") for b in self.d1]
        names += [(b.binding, "R2 Bucket") for b in self.r2]
        names += [(b.binding, "Service") for b in self.services]
        if self.assets is not None and self.assets.binding:
            names.append((self.assets.binding, "Assets"))
        names += [(b.binding, "Workflow") for b in self.workflows]
        names += [(b.binding, "Queue") for b in self.producers]
        if self.ai is not None:
            names.append((self.ai.binding, "AI"))
        return names


_KV_KEYS = ("binding", "id", "preview_id", "remote", "experimental_remote")
_D1_KEYS = (
    "binding", "database_name", "database_id", "preview_database_id", "migrations_dir",
    "migrations_table", "database_internal_env", "remote", "experimental_remote",
)  # fmt: skip
_R2_KEYS = (
    "binding", "bucket_name", "preview_bucket_name", "jurisdiction", "remote",
    "experimental_remote",
)  # fmt: skip
_SERVICE_KEYS = ("binding", "service", "entrypoint", "environment", "props", "remote",
                 "experimental_remote")  # fmt: skip
_ASSETS_KEYS = ("directory", "binding", "html_handling", "not_found_handling", "run_worker_first")
_TRIGGER_KEYS = ("crons",)


def check_resources(
    check: Checker, raw: Mapping[str, Any], *, base_dir: Path, worker_name: str | None
) -> WorkerResources:
    """The bindings of ``raw`` (the decoded config), problems and warnings added to ``check``."""
    present = frozenset(
        key
        for key in (
            "kv_namespaces", "d1_databases", "r2_buckets", "services", "triggers", "assets",
            "workflows", "queues", "ai",
        )
        if key in raw
    )  # fmt: skip
    # Workflows, queues and AI are read by their own module, imported only for a config that has
    # one of them: its dataclasses are a few milliseconds of every start-up (a restart's too).
    work = None
    if not present.isdisjoint(_WORK_KEYS):
        from .workbindings import check_work_bindings

        work = check_work_bindings(check, raw)
    return WorkerResources(
        kv=tuple(_kv(check, raw.get("kv_namespaces"))),
        d1=tuple(_d1(check, raw.get("d1_databases"), base_dir)),
        r2=tuple(_r2(check, raw.get("r2_buckets"))),
        services=tuple(_services(check, raw.get("services"), worker_name)),
        crons=tuple(_crons(check, raw.get("triggers"))),
        assets=_assets(check, raw.get("assets"), base_dir),
        workflows=work.workflows if work else (),
        producers=work.producers if work else (),
        consumers=work.consumers if work else (),
        ai=work.ai if work else None,
        present=present,
    )


def _entries(
    check: Checker, value: Any, key: str, known: tuple[str, ...]
) -> list[tuple[str, dict[str, Any]]]:
    """The well-formed tables of an array of bindings, with their keys (``kv_namespaces[0]``)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for index, entry in enumerate(check.array_of_tables(value, key) or []):
        where = f"{key}[{index}]"
        item = check.table(entry, where)
        if item is None:
            continue
        warning = unexpected(where, item, known)
        if warning:
            check.warnings.append(warning)
        out.append((where, item))
    return out


def _binding_name(check: Checker, item: Mapping[str, Any], where: str) -> str | None:
    name = check.string(item.get("binding"), f"{where}.binding", required=True)
    if name is not None and not name.isidentifier():
        check.errors.append(
            f"{where}.binding must be a name usable as env.<binding>, got {show(name)}"
        )
        return None
    return name


def _kv(check: Checker, value: Any) -> list[KvNamespaceBinding]:
    out = []
    for where, item in _entries(check, value, "kv_namespaces", _KV_KEYS):
        name = _binding_name(check, item, where)
        namespace_id = check.string(item.get("id"), f"{where}.id")
        check.string(item.get("preview_id"), f"{where}.preview_id")
        if name is not None:
            out.append(KvNamespaceBinding(name, namespace_id or None))
    return out


def _d1(check: Checker, value: Any, base_dir: Path) -> list[D1DatabaseBinding]:
    out = []
    for where, item in _entries(check, value, "d1_databases", _D1_KEYS):
        name = _binding_name(check, item, where)
        database_name = check.string(item.get("database_name"), f"{where}.database_name")
        database_id = check.string(item.get("database_id"), f"{where}.database_id")
        folder = check.string(item.get("migrations_dir"), f"{where}.migrations_dir")
        table = check.string(item.get("migrations_table"), f"{where}.migrations_table")
        if table is not None and not table.isidentifier():
            check.errors.append(f"{where}.migrations_table must be a table name, got {show(table)}")
            table = None
        if name is not None:
            out.append(
                D1DatabaseBinding(
                    name,
                    database_name or None,
                    database_id or None,
                    base_dir / (folder or DEFAULT_MIGRATIONS_DIR),
                    table or DEFAULT_MIGRATIONS_TABLE,
                )
            )
    return out


def _r2(check: Checker, value: Any) -> list[R2BucketBinding]:
    out = []
    for where, item in _entries(check, value, "r2_buckets", _R2_KEYS):
        name = _binding_name(check, item, where)
        bucket = check.string(item.get("bucket_name"), f"{where}.bucket_name")
        if name is not None:
            out.append(R2BucketBinding(name, bucket or None))
    return out


def _services(check: Checker, value: Any, worker_name: str | None) -> list[ServiceBinding]:
    out = []
    for where, item in _entries(check, value, "services", _SERVICE_KEYS):
        name = _binding_name(check, item, where)
        service = check.string(item.get("service"), f"{where}.service", required=True)
        entrypoint = check.string(item.get("entrypoint"), f"{where}.entrypoint")
        if entrypoint is not None and not entrypoint.isidentifier():
            check.errors.append(f"{where}.entrypoint must be a class name, got {show(entrypoint)}")
            continue
        if name is None or service is None:
            continue
        local = service == worker_name
        if not local:
            check.warnings.append(
                f'{where} "{name}" binds to the Worker "{service}": doemu runs one Worker per '
                f"process, so calls through env.{name} fail with an error naming it (bind to "
                f'this Worker, "{worker_name}", and an entrypoint class instead)'
            )
        out.append(ServiceBinding(name, service, entrypoint, local))
    return out


def _crons(check: Checker, value: Any) -> list[str]:
    if value is None:
        return []
    table = check.table(value, "triggers")
    if table is None:
        return []
    warning = unexpected("triggers", table, _TRIGGER_KEYS)
    if warning:
        check.warnings.append(warning)
    crons = check.strings(table.get("crons"), "triggers.crons") or []
    if not crons:
        return []
    from .crons import CronExpression  # only a config with crons pays for croniter's import

    valid = []
    for index, cron in enumerate(crons):
        try:
            CronExpression(cron)
        except ValueError as exc:
            check.errors.append(f"triggers.crons[{index}]: {exc}")
        else:
            valid.append(cron)
    return valid


def _assets(check: Checker, value: Any, base_dir: Path) -> AssetsConfig | None:
    if value is None:
        return None
    table = check.table(value, "assets")
    if table is None:
        return None
    errors_before = len(check.errors)
    warning = unexpected("assets", table, _ASSETS_KEYS)
    if warning:
        check.warnings.append(warning)
    directory = check.string(table.get("directory"), "assets.directory")
    binding = table.get("binding")
    if binding is not None:
        binding = _binding_name(check, table, "assets")
    html = table.get("html_handling", "auto-trailing-slash")
    if html not in HTML_HANDLING:
        check.errors.append(
            f"assets.html_handling must be one of {', '.join(HTML_HANDLING)}, got {show(html)}"
        )
    not_found = table.get("not_found_handling", "none")
    if not_found not in NOT_FOUND_HANDLING:
        check.errors.append(
            "assets.not_found_handling must be one of "
            f"{', '.join(NOT_FOUND_HANDLING)}, got {show(not_found)}"
        )
    first = table.get("run_worker_first", False)
    run_first: bool | tuple[str, ...] = False
    if isinstance(first, bool):
        run_first = first
    elif isinstance(first, list) and all(isinstance(p, str) for p in first):
        bad = [p for p in first if not p.lstrip("!").startswith("/")]
        if bad:
            check.errors.append(
                f"assets.run_worker_first routes must start with / (or !/), got {show(bad)}"
            )
        run_first = tuple(first)
    else:
        check.errors.append(
            f"assets.run_worker_first must be a boolean or an array of routes, got {show(first)}"
        )
    if directory is None:
        if binding is None:
            check.errors.append('assets: "directory" is required (the folder of static files)')
            return None
        # wrangler allows a binding without a directory only when a build tool provides it.
        check.errors.append('assets: "directory" is required locally (the folder to serve)')
        return None
    folder = base_dir / directory
    if not folder.is_dir():
        check.errors.append(
            f'assets.directory "{directory}" does not exist or is not a folder '
            f"(looked for {folder})"
        )
        return None
    if len(check.errors) > errors_before:
        return None
    return AssetsConfig(folder.resolve(), binding, html, not_found, run_first)
