"""Agent markdown for the chat pane: parsed without dropping a character, laid out for the terminal.

``blocks`` turns a reply into prose items and code blocks (markdown-it, HTML off, so
``List<String>`` and ``<div>`` stay text); ``layout`` wraps prose and tables to a width.
The widgets that draw them live in ``ui/widgets``.
"""
