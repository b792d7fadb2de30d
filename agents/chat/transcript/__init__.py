"""UI messages: chunks applied to parts, messages, what clients send, storage."""
