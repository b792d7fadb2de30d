"""The exception tree of the doemu runtime.

Every error doemu raises on purpose derives from :class:`DoemuError`. Where Cloudflare's error
comes from a JavaScript API (storage, SQL, ids, WebSockets, streams), the subclass is also a
:class:`~doemu.jsboundary.JsException`, as Pyodide raises it on Cloudflare: its ``name`` is the
JavaScript error's (``TypeError``, ``RangeError``, ``DataCloneError``, ``Error``), its ``message``
Cloudflare's exact text, ``str()`` both (``"TypeError: …"``), and it is *not* a Python
``TypeError`` or ``ValueError`` — ``except TypeError:`` does not catch it there, so it does not
here either.
"""

from __future__ import annotations

from .jsboundary import JsException

__all__ = [
    "AlarmError",
    "BlockConcurrencyTimeoutError",
    "ConfigError",
    "DataCloneError",
    "DoemuError",
    "DurableObjectAbort",
    "FetchError",
    "HttpError",
    "InvalidIdError",
    "LimitExceededError",
    "LoaderError",
    "NotEmulatedError",
    "ObjectResetError",
    "RpcError",
    "SqlError",
    "SqlNotAllowedError",
    "StorageError",
    "StreamError",
    "WebSocketError",
    "error_text",
    "not_emulated",
]


class DoemuError(Exception):
    """Root of every error doemu raises deliberately."""


class InvalidIdError(DoemuError, JsException):
    """A Durable Object id string is malformed or belongs to another namespace."""

    js_name = "TypeError"


class StorageError(DoemuError, JsException):
    """A storage operation was refused or failed (a JavaScript ``Error``)."""


class SqlError(StorageError):
    """``sql.exec`` failed: bad SQL, wrong bindings, or a cursor used wrongly."""


class SqlNotAllowedError(SqlError):
    """The SQLite authorizer refused a statement Cloudflare does not allow (``SQLITE_AUTH``)."""


class DataCloneError(StorageError):
    """A value cannot be stored or sent over RPC (Cloudflare's structured-clone rules)."""

    js_name = "DataCloneError"


class LimitExceededError(StorageError):
    """A production storage limit (key size, value size, batch size) was exceeded."""

    js_name = "RangeError"


class AlarmError(StorageError):
    """``setAlarm`` was called wrongly (bad time, class without an ``alarm`` handler)."""

    js_name = "TypeError"


class ObjectResetError(DoemuError):
    """The object was reset (``ctx.abort``, admin reset, blockConcurrencyWhile timeout).

    In-flight callers receive this error; the next event builds a fresh instance.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DurableObjectAbort(BaseException):
    """What ``ctx.abort()`` raises in the aborting code, as Cloudflare's Python runtime does.

    A ``BaseException``, not a :class:`DoemuError`, on purpose: the workers runtime SDK's
    ``DurableObjectAbort`` (``workers/entrypoints.py``) is one, so that an ``except Exception:``
    around the call cannot swallow it and the code after such a handler does not run. It ends
    the handler; the object's callers get the reset's :class:`ObjectResetError`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BlockConcurrencyTimeoutError(ObjectResetError):
    """``blockConcurrencyWhile`` did not settle within its limit; the object was reset."""


class RpcError(DoemuError):
    """A stub call could not be made (unknown or private method, unserializable arguments)."""


class WebSocketError(DoemuError, JsException):
    """A hibernatable WebSocket API was used wrongly (tags, attachments, closed sockets)."""

    js_name = "TypeError"


class StreamError(DoemuError, JsException):
    """A stream was used wrongly (a locked reader, a write after close) or was cancelled (a
    JavaScript ``TypeError``, as the errors of the same cases are)."""

    js_name = "TypeError"


class FetchError(DoemuError, OSError):
    """An outbound ``fetch()`` failed before a response arrived; the message names the URL.

    An ``OSError``, as the ``AbortError`` Pyodide raises on Cloudflare is.
    """


class NotEmulatedError(DoemuError, AttributeError):
    """A Cloudflare API that exists on Cloudflare but that doemu does not emulate.

    An ``AttributeError`` (so ``hasattr``/``getattr(obj, name, default)`` treat it as absent), with
    a message that says it is a real API, not a typo, and what to do instead.
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


def error_text(exc: BaseException) -> str:
    """An error's text for doemu's own surfaces (admin API, CLI, logs): a JavaScript error's
    message without its ``"Name: "`` prefix, any other error as ``str()`` gives it."""
    return exc.message if isinstance(exc, JsException) else str(exc)


def not_emulated(owner: str, name: str, what: str) -> NotEmulatedError:
    """The error for ``owner.name``: Cloudflare has it (``what``), doemu does not."""
    return NotEmulatedError(
        f"{owner}.{name} is a Cloudflare API that doemu does not emulate ({what}); see "
        "docs/differences.md, the table of what is not emulated"
    )
