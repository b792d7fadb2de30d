"""Storage errors that workerd raises as a JavaScript ``TypeError``.

The shared tree lives in :mod:`doemu.errors`; this adds the one shape it lacks: a
:class:`~doemu.errors.StorageError` named ``TypeError``, for wrong argument types and invalid
``list()`` options. Like every JavaScript error on Cloudflare it is a ``JsException``, not a
Python ``TypeError``.
"""

from __future__ import annotations

from doemu.errors import StorageError

__all__ = ["StorageTypeError"]


class StorageTypeError(StorageError):
    """A storage method was called with arguments of the wrong type or an invalid option."""

    js_name = "TypeError"
