"""Reaching the engine as a service: from another process, or another machine over OpenSSH."""
