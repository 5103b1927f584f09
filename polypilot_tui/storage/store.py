"""The stores of one state folder: the registry and the history database, one writer, and
the write-back of what an earlier run could not save."""

from __future__ import annotations

import logging
from pathlib import Path

from polypilot_tui.domain.safe_json import ParseError
from polypilot_tui.infra.private import private_dir
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB, WriteResult
from polypilot_tui.storage.registry import Registry, SessionRecord
from polypilot_tui.storage.saved_rows import SavedRows
from polypilot_tui.storage.spill import Spill, find_spills, read_spill

log = logging.getLogger(__name__)


class Store:
    """The registry and the history database of one state folder (0700).

    ``owner`` is the writer's token (one per app run): the history database refuses the
    rows of any other writer once a newer one has claimed it.
    """

    def __init__(self, state_dir: Path, owner: str = "") -> None:
        self.state_dir = Path(state_dir)
        self.problem = ""
        """Why the folder itself could not be created ("" when it is there)."""
        try:
            private_dir(self.state_dir)
        except OSError as exc:  # sessions still run; every write is retried and the user told
            log.error("cannot create the state directory %s: %s", self.state_dir, exc)
            self.problem = f"the state folder {self.state_dir} cannot be created ({exc.strerror or exc})"
        self.registry = Registry(self.state_dir)
        self.history = HistoryDB(self.state_dir / HISTORY_FILE, owner=owner)
        self.saved = SavedRows(self.state_dir / HISTORY_FILE)
        """Saved rows read on demand, on the loop (the writer has its own connection and thread)."""

    def close(self) -> None:
        self.history.close()
        self.saved.close()

    def recover_spills(self) -> list[str]:
        """Write back what earlier runs could not save at quit; one sentence per spill file."""
        messages = []
        for path in find_spills(self.state_dir):
            try:
                spill = read_spill(path)
            except (OSError, ParseError) as exc:
                messages.append(f"Unsaved data of an earlier run could not be read ({exc}); it was left in {path}.")
                continue
            if self._apply(spill):
                path.unlink(missing_ok=True)
                what = f"{spill.row_count()} chat rows" + (
                    " and the session list" if spill.sessions is not None else ""
                )
                messages.append(
                    f"{what} that could not be saved when polypilot last quit were written back "
                    f"to {self.state_dir} from {path}."
                )
            else:
                why = self.history.last_error or "the state folder cannot be written"
                messages.append(
                    f"Unsaved data of an earlier run is still in {path} ({why}); it is written back at a later start."
                )
        return messages

    def _apply(self, spill: Spill) -> bool:
        if spill.sessions is not None:
            current = self.registry.load(repair=False)
            if current.problem == "" and (current.saved_at is None or current.saved_at <= spill.saved_at):
                records = [r for r in map(SessionRecord.from_json, spill.sessions) if r is not None]
                try:
                    self.registry.save(records, spill.saved_at)
                except OSError as exc:
                    self.history.last_error = exc.strerror or str(exc)
                    return False
        rows = list(spill.rows)
        for sid, items in spill.appended.items():
            start = self.history.next_index(sid)
            if start is None:
                return False
            rows += [(sid, start + i, item) for i, item in enumerate(items)]
        return self.history.write(rows, spill.drafts, spill.deletions) is WriteResult.OK
