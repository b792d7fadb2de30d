"""A tiny stdlib client for the admin API, used by the CLI's inspection commands."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from .errors import DoemuError

__all__ = ["AdminClient", "AdminUnavailable"]


class AdminUnavailable(DoemuError):
    """No doemu server answers at the admin URL (the CLI then reads the persist dir)."""


class AdminClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0) -> None:
        self.base = base_url.rstrip("/") + "/__doemu/api"
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if self.token:
            request.add_header("authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except (ValueError, AttributeError):
                message = exc.reason
            raise DoemuError(f"admin API {method} {path}: {exc.code} {message}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            raise AdminUnavailable(f"no doemu server at {self.base}: {exc}") from None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, body if body is not None else {})
