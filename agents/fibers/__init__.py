"""Durable fibers: work registered in SQLite before it runs, recovered after a crash.

* ``runs`` — ``run_fiber`` and ``stash``: the ``cf_agents_runs`` row of each running fiber.
* ``managed`` — ``start_fiber`` and the job operations (inspect, list, cancel, resolve, delete).
* ``ledger`` — the ``cf_agents_fibers`` table of managed fibers, its records and waiters.
* ``recovery`` — the one recovery scan: orphaned rows → ``on_fiber_recovered``, with back-off.
* ``types`` — the shared vocabulary: contexts, signal, status, resolution.
"""

from __future__ import annotations

__all__: list[str] = []
