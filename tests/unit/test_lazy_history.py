"""History (domain/history.py): rows saved before a restart are read only when looked at,
and the whole behaves exactly as a list of every row would."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.history import PAGE, UNREADABLE, History
from polypilot_tui.domain.session import Session
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.read_ahead import RETRY_AFTER, START_AFTER, ReadAhead


def rows(count: int, tag: str = "saved") -> list[ChatItem]:
    return [ChatItem(ItemKind.SYSTEM, f"{tag} {i}", float(i)) for i in range(count)]


class Disk:
    """Saved rows, counting what is read; ``down`` makes every read fail."""

    def __init__(self, saved: list[ChatItem]) -> None:
        self.saved = saved
        self.read_rows: list[int] = []
        self.down = False
        self.attempts = 0

    def read(self, start: int, stop: int) -> list[ChatItem] | None:
        self.attempts += 1
        if self.down:
            return None
        self.read_rows += range(start, stop)
        return self.saved[start:stop]


def lazy(saved: int, held: int = 0) -> tuple[History, Disk, list[ChatItem]]:
    disk = Disk(rows(saved))
    history = History(rows(held, "new"), saved=saved, read=disk.read)
    return history, disk, disk.saved + rows(held, "new")


operations = st.lists(
    st.one_of(
        st.tuples(st.just("get"), st.integers(-700, 700)),
        st.tuples(st.just("slice"), st.integers(-700, 700), st.integers(-700, 700)),
        st.tuples(st.just("set"), st.integers(-700, 700)),
        st.tuples(st.just("append"), st.just(0)),
        st.tuples(st.just("newest"), st.integers(0, 50)),
        st.tuples(st.just("more"), st.just(0)),
        st.tuples(st.just("all"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(saved=st.integers(0, 600), held=st.integers(0, 5), ops=operations)
def test_a_lazy_history_behaves_as_the_list_of_all_its_rows(saved: int, held: int, ops: list[tuple]) -> None:
    history, disk, model = lazy(saved, held)
    for op, *args in ops:
        if op == "get":
            try:
                expected = model[args[0]]
            except IndexError:
                with pytest.raises(IndexError):
                    history[args[0]]
            else:
                assert history[args[0]] == expected
        elif op == "slice":
            assert history[args[0] : args[1]] == model[args[0] : args[1]]
        elif op == "set":
            if -len(model) <= args[0] < len(model):
                item = replace(model[args[0]], text="changed")
                history[args[0]] = model[args[0]] = item
        elif op == "append":
            item = ChatItem(ItemKind.USER, f"appended {len(model)}", 0.0)
            history.append(item)
            model.append(item)
        elif op == "newest":
            taken = [item for item, _ in zip(reversed(history), range(args[0]), strict=False)]
            assert taken == list(reversed(model))[: args[0]]
        elif op == "more":
            unread = history.unread
            assert history.read_more() is (unread > 0)
        else:
            assert list(history) == model
        assert len(history) == len(model)
        assert sorted(disk.read_rows) == sorted(set(disk.read_rows)), "a saved row was read twice"
    assert history == model and model == history and history == tuple(model)


def test_the_newest_rows_read_one_page_not_the_whole_history() -> None:
    history, disk, _ = lazy(5000)
    assert history.unread == 5000 and disk.read_rows == []
    assert history[-20:] == rows(5000)[-20:]
    assert len(disk.read_rows) == PAGE and history.unread == 5000 - PAGE
    assert history[-1].text == "saved 4999" and len(disk.read_rows) == PAGE  # held: not read again
    assert history[100].text == "saved 100"  # far back: everything from there on
    assert disk.read_rows[-1] == 5000 - PAGE - 1 and history.unread == 100


def test_appended_rows_take_the_indexes_after_the_saved_ones_without_reading_them() -> None:
    history, disk, _ = lazy(300)
    history.append(ChatItem(ItemKind.USER, "new", 0.0))
    assert len(history) == 301 and history[300].text == "new" and disk.read_rows == []
    assert [index for index, _ in history.held()] == [300]


def test_unreadable_rows_show_a_placeholder_and_are_read_when_tried_again() -> None:
    history, disk, model = lazy(50)
    disk.down = True
    assert history[-1] is UNREADABLE and history.unread == 50 and history.broken
    attempts = disk.attempts
    assert list(history) == [UNREADABLE] * 50 and history[3] is UNREADABLE and history[-5:] == [UNREADABLE] * 5
    assert disk.attempts == attempts  # broken: looks do not touch the disk again, row by row
    with pytest.raises(IndexError, match="could not be read"):
        history[3] = ChatItem(ItemKind.USER, "no", 0.0)
    assert history.read_more() is False and history.read_all() is False  # explicit tries do
    assert disk.attempts == attempts + 2
    disk.down = False  # the disk is back: nothing was kept of the failure
    assert history[-1] is UNREADABLE  # until something tries again
    assert history.read_more() is True and not history.broken
    assert list(history) == model and history.unread == 0


def test_a_short_read_is_not_taken_for_the_rows() -> None:
    """A database that lost rows (replaced underneath) must not shift every later index."""
    disk = Disk(rows(40))
    history = History(saved=50, read=disk.read)  # 50 saved, only 40 there now
    assert history[-1] is UNREADABLE and len(history) == 50 and history.unread == 50


def test_a_session_given_a_list_holds_it_as_a_history() -> None:
    session = Session("s", "n", "demo", history=rows(3))
    assert isinstance(session.history, History) and session.history == rows(3)
    assert session.add_item(ItemKind.USER, "next", 0.0) == 3


def test_settling_open_tool_rows_reads_nothing_from_disk() -> None:
    """A restore reads every session with open tool rows at once; the others stay on disk."""
    disk = Disk(rows(500))
    session = Session("s", "n", "demo", history=History(saved=500, read=disk.read))
    tool = session.add_item(ItemKind.TOOL, "", 0.0, tool_call_id="c1", tool_name="bash", tool_status="running")
    session.settle_open_tool_rows(0.0)
    assert session.history[tool].tool_status == "interrupted" and disk.read_rows == []


async def test_read_ahead_reads_a_page_per_loop_turn_after_its_delay_and_retries_a_failing_disk(
    fake_clock: FakeClock,
) -> None:
    """Virtual time: nothing before START_AFTER, then page by page (newest first) until every
    session is in memory. A failed read ends the round (one try per RETRY_AFTER, not one per
    session) and sends that session to the back, so the next round reads the others."""
    settings = Settings.read(None, record=False)
    manager = SessionManager(settings, load_agents(None), fake_clock)
    disks = {"bad": Disk(rows(10)), "a": Disk(rows(3 * PAGE)), "b": Disk(rows(10))}
    for sid, disk in disks.items():
        manager.adopt(Session(sid, sid, "demo", history=History(saved=len(disk.saved), read=disk.read)))
    disks["bad"].down = True
    ahead = ReadAhead(manager)
    ahead.start(["bad", "a", "b"])
    await fake_clock.advance(START_AFTER - 0.01)
    assert all(not disk.attempts for disk in disks.values())
    await fake_clock.advance(0.01)
    assert [disk.attempts for disk in disks.values()] == [1, 0, 0]  # the round ended there
    await fake_clock.advance(RETRY_AFTER)
    assert [manager.session(sid).history.unread for sid in disks] == [10, 0, 0]  # page by page, per loop turn
    assert disks["a"].read_rows[:PAGE] == list(range(2 * PAGE, 3 * PAGE))  # the newest first
    assert disks["bad"].attempts == 2 and not ahead.done
    disks["bad"].down = False
    await fake_clock.advance(RETRY_AFTER)
    assert manager.session("bad").history.unread == 0 and ahead.done
    assert list(manager.history("bad")) == disks["bad"].saved and fake_clock.next_deadline() is None


async def test_a_session_brought_back_with_unread_rows_is_read_again(fake_clock: FakeClock) -> None:
    """An undo brings back a session whose rows could not be read at its close: the read-ahead,
    done by then, takes it up again."""
    settings = Settings.read(None, record=False)
    manager = SessionManager(settings, load_agents(None), fake_clock)
    ahead = ReadAhead(manager)
    ahead.start([])
    await fake_clock.advance(START_AFTER)
    disk = Disk(rows(10))
    manager.adopt(Session("back", "back", "demo", history=History(saved=10, read=disk.read)), restored=False)
    ahead.add("back")
    ahead.add("nobody")  # closed again meanwhile: nothing to do
    await fake_clock.advance(0)
    assert manager.session("back").history.unread == 0 and ahead.done
