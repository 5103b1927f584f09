"""Performance scripts that print figures measured in one run (``python -m bench``)."""
