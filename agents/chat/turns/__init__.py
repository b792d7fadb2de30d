"""One model reply (a turn), the queue of turns, auto-continuation, transient failures."""
