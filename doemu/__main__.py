"""``python -m doemu`` is the ``doemu`` command."""

from __future__ import annotations

from .cli import main

main()
