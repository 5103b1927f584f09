"""bounded_lines: a file's lines with a bound, on real files; a line too long is cut and the
rest of it dropped, and the lines after it are read as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.infra.lines import bounded_lines


def lines_of(tmp_path: Path, data: bytes, limit: int) -> list[tuple[bytes, bool]]:
    path = tmp_path / "lines"
    path.write_bytes(data)
    with path.open("rb") as file:
        return list(bounded_lines(file, limit))


def test_lines_within_the_bound_are_whole(tmp_path: Path) -> None:
    assert lines_of(tmp_path, b"one\ntwo\nthree", 8) == [(b"one\n", False), (b"two\n", False), (b"three", False)]


@pytest.mark.parametrize("size", [5, 6, 7, 20, 3_000_000])
def test_a_line_too_long_is_cut_and_the_next_kept(tmp_path: Path, size: int) -> None:
    assert lines_of(tmp_path, b"x" * size + b"\nnext\n", 5) == [(b"xxxxx", True), (b"next\n", False)]


def test_a_line_filling_the_bound_with_its_newline_is_whole(tmp_path: Path) -> None:
    """The line after one of exactly ``limit`` bytes (its newline the last) is not skipped."""
    assert lines_of(tmp_path, b"abcd\nnext\n", 5) == [(b"abcd\n", False), (b"next\n", False)]


def test_a_last_line_of_the_bound_without_newline_is_whole(tmp_path: Path) -> None:
    assert lines_of(tmp_path, b"abcde", 5) == [(b"abcde", False)]


def test_an_empty_file_has_no_lines(tmp_path: Path) -> None:
    assert lines_of(tmp_path, b"", 5) == []
