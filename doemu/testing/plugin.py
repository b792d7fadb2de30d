"""pytest plugin registered under ``pytest11`` (fixtures are added as the harness grows)."""

from __future__ import annotations

__all__: list[str] = []
