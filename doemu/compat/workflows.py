"""``workers.workflows``: what Cloudflare's SDK defines for Workflows (``NonRetryableError``).

``from workers.workflows import NonRetryableError`` imports this module (doemu installs it in
``sys.modules["workers.workflows"]``). Raised inside a ``step.do`` callback, the step fails at
once, without the retries its config allows (see :mod:`doemu.bindings.workflows`).
"""

__all__ = ["NonRetryableError"]


class NonRetryableError(Exception):
    """A step that raises this is not retried: the step fails with its message."""
