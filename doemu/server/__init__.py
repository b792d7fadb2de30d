"""What ``doemu dev`` serves: the ASGI app (entry worker, default router, WebSocket upgrades),
the admin API, and the dev server process (bind, banner, graceful stop, reload)."""
