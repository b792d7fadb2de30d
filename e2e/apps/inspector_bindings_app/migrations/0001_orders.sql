-- Migration number: 0001
CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, placed_at INTEGER NOT NULL);
