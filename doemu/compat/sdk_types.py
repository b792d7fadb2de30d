"""The type aliases of Cloudflare's ``workers`` module, with the SDK's runtime values.

On Cloudflare, ``Headers``, ``Body``, ``JSBody``, ``BlobValue`` and ``FormDataValue`` are
annotations whose value at runtime is a *string*, not a type (the SDK declares them as strings
naming JavaScript types): fine in annotations, useless in ``isinstance`` or as constructors. They
hold the same strings here, so code that treats them as types fails here as it would on deploy.
``FetchKwargs`` and ``RequestInitCfProperties`` are the SDK's ``TypedDict``s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

__all__ = [
    "BlobValue",
    "Body",
    "FetchKwargs",
    "FormDataValue",
    "Headers",
    "JSBody",
    "RequestInitCfProperties",
]

BlobValue = "str | bytes | js.ArrayBuffer | js.TypedArray | js.DataView | js.Blob | Blob | File"
FormDataValue = "str | js.Blob | Blob"
JSBody = "js.Blob | JsBuffer | js.FormData | js.ReadableStream | js.URLSearchParams"
Body = "str | FormData | JSBody"
Headers = "dict[str, str] | list[tuple[str, str]] | js.Headers"


class RequestInitCfProperties(TypedDict, total=False):
    """The ``cf`` options of an outbound ``fetch`` (no local meaning; accepted and logged)."""

    apps: bool
    cacheEverything: bool
    cacheKey: str
    cacheTags: list[str]
    cacheTtl: int
    cacheTtlByStatus: dict[str, int]
    image: Any
    mirage: bool
    polish: str
    resolveOverride: str
    scrapeShield: bool
    webp: bool


class FetchKwargs(TypedDict, total=False):
    """The keywords of ``fetch`` (and of ``Request``)."""

    headers: Any
    body: Any
    method: str
    redirect: str
    cf: RequestInitCfProperties
    fetcher: Callable[..., Any] | None
