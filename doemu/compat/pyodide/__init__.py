"""The ``pyodide`` package as Python Workers code imports it: only ``pyodide.ffi`` is provided.

doemu installs this package as ``sys.modules["pyodide"]`` and its ``ffi`` module as
``sys.modules["pyodide.ffi"]``. There is no ``pyodide.http`` (outbound ``pyfetch``) in doemu.
"""

from . import ffi

__all__ = ["ffi"]
