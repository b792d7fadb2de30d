"""``Headers``, ``Request`` and ``Response`` as Cloudflare's Python ``workers`` module exposes them.

The Python SDK wraps JS objects and names its own members in Python style (``status_text``,
``body_used``, ``web_socket=``), while JS-defined behaviour keeps JS rules: a body can be read
once, a ``GET`` request has no body, and so on, with workerd's error texts. The definitions live
in :mod:`~doemu.compat.headers`, :mod:`~doemu.compat.requests` and
:mod:`~doemu.compat.responses`; this module gathers them.
"""

from __future__ import annotations

from .headers import Headers as Headers
from .headers import HeadersInit as HeadersInit
from .requests import Request as Request
from .responses import FetchResponse as FetchResponse
from .responses import Response as Response

__all__ = ["FetchResponse", "Headers", "HeadersInit", "Request", "Response"]
