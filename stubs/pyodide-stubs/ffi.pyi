# `from pyodide.ffi import …` for mypy and editors (doemu.compat.pyodide.ffi, fully typed).
from doemu.compat.pyodide.ffi import *  # noqa: F403
from doemu.compat.pyodide.ffi import __all__ as __all__
