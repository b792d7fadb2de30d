# `import pyodide` for mypy and editors: only `pyodide.ffi` is typed (doemu.compat.pyodide.ffi).
# Partial (see py.typed), so an installed pyodide-py still supplies the modules this one lacks.
from . import ffi as ffi

__all__ = ["ffi"]
