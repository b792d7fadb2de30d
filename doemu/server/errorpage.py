"""The error page a browser gets from ``doemu dev``; API clients keep the JSON body.

When a Worker's ``fetch`` raises, ``wrangler dev`` answers a browser with a page naming the
error and showing where it happened, and a ``curl`` or ``fetch()`` with a plain body. doemu does
the same: a request whose ``Accept`` header asks for ``text/html`` (what a browser sends when it
opens a page) gets this page, everyone else ``{"error": ...}`` with the same status. The page
shows the user's own frames (see :mod:`doemu.tracebacks`) only to a client on this machine
(loopback): a server bound to every interface does not show its source lines to the network.
The same page is served while ``doemu dev --reload`` waits for a fix to a Worker that fails to
import, so a browser tab shows the error instead of "connection refused".
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["error_page", "is_loopback", "wants_html"]

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{status} {title} · doemu</title>
<style>
body {{ font: 15px system-ui, sans-serif; margin: 2em auto; max-width: 60em; padding: 0 1em;
  color: #222; }}
h1 {{ font-size: 1.3em; color: #b00; }}
.message {{ font-size: 1.1em; font-weight: 600; white-space: pre-wrap; }}
pre {{ background: #f6f6f6; border-left: 3px solid #b00; padding: .8em; overflow-x: auto;
  font-size: 13px; }}
footer {{ color: #777; font-size: 13px; }}
</style>
</head>
<body>
<h1>{status} {title}</h1>
<p class="message">{message}</p>
{detail}
<footer>{footer}</footer>
</body>
</html>
"""

_TITLES = {
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    426: "Upgrade Required",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def wants_html(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the request's ``Accept`` header asks for HTML (a browser opening a page)."""
    for name, value in headers:
        if name.lower() == b"accept":
            return b"text/html" in value.lower()
    return False


def is_loopback(client: tuple[str, int] | list[object] | None) -> bool:
    """Whether the ASGI ``client`` address is this machine."""
    return bool(client) and str(client[0]) in _LOOPBACK  # type: ignore[index]


def error_page(
    status: int, message: str, detail: str | None = None, footer: str | None = None
) -> bytes:
    """The HTML page for ``status`` and ``message``; ``detail`` (a traceback) in a ``pre``."""
    import html  # html.entities' table: 2 ms of every start-up, for a page few servers show

    block = f"<pre>{html.escape(detail)}</pre>" if detail else ""
    return _PAGE.format(
        status=status,
        title=_TITLES.get(status, "Error"),
        message=html.escape(message),
        detail=block,
        footer=html.escape(footer or "doemu dev: the error is also in the server's log."),
    ).encode()
