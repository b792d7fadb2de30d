"""Static assets (``[assets]``): files served before the Worker, and ``env.ASSETS.fetch``.

:mod:`~doemu.bindings.assets.resolve` maps a path onto the folder (``html_handling``,
``not_found_handling``); :mod:`~doemu.bindings.assets.server` routes requests between the assets
and the Worker (``run_worker_first``) and answers with Cloudflare's headers.
"""

from __future__ import annotations

from .resolve import AssetFolder as AssetFolder
from .resolve import Intent as Intent
from .server import AssetsBinding as AssetsBinding
from .server import AssetServer as AssetServer

__all__ = ["AssetFolder", "AssetServer", "AssetsBinding", "Intent"]
