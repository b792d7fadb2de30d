-- The first D1 migration: `doemu d1 migrations apply DB` (or, on Cloudflare,
-- `wrangler d1 migrations apply DB --remote`) runs each file of this folder once, in order.
CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL);
