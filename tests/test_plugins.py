"""Durable Object classes shipped by installed packages (entry-point group doemu.durable_objects).

The end-to-end test builds tests/fixtures/plugin_dist into a real wheel, installs it with pip
(offline) into a temporary directory, and loads a Worker whose binding names a class that only
the installed package provides, in a fresh interpreter. The other tests put hand-written
``*.dist-info`` directories on ``sys.path``: real distributions as far as ``importlib.metadata``
is concerned, cheap enough to cover each failure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from doemu.config import WorkerConfig, load_config
from doemu.errors import LoaderError
from doemu.loader import (
    ENTRY_POINT_GROUP,
    AttributeNotFoundError,
    ClassNotFoundError,
    ImportStringError,
    ModuleImportError,
    NotADurableObjectError,
    load_worker,
    unload_user_modules,
)

FIXTURE = Path(__file__).parent / "fixtures" / "plugin_dist"

WORKER = """\
name = "plugin-worker"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "AGENT"
class_name = "{class_name}"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["{class_name}"]
"""
CLASS_NAME_LINE = 8
SCOUT = "from workers import DurableObject\n\nclass Scout(DurableObject): ...\n"


@pytest.fixture(autouse=True)
def _clean_imports() -> Iterator[None]:
    path = list(sys.path)
    modules = set(sys.modules)
    unload_user_modules()
    yield
    unload_user_modules()
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name.startswith("plug_"):
            del sys.modules[name]


def worker(root: Path, class_name: str, entry: str = "") -> WorkerConfig:
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text(entry or "from workers import DurableObject\n")
    (root / "wrangler.toml").write_text(WORKER.format(class_name=class_name))
    return load_config(root / "wrangler.toml")


def dist(site: Path, name: str, entry_points: dict[str, str], files: dict[str, str]) -> None:
    """An installed distribution: package files plus a ``.dist-info`` directory, in ``site``."""
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")


# ---------------------------------------------------------------- in-process, dist-info on path


def test_plugin_class_is_found_when_main_lacks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist(
        tmp_path / "site",
        "plug-ok",
        {"Scout": "plug_ok.agents:Scout"},
        {
            "plug_ok/__init__.py": "",
            "plug_ok/agents.py": SCOUT,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    loaded = load_worker(worker(tmp_path / "proj", "Scout"))
    scout = loaded.classes["Scout"]
    assert scout.origin == "plugin plug-ok 0.1 (plug_ok.agents:Scout)"
    assert scout.cls.__module__ == "plug_ok.agents"
    assert (scout.sql, scout.bindings) == (True, ("AGENT",))


def test_main_module_wins_over_a_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist(tmp_path / "site", "plug-shadow", {"Scout": "plug_shadow:Nope"}, {})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    loaded = load_worker(worker(tmp_path / "proj", "Scout", SCOUT))
    assert loaded.classes["Scout"].origin == "main module src/entry.py"


@pytest.mark.parametrize(
    ("value", "files", "error", "tail"),
    [
        ("plug_fmt.agents", {}, ImportStringError,
         'Import string "plug_fmt.agents" must be in format "<module>:<attribute>".'),
        ("plug_gone.agents:Scout", {}, ModuleImportError,
         'Could not import module "plug_gone.agents".'),
        ("plug_attr.agents:Scout", {"plug_attr/__init__.py": "", "plug_attr/agents.py": ""},
         AttributeNotFoundError, 'Attribute "Scout" not found in module "plug_attr.agents".'),
        ("plug_type.agents:Scout",
         {"plug_type/__init__.py": "", "plug_type/agents.py": "def Scout(): pass\n"},
         NotADurableObjectError,
         "plug_type.agents:Scout is function plug_type.agents.Scout, not a subclass"),
    ],
)  # fmt: skip
def test_plugin_import_failures_name_config_line_and_entry_point(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    files: dict[str, str],
    error: type[LoaderError],
    tail: str,
) -> None:
    dist(tmp_path / "site", "plug-bad", {"Scout": value}, files)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    config = worker(tmp_path / "proj", "Scout")
    with pytest.raises(error) as info:
        load_worker(config)
    message = str(info.value)
    assert message.startswith(
        f'{config.source_name}:{CLASS_NAME_LINE}: durable_objects.bindings[0] class_name "Scout":'
        f" entry point Scout = '{value}' of plug-bad 0.1: "
    )
    assert tail in message


def test_nested_import_error_inside_a_plugin_is_reraised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist(
        tmp_path / "site",
        "plug-nested",
        {"Scout": "plug_nested.agents:Scout"},
        {"plug_nested/__init__.py": "", "plug_nested/agents.py": "import plug_missing_dep\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(ModuleNotFoundError) as info:
        load_worker(worker(tmp_path / "proj", "Scout"))
    assert not isinstance(info.value, LoaderError)
    assert info.value.name == "plug_missing_dep"


def test_two_packages_providing_one_class_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist(tmp_path / "a", "plug-a", {"Scout": "plug_a:Scout"}, {})
    dist(tmp_path / "b", "plug-b", {"Scout": "plug_b:Scout"}, {})
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(ClassNotFoundError, match="several installed packages provide it") as info:
        load_worker(worker(tmp_path / "proj", "Scout"))
    assert "plug-a 0.1 (plug_a:Scout)" in str(info.value)
    assert "plug-b 0.1 (plug_b:Scout)" in str(info.value)


# ----------------------------------------------------------- end to end: pip-installed wheel


def build_wheel(project: Path, out: Path) -> Path:
    """Build a pure-Python wheel from ``project/pyproject.toml`` (PEP 427 layout, with RECORD).

    The venv has setuptools 65 without ``wheel``, which cannot build wheels offline, so the test
    writes the few files a build backend would; pip then installs it like any other wheel.
    """
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    name, version = meta["name"], meta["version"]
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    entry_points = "".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in eps.items()) + "\n"
        for group, eps in meta.get("entry-points", {}).items()
    )
    files: dict[str, bytes] = {
        path.relative_to(project).as_posix(): path.read_bytes()
        for path in sorted((project / "demo_plugin").rglob("*.py"))
    }
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {meta['description']}\nRequires-Python: {meta['requires-python']}\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: doemu-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = []
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for rel, data in files.items():
            archive.writestr(rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{rel},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


PROBE = """
import importlib.metadata, json, sys
from doemu.config import load_config
from doemu.loader import describe_classes, load_worker

