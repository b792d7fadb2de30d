"""Helpers for the config tests: a minimal wrangler.toml, written and loaded from tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from doemu.config import ConfigValueError, WorkerConfig, load_config

__all__ = ["BASE_TOML", "load", "problems_of", "write"]

BASE_TOML = """\
name = "my-worker"
main = "src/entry.py"
compatibility_date = "2025-01-01"
compatibility_flags = ["python_workers"]
"""


def write(tmp_path: Path, text: str, name: str = "wrangler.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, name: str = "wrangler.toml") -> WorkerConfig:
    return load_config(write(tmp_path, text, name))


def problems_of(tmp_path: Path, text: str, name: str = "wrangler.toml") -> tuple[str, ...]:
    with pytest.raises(ConfigValueError) as info:
        load(tmp_path, text, name)
    return info.value.problems
