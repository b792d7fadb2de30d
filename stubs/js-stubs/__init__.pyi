# `from js import …` for mypy and editors: the JavaScript globals doemu implements
# (doemu.compat.js). Shipped in doemu's wheel as a PEP 561 stub-only package.
from doemu.compat.js import *  # noqa: F403
from doemu.compat.js import __all__ as __all__
