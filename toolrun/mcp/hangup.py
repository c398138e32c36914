"""SIGHUP while an HTTP server with an audit log file starts.

The server reopens its audit log at SIGHUP (logrotate's ``postrotate``), but that handler belongs to the
event loop, which runs only once the SDK has been imported and the catalog loaded: a second or more after
the log was opened. A SIGHUP in between ended the server (Python's default for it). From the moment the log
opens, ``HeldHangup`` keeps such a signal instead, and the loop reopens the log once it takes over.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class HeldHangup:
    """Within ``with HeldHangup(active)``: SIGHUP noted, not acted on, until ``taken`` (a signal handler may not
    touch the log: a line being written holds its lock). Inactive, nothing changes and nothing is ever taken."""

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.arrived = False
        self._previous: Any = None
        self._held = False

    def __enter__(self) -> HeldHangup:
        return self.hold()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def hold(self) -> HeldHangup:
        """Note SIGHUP from now on (only the main thread may set a handler; elsewhere nothing changes)."""
        if self.active and hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGHUP, self._note)
            self._held = True
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.arrived = True

    def taken(self) -> bool:
        """The loop's handler is in place: whether a SIGHUP came before it (then the log is reopened once)."""
        arrived, self.arrived = self.arrived, False
        return arrived

    def release(self) -> None:
        """The handler there before ``hold``, once serving is over (the loop's is gone with the loop)."""
        if self._held:
            signal.signal(signal.SIGHUP, self._previous if self._previous is not None else signal.SIG_DFL)
            self._held = False
