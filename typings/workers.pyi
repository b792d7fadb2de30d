from doemu.compat.workers import *  # noqa: F403
from doemu.compat.workers import __all__ as __all__
