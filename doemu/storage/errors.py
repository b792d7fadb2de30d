"""Storage errors that workerd raises as a JavaScript ``TypeError``.

The shared tree lives in :mod:`doemu.errors`; this adds the one shape it lacks: a
:class:`~doemu.errors.StorageError` that is also a ``TypeError``, for wrong argument types and
invalid ``list()`` options, so ``except TypeError`` catches it as it would the JS error.
"""

from __future__ import annotations

from doemu.errors import StorageError

__all__ = ["StorageTypeError"]


class StorageTypeError(StorageError, TypeError):
    """A storage method was called with arguments of the wrong type or an invalid option."""
