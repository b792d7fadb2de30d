"""Read-only views of a persist directory: object files, namespace listings, and the CLI's
offline fallback. Looking at a system never changes it: nothing here wakes an object or writes
a file."""
