"""The SDK's chat frames on the WebSocket: their types and builders."""
