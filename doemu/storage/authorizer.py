"""The SQLite authorizer that makes user SQL as restricted as on Cloudflare.

workerd installs an authorizer on every Durable Object database (``util/sqlite.c++``,
``SqliteDatabase::isAuthorized``) and its SQL API (``api/sql.c++``) adds the name rules. doemu
reproduces those rules so SQL that works locally also works once deployed:

* ``_cf_*`` tables, indexes, triggers and views (the KV table, metadata) are off limits;
* ``BEGIN``/``COMMIT``/``ROLLBACK``/``SAVEPOINT``/``RELEASE`` are refused with workerd's advice to
  use ``transaction()``/``transactionSync()``, because the implicit transaction is the runtime's;
* ``ATTACH``/``DETACH``, ``TEMP`` objects and virtual tables other than FTS5 are refused;
* only allow-listed pragmas (with the argument shapes workerd accepts) and SQL functions run.

Refusals make SQLite fail the statement with ``SQLITE_AUTH`` ("not authorized", or "access to
_cf_KV.key is prohibited" for a column read); the connection and its transaction stay usable.
The storage layer's own statements run with :attr:`Authorizer.trusted` set and skip the checks.
Names are compared case-insensitively for ``_cf_`` (stricter than workerd, never looser); pragma
names are compared as written, as workerd does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from doemu.storage import messages

__all__ = ["ALLOWED_FUNCTIONS", "ALLOWED_PRAGMAS", "Authorizer"]

_OK = sqlite3.SQLITE_OK
_DENY = sqlite3.SQLITE_DENY

# util/sqlite.c++ ALLOWED_SQLITE_FUNCTIONS: SQL functions user queries may call.
ALLOWED_FUNCTIONS: frozenset[str] = frozenset(
    """
    abs changes char coalesce concat concat_ws format glob hex ifnull iif instr last_insert_rowid
    length like likelihood likely load_extension lower ltrim max_scalar min_scalar nullif
    octet_length printf quote random randomblob replace round rtrim sign soundex substr substring
    total_changes trim typeof unhex unicode unlikely upper zeroblob
    date time datetime julianday unixepoch strftime timediff current_date current_time
    current_timestamp
    avg count group_concat max min string_agg sum total
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    acos acosh asin asinh atan atan2 atanh ceil cos cosh degrees exp floor ln log log2 mod pi pow
    radians sin sinh sqrt tan tanh trunc
    json json_array json_array_length json_extract -> ->> json_insert json_object json_patch
    json_remove json_replace json_set json_type json_valid json_quote json_group_array
    json_group_object json_each json_tree
    match highlight bm25 snippet
    sqlite_rename_column sqlite_rename_table sqlite_rename_test sqlite_drop_column
    sqlite_rename_quotefix
    """.split()
)


def _allowed_name(name: str | None) -> bool:
    return name is None or not name.lower().startswith("_cf_")


def _boolean_arg(arg: str | None) -> bool:
    if arg is None:  # reading the current value
        return True
    value = arg
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    value = value.lower()
    # workerd compares prefixes (strncasecmp); keep its exact behaviour.
    return value.startswith(("true", "false", "yes", "no", "on", "off", "1", "0"))


def _no_arg(arg: str | None) -> bool:
    return arg is None


def _object_name(arg: str | None) -> bool:
    return arg is not None and _allowed_name(arg)


def _optional_object_name(arg: str | None) -> bool:
    return _allowed_name(arg)


def _null_or_number(arg: str | None) -> bool:
    if arg is None:
        return True
    try:
        int(arg)
    except ValueError:
        return False
    return True


def _null_number_or_object_name(arg: str | None) -> bool:
    if arg is None or arg.isdigit():
        return True
    return _allowed_name(arg)


# util/sqlite.c++ ALLOWED_PRAGMAS and the special cases in isAuthorized(): pragma → argument rule.
ALLOWED_PRAGMAS: dict[str, Callable[[str | None], bool]] = {
    "data_version": _no_arg,
    "page_size": _no_arg,  # reading it is allowed (workerd, observed 2026-11-17); setting is not
    "case_sensitive_like": _boolean_arg,
    "foreign_keys": _boolean_arg,
    "defer_foreign_keys": _boolean_arg,
    "ignore_check_constraints": _boolean_arg,
    "legacy_alter_table": _boolean_arg,
    "recursive_triggers": _boolean_arg,
    "reverse_unordered_selects": _boolean_arg,
    "foreign_key_check": _optional_object_name,
    "foreign_key_list": _object_name,
    "index_info": _object_name,
    "index_list": _object_name,
    "index_xinfo": _object_name,
    "quick_check": _null_number_or_object_name,
    "optimize": _null_or_number,
    "table_list": lambda arg: True,
    "table_info": _object_name,
    "table_xinfo": _object_name,
}

# Actions whose first argument is the (only) object name to check.
_NAME_IN_ARG1 = frozenset(
    {
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_UPDATE,
    }
)
# Actions naming an index/trigger (arg1) on a table (arg2): both must be allowed.
_NAME_IN_BOTH = frozenset(
    {
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_DROP_TRIGGER,
    }
)
_ALWAYS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_ANALYZE, sqlite3.SQLITE_RECURSIVE})
_VTABLE = frozenset({sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE})
_TRANSACTION = frozenset({sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT})


class Authorizer:
    """The authorizer callback plus the two bits of state it needs.

    ``trusted`` is set by the storage layer around its own statements. ``denial`` records a
    tailored message (the transaction advice) for the SQL layer to raise instead of SQLite's
    generic "not authorized". ``pragma_set`` says that user SQL has set a connection pragma
    (``PRAGMA foreign_keys=OFF``…), so the connection must not outlive the instance that set it.
    """

    __slots__ = ("denial", "pragma_set", "trusted")

    def __init__(self) -> None:
        self.trusted = False
        self.denial: str | None = None
        self.pragma_set = False

    def __call__(
        self,
        action: int,
        arg1: str | None,
        arg2: str | None,
        db_name: str | None,
        trigger: str | None,
    ) -> int:
        if self.trusted:
            return _OK
        return _OK if self._allowed(action, arg1, arg2, db_name) else _DENY

    def _allowed(self, action: int, arg1: str | None, arg2: str | None, db: str | None) -> bool:
        if action == sqlite3.SQLITE_ALTER_TABLE:  # SQLite passes (database, table) here
            db, arg1 = arg1, arg2
        elif action == sqlite3.SQLITE_DETACH:
            return False
        if db == "temp":  # the temp schema: reading and updating allowed names only
            return action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE) and _allowed_name(arg1)
        if db is not None and db != "main":
            return False
        if action in _NAME_IN_ARG1 or action == sqlite3.SQLITE_ALTER_TABLE:
            return _allowed_name(arg1)
        if action in _NAME_IN_BOTH:
            return _allowed_name(arg1) and _allowed_name(arg2)
        if action == sqlite3.SQLITE_FUNCTION:
            return arg2 in ALLOWED_FUNCTIONS
        if action == sqlite3.SQLITE_PRAGMA:
            rule = ALLOWED_PRAGMAS.get(arg1 or "")
            if rule is None or not rule(arg2):
                return False
            if arg2 is not None:
                self.pragma_set = True
            return True
        if action in _ALWAYS:
            return True
        if action in _TRANSACTION:
            self.denial = messages.SQL_TRANSACTION
            return False
        if action in _VTABLE:
            return arg2 is not None and arg2.lower() in ("fts5", "fts5vocab")
        # ATTACH, TEMP objects, COPY and anything SQLite adds later.
        return False
