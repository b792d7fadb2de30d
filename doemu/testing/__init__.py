"""Test helpers: an in-process harness with a manual clock, and a pytest plugin."""

from __future__ import annotations

from .harness import WorkerHarness as WorkerHarness

__all__ = ["WorkerHarness"]
