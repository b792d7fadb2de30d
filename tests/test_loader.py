"""Importing a Worker's main module from real project directories, and the import errors."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from doemu.config import WorkerConfig, load_config
from doemu.errors import LoaderError
from doemu.loader import (
    AttributeNotFoundError,
    ClassNotFoundError,
    EntrypointError,
    ImportStringError,
    MainNotFoundError,
    ModuleImportError,
    ModuleNameConflictError,
    NotADurableObjectError,
    describe_classes,
    import_from_string,
    load_worker,
    unload_user_modules,
)

CONFIG = """\
name = "my-worker"
main = "{main}"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]
{extra}
[[durable_objects.bindings]]
name = "COUNTER"
class_name = "{class_name}"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["{class_name}"]
"""
# Line of the binding's class_name in CONFIG when ``extra`` is empty.
CLASS_NAME_LINE = 8

COUNTER = """\
from workers import DurableObject, Response, WorkerEntrypoint

class Counter(DurableObject):
    async def fetch(self, request):
        return Response("ok")
"""


@pytest.fixture(autouse=True)
def _forget_user_code() -> Iterator[None]:
    """Each test starts and ends without another test's user modules or sys.path entries."""
    unload_user_modules()
    path = list(sys.path)
    yield
    unload_user_modules()
    sys.path[:] = path


def project(
    root: Path,
    files: dict[str, str],
    *,
    main: str = "src/entry.py",
    class_name: str = "Counter",
    extra: str = "",
) -> WorkerConfig:
    """Write a project (wrangler.toml plus ``files``) under ``root`` and load its config."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    config = root / "wrangler.toml"
    config.write_text(CONFIG.format(main=main, class_name=class_name, extra=extra))
    return load_config(config)


# ------------------------------------------------------------------------------- discovery


def test_classes_and_default_entry_are_discovered(tmp_path: Path) -> None:
    config = project(
        tmp_path,
        {
            "src/entry.py": COUNTER
            + """
from helpers import Helper, greeting
from workers import DurableObject as _Base

class _Private(DurableObject):
    pass

