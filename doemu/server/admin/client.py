"""A tiny stdlib client for the admin API, used by the CLI's inspection commands.

Standard library only, so the CLI needs no HTTP client dependency. It tells apart the two
failures the CLI handles differently: no doemu server at the URL, or none to ask at all
(:class:`AdminUnavailable`, and the CLI falls back to reading the persist dir), and a server
that refused the call (:class:`~doemu.errors.DoemuError` with the server's own message, which
the CLI prints).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from ...errors import DoemuError

__all__ = ["AdminClient", "AdminRefused", "AdminUnavailable"]


class AdminUnavailable(DoemuError):
    """No doemu server answers at the admin URL (the CLI then reads the persist dir)."""


class AdminRefused(DoemuError):
    """The server refused the call: the message is the server's own (``no such table: x``),
    without the HTTP plumbing the CLI's user never asked about; ``status``, ``method`` and
    ``path`` keep it for code that needs it."""

    def __init__(self, message: str, *, status: int, method: str, path: str) -> None:
        super().__init__(message)
        self.status = status
        self.method = method
        self.path = path


class AdminClient:
    """Calls ``/__doemu/api`` routes of the server at ``base_url`` and decodes their JSON.

    ``base_url=None`` is a client with no server to ask — the persist dir the CLI was pointed at
    records none that still runs, and any other server would be another project's: every call
    raises :class:`AdminUnavailable` with ``absent`` as its message, and the CLI reads the files.
    """

    def __init__(
        self,
        base_url: str | None,
        token: str | None = None,
        timeout: float = 10.0,
        *,
        absent: str = "no doemu server to ask",
    ) -> None:
        self.base = None if base_url is None else base_url.rstrip("/") + "/__doemu/api"
        self.token = token
        self.timeout = timeout
        self.absent = absent

    @property
    def where(self) -> str:
        """Where the client asks, for messages: ``at <url>``, or why there is nowhere."""
        return self.absent if self.base is None else f"no doemu server at {self.base}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """``method path`` with an optional JSON ``body``; the decoded JSON answer.

        Raises :class:`AdminUnavailable` when nothing (or something that is not doemu) answers,
        and :class:`DoemuError` carrying the server's ``error`` message when the call is refused.
        """
        if self.base is None:
            raise AdminUnavailable(self.absent)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            request.add_header("content-type", "application/json")
        if self.token:
            request.add_header("authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message = _error_message(exc)
            if message is None:  # not doemu's JSON refusal: a proxy, another server
                message = f"the server at {self.base} answered {method} {path} with {exc.code} "
                message += str(exc.reason)
            raise AdminRefused(message, status=exc.code, method=method, path=path) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            # URLError: refused or unresolvable; HTTPException: something that does not speak
            # HTTP; OSError: reset or timed out mid-response.
            raise AdminUnavailable(f"no doemu server at {self.base}: {exc}") from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise AdminUnavailable(
                f"the server at {self.base} answered {method} {path} with something other than "
                "JSON; is it a doemu server?"
            ) from None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``GET /events`` as ``(type, event)`` pairs, as the server sends them, until it stops.

        The first pair is ``("connected", {})``, once the server has subscribed this stream:
        nothing that happens after it can be missed. The stream has no deadline, connecting
        included (it is quiet while nothing happens, and a read deadline would end it); failures
        are reported as by :meth:`call`.
        """
        if self.base is None:
            raise AdminUnavailable(self.absent)
        request = urllib.request.Request(self.base + "/events", method="GET")
        if self.token:
            request.add_header("authorization", f"Bearer {self.token}")
        try:
            response = urllib.request.urlopen(request, timeout=None)
        except urllib.error.HTTPError as exc:
            message = _error_message(exc) or f"{exc.code} {exc.reason}"
            raise AdminRefused(message, status=exc.code, method="GET", path="/events") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            raise AdminUnavailable(f"no doemu server at {self.base}: {exc}") from None
        with response:
            yield "connected", {}  # the server subscribed before it sent the headers
            kind, data = "message", ""
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
                elif not line and data:
                    yield kind, json.loads(data)
                    kind, data = "message", ""

    def post(self, path: str, body: Any = None) -> Any:
        """POST with a JSON body (``{}`` when none is given: every POST route takes JSON)."""
        return self.call("POST", path, body if body is not None else {})


def _error_message(exc: urllib.error.HTTPError) -> str | None:
    """The server's ``{"error": ...}`` text; ``None`` for an answer that is not doemu's."""
    try:
        payload = json.loads(exc.read())
    except (ValueError, OSError):
        return None
    message = payload.get("error") if isinstance(payload, dict) else None
    return message if isinstance(message, str) else None
