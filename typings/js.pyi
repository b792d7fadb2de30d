from doemu.compat.js import *  # noqa: F403
from doemu.compat.js import __all__ as __all__
