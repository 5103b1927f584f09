"""The fan-out groups file, ``state_dir/fan-out.jsonl``: one group a line, beside sessions.json.

Private (0600, never through a link), replaced whole and atomically at each change. A line
that cannot be read is skipped and named; the rest are kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from polypilot_tui.domain.fan_out import Group
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.engine.codec import decode, encode
from polypilot_tui.infra.private import atomic_write, private_dir, read_private

GROUPS_FILE = "fan-out.jsonl"
MAX_FILE_BYTES = 256 * 1024 * 1024
"""The most the file is read (groups carry their tasks and checks' output)."""
KEEP_GROUPS = 200
"""Groups kept at most (the oldest go first)."""


class GroupsFile:
    """The groups as saved in ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / GROUPS_FILE

    def load(self) -> tuple[list[Group], list[str]]:
        """The groups saved, and what could not be read (a sentence each)."""
        try:
            data = read_private(self.path, MAX_FILE_BYTES)
        except FileNotFoundError:
            return [], []
        except (OSError, ParseError) as exc:
            return [], [f"{self.path} cannot be read: {exc}"]
        groups: list[Group] = []
        problems: list[str] = []
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                groups.append(decode(Group, load_json(line, str(self.path), first_line=number), f"line {number}"))
            except ValueError as exc:
                problems.append(f"{self.path}: line {number} skipped: {exc}")
        return groups, problems

    def save(self, groups: Iterable[Group]) -> None:
        """Replace the file with ``groups`` (the newest :data:`KEEP_GROUPS`); OSError (NotPrivate
        among them: a folder others may write) when it cannot be."""
        self.save_lines((group.created_wall, line_of(group)) for group in groups)

    def save_lines(self, lines: Iterable[tuple[float, str]]) -> None:
        """:meth:`save` of groups already made lines (:func:`line_of`), each with its creation time."""
        kept = sorted(lines, key=lambda line: line[0])[-KEEP_GROUPS:]
        text = "".join(line + "\n" for _, line in kept)
        private_dir(self.path.parent)  # the engine's state folder: made, or checked, as every other
        atomic_write(self.path, text.encode())


def line_of(group: Group) -> str:
    """One group as its line in the file (redact it first: a check may print a key)."""
    return dump_json(encode(group))
