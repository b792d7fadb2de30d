"""No randomness while the Worker's modules are imported, as on Cloudflare.

Cloudflare's Python runtime imports a Worker's modules outside any request (and snapshots the
result), and refuses entropy there, so the Worker fails to load (observed on workerd):

* ``random.Random()``, ``os.urandom``, ``uuid.uuid4()``, ``secrets``, ``SystemRandom().random()``
  raise ``OSError: [Errno 29] Cannot get entropy outside of request context``;
* the ``random`` module's own functions (``random.random()``, ``randint``, ``choice``,
  ``seed()``…) raise ``RuntimeError: Cannot use random.random() outside of request context``;
* ``random.Random(42)`` (an explicit seed) and ``tempfile`` (whose names come out fixed there)
  work.

Inside a request (a handler, a Durable Object's constructor, ``alarm()``) all of it works.
:func:`entropy_refused` applies the same rules around the import of ``main`` (and of the plugin
modules a binding names), so a module-level random source fails locally first; the log line that
reports the failed import says why (:data:`HINT`).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Iterator
from typing import Any

__all__ = [
    "ENTROPY_MESSAGE",
    "HINT",
    "entropy_refused",
    "is_entropy_refusal",
]

#: Cloudflare's text (with ``errno`` 29, ``EIO``'s number in Pyodide).
ENTROPY_MESSAGE = "Cannot get entropy outside of request context"
_EIO_PYODIDE = 29

#: What doemu adds when an import fails this way (in the start-up error, not in the exception).
HINT = (
    "Cloudflare imports a Worker's modules outside any request and refuses randomness there: "
    "create the random source inside a handler, or lazily on first use"
)

#: The ``random`` module's functions that share its global generator (refused at import).
_MODULE_FUNCTIONS = (
    "betavariate", "binomialvariate", "choice", "choices", "expovariate", "gammavariate",
    "gauss", "getrandbits", "getstate", "lognormvariate", "normalvariate", "paretovariate",
    "randbytes", "randint", "random", "randrange", "sample", "seed", "setstate", "shuffle",
    "triangular", "uniform", "vonmisesvariate", "weibullvariate",
)  # fmt: skip


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    # A plain OSError, as Cloudflare raises: the traceback's last line is the same on both.
    raise OSError(_EIO_PYODIDE, ENTROPY_MESSAGE)


def _refuse_module_function(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"Cannot use random.{name}() outside of request context")

    refuse.__name__ = name
    return refuse


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

    module_functions = {n: getattr(random, n) for n in _MODULE_FUNCTIONS if hasattr(random, n)}
    original_tempfile_names = _tempfile_names()
    os.urandom = _refuse
    if original_random_urandom is not None:
        random._urandom = _refuse  # type: ignore[attr-defined]
    random.Random.seed = seed  # type: ignore[method-assign]
    for name in module_functions:
        setattr(random, name, _refuse_module_function(name))
    _set_tempfile_names(_fixed_names())
    try:
        yield
    finally:
        os.urandom = original_urandom
        if original_random_urandom is not None:
            random._urandom = original_random_urandom  # type: ignore[attr-defined]
        random.Random.seed = original_seed  # type: ignore[method-assign]
        for name, fn in module_functions.items():
            setattr(random, name, fn)
        _set_tempfile_names(original_tempfile_names)


def _fixed_names() -> Any:
    """``tempfile``'s name sequence with a fixed seed, as Cloudflare's is at import."""
    names = tempfile._RandomNameSequence()  # type: ignore[attr-defined]
    names._rng = random.Random(0)
    names._rng_pid = os.getpid()
    return names


def _tempfile_names() -> Any:
    return getattr(tempfile, "_name_sequence", None)


def _set_tempfile_names(names: Any) -> None:
    tempfile._name_sequence = names  # type: ignore[attr-defined]


def is_entropy_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is one of the refusals above."""
    seen: BaseException | None = exc
    while seen is not None:
        if (
            isinstance(seen, OSError)
            and seen.errno == _EIO_PYODIDE
            and seen.strerror == ENTROPY_MESSAGE
        ) or (isinstance(seen, RuntimeError) and "outside of request context" in str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
