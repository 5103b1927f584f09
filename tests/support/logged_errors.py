"""Errors polypilot logged during a test: in the test process, and in the log files of the
engine processes the test started.

The autouse fixture ``no_unexpected_errors`` (tests/conftest.py) puts a :class:`LoggedErrors`
on the :data:`WATCHED_LOGGERS` for each test and fails the test when an error it did not
declare was logged. A rig that runs ``polypilot serve`` (or any other
polypilot process) hands that process's log over with :func:`report_log_folder` before it
removes the folder, so the engine's errors fail the test too.
"""

from __future__ import annotations

import logging
import os
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

#: polypilot's loggers, and asyncio's, which reports what our tasks and callbacks let escape
#: ("Task exception was never retrieved", "Exception in callback …"): those whose traceback
#: runs through polypilot's code (the event loop's own teardown in a test is not ours).
WATCHED_LOGGERS = ("polypilot_tui", "asyncio")
OURS = f"{os.sep}polypilot_tui{os.sep}"
"""A traceback frame in a file under this is polypilot's code."""
#: The log files polypilot writes in a state folder (``infra/logs.py``), oldest rotation last.
LOG_FILES = ("engine.log", "run.log", "polypilot.log")
#: A line that starts a record in those files (``infra/logs.FORMAT``).
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<name>\S+): ")
_ERROR_LEVELS = {"ERROR", "CRITICAL"}
#: The last words of a Python process on stderr (a crash before logging was set up).
TRACEBACK = "Traceback (most recent call last):"


@dataclass(frozen=True)
class LoggedError:
    """One error record: where it was logged, its text (the message, then the exception's
    last line) that a test's patterns are searched in, and its traceback if any."""

    where: str
    text: str
    details: str = ""

    def matches(self, pattern: str) -> bool:
        return re.search(pattern, self.text) is not None


class LoggedErrors(logging.Handler):
    """Keeps every record at ERROR or above of the logger it is put on (any thread)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[LoggedError] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("polypilot_tui") or _raised_in_ours(record):
            self.errors.append(_from_record(record))

    def add(self, errors: list[LoggedError]) -> None:
        self.errors.extend(errors)


_current: list[LoggedErrors] = []
"""The collector of the test that runs now (one per xdist worker process)."""


def collecting(collector: LoggedErrors | None) -> None:
    """Make ``collector`` the one :func:`report_log_folder` adds to (None: no test runs)."""
    _current[:] = [collector] if collector is not None else []


def report_log_folder(folder: Path, stderr: str = "") -> None:
    """Add the errors of ``folder``'s polypilot logs (and a traceback in ``stderr``, a
    process's last words) to the running test's collector."""
    found = errors_in_log_folder(folder)
    if TRACEBACK in stderr:  # the whole of it is the text: what it says is not in one line
        found.append(LoggedError(f"stderr of the process of {folder}", stderr.strip()))
    if _current:
        _current[0].add(found)


def errors_in_log_folder(folder: Path) -> list[LoggedError]:
    """The ERROR and CRITICAL records of the polypilot log files in ``folder`` (any logger's:
    the process is polypilot's), tracebacks attached (rotated files ``engine.log.1`` … too)."""
    found: list[LoggedError] = []
    for name in LOG_FILES:
        for path in sorted(folder.glob(f"{name}*"), reverse=True):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found.extend(_errors_in_text(text, path.name))
    return found


def _errors_in_text(text: str, where: str) -> list[LoggedError]:
    records: list[list[str]] = []  # each record's lines: its first, then its traceback
    for line in text.splitlines():
        if _RECORD.match(line) is not None or not records:
            records.append([line])
        else:
            records[-1].append(line)
    found = []
    for lines in records:
        start = _RECORD.match(lines[0])
        if start is not None and start["level"] in _ERROR_LEVELS:
            head = f"{start['name']}: {lines[0][start.end() :]}"
            found.append(LoggedError(where, head + _last_exception_line(lines[1:]), "\n".join(lines)))
    return found


def _last_exception_line(lines: list[str]) -> str:
    """``\\n<Type>: <text>`` when ``lines`` hold a traceback, the form a record's text has."""
    if TRACEBACK not in lines:
        return ""
    last = next((line for line in reversed(lines) if line and not line.startswith(" ")), "")
    return f"\n{last}"


def _raised_in_ours(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    while exc is not None:
        if any(OURS in frame.filename for frame in traceback.extract_tb(exc.__traceback__)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _from_record(record: logging.LogRecord) -> LoggedError:
    try:
        message = record.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the format: still an error
        message = f"{record.msg!r} % {record.args!r}"
    text = f"{record.name}: {message}"
    details = ""
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text += "\n" + "".join(traceback.format_exception_only(type(exc), exc)).strip()
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return LoggedError(f"{record.threadName}, {record.pathname}:{record.lineno}", text, details)
