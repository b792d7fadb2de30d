"""What the agent does with a client's frames: chat requests, tool results, resume."""
