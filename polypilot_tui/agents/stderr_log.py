"""An agent's stderr: drained from a pipe, redacted, and kept on disk within a cap.

An unread stderr pipe hangs an ACP agent (reference/acp.md, trap 1), and a file handed to
the agent directly can neither be capped (a chatty agent wrote 2.8 GB in one turn) nor
redacted (a failing agent printed its API key). So the agent writes into a pipe, and a
thread of ours drains it as fast as it comes:

- complete lines are redacted and appended to ``agent-stderr.log`` (0600) until the file
  holds :data:`MAX_LOG_BYTES`; a log already that big is moved to ``agent-stderr.log.1``
  when the next agent process starts (two generations at most);
- past the cap the bytes are read and dropped, except the last :data:`TAIL_BYTES`, which are
  written after a marker line saying how much was dropped when the agent closes stderr;
- the last lines are kept in memory for the failure the user reads (and the details view).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import struct
import termios
import threading
from pathlib import Path

from polypilot_tui.infra.private import open_private
from polypilot_tui.infra.redact import CONTEXT_CHARS, REDACTOR

log = logging.getLogger(__name__)

MAX_LOG_BYTES = 2_000_000
TAIL_BYTES = 64_000
MAX_LINE_BYTES = 64_000
"""A longer line is written in pieces (each redacted as a fragment, so no piece leaks a key)."""
RECENT_CHARS = 4096


class AgentStderr:
    """The pipe an agent writes its stderr into, and the thread that keeps it."""

    def __init__(self, path: Path, max_bytes: int = MAX_LOG_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._rotate()
        self._out = open_private(self.path)
        self._size = os.fstat(self._out).st_size
        self._read_fd, self.write_fd = os.pipe()  # both close-on-exec; the agent gets write_fd as its fd 2
        self._recent = ""
        self._line = ""
        """The line being written in pieces, so far (its end: the next piece's context)."""
        self._lock = threading.Lock()
        self._dropped = 0
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        self._in_hand = 0
        """Bytes read from the pipe and not yet in the log (what :meth:`unread` adds)."""
        self.done = threading.Event()
        """Set when every writer closed the pipe and the log is complete."""
        self._thread = threading.Thread(target=self._pump, name=f"agent-stderr:{self.path.parent.name}", daemon=True)
        self._thread.start()

    def _rotate(self) -> None:
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_size >= self.max_bytes:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))

    def started(self) -> None:
        """The agent has its copy of the pipe: drop ours, so its end (and its children's) is EOF."""
        fd, self.write_fd = self.write_fd, -1
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        """Stop keeping stderr (safe before start; the thread ends at EOF on its own)."""
        self.started()

    def unread(self) -> int:
        """Bytes the agent wrote that are not in the log yet (still in the pipe, or being kept)."""
        if self.done.is_set():
            return 0
        try:
            waiting = struct.unpack("i", fcntl.ioctl(self._read_fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return 0
        return int(waiting) + self._in_hand

    def recent_lines(self, count: int = 20) -> tuple[str, ...]:
        """The last ``count`` non-blank lines, redacted (also those past the cap or a full disk)."""
        with self._lock:
            text = self._recent
        return tuple(line.rstrip() for line in text.splitlines() if line.strip())[-count:]

    # ---- the thread -----------------------------------------------------------------
    def _pump(self) -> None:
        pending = b""
        try:
            while chunk := self._read():
                if self._size >= self.max_bytes:
                    self._keep_tail(chunk)
                    continue
                pending += chunk
                cut = pending.rfind(b"\n") + 1
                if cut:
                    self._write(pending[:cut], whole=True)
                    pending = pending[cut:]
                while len(pending) > MAX_LINE_BYTES:
                    self._write(pending[:MAX_LINE_BYTES], whole=False)
                    pending = pending[MAX_LINE_BYTES:]
            if pending:
                self._write(pending, whole=False)
            if self._dropped:
                tail = b"".join(self._tail)[-TAIL_BYTES:]
                marker = (
                    f"\n[agent-stderr: the log reached its cap of {self.max_bytes:,} bytes; "
                    f"{self._dropped - len(tail):,} bytes were dropped; the last {len(tail):,} follow]\n"
                )
                self._write(marker.encode() + tail, whole=False, force=True)
        except OSError as exc:  # the pipe itself failed: nothing more can come
            log.warning("agent stderr log %s stopped: %s", self.path, exc)
        finally:
            os.close(self._read_fd)
            os.close(self._out)
            self.done.set()

    def _read(self) -> bytes:
        self._in_hand = 0  # the previous chunk is in the log
        chunk = os.read(self._read_fd, 65536)
        self._in_hand = len(chunk)
        return chunk

    def _keep_tail(self, chunk: bytes) -> None:
        self._dropped += len(chunk)
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail_size - len(self._tail[0]) >= TAIL_BYTES:
            self._tail_size -= len(self._tail.popleft())
        self._remember(chunk.decode("utf-8", "replace"))

    def _write(self, data: bytes, whole: bool, force: bool = False) -> None:
        text = data.decode("utf-8", "replace")  # invalid bytes are shown replaced, never dropped
        # A piece of a long line is read after the pieces before it: a secret cut in two is found.
        clean = REDACTOR.text(text) if whole and not self._line else REDACTOR.fragment(text, self._line)
        self._line = "" if whole else (self._line + text)[-CONTEXT_CHARS:]
        self._remember(clean)
        if self._size >= self.max_bytes and not force:
            return
        out = clean.encode("utf-8")
        try:
            os.write(self._out, out)
        except OSError as exc:  # full disk: keep draining the pipe anyway, or the agent would hang
            log.warning("agent stderr log %s cannot be written: %s", self.path, exc)
            self._size = self.max_bytes
            return
        self._size += len(out)

    def _remember(self, text: str) -> None:
        with self._lock:
            self._recent = REDACTOR.fragment((self._recent + text)[-RECENT_CHARS:])
