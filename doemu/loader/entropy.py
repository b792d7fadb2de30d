"""No randomness while the Worker's modules are imported, as on Cloudflare.

Cloudflare's Python runtime imports a Worker's modules outside any request (and snapshots the
result), and refuses entropy there: ``random.Random()``, ``os.urandom``, ``uuid.uuid4()``,
``secrets`` … at module level raise ``OSError: Cannot get entropy outside of request context``, so
the Worker fails to load. Inside a request (a handler, a Durable Object's constructor) entropy is
available. :func:`entropy_refused` applies the same rule around the import of ``main`` (and of the
plugin modules a binding names), so a module-level random source fails locally first.

What is patched for the duration: ``os.urandom``, the ``urandom`` that ``random`` bound at import
(``SystemRandom``, ``secrets``), and ``random.Random.seed`` when asked to seed from the system
(``random.Random()``, ``random.seed()``; ``tempfile``'s name generator goes through it too).
Seeding with an explicit value stays allowed, as on Cloudflare.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

__all__ = ["ENTROPY_MESSAGE", "EntropyAtImportError", "entropy_refused"]

#: Cloudflare's text.
ENTROPY_MESSAGE = "Cannot get entropy outside of request context"

_HINT = (
    " (doemu: Cloudflare imports a Worker's modules outside any request and refuses randomness "
    "there; create the random source inside a handler, or lazily on first use)"
)


class EntropyAtImportError(OSError):
    """Randomness was asked for while the Worker's modules were being imported."""


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise EntropyAtImportError(ENTROPY_MESSAGE + _HINT)


@contextlib.contextmanager
def entropy_refused(active: bool = True) -> Iterator[None]:
    """Refuse system entropy inside the ``with`` block (see the module docstring)."""
    if not active:
        yield
        return
    original_urandom = os.urandom
    original_random_urandom = getattr(random, "_urandom", None)
    original_seed = random.Random.seed

    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        if a is None:
            _refuse()
        original_seed(self, a, version)

    os.urandom = _refuse
    if original_random_urandom is not None:
        random._urandom = _refuse  # type: ignore[attr-defined]
    random.Random.seed = seed  # type: ignore[method-assign]
    try:
        yield
    finally:
        os.urandom = original_urandom
        if original_random_urandom is not None:
            random._urandom = original_random_urandom  # type: ignore[attr-defined]
        random.Random.seed = original_seed  # type: ignore[method-assign]
