"""The check that fails a test when polypilot logged an error (tests/support/logged_errors.py):
the records of a log file written the way every polypilot process writes it, and a process's
last words on stderr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from polypilot_tui.domain.safe_json import ParseError, load_json
from polypilot_tui.infra.logs import FORMAT, PrivateLogFile, RedactingFormatter
from tests.support.logged_errors import errors_in_log_folder, report_log_folder


def engine_log(folder: Path, name: str = "engine.log") -> logging.Logger:
    """A logger writing ``folder/name`` as ``polypilot serve`` does (outside the test's
    ``polypilot_tui`` tree: what it logs reaches only the file)."""
    handler = PrivateLogFile(folder / name)
    handler.setFormatter(RedactingFormatter(FORMAT))
    logger = logging.Logger("polypilot_tui.engine.context")
    logger.addHandler(handler)
    return logger


def test_the_error_records_of_a_log_are_found_with_their_exception(tmp_path: Path) -> None:
    logger = engine_log(tmp_path)
    logger.info("engine listening")
    logger.warning("an agent said no\nover two lines")
    try:
        raise ValueError("the last line of the traceback")
    except ValueError:
        logger.exception("background task of s1 failed")
    logger.error("a plain error")
    logger.critical("uncaught exception")
    for handler in logger.handlers:
        handler.close()
    found = errors_in_log_folder(tmp_path)
    assert [e.text for e in found] == [
        "polypilot_tui.engine.context: background task of s1 failed\nValueError: the last line of the traceback",
        "polypilot_tui.engine.context: a plain error",
        "polypilot_tui.engine.context: uncaught exception",
    ]
    assert "Traceback (most recent call last):" in found[0].details and found[0].where == "engine.log"


def test_a_log_without_errors_and_a_folder_without_logs_have_none(tmp_path: Path) -> None:
    assert errors_in_log_folder(tmp_path) == []
    logger = engine_log(tmp_path, "run.log")
    logger.warning("a warning with a traceback is still a warning", exc_info=ValueError("x"))
    for handler in logger.handlers:
        handler.close()
    assert errors_in_log_folder(tmp_path) == []


@pytest.mark.expect_errors(r"a bug in the engine process", r"(?s)^Traceback.*RuntimeError: its last words$")
def test_an_engine_processs_errors_reach_the_test_that_started_it(tmp_path: Path) -> None:
    logger = engine_log(tmp_path)
    logger.error("a bug in the engine process")
    for handler in logger.handlers:
        handler.close()
    stderr = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: its last words\n'
    report_log_folder(tmp_path, stderr)  # what running_engine does with its state folder at the end


@pytest.mark.expect_errors(r"asyncio: Task exception was never retrieved\n.*ParseError: a task.s input")
def test_asyncio_reports_count_when_the_exception_was_raised_in_polypilots_code() -> None:
    """A task of ours that raised and was never awaited is an error; asyncio's report of its
    own (the loop's teardown in a test, say) is not ours to fail a test on."""
    asyncio_log = logging.getLogger("asyncio")
    try:
        load_json("{", "a task's input")  # raises inside polypilot_tui
    except ParseError as exc:
        asyncio_log.error("Task exception was never retrieved", exc_info=exc)
    try:
        raise RuntimeError("raised outside polypilot")
    except RuntimeError as exc:
        asyncio_log.error("Exception in callback Future.set_result(None)", exc_info=exc)  # not counted
