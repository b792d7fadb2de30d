"""The workerd runner's config generator, pyworkerd discovery and vendoring, without workerd.

What the generated config does on real workerd is proven by e2e/differential (the same client
script on both targets); these tests pin the decisions behind it: module layout, the router only
without ``Default``, flags and the clamped date, namespaces and their storage kind, vars layered
as ``doemu dev`` layers them, ``python_modules/`` contents, Cap'n Proto escaping, and the typed
errors that say what is missing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from doemu.config import load_config
from doemu.errors import DoemuError
from doemu.testing.workerd import (
    MAX_COMPATIBILITY_DATE,
    REQUIRED_FLAGS,
    Binding,
    Namespace,
    PyworkerdUnavailableError,
    VendorError,
    WorkerdError,
    default_home,
    find_pyworkerd,
    plan_worker,
    prepare_pyworkerd,
    write_worker,
)
from doemu.testing.workerd.generate import capnp_string, render_config
from doemu.testing.workerd.router import ROUTER_MODULE, defines_default, router_source
from doemu.testing.workerd.vendor import distribution_modules, sdk_modules

TOML = """\
name = "shop"
main = "src/entry.py"
compatibility_date = "{date}"
compatibility_flags = ["python_workers", "nodejs_compat"]

[[durable_objects.bindings]]
name = "CARTS"
class_name = "Cart"

[[durable_objects.bindings]]
name = "LOGS"
class_name = "Log"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Cart"]

[[migrations]]
tag = "v2"
new_classes = ["Log"]

[vars]
PLAIN = "toml"
SHADOWED = "toml"
LIMITS = {{ n = 3 }}
"""

ENTRY_WITH_DEFAULT = """\
from workers import DurableObject, WorkerEntrypoint

class Cart(DurableObject):
    pass

class Log(DurableObject):
    pass

class Default(WorkerEntrypoint):
    pass
"""


def project(tmp_path: Path, *, entry: str = ENTRY_WITH_DEFAULT, date: str = "2026-01-15") -> Path:
    root = tmp_path / "shop"
    (root / "src" / "lib" / "__pycache__").mkdir(parents=True)
    (root / "wrangler.toml").write_text(TOML.format(date=date))
    (root / "src" / "entry.py").write_text(entry)
    (root / "src" / "helpers.py").write_text("X = 1\n")
    (root / "src" / "lib" / "__init__.py").write_text("")
    (root / "src" / "lib" / "deep.py").write_text("Y = 2\n")
    (root / "src" / "lib" / "__pycache__" / "deep.cpython-311.pyc").write_bytes(b"\0")
    (root / "src" / "notes.txt").write_text("not a module")
    (root / ".dev.vars").write_text("SHADOWED=dev-vars\nSECRET=s3cret\n")
    return root


def fake_sdk(tmp_path: Path) -> Path:
    sdk = tmp_path / "sdk" / "py"
    for rel in (
        "workers/__init__.py",
        "workers/py.typed",
        "workers/workflows.js",
        "workers/__pycache__/x.cpython-314.pyc",
        "_pyodide_entrypoint_helper.pyi",
        "_workers_sdk_patch_loader.pth",
        "workers_runtime_sdk-1.9.5.dist-info/RECORD",
    ):
        (sdk / rel).parent.mkdir(parents=True, exist_ok=True)
        (sdk / rel).write_text("")
    return sdk


# ------------------------------------------------------------------------------------ the plan


def test_modules_follow_pywranglers_layout(tmp_path: Path) -> None:
    """The main module first by its file name, then the other .py files of its directory by
    relative path (no __pycache__, no data files), then python_modules/."""
    worker = load_config(project(tmp_path))
    plan = plan_worker(worker, tmp_path / "state", sdk=fake_sdk(tmp_path))
    names = [m.name for m in plan.modules]
    assert names[:4] == ["entry.py", "helpers.py", "lib/__init__.py", "lib/deep.py"]
    assert plan.main_module == "entry.py"
    assert plan.generated == {}
    assert names[4:] == [
        "python_modules/_workers_sdk_patch_loader.pth",
        "python_modules/workers/__init__.py",
        "python_modules/workers/py.typed",
        "python_modules/workers/workflows.js",
    ]
    kinds = {m.name: m.python for m in plan.modules}
    assert kinds["python_modules/workers/__init__.py"] is True
    assert kinds["python_modules/workers/workflows.js"] is False


def test_compatibility_flags_and_date(tmp_path: Path) -> None:
    """The project's flags, then the ones Python Workers need here; a date past what the
    binary knows is clamped to it, an earlier one kept."""
    plan = plan_worker(load_config(project(tmp_path, date="2026-11-01")), tmp_path, sdk=None)
    assert plan.compatibility_flags == (
        "python_workers",
        "nodejs_compat",
        "python_workers_development",
        "no_python_workers_20250116",
    )
    assert set(REQUIRED_FLAGS) <= set(plan.compatibility_flags)
    assert plan.compatibility_date == MAX_COMPATIBILITY_DATE == "2026-08-29"
    other = tmp_path / "other"
    plan = plan_worker(load_config(project(other, date="2026-01-15")), tmp_path, sdk=None)
    assert plan.compatibility_date == "2026-01-15"


def test_namespaces_bindings_and_vars(tmp_path: Path) -> None:
    """new_sqlite_classes → enableSql, new_classes → KV only, under doemu's unique keys;
    [vars] < .dev.vars < the caller's vars; a non-string var is a JSON binding."""
    worker = load_config(project(tmp_path))
    plan = plan_worker(worker, tmp_path / "state", sdk=None, vars={"EXTRA": "caller"})
    assert plan.namespaces == (
        Namespace("Cart", "shop-Cart", sql=True),
        Namespace("Log", "shop-Log", sql=False),
    )
    assert plan.bindings == (
        Binding("CARTS", "durableObjectNamespace", "Cart"),
        Binding("LOGS", "durableObjectNamespace", "Log"),
        Binding("PLAIN", "text", "toml"),
        Binding("SHADOWED", "text", "dev-vars"),
        Binding("LIMITS", "json", '{"n": 3}'),
        Binding("SECRET", "text", "s3cret"),
        Binding("EXTRA", "text", "caller"),
    )
    assert plan.persist_dir == (tmp_path / "state").absolute()


