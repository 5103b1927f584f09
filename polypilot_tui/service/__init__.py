"""The engine as a service: its HTTP API on a Unix socket, the clients that attach to it."""
