"""D1, the same calls on Miniflare (workerd-Python) and on doemu: e2e/test_bindings_differential.py.

``meta`` is recorded without the fields that differ by nature (``duration``, ``served_by``,
``size_after``, ``timings``) and without ``rows_read``, which doemu approximates (README)."""

import json

from record import seen, step
from workers import Response, WorkerEntrypoint

VOLATILE = {
    "duration",
    "served_by",
    "served_by_region",
    "served_by_primary",
    "timings",
    "size_after",
    "rows_read",
    "rows_written",
}


def result(value):
    """A D1Result (or a list of them) with its meta's stable fields only."""
    if isinstance(value, list):
        return [result(v) for v in value]
    if isinstance(value, dict) and "meta" in value:
        copy = dict(value)
        copy["meta"] = {k: v for k, v in value["meta"].items() if k not in VOLATILE}
        return copy
    if isinstance(value, dict) and "count" in value and "duration" in value:  # exec()
        return {"count": value["count"]}
    return value


async def run(out, name, make):
    async def shaped():
        return result(await make())

    await step(out, name, shaped)


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        db = self.env.DB
        out = {}
        await run(
            out,
            "exec_create",
            lambda: db.exec(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB);\n"
                "INSERT INTO t (name, score) VALUES ('a', 1.5)"
            ),
        )
        await run(
            out,
            "insert",
            lambda: (
                db.prepare("INSERT INTO t (name, score, data) VALUES (?, ?, ?)")
                .bind("b", 2, None)
                .run()
            ),
        )
        await run(out, "all", lambda: db.prepare("SELECT * FROM t ORDER BY id").all())
        await run(out, "first", lambda: db.prepare("SELECT * FROM t WHERE id = ?").bind(1).first())
        await run(
            out,
            "first_column",
            lambda: db.prepare("SELECT name FROM t WHERE id = ?").bind(1).first("name"),
        )
        await run(out, "first_none", lambda: db.prepare("SELECT * FROM t WHERE id = 99").first())
        await run(out, "first_column_none", lambda: db.prepare("SELECT 1 AS a WHERE 0").first("a"))
        await run(out, "first_bad_column", lambda: db.prepare("SELECT 1 AS a").first("b"))
        await run(out, "raw", lambda: db.prepare("SELECT id, name FROM t ORDER BY id").raw())
        await run(
            out,
            "raw_names",
            lambda: db.prepare("SELECT id, name FROM t ORDER BY id").raw(columnNames=True),
        )
        await run(
            out,
            "raw_names_empty",
            lambda: db.prepare("SELECT 1 AS a WHERE 0").raw(columnNames=True),
        )
        await run(
            out, "raw_options_dict", lambda: db.prepare("SELECT 1 AS a").raw({"columnNames": True})
        )
        await run(out, "run_select", lambda: db.prepare("SELECT id FROM t ORDER BY id").run())
        await run(out, "duplicate_columns", lambda: db.prepare("SELECT 1 AS a, 2 AS a").first())
        await run(
            out,
            "batch",
            lambda: db.batch(
                [
                    db.prepare("INSERT INTO t (name) VALUES (?)").bind("c"),
                    db.prepare("SELECT count(*) AS n FROM t"),
                ]
            ),
        )
        await run(
            out,
            "batch_rollback",
            lambda: db.batch(
                [
                    db.prepare("INSERT INTO t (name) VALUES ('rolled back')"),
                    db.prepare("INSERT INTO nope VALUES (1)"),
                ]
            ),
        )
        await run(
            out,
            "after_rollback",
            lambda: db.prepare("SELECT count(*) AS n FROM t WHERE name = 'rolled back'").first("n"),
        )
        await run(out, "batch_empty", lambda: db.batch([]))
        await run(out, "no_such_table", lambda: db.prepare("SELECT * FROM nope").all())
        await run(out, "syntax", lambda: db.prepare("SELEC 1").all())
        await run(
            out, "unique", lambda: db.prepare("INSERT INTO t (id, name) VALUES (1, 'dup')").run()
        )
        await run(out, "not_null", lambda: db.exec("CREATE TABLE nn (a NOT NULL)"))
        await run(out, "not_null_insert", lambda: db.prepare("INSERT INTO nn VALUES (NULL)").run())
        await run(out, "too_few_bindings", lambda: db.prepare("SELECT ?, ?").bind(1).all())
        await run(out, "too_many_bindings", lambda: db.prepare("SELECT ?").bind(1, 2).all())
        await run(out, "empty", lambda: db.prepare("").all())
        await run(out, "comment_only", lambda: db.prepare("-- nothing").all())
        await run(out, "begin", lambda: db.prepare("BEGIN TRANSACTION").run())
        await run(out, "cf_table", lambda: db.prepare("CREATE TABLE _cf_x (a)").run())
        await run(out, "attach", lambda: db.prepare("ATTACH DATABASE 'x' AS y").run())
        await run(out, "pragma_refused", lambda: db.prepare("PRAGMA journal_mode").all())
        await run(out, "pragma_allowed", lambda: db.prepare("PRAGMA foreign_keys = ON").run())
        await run(
            out,
            "multi_statement",
            lambda: db.prepare(
                "INSERT INTO t (name) VALUES ('m'); SELECT count(*) AS n FROM t"
            ).all(),
        )
        await run(out, "bind_dict", lambda: db.prepare("SELECT ?").bind({"a": 1}).all())
        await run(out, "bind_tuple", lambda: db.prepare("SELECT ?").bind((1, 2)).all())
        await run(out, "bind_list", lambda: db.prepare("SELECT ? AS v").bind([1, 2, 3]).first())
        await run(
            out,
            "bind_bytes",
            lambda: db.prepare("SELECT ? AS v, typeof(?) AS t").bind(b"\x01\x02", b"\x01").first(),
        )
        await run(
            out,
            "bind_bool",
            lambda: db.prepare("SELECT ? AS v, typeof(?) AS t").bind(False, True).first(),
        )
        await run(
            out,
            "bind_none",
            lambda: db.prepare("SELECT ? AS v, typeof(?) AS t").bind(None, None).first(),
        )
        await run(
            out,
            "bind_int",
            lambda: db.prepare("SELECT typeof(?) AS t, ? / 2 AS d").bind(7, 7).first(),
        )
        await run(
            out,
            "bind_float",
            lambda: db.prepare("SELECT ? AS v, typeof(?) AS t").bind(1.5, 1.0).first(),
        )
        await run(out, "bind_big_int", lambda: db.prepare("SELECT ?").bind(2**60).all())
        await run(
            out, "bind_numbered", lambda: db.prepare("SELECT ?1 AS a, ?1 AS b").bind(7).first()
        )
        await run(out, "bind_named", lambda: db.prepare("SELECT :x AS a").bind(7).first())
        await run(out, "bind_twice", lambda: db.prepare("SELECT ? AS v").bind(1).bind(2).first("v"))
        await run(out, "text_column_number", lambda: db.exec("CREATE TABLE tx (v TEXT)"))
        await db.prepare("INSERT INTO tx VALUES (?)").bind(7).run()
        await run(
            out,
            "text_column_number_read",
            lambda: db.prepare("SELECT v, typeof(v) AS t FROM tx").first(),
        )
        await run(out, "blob_literal", lambda: db.prepare("SELECT x'0102' AS b").first())
        await run(
            out,
            "big_integers",
            lambda: db.prepare("SELECT 9007199254740991 AS a, 9007199254740992 AS b").first(),
        )
        await run(out, "real_integral", lambda: db.prepare("SELECT 2.0 AS a").first())
        await run(out, "update", lambda: db.prepare("UPDATE t SET name = 'u' WHERE id <= 2").run())
        await run(out, "delete_none", lambda: db.prepare("DELETE FROM t WHERE id > 100").run())
        await run(
            out,
            "exec_semicolons",
            lambda: db.exec(
                "CREATE TABLE e2 (a); INSERT INTO e2 VALUES (1); INSERT INTO e2 VALUES (2)"
            ),
        )
        await run(
            out,
            "exec_blank_lines",
            lambda: db.exec("CREATE TABLE e3 (a);\n\n   \nINSERT INTO e3 VALUES (1);"),
        )
        await run(out, "exec_split_statement", lambda: db.exec("CREATE TABLE e4 (\n a\n);"))
        await run(out, "exec_empty", lambda: db.exec(""))
        await run(out, "exec_error_first_line", lambda: db.exec("SELECT * FROM nope"))
        await run(
            out,
            "exec_error_second_line",
            lambda: db.exec("CREATE TABLE e5 (a);\nSELECT * FROM nope"),
        )
        await run(
            out,
            "exec_error_kept",
            lambda: db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'e5'").first(
                "n"
            ),
        )
        session = db.withSession("first-unconstrained")
        await run(out, "session_first", lambda: session.prepare("SELECT 1 AS a").first())
        out["session_bookmark_fresh"] = seen(db.withSession().getBookmark())
        await run(out, "session_batch", lambda: session.batch([session.prepare("SELECT 2 AS b")]))
        out["session_bookmark_after"] = type(session.getBookmark()).__name__
        return Response(json.dumps(out), headers={"content-type": "application/json"})
