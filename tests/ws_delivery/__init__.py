"""WebSocket delivery through a real server, one behaviour a module; the app is app.py."""
