"""Server-held WebSockets: the registry of an object's hibernatable sockets, frame delivery
without a task per frame, and the bridge between a pair's client end and a real connection."""
