"""``parse_diff`` on what real git prints: each case is made in a temp repository and diffed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polypilot_tui.domain.changeset import DiffLine, FileDiff, FileStatus, LineKind
from polypilot_tui.workspace.diff_parse import decode_git_path, parse_diff
from tests.support.git_repo import GitRepo
from tests.support.heap import tracked_in


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


def only(files: tuple[FileDiff, ...], path: str) -> FileDiff:
    [found] = [f for f in files if f.path == path]
    return found


def test_modified_file_has_numbered_lines(repo: GitRepo) -> None:
    repo.write("app.py", "".join(f"line {i}\n" for i in range(1, 11)))
    base = repo.commit()
    repo.write("app.py", "".join(f"line {i}\n" for i in range(1, 11)).replace("line 5\n", "five\nfive b\n"))
    changes = repo.changeset(base)
    [diff] = changes.files
    assert (diff.path, diff.status, diff.added, diff.removed) == ("app.py", FileStatus.MODIFIED, 2, 1)
    [hunk] = diff.hunks
    assert (hunk.old_start, hunk.new_start) == (2, 2)
    changed = [line for line in hunk.lines if line.kind is not LineKind.CONTEXT]
    assert changed == [
        DiffLine(LineKind.REMOVED, "line 5", 5, None),
        DiffLine(LineKind.ADDED, "five", None, 5),
        DiffLine(LineKind.ADDED, "five b", None, 6),
    ]
    assert hunk.lines[0] == DiffLine(LineKind.CONTEXT, "line 2", 2, 2)
    assert changes.base == base and changes.stats.short() == "1 file +2 \u22121"


def test_rename_with_an_edit_keeps_the_old_path(repo: GitRepo) -> None:
    body = "".join(f"def f{i}():\n    return {i}\n" for i in range(20))
    repo.write("old_name.py", body)
    base = repo.commit()
    (repo.root / "pkg").mkdir()
    repo.git("mv", "old_name.py", "pkg/new name.py")
    repo.write("pkg/new name.py", body.replace("return 3\n", "return 33\n"))
    [diff] = repo.changeset(base).files
    assert (diff.status, diff.path, diff.old_path) == (FileStatus.RENAMED, "pkg/new name.py", "old_name.py")
    assert (diff.added, diff.removed) == (1, 1)


def test_pure_rename_has_no_hunks(repo: GitRepo) -> None:
    repo.write("a.txt", "same\n" * 5)
    base = repo.commit()
    repo.git("mv", "a.txt", "b.txt")
    [diff] = repo.changeset(base).files
    assert (diff.status, diff.path, diff.old_path, diff.hunks) == (FileStatus.RENAMED, "b.txt", "a.txt", ())


def test_binary_file_is_flagged_without_hunks(repo: GitRepo) -> None:
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    base = repo.commit()
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(255, -1, -1)))
    repo.write("new.bin", b"\x00\x01\x02")
    repo.git("add", "new.bin")
    changes = repo.changeset(base)
    logo, new = only(changes.files, "logo.png"), only(changes.files, "new.bin")
    assert (logo.binary, logo.status, logo.hunks) == (True, FileStatus.MODIFIED, ())
    assert (new.binary, new.status) == (True, FileStatus.ADDED)


def test_no_newline_at_end_of_file_is_a_note(repo: GitRepo) -> None:
    repo.write("a.txt", "one\ntwo")
    base = repo.commit()
    repo.write("a.txt", "one\ntwo\nthree")
    [diff] = repo.changeset(base).files
    kinds = [(line.kind, line.text) for line in diff.hunks[0].lines]
    assert kinds == [
        (LineKind.CONTEXT, "one"),
        (LineKind.REMOVED, "two"),
        (LineKind.NOTE, "No newline at end of file"),
        (LineKind.ADDED, "two"),
        (LineKind.ADDED, "three"),
        (LineKind.NOTE, "No newline at end of file"),
    ]
    assert (diff.added, diff.removed) == (2, 1)


def test_non_utf8_name_and_content_never_crash(repo: GitRepo) -> None:
    repo.write("seed", "x\n")
    base = repo.commit()
    repo.write("café.txt".encode("latin-1"), b"caf\xe9 au lait\n")
    repo.write("naïve.txt", "ok\n")
    repo.git("add", "-A")
    changes = repo.changeset(base)
    latin, utf8 = only(changes.files, "café.txt"), only(changes.files, "naïve.txt")
    assert latin.path.encode("latin-1") == b"caf\xe9.txt"  # the real bytes of the name, back
    assert latin.hunks[0].lines[0] == DiffLine(LineKind.ADDED, "caf\ufffd au lait", None, 1)
    assert utf8.status is FileStatus.ADDED


def test_crlf_lines_lose_only_the_newline(repo: GitRepo) -> None:
    repo.write("win.txt", b"a\r\nb\r\n")
    base = repo.commit()
    repo.write("win.txt", b"a\r\nb changed\r\nlone\rcr\r\n")
    [diff] = repo.changeset(base).files
    added = [line.text for line in diff.hunks[0].lines if line.kind is LineKind.ADDED]
    assert added == ["b changed", "lone\rcr"]  # a carriage return inside a line is content


def test_deletion_counts_old_lines(repo: GitRepo) -> None:
    repo.write("gone.py", "a\nb\nc\n")
    base = repo.commit()
    (repo.root / "gone.py").unlink()
    [diff] = repo.changeset(base).files
    assert (diff.status, diff.path, diff.added, diff.removed) == (FileStatus.DELETED, "gone.py", 0, 3)
    assert [line.old_no for line in diff.hunks[0].lines] == [1, 2, 3]
    assert all(line.new_no is None for line in diff.hunks[0].lines)


def test_untracked_files_come_from_no_index_diffs(repo: GitRepo) -> None:
    repo.write("tracked.txt", "t\n")
    base = repo.commit()
    repo.write("notes/todo.md", "# todo\n- one\n")
    repo.write("empty.txt", "")
    changes = repo.changeset(base)
    todo = only(changes.files, "notes/todo.md")
    assert (todo.status, todo.added, [line.new_no for line in todo.hunks[0].lines]) == (
        FileStatus.UNTRACKED,
        2,
        [1, 2],
    )
    assert only(changes.files, "empty.txt").status is FileStatus.UNTRACKED
    # Without being told which files are untracked, they read as added.
    plain = parse_diff(repo.diff_text(base), base)
    assert only(plain.files, "notes/todo.md").status is FileStatus.ADDED


def test_a_file_past_the_limit_keeps_its_stats_only(repo: GitRepo) -> None:
    repo.write("small.txt", "s\n")
    base = repo.commit()
    repo.write("big.txt", "".join(f"{i}\n" for i in range(50)))
    repo.write("small.txt", "S\n")
    changes = repo.changeset(base, max_lines_per_file=40)
    big = only(changes.files, "big.txt")
    assert (big.omitted, big.added, big.hunks) == ("too large to show (50 lines)", 50, ())
    assert only(changes.files, "small.txt").hunks  # the limit is per file


def test_the_lines_of_a_parsed_diff_are_nothing_the_garbage_collector_walks(repo: GitRepo) -> None:
    """A diff is shown for long, and every full collection meanwhile walks what it tracks: the
    lines are kept as plain strings and numbers, so a changeset tracks as many objects for
    2,000 changed lines as for 2 (a DiffLine object a line was 20,000 for a 20,000-line diff)."""
    changesets = []
    for size in (2, 2000):
        repo.write("big.py", "".join(f"value_{i} = {i}\n" for i in range(size)))
        base = repo.commit()
        repo.write("big.py", "".join(f"value_{i} = {i} * 2\n" for i in range(size)))
        changesets.append(parse_diff(repo.diff_text(base), base))
    small, big = changesets
    assert len(big.files[0].hunks[0].lines) == 4000 and len(small.files[0].hunks[0].lines) == 4
    assert tracked_in(big) == tracked_in(small)


def test_empty_input_has_no_files() -> None:
    assert parse_diff("", "HEAD").files == ()
    assert parse_diff("\n\n", "HEAD").files == ()


def test_a_broken_file_becomes_an_entry_that_says_why(repo: GitRepo) -> None:
    repo.write("a.txt", "1\n2\n3\n")
    repo.write("b.txt", "x\n")
    base = repo.commit()
    repo.write("a.txt", "1\nTWO\n3\n")
    repo.write("b.txt", "y\n")
    text = repo.diff_text(base)
    # Cut a.txt's hunk short: unidiff refuses it; b.txt must still be read.
    broken = text.replace("+TWO\n", "", 1)
    changes = parse_diff(broken, base)
    a, b = only(changes.files, "a.txt"), only(changes.files, "b.txt")
    assert a.omitted.startswith("could not read the diff") and a.hunks == ()
    assert b.hunks and not b.omitted


def test_garbage_never_raises() -> None:
    for text in ("not a diff", "diff --git \n@@ nonsense", "@@ -1 +1 @@\n+x\n", "\x00\xff" * 10, "diff --git a/x"):
        parse_diff(text, "HEAD")  # must not raise


DIFFISH = st.lists(
    st.sampled_from(
        [
            "diff --git a/x.txt b/x.txt",
            "diff --git a/y b/y",
            "--- a/x.txt",
            "+++ b/x.txt",
            "--- /dev/null",
            "+++ /dev/null",
            "new file mode 100644",
            "deleted file mode 100644",
            "rename from x.txt",
            "rename to z.txt",
            "Binary files a/x and b/x differ",
            "GIT binary patch",
            "@@ -1,2 +1,2 @@",
            "@@ -1 +1 @@ def f():",
            "@@ -0,0 +1,3 @@",
            " context",
            "-removed",
            "+added",
            "\\ No newline at end of file",
            "",
        ]
    )
    | st.text(max_size=30),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(DIFFISH)
def test_any_diffish_text_is_read_or_said_unreadable_never_raised(lines: list[str]) -> None:
    """The one failure unidiff has (UnidiffParseError) is the one caught: an entry says so."""
    changes = parse_diff("\n".join(lines) + "\n", "HEAD")
    for file in changes.files:
        assert file.hunks or file.omitted or not (file.added or file.removed)


def test_git_quoted_names() -> None:
    assert decode_git_path('"caf\\303\\251.txt"') == "café.txt"
    assert decode_git_path('"tab\\there \\"q\\""') == 'tab\there "q"'
    assert decode_git_path("plain name.txt") == "plain name.txt"
