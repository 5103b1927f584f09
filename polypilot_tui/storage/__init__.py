"""Storage: everything the app writes under its state folder, and how it stays safe.

private (0600/0700 files and folders), redact (secrets never reach a file), lock (one
writer per state folder), registry and history (the stores), retention (what is cleaned up).
"""