dist = importlib.metadata.distribution("demo-plugin")
eps = [ep.value for ep in importlib.metadata.entry_points(group="doemu.durable_objects")]
loaded = load_worker(load_config(sys.argv[1]))
print(json.dumps({
    "installer": (dist.read_text("INSTALLER") or "").strip(),
    "location": str(dist.locate_file("")),
    "entry_points": eps,
    "classes": describe_classes(loaded),
    "module": loaded.classes["Researcher"].cls.__module__,
}))
"""


def test_installed_distribution_provides_a_bound_class(tmp_path: Path) -> None:
    wheel = build_wheel(FIXTURE, tmp_path)
    site = tmp_path / "site"
    env = {
        **os.environ,
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
         str(site), str(wheel)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr

    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(FIXTURE / "worker" / "wrangler.toml")],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)

    assert result["installer"] == "pip"
    assert Path(result["location"]) == site
    assert "demo_plugin.agents:Researcher" in result["entry_points"]
    assert result["module"] == "demo_plugin.agents"
    assert result["classes"] == [
        {
            "name": "Counter",
            "bindings": ["COUNTER"],
            "origin": "main module src/entry.py",
            "sql": True,
            "unique_key": "plugin-worker-Counter",
        },
        {
            "name": "Researcher",
            "bindings": ["RESEARCHER"],
            "origin": "plugin demo-plugin 1.2.0 (demo_plugin.agents:Researcher)",
            "sql": True,
            "unique_key": "plugin-worker-Researcher",
        },
    ]
