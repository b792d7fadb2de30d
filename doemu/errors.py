"""The exception tree of the doemu runtime.

Every error doemu raises on purpose derives from :class:`DoemuError`. Where Cloudflare raises a
JavaScript ``TypeError`` or ``RangeError`` with a fixed text, the subclass also derives from the
matching Python built-in and carries the same text, so user code that catches ``TypeError`` (as it
would catch the JS error through Pyodide) keeps working, and tests can compare messages exactly.
"""

from __future__ import annotations

__all__ = [
    "AlarmError",
    "BlockConcurrencyTimeoutError",
    "ConfigError",
    "DataCloneError",
    "DoemuError",
    "FetchError",
    "HttpError",
    "InvalidIdError",
    "LimitExceededError",
    "LoaderError",
    "ObjectResetError",
    "RpcError",
    "SqlError",
    "SqlNotAllowedError",
    "StorageError",
    "StreamError",
    "WebSocketError",
]


class DoemuError(Exception):
    """Root of every error doemu raises deliberately."""


class InvalidIdError(DoemuError, TypeError):
    """A Durable Object id string is malformed or belongs to another namespace."""


class StorageError(DoemuError):
    """A storage operation was refused or failed."""


class SqlError(StorageError):
    """``sql.exec`` failed: bad SQL, wrong bindings, or a cursor used wrongly."""


class SqlNotAllowedError(SqlError):
    """The SQLite authorizer refused a statement Cloudflare does not allow (``SQLITE_AUTH``)."""


class DataCloneError(StorageError, TypeError):
    """A value cannot be stored or sent over RPC (Cloudflare's structured-clone rules)."""


class LimitExceededError(StorageError, ValueError):
    """A production storage limit (key size, value size, batch size) was exceeded."""


class AlarmError(StorageError, TypeError):
    """``setAlarm`` was called wrongly (bad time, class without an ``alarm`` handler)."""


class ObjectResetError(DoemuError):
    """The object was reset (``ctx.abort``, admin reset, blockConcurrencyWhile timeout).

    In-flight callers receive this error; the next event builds a fresh instance.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BlockConcurrencyTimeoutError(ObjectResetError):
    """``blockConcurrencyWhile`` did not settle within its limit; the object was reset."""


class RpcError(DoemuError):
    """A stub call could not be made (unknown or private method, unserializable arguments)."""


class WebSocketError(DoemuError, TypeError):
    """A hibernatable WebSocket API was used wrongly (tags, attachments, closed sockets)."""


class StreamError(DoemuError, TypeError):
    """A stream was used wrongly (a locked reader, a write after close) or was cancelled.

    A ``TypeError`` too, as the JavaScript errors of the same cases are.
    """


class FetchError(DoemuError, OSError):
    """An outbound ``fetch()`` failed before a response arrived; the message names the URL.

    An ``OSError``, as the ``AbortError`` Pyodide raises on Cloudflare is.
    """


class ConfigError(DoemuError):
    """wrangler.toml / wrangler.jsonc / doemu settings are invalid."""


class LoaderError(DoemuError):
    """The worker's main module or a Durable Object class could not be imported."""


class HttpError(DoemuError):
    """A request refused before it reaches user code (the server's or the admin API's).

    Answered as ``{"error": message}`` with ``status``; never a traceback.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
