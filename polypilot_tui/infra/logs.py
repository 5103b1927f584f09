"""Logging for every entry point: private, bounded, redacted, and never on the terminal the
dashboard draws on.

- The dashboard logs to ``state_dir/polypilot.log``, ``polypilot run`` to ``state_dir/run.log``
  (two files: a run may go on while the dashboard runs, and two processes rotating one file
  would lose lines). Each is 0600 whatever the umask and rotates at :data:`LOG_MAX_BYTES`
  keeping :data:`LOG_BACKUPS` old files.
- Every line, tracebacks included, goes through the redactor after it is formatted, so a
  key an agent printed in an exception message is gone before it reaches the file.
- A log that cannot be written (full disk, read-only folder) is dropped quietly: never a
  ``--- Logging error ---`` traceback on the terminal. Saving problems reach the user as
  notices, not through the log.
- Python warnings and exceptions in threads go to the log too, redacted like the rest; an
  exception that ends the process is logged in full and said in one redacted line on stderr.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
import sys
import threading
from pathlib import Path
from typing import Any

from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.infra.redact import REDACTOR

LOG_MAX_BYTES = 1_000_000
LOG_BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_installed: list[logging.Handler] = []
"""Handlers this module put on the root logger (replaced, never stacked, by a new set-up)."""


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then removes every secret from the whole text (tracebacks too)."""

    def format(self, record: logging.LogRecord) -> str:
        return REDACTOR.text(super().format(record))


class PrivateLogFile(logging.handlers.RotatingFileHandler):
    """A size-rotated log file created 0600, that never complains on the terminal."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8", delay=False)
        self.failures = 0

    def _open(self) -> io.TextIOWrapper:
        fd = open_private(Path(self.baseFilename), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        self.failures += 1  # full disk or gone folder: losing a log line beats a traceback on screen


class _QuietStderr(logging.StreamHandler):  # type: ignore[type-arg]
    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802
        pass


class RepeatFilter(logging.Filter):
    """The same failure logs once in full; its repeats are counted on one line each 100.

    An agent whose every update fails the SDK's schema (claude-agent-acp's ``usage_update``
    with ``"used": null``) would otherwise write a traceback per update into the log.
    """

    def __init__(self) -> None:
        super().__init__()
        self._seen: dict[tuple[str, str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # ``exc_info=False`` (the Copilot SDK's timing lines at debug) is kept as False, not None.
        if not record.exc_info or record.levelno >= logging.CRITICAL:
            return True
        exc = record.exc_info[1]
        first_line = str(exc).splitlines()[0][:200] if exc is not None and str(exc) else ""
        key = (record.name, str(record.msg), f"{type(exc).__name__}: {first_line}")
        count = self._seen.get(key, 0) + 1
        if len(self._seen) < 1000 or key in self._seen:
            self._seen[key] = count
        if count == 1:
            return True
        if count % 100 == 0:
            record.msg = f"{record.msg} (the same failure {count} times so far)"
            record.exc_info = record.exc_text = None
            return True
        return False


def _install(handler: logging.Handler, level: int) -> None:
    root = logging.getLogger()
    for old in _installed:
        root.removeHandler(old)
        old.close()
    _installed[:] = [handler]
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)


def _thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    logging.getLogger("polypilot_tui.thread").error(
        "unhandled exception in thread %s",
        args.thread.name if args.thread else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
    )


def _uncaught(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    """An exception that ends the process: in the log in full, on stderr one line, both
    redacted (a detached engine's stderr is a file of the state folder, ``engine.err``)."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("polypilot_tui").critical("uncaught exception", exc_info=(kind, exc, tb))
    files = [h.baseFilename for h in _installed if isinstance(h, PrivateLogFile)]
    where = f" (the traceback is in {files[0]})" if files else ""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(REDACTOR.text(f"polypilot: {kind.__name__}: {exc}") + where + "\n")


def log_failure(
    logger: logging.Logger, what: str, exc: BaseException, expected: tuple[type[BaseException], ...]
) -> None:
    """``what`` failed with ``exc``, at a boundary that goes on: one warning line when ``exc``
    is ``expected`` (an agent, the disk or the engine said no), else an error with the
    traceback (a bug: it is seen, and fails the test it happens in)."""
    if isinstance(exc, expected):
        logger.warning("%s failed: %s", what, str(exc) or type(exc).__name__)
    else:
        logger.error("%s failed", what, exc_info=exc)


def setup_file_logging(
    state_dir: Path, file_name: str, level: int = logging.WARNING, extra_file: Path | None = None
) -> Path | None:
    """Log to ``state_dir/file_name`` (or ``extra_file`` at DEBUG, the ``--log-file`` option).

    Returns the log's path, or None when it cannot be created (then nothing is logged, and
    nothing is printed either).
    """
    logging.raiseExceptions = False  # a failing handler never prints a traceback
    logging.captureWarnings(True)
    threading.excepthook = _thread_exception
    sys.excepthook = _uncaught
    target = Path(extra_file) if extra_file is not None else Path(state_dir) / file_name
    try:
        # The user's --log-file may be in a folder they merely use (/tmp): only a folder made
        # for it is ours to check; the file itself is opened the private way either way.
        if extra_file is None or not target.parent.is_dir():
            private_dir(target.parent)
        handler: logging.Handler = PrivateLogFile(target)
    except OSError:
        _install(logging.NullHandler(), level)
        return None
    handler.setFormatter(RedactingFormatter(FORMAT))
    handler.addFilter(RepeatFilter())
    _install(handler, logging.DEBUG if extra_file is not None else level)
    return target


def setup_stderr_logging(stream: Any = None) -> None:
    """Short commands (status, agents, replay): warnings on stderr, one redacted line each."""
    logging.raiseExceptions = False
    handler = _QuietStderr(stream or sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLine("polypilot: %(message)s"))
    _install(handler, logging.WARNING)


class _OneLine(RedactingFormatter):
    """No tracebacks on a terminal: the message alone."""

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return ""

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return ""