def test_router_is_generated_only_without_default(tmp_path: Path) -> None:
    """No Default in the main module: the generated router is the main module, re-exports
    the classes from it, and the user's main becomes an ordinary module."""
    entry = ENTRY_WITH_DEFAULT.replace("class Default(WorkerEntrypoint):\n    pass\n", "")
    plan = plan_worker(load_config(project(tmp_path, entry=entry)), tmp_path, sdk=None)
    assert [m.name for m in plan.modules][:2] == [ROUTER_MODULE, "entry.py"]
    source = plan.generated[ROUTER_MODULE]
    assert "from entry import Cart as Cart\nfrom entry import Log as Log\n" in source
    assert "BINDINGS = ['CARTS', 'LOGS']" in source
    assert "test plumbing" in source
    compile(source, ROUTER_MODULE, "exec")  # valid Python


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class Default(WorkerEntrypoint): pass", True),
        ("from app import Default", True),
        ("from app import Entry as Default", True),
        ("Default = make()", True),
        ("try:\n    from a import Default\nexcept ImportError:\n    pass", True),
        ("class Defaults: pass\ndef f():\n    Default = 1", False),
        ("import Default.x as y", False),
    ],
)
def test_defines_default_reads_top_level_bindings(
    tmp_path: Path, source: str, expected: bool
) -> None:
    main = tmp_path / "entry.py"
    main.write_text(source)
    assert defines_default(main) is expected


def test_a_dotted_main_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    text = (root / "wrangler.toml").read_text().replace('"src/entry.py"', '"entry"')
    (root / "wrangler.toml").write_text(text)
    with pytest.raises(WorkerdError, match="workerd needs the main module's file"):
        plan_worker(load_config(root), tmp_path, sdk=None)


# ------------------------------------------------------------------------------- rendering


def test_capnp_string_escapes() -> None:
    assert capnp_string('a "b" \\ c\nd\te\x01 ü') == '"a \\"b\\" \\\\ c\\nd\\te\\x01 ü"'


def test_rendered_config_and_written_files(tmp_path: Path) -> None:
    """The config names every piece: modules embedded from numbered files, the namespaces,
    localDisk in the persist dir, loopback-capable outbound, the socket; 0600 (secrets)."""
    worker = load_config(project(tmp_path))
    plan = plan_worker(worker, tmp_path / "st ate", sdk=fake_sdk(tmp_path))
    build = tmp_path / "build"
    config = write_worker(plan, build, "127.0.0.1:8123")
    text = config.read_text()
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    assert '(name = "entry.py", pythonModule = embed "modules/00000.py")' in text
    assert '(name = "python_modules/workers/py.typed", data = embed ' in text
    assert (build / "modules" / "00000.py").read_text() == ENTRY_WITH_DEFAULT
    assert '(className = "Cart", uniqueKey = "shop-Cart", enableSql = true)' in text
    assert '(className = "Log", uniqueKey = "shop-Log", enableSql = false)' in text
    assert f"disk = (path = {capnp_string(str(tmp_path / 'st ate'))}, writable = true)" in text
    assert 'durableObjectStorage = (localDisk = "doemu-disk")' in text
    assert 'allow = ["public", "private", "local"]' in text
    assert 'globalOutbound = "doemu-outbound"' in text
    assert 'address = "127.0.0.1:8123", http = (), service = "main"' in text
    assert '(name = "LIMITS", json = "{\\"n\\": 3}")' in text
    assert '(name = "SECRET", text = "s3cret")' in text
    assert (tmp_path / "st ate").is_dir()
    # Written again from scratch: nothing of an earlier run is left behind.
    (build / "modules" / "stale.py").write_text("")
    write_worker(plan, build, "127.0.0.1:8123")
    assert not (build / "modules" / "stale.py").exists()
    assert render_config(plan, {m.name: "x" for m in plan.modules}, "h:1").count("embed") == len(
        plan.modules
    )


