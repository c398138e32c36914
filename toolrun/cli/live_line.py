"""The live elapsed-time line: which calls have been running longer than a second, redrawn until they end.

On a terminal only; erased before any other line is printed and when the last call ends,
so it never stays in the scrollback or in a pipe. Paused while an approval prompt is up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from toolrun.core.text import terminal_safe

SHOW_AFTER_SECONDS = 1.0  # a call this quick never gets a line
TICK_SECONDS = 0.2
_ERASE = "\r\x1b[K"


class LiveElapsed:
    """Draws ``… get_report 3.4 s`` on ``stream`` for the calls running longer than a second."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.RLock()  # the ticker and the display's own lines write to one stream
        self._running: dict[str, tuple[str, float]] = {}  # call id -> (tool name, start)
        self._drawn = False
        self._paused = 0
        self._thread: threading.Thread | None = None

    def started(self, call_id: str, name: str) -> None:
        with self.lock:
            self._running[call_id] = (name, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(target=self._tick, name="toolrun-live-line", daemon=True)
                self._thread.start()

    def ended(self, call_id: str) -> None:
        with self.lock:
            self._running.pop(call_id, None)
            if not self._running:
                self.erase()

    def stop(self) -> None:
        """Forget every running call (the run was interrupted: their ends will never come) and erase the line."""
        with self.lock:
            self._running.clear()
            self.erase()

    def erase(self) -> None:
        """Take the line away (before another line is printed, or when nothing runs)."""
        with self.lock:
            if self._drawn:
                self.stream.write(_ERASE)
                self.stream.flush()
                self._drawn = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No line while a question is on the terminal."""
        with self.lock:
            self._paused += 1
            self.erase()
        try:
            yield
        finally:
            with self.lock:
                self._paused -= 1

    def line(self, now: float) -> str | None:
        """The text to draw, or None when no call has run a second yet."""
        slow = [(name, now - start) for name, start in self._running.values() if now - start >= SHOW_AFTER_SECONDS]
        if not slow:
            return None
        return "… " + ", ".join(f"{terminal_safe(name)} {elapsed:.1f} s" for name, elapsed in slow)

    def _tick(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            with self.lock:
                if not self._running:
                    self._thread = None  # the next slow call starts a ticker of its own
                    return
                text = None if self._paused else self.line(time.monotonic())
                if text is None:
                    continue
                self.stream.write(_ERASE + text)
                self.stream.flush()
                self._drawn = True
