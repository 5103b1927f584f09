"""The drafted commit message: the session's first real request, whole words, then the files."""

from __future__ import annotations

from polypilot_tui.domain.changeset import FileStatus, ReviewComment, Side, is_review_prompt, review_prompt
from polypilot_tui.domain.commit_message import (
    SUBJECT_LIMIT,
    changes_subject,
    draft_message,
    first_request,
    subject_of,
)

REVIEW = review_prompt([ReviewComment("a.py", 1, "rename it", Side.NEW), ReviewComment("b.py", 2, "why?", Side.OLD)])


def test_a_review_prompt_is_known_and_never_the_request() -> None:
    assert is_review_prompt(REVIEW)
    assert not is_review_prompt("Review of your changes: looks good to me, ship it")
    assert first_request([REVIEW, "  \n", "\x1b[31madd a cache\x1b[0m", "later"]) == "add a cache"
    assert first_request([REVIEW]) == ""


def test_the_subject_is_the_first_sentence_in_whole_words_never_with_an_ellipsis() -> None:
    assert subject_of("fix the login bug") == "Fix the login bug"
    assert subject_of("Add a cache. Then measure it.\nMore lines") == "Add a cache"
    assert subject_of("\n\nwhy is this slow? find out") == "Why is this slow?"
    long = "refactor the session manager so that every collaborator shares one context object and nothing else"
    subject = subject_of(long)
    assert len(subject) <= SUBJECT_LIMIT and long.startswith(subject[:1].lower() + subject[1:])
    assert long[len(subject)] == " " and "…" not in subject  # ends where a word ends
    assert subject_of("x" * 100) == ""  # one word longer than a subject: nothing cut from it


def test_without_a_request_the_subject_says_what_changed() -> None:
    assert changes_subject([(FileStatus.ADDED, "notes.md")]) == "Add notes.md"
    assert changes_subject([(FileStatus.MODIFIED, "a.py"), (FileStatus.MODIFIED, "b.py")]) == "Update a.py and b.py"
    many = [(FileStatus.MODIFIED, f"src/pkg/module_number_{n}.py") for n in range(6)]
    assert changes_subject(many) == "Update 6 files in src/pkg/"
    mixed = [(FileStatus.DELETED, "old.py"), (FileStatus.UNTRACKED, "new.py")]
    assert changes_subject(mixed) == "Change old.py and new.py"
    assert changes_subject([]) == "Changes from polypilot"


def test_the_whole_request_and_the_files_are_in_the_body() -> None:
    request = "Make the cache expire after an hour. Keep the old default for tests."
    files = [(FileStatus.MODIFIED, "cache.py"), (FileStatus.UNTRACKED, "test_cache.py")]
    assert draft_message([REVIEW, request], files) == (
        f"Make the cache expire after an hour\n\n{request}\n\n- cache.py\n- test_cache.py"
    )
    assert draft_message(["add a cache"], files[:1]) == "Add a cache\n\n- cache.py"  # said whole already
    assert draft_message([REVIEW], files[:1]) == "Update cache.py\n\n- cache.py"
    many = [(FileStatus.ADDED, f"f{n}.txt") for n in range(25)]
    assert draft_message(["add files"], many).endswith("- f19.txt\n- and 5 more")


def test_a_huge_request_is_kept_to_a_bound_that_says_so() -> None:
    request = "word " * 2000
    body = draft_message([request], []).split("\n\n", 1)[1]
    assert len(body) < 2100 and body.endswith("more characters of the request]")
    assert "wor [" not in body  # cut after a whole word