# --------------------------------------------------------------------------------- vendoring


def test_sdk_modules_skip_caches_stubs_and_dist_info(tmp_path: Path) -> None:
    names = [m.name for m in sdk_modules(fake_sdk(tmp_path))]
    assert names == [
        "python_modules/_workers_sdk_patch_loader.pth",
        "python_modules/workers/__init__.py",
        "python_modules/workers/py.typed",
        "python_modules/workers/workflows.js",
    ]


def test_an_installed_distribution_is_vendored_from_its_record() -> None:
    """croniter (and what it needs): .py files from RECORD, under python_modules/."""
    modules = distribution_modules("croniter")
    names = {m.name for m in modules}
    assert "python_modules/croniter/__init__.py" in names
    assert all(m.name.endswith(".py") and "__pycache__" not in m.name for m in modules)
    assert all(m.source.is_file() for m in modules)
    dateutil = {m.name for m in distribution_modules("python-dateutil")}
    assert "python_modules/dateutil/relativedelta.py" in dateutil


def test_a_package_without_its_own_distribution_is_vendored_from_its_files() -> None:
    """agents ships inside the (editable) doemu distribution: its package directory is walked."""
    modules = distribution_modules("agents")
    names = {m.name for m in modules}
    assert {"python_modules/agents/__init__.py", "python_modules/agents/chat/agent.py"} <= names
    assert all(m.name.endswith(".py") and "__pycache__" not in m.name for m in modules)


def test_vendoring_refuses_compiled_and_unknown_packages() -> None:
    with pytest.raises(VendorError, match="not pure Python") as info:
        distribution_modules("msgpack")  # ships a CPython extension
    assert info.value.name == "msgpack"
    with pytest.raises(VendorError, match="no installed distribution"):
        distribution_modules("no-such-package-anywhere")


def test_router_source_for_no_bindings_is_valid() -> None:
    compile(router_source("entry", [], []), "r.py", "exec")


# ------------------------------------------------------------------------- finding pyworkerd


def test_find_pyworkerd_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(PyworkerdUnavailableError, match="DOEMU_PYWORKERD") as info:
        find_pyworkerd({"DOEMU_PYWORKERD": str(tmp_path)})
    assert info.value.missing == str(tmp_path / "setup.sh")
    assert isinstance(info.value, DoemuError)
    (tmp_path / "setup.sh").write_text("")
    assert find_pyworkerd({"DOEMU_PYWORKERD": str(tmp_path)}) == tmp_path.resolve()


def test_default_home(tmp_path: Path) -> None:
    assert default_home({"PYWORKERD_HOME": str(tmp_path)}) == tmp_path
    assert default_home({"XDG_CACHE_HOME": "/c"}) == Path("/c/doemu/pyworkerd")


def test_a_failing_setup_reports_its_exit_and_output(tmp_path: Path) -> None:
    folder = tmp_path / "pw"
    folder.mkdir()
    (folder / "setup.sh").write_text("echo 'npm: command not found' >&2\nexit 127\n")
    with pytest.raises(PyworkerdUnavailableError, match="exit 127") as info:
        prepare_pyworkerd(folder, tmp_path / "home")
    assert "npm: command not found" in str(info.value)


def test_a_setup_that_leaves_no_binary_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "pw"
    folder.mkdir()
    (folder / "setup.sh").write_text('mkdir -p "$1"; echo "$1"\n')
    with pytest.raises(PyworkerdUnavailableError, match="no workerd binary") as info:
        prepare_pyworkerd(folder, tmp_path / "home")
    assert "bin/workerd" in info.value.missing


def test_a_prepared_home_is_found_and_cached(tmp_path: Path) -> None:
    """setup.sh runs once per process for a folder and home; the paths point into home."""
    folder = tmp_path / "pw"
    folder.mkdir()
    count = tmp_path / "runs"
    (folder / "setup.sh").write_text(
        f"""set -e
echo run >> {count}
home="$1"
mkdir -p "$home/node_modules/@cloudflare/workerd-linux-64/bin" "$home/cache" "$home/sdk/py/workers"
printf '#!/bin/sh\\n' > "$home/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
chmod +x "$home/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
touch "$home/cache/pyodide_dev.capnp.bin" "$home/sdk/py/workers/__init__.py"
"""
    )
    home = tmp_path / "home"
    paths = prepare_pyworkerd(folder, home)
    assert paths.workerd == home / "node_modules/@cloudflare/workerd-linux-64/bin/workerd"
    assert (paths.bundle_cache, paths.sdk) == (home / "cache", home / "sdk" / "py")
    assert prepare_pyworkerd(folder, home) is paths
    assert count.read_text() == "run\n"
