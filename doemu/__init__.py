"""doemu: a fully local Durable-Object runtime for Cloudflare's Python Workers API."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