class NotAnObject:
    pass

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(greeting())
""",
            "src/helpers.py": """
                from workers import DurableObject

                def greeting():
                    return "hi"

                class Helper(DurableObject):
                    pass
            """,
        },
    )
    loaded = load_worker(config)
    assert set(loaded.classes) == {"Counter", "Helper"}
    counter = loaded.classes["Counter"]
    assert counter.cls is loaded.module.Counter
    assert counter.origin == "main module src/entry.py"
    assert counter.sql is True
    assert counter.bindings == ("COUNTER",)
    helper = loaded.classes["Helper"]
    assert helper.cls.__module__ == "helpers"  # imported from a sibling module
    assert (helper.sql, helper.bindings) == (False, ())
    assert loaded.entry is loaded.module.Default
    assert loaded.module.__name__ == "entry"
    assert loaded.module.__file__ == str(tmp_path / "src" / "entry.py")
    assert loaded.class_for("COUNTER") is counter
    assert loaded.warnings == ()


def test_describe_classes(tmp_path: Path) -> None:
    loaded = load_worker(
        project(tmp_path, {"src/entry.py": COUNTER + "\nclass Extra(Counter): pass\n"})
    )
    assert describe_classes(loaded) == [
        {
            "name": "Counter",
            "bindings": ["COUNTER"],
            "origin": "main module src/entry.py",
            "sql": True,
            "unique_key": "my-worker-Counter",
        },
        {
            "name": "Extra",
            "bindings": [],
            "origin": "main module src/entry.py",
            "sql": False,
            "unique_key": "my-worker-Extra",
        },
    ]


def test_without_default_there_is_no_entry(tmp_path: Path) -> None:
    loaded = load_worker(project(tmp_path, {"src/entry.py": COUNTER}))
    assert loaded.entry is None


def test_framework_base_classes_are_not_collected_unless_bound(tmp_path: Path) -> None:
    # A base class from an installed framework package imported into main is not a user class.
    source = COUNTER + "from doemu.compat.workers import DurableObject as Base\n"
    loaded = load_worker(project(tmp_path, {"src/entry.py": source}))
    assert set(loaded.classes) == {"Counter"}


def test_dotted_main_module(tmp_path: Path) -> None:
    config = project(
        tmp_path,
        {"app/__init__.py": "", "app/worker.py": COUNTER},
        main="app.worker",
    )
    loaded = load_worker(config)
    assert loaded.module.__name__ == "app.worker"
    assert loaded.classes["Counter"].origin == "main module app.worker"


def test_migrated_class_missing_from_main_warns(tmp_path: Path) -> None:
    config = project(
        tmp_path,
        {"src/entry.py": COUNTER},
        extra='[[migrations]]\ntag = "v0"\nnew_classes = ["Gone"]\n',
    )
    loaded = load_worker(config)
    assert loaded.warnings == (
        f"{config.source_name}: migration 'v0' declares Durable Object class Gone, but "
        "src/entry.py does not export it (wrangler deploy would fail)",
    )


# ------------------------------------------------------------------------- import failures


def test_missing_main_file_names_the_config_line(tmp_path: Path) -> None:
    config = project(tmp_path, {}, main="src/missing.py")
    with pytest.raises(MainNotFoundError) as info:
        load_worker(config)
    assert str(info.value) == (
        f'{config.source_name}:2: main = "src/missing.py" was not found '
        f"(looked for {tmp_path / 'src' / 'missing.py'})"
    )


def test_missing_dotted_main_module(tmp_path: Path) -> None:
    config = project(tmp_path, {}, main="nowhere.worker")
    with pytest.raises(ModuleImportError) as info:
        load_worker(config)
    assert str(info.value).startswith(
        f'{config.source_name}:2: Could not import module "nowhere.worker" '
        '(main = "nowhere.worker"; searched'
    )


def test_nested_missing_module_is_reraised_as_itself(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": "import definitely_not_installed_xyz\n" + COUNTER})
    with pytest.raises(ModuleNotFoundError) as info:
        load_worker(config)
    assert not isinstance(info.value, LoaderError)
    assert info.value.name == "definitely_not_installed_xyz"
    assert "entry" not in sys.modules


def test_nested_missing_module_in_dotted_main_is_reraised(tmp_path: Path) -> None:
    config = project(
        tmp_path,
        {"app/__init__.py": "", "app/worker.py": "from app import missing_sibling\n"},
        main="app.worker",
    )
    with pytest.raises(ImportError) as info:
        load_worker(config)
    assert not isinstance(info.value, LoaderError)


def test_syntax_error_points_into_the_users_file(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER + "\ndef broken(:\n    pass\n"})
    with pytest.raises(SyntaxError) as info:
        load_worker(config)
    assert info.value.filename == str(tmp_path / "src" / "entry.py")
    assert info.value.lineno == 7


def test_syntax_error_in_a_sibling_module(tmp_path: Path) -> None:
    config = project(
        tmp_path,
        {"src/entry.py": "import helpers\n" + COUNTER, "src/helpers.py": "x = = 1\n"},
    )
    with pytest.raises(SyntaxError) as info:
        load_worker(config)
    assert info.value.filename == str(tmp_path / "src" / "helpers.py")


def test_class_name_found_nowhere_names_config_line(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER}, class_name="Foo")
    with pytest.raises(ClassNotFoundError) as info:
        load_worker(config)
    assert str(info.value) == (
        f'{config.source_name}:{CLASS_NAME_LINE}: durable_objects.bindings[0] class_name "Foo" '
        "is not exported by src/entry.py and no installed package provides it in entry-point "
        'group "doemu.durable_objects"'
    )


def test_class_name_typo_gets_a_suggestion(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER}, class_name="Countr")
    with pytest.raises(ClassNotFoundError, match=r'\(did you mean "Counter"\?\)$'):
        load_worker(config)


def test_class_name_line_is_found_in_jsonc(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "entry.py").write_text(COUNTER)
    (tmp_path / "wrangler.jsonc").write_text(
        textwrap.dedent(
            """\
            {
              "name": "my-worker",
              "main": "src/entry.py",
              "compatibility_flags": ["python_workers"],
              "compatibility_date": "2025-01-01",
              "durable_objects": {
                "bindings": [
                  {"name": "COUNTER", "class_name": "Counter"},
                  // the next one is wrong
                  {"name": "OTHER",
                   "class_name": "Other"},
                ]
              },
              "migrations": [{"tag": "v1", "new_sqlite_classes": ["Counter", "Other"]}],
            }
            """
        )
    )
    config = load_config(tmp_path)
    with pytest.raises(ClassNotFoundError) as info:
        load_worker(config)
    assert str(info.value).startswith(
        f'{config.source_name}:11: durable_objects.bindings[1] class_name "Other" is not exported'
    )


@pytest.mark.parametrize(
    ("definition", "described"),
    [
        ("def Foo(): pass", "function entry.Foo"),
        ("class Foo: pass", "class entry.Foo"),
        ("Foo = 3", "int 3"),
    ],
)
def test_bound_object_that_is_not_a_durable_object(
    tmp_path: Path, definition: str, described: str
) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER + definition + "\n"}, class_name="Foo")
    with pytest.raises(NotADurableObjectError) as info:
        load_worker(config)
    message = str(info.value)
    assert message.startswith(
        f'{config.source_name}:{CLASS_NAME_LINE}: durable_objects.bindings[0] class_name "Foo" '
        f"in src/entry.py is {described}"
    )
    assert message.endswith(", not a subclass of workers.DurableObject")
    assert isinstance(info.value, TypeError)


def test_default_that_is_not_a_worker_entrypoint(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER + "class Default: pass\n"})
    with pytest.raises(EntrypointError) as info:
        load_worker(config)
    assert str(info.value) == (
        f"{config.source_name}:2: Default in src/entry.py must be a subclass of "
        "workers.WorkerEntrypoint, got class entry.Default"
    )


def test_main_module_name_may_not_shadow_the_stdlib(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/json.py": COUNTER}, main="src/json.py")
    with pytest.raises(ModuleNameConflictError, match='imported as module "json"'):
        load_worker(config)
    assert sys.modules["json"].__file__ != str(tmp_path / "src" / "json.py")


# ------------------------------------------------------------------ uvicorn-style importer


def test_import_from_string_three_shapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "good_mod_xyz.py").write_text("class Thing:\n    class Inner: pass\n")
    (tmp_path / "nested_bad_xyz.py").write_text("import not_there_at_all_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert import_from_string("good_mod_xyz:Thing.Inner").__name__ == "Inner"
        with pytest.raises(ImportStringError) as info:
            import_from_string("good_mod_xyz", context="ctx")
        assert str(info.value) == (
            'ctx: Import string "good_mod_xyz" must be in format "<module>:<attribute>".'
        )
        with pytest.raises(ModuleImportError) as missing:
            import_from_string("no_such_mod_xyz.sub:Thing")
        assert str(missing.value) == 'Could not import module "no_such_mod_xyz.sub".'
        with pytest.raises(AttributeNotFoundError) as attr:
            import_from_string("good_mod_xyz:Nope")
        assert str(attr.value) == 'Attribute "Nope" not found in module "good_mod_xyz".'
        with pytest.raises(ModuleNotFoundError) as nested:
            import_from_string("nested_bad_xyz:Thing")
        assert nested.value.name == "not_there_at_all_xyz"
    finally:
        for name in ("good_mod_xyz", "nested_bad_xyz"):
            sys.modules.pop(name, None)


# ------------------------------------------------------------------------ importing twice


def test_reload_drops_stale_sibling_modules_between_projects(tmp_path: Path) -> None:
    entry = "from helpers import VALUE\n" + COUNTER
    first = project(tmp_path / "one", {"src/entry.py": entry, "src/helpers.py": "VALUE = 1\n"})
    second = project(tmp_path / "two", {"src/entry.py": entry, "src/helpers.py": "VALUE = 2\n"})
    assert load_worker(first).module.VALUE == 1
    loaded = load_worker(second)
    assert loaded.module.VALUE == 2
    assert sys.modules["helpers"].__file__ == str(tmp_path / "two" / "src" / "helpers.py")
    assert str(tmp_path / "one" / "src") not in sys.path


def test_reload_sees_edited_code_and_new_class_identity(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": "from helpers import VALUE\n" + COUNTER})
    helpers = tmp_path / "src" / "helpers.py"
    helpers.write_text("VALUE = 'old'\n")
    old = load_worker(config)
    helpers.write_text("VALUE = 'new'  # edited\n")
    new = load_worker(config)
    assert (old.module.VALUE, new.module.VALUE) == ("old", "new")
    assert new.classes["Counter"].cls is not old.classes["Counter"].cls


def test_reload_false_reuses_the_imported_module(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": COUNTER})
    first = load_worker(config)
    again = load_worker(config, reload=False)
    assert again.module is first.module
    assert again.classes["Counter"].cls is first.classes["Counter"].cls


def test_unload_user_modules_forgets_everything(tmp_path: Path) -> None:
    config = project(tmp_path, {"src/entry.py": "import helpers\n" + COUNTER, "src/helpers.py": ""})
    load_worker(config)
    assert "helpers" in sys.modules and "entry" in sys.modules
    unload_user_modules()
    assert "helpers" not in sys.modules and "entry" not in sys.modules
    assert str(tmp_path / "src") not in sys.path
    assert "workers" in sys.modules  # doemu's shims stay installed
