"""Placeholder: replaced by the RPC feature."""

from __future__ import annotations

__all__ = ["RpcMixin"]


class RpcMixin:
    pass
