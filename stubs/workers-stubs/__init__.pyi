# `from workers import …` for mypy and editors: Cloudflare's `workers` module as doemu implements
# it (doemu.compat.workers, fully typed). Shipped in doemu's wheel as a PEP 561 stub-only package.
from doemu.compat.workers import *  # noqa: F403
from doemu.compat.workers import __all__ as __all__
