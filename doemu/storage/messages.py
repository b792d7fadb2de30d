"""Cloudflare's exact error texts for storage, in one place.

Users compare error messages and tests assert them, so doemu reuses workerd's wording wherever
workerd has one. Each text names its source in workerd (``src/workerd/...``); texts marked
*doemu* have no Cloudflare equivalent (they cover Python-only mistakes or doemu's own state).
"""

from __future__ import annotations

__all__ = [
    "DELETE_ALL_IN_TXN",
    "LIST_BOTH_STARTS",
    "LIST_LIMIT_POSITIVE",
    "MAX_KEYS",
    "MAX_PAIRS",
    "ONE_MULTIPLE",
    "ONE_NONE",
    "PUT_SIGNATURE",
    "PUT_UNDEFINED",
    "SET_ALARM_NOT_POSITIVE",
    "SET_ALARM_NO_HANDLER",
    "SQL_BINDINGS_ON_EARLIER_STATEMENT",
    "SQL_NOT_ENABLED",
    "SQL_NO_STATEMENT",
    "SQL_TRANSACTION",
    "SQL_WRONG_BINDING_COUNT",
    "STORAGE_CLOSED",
    "key_too_large",
    "key_too_large_in_batch",
    "txn_committed",
    "txn_rolled_back",
    "value_too_large",
    "value_too_large_in_batch",
]

# api/sql.c++, SqlStorage::allowTransactions()
SQL_TRANSACTION = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)

# util/sqlite.c++, SqliteDatabase::prepareSql() and Query::checkRequirements()
SQL_BINDINGS_ON_EARLIER_STATEMENT = (
    "When executing multiple SQL statements in a single call, only the last statement can have "
    "parameters."
)
SQL_WRONG_BINDING_COUNT = "Wrong number of parameter bindings for SQL query."
SQL_NO_STATEMENT = "SQL code did not contain a statement."

# api/sql.c++, SqlStorage::Cursor::one()
ONE_NONE = "Expected exactly one result from SQL query, but got no results."
ONE_MULTIPLE = "Expected exactly one result from SQL query, but got multiple results."

# workerd (local, 2026-11-17): ctx.storage.sql of a class without new_sqlite_classes. Cloudflare's
# production text is longer (it explains the migration); doemu matches the runtime it emulates.
SQL_NOT_ENABLED = "SQL is not enabled for this Durable Object class."

# api/actor-state.c++, DurableObjectStorageOperations::list() / put()
LIST_BOTH_STARTS = "list() cannot be called with both start and startAfter values."
LIST_LIMIT_POSITIVE = "List limit must be positive."
PUT_UNDEFINED = "put() called with undefined value."
PUT_SIGNATURE = (
    "put() may only be called with a single key-value pair and optional options as "
    "put(key, value, options) or with multiple key-value pairs and optional options as "
    "put(entries, options)"
)

# api/actor-state.c++, setAlarm()
SET_ALARM_NOT_POSITIVE = "setAlarm() cannot be called with an alarm time <= 0"
SET_ALARM_NO_HANDLER = (
    "Your Durable Object class must have an alarm() handler in order to call setAlarm()"
)

# api/actor-state.c++, DurableObjectTransaction
DELETE_ALL_IN_TXN = "Cannot call deleteAll() within a transaction"

# api/actor-state.c++ (key/value size and batch limits, enforced with --limits production)
MAX_KEYS = "Maximum number of keys is 128."
MAX_PAIRS = "Maximum number of pairs is 128."

# doemu
STORAGE_CLOSED = "This object's storage is closed (the object was evicted or reset)."


def key_too_large(limit: int) -> str:
    """api/actor-state.c++ checkMaxKeySize(), single-key operations."""
    return f"Keys cannot be larger than {limit} bytes."


def key_too_large_in_batch(key: str, limit: int) -> str:
    """api/actor-state.c++ checkMaxKeySize(), batch operations."""
    return f'Key "{key}" is larger than the limit of {limit} bytes.'


def value_too_large(limit: int) -> str:
    """api/actor-state.c++ putOne()."""
    return f"Values cannot be larger than {limit} bytes."


def value_too_large_in_batch(key: str, limit: int) -> str:
    """api/actor-state.c++ putMultiple()."""
    return f'Value for key "{key}" is above the limit of {limit} bytes.'


def txn_rolled_back(op: str) -> str:
    """api/actor-state.c++ DurableObjectTransaction::getCache()."""
    return f"Cannot {op} on rolled back transaction"


def txn_committed(op: str) -> str:
    """api/actor-state.c++ DurableObjectTransaction::getCache()."""
    return (
        f"Cannot call {op} on transaction that has already committed: did you move `txn` "
        "outside of the closure?"
    )
