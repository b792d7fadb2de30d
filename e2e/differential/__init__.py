"""The differential suite: the same client script against doemu dev and real workerd."""
