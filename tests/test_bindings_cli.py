"""``doemu d1 …`` and ``doemu sql DATABASE …`` without a server: migrations created, listed and
applied on the persist dir's file, SQL run through D1's rules, and read back read-only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from doemu.cli import main

WRANGLER = """\
name = "cli-d1"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]

[[d1_databases]]
binding = "DB"
database_name = "app-db"
database_id = "00000000-0000-0000-0000-000000000001"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "entry.py").write_text("from workers import WorkerEntrypoint\n")
    (tmp_path / "wrangler.toml").write_text(WRANGLER)
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("DOEMU_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("DOEMU_PORT", "1")  # nothing listens on port 1: commands go offline
    return tmp_path


def doemu(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_migrations_offline(project: Path) -> None:
    created = doemu("d1", "migrations", "create", "app-db", "create users")
    assert created.exit_code == 0, created.output
    path = project / "migrations" / "0001_create_users.sql"
    assert f"created {path}" in created.output
    path.write_text(path.read_text() + "CREATE TABLE users (id INTEGER PRIMARY KEY, n TEXT);\n")
    (project / "migrations" / "0002_seed.sql").write_text("INSERT INTO users (n) VALUES ('a');")

    listed = doemu("d1", "migrations", "list", "DB")
    assert listed.exit_code == 0, listed.output
    assert "pending  0001_create_users.sql" in listed.output
    assert "pending  0002_seed.sql" in listed.output
    applied = doemu("d1", "migrations", "apply", "DB")
    assert applied.exit_code == 0, applied.output
    assert "applied  0001_create_users.sql" in applied.output
    again = doemu("d1", "migrations", "apply", "DB")
    assert again.exit_code == 0 and "no migrations to apply" in again.output
    assert (
        project / ".doemu" / "state" / "d1" / "00000000-0000-0000-0000-000000000001.sqlite"
    ).is_file()

    (project / "migrations" / "0003_broken.sql").write_text("INSERT INTO nope VALUES (1);")
    broken = doemu("d1", "migrations", "apply", "DB")
    assert broken.exit_code == 1
    assert "Migration 0003_broken.sql failed: D1_ERROR: no such table: nope" in broken.output


def test_execute_and_read_offline(project: Path) -> None:
    made = doemu(
        "d1", "execute", "DB", "--command", "CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('x')"
    )
    assert made.exit_code == 0, made.output
    read = doemu("sql", "DB", "SELECT v FROM t", "--format", "json")
    assert read.exit_code == 0, read.output
    assert json.loads(read.output[read.output.index("{") :]) == {"columns": ["v"], "rows": [["x"]]}
    refused = doemu("d1", "execute", "DB", "--command", "SELECT * FROM nope")
    assert refused.exit_code == 1
    assert "D1_ERROR: no such table: nope: SQLITE_ERROR" in refused.output
    write = doemu("sql", "DB", "DELETE FROM t")
    assert write.exit_code == 1 and "read-only SQL" in write.output
    assert doemu("d1", "execute", "DB").exit_code == 1  # neither --command nor --file
    unknown = doemu("d1", "migrations", "list", "nope")
    assert unknown.exit_code == 1
    assert "no D1 database 'nope' in wrangler.toml (D1 bindings: DB)" in unknown.output
