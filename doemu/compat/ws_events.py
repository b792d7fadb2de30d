"""The DOM-style events a WebSocket's listeners receive (``message``, ``close``, ``error``)."""

from __future__ import annotations

from typing import Any

from .jsproxy import as_js_buffer

__all__ = ["CloseEvent", "ErrorEvent", "Event", "Message", "MessageEvent"]

#: A WebSocket message: text or binary.
Message = str | bytes


class Event:
    """A DOM-style event as WebSocket listeners receive it."""

    __slots__ = ("type",)

    def __init__(self, type: str) -> None:
        self.type = type

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.type!r})"


class MessageEvent(Event):
    __slots__ = ("data",)

    def __init__(self, data: Message) -> None:
        super().__init__("message")
        self.data: Any = as_js_buffer(data) if isinstance(data, bytes) else data


class CloseEvent(Event):
    __slots__ = ("code", "reason", "wasClean")

    def __init__(self, code: int, reason: str, wasClean: bool) -> None:
        super().__init__("close")
        self.code = code
        self.reason = reason
        self.wasClean = wasClean


class ErrorEvent(Event):
    __slots__ = ("error", "message")

    def __init__(self, error: BaseException) -> None:
        super().__init__("error")
        self.error = error
        self.message = str(error)
