"""D1 databases (``d1_databases``): ``env.DB.prepare(...).bind(...).all()`` on one SQLite file.

:mod:`~doemu.bindings.d1.engine` runs queries the way D1 does (its authorizer, values, ``meta``,
error texts, batches as transactions); :mod:`~doemu.bindings.d1.database` and
:mod:`~doemu.bindings.d1.statement` are what user code holds; :mod:`~doemu.bindings.d1.migrations`
reads and applies a ``wrangler d1 migrations`` folder.
"""

from __future__ import annotations

from .database import D1Database as D1Database
from .database import D1DatabaseSession as D1DatabaseSession
from .engine import D1Engine as D1Engine
from .engine import D1Error as D1Error
from .statement import D1PreparedStatement as D1PreparedStatement

__all__ = ["D1Database", "D1DatabaseSession", "D1Engine", "D1Error", "D1PreparedStatement"]
