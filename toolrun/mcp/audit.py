"""The audit log of a server: one JSON line per call — time, client, tool, arguments, outcome.

The same line goes to a file or a terminal (stderr): JSON whose every character a terminal
acts on (C0/C1 controls, line separators, bidi controls) is a ``\\u`` escape.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from toolrun.core.private_files import open_private
from toolrun.core.text import json_terminal_safe


class AuditLog:
    """Appends one JSON object per line to a file (or stderr); arguments arrive already redacted.

    A line that cannot be written (a full disk, a removed mount) makes the log ``unwritable``, with why, and
    says so once on stderr: the server then refuses calls (each refusal's own line tries the log again) rather
    than run them unaudited. The next line written makes it writable again.
    """

    # Refused sign-in tokens come from anyone who can reach the server: their lines are bounded (a burst, then
    # one a second), so that junk tokens cannot fill the disk and stop the calls of everyone else. What was
    # left out is counted on the next refusal's line (and every refusal in toolrun_mcp_auth_failures_total).
    REFUSAL_LINES_BURST = 60
    REFUSAL_LINES_PER_SECOND = 1.0

    def __init__(self, stream: TextIO | int, *, owned: bool = False, name: str = "stderr") -> None:
        self._stream = stream  # a file's descriptor: each line one os.write, nothing kept in a buffer
        self._cut = False  # a line of the file was cut short (its disk filled up): the next starts on a line of its own
        self._owned = owned
        self._lock = threading.Lock()
        self.name = name
        self.unwritable: str | None = None  # why the last line could not be written; None while lines are
        self.path: Path | None = None  # the file's, which ``reopen`` opens again
        self.clock = time.monotonic
        self._refusal_allowance = float(self.REFUSAL_LINES_BURST)
        self._refusal_checked = self.clock()
        self._refusals_left_out = 0

    @classmethod
    def open(cls, path: Path | None) -> AuditLog:
        """The log at ``path`` (appended to), or on stderr when ``path`` is None."""
        if path is None:
            return cls(sys.stderr)
        descriptor = open_private(path, os.O_WRONLY | os.O_APPEND)  # every argument and result: 0600
        log = cls(descriptor, owned=True, name=str(path))
        log.path = path
        return log

    def reopen(self) -> None:
        """Open the file at its path again, where the next lines go (SIGHUP, after logrotate moved the file
        away); a file that cannot be opened leaves the lines going where they went, and stderr says why."""
        if self.path is None or not isinstance(self._stream, int):
            return
        try:
            descriptor = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            _say(f"error: cannot reopen the audit log {self.name} ({exc.strerror or exc}): "
                 "its lines go on to the file it had open")
            return
        with self._lock:
            previous = self._stream
            # The same file opened again (a SIGHUP with nothing rotated): a line cut short there still ends it.
            self._stream, self._cut = descriptor, self._cut and _same_file(previous, descriptor)
        with contextlib.suppress(OSError):
            os.close(previous)
        _say(f"toolrun: reopened the audit log {self.name}")

    def record(self, *, client: str | None, tool: str, arguments: Any, is_error: bool, duration_ms: int,
               unknown: bool = False) -> None:
        """One line for one call; ``unknown``: the client named a tool it cannot see (nothing ran)."""
        entry = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                 "client": client, "tool": tool, "arguments": arguments, "is_error": is_error,
                 "duration_ms": duration_ms}
        if unknown:
            entry["unknown_tool"] = True
        self._write(entry)

    def refused(self, *, subject: str | None, issuer: str | None, reason: str) -> None:
        """One line for a bearer token refused at the door (HTTP 401): who it claimed to be, and why. Past the
        bound on such lines, none; the next written says how many were left out (``refusals_left_out``)."""
        with self._lock:
            now = self.clock()
            self._refusal_allowance = min(float(self.REFUSAL_LINES_BURST), self._refusal_allowance
                                          + max(0.0, now - self._refusal_checked) * self.REFUSAL_LINES_PER_SECOND)
            self._refusal_checked = now
            if self._refusal_allowance < 1:
                self._refusals_left_out += 1
                return
            self._refusal_allowance -= 1
            left_out, self._refusals_left_out = self._refusals_left_out, 0
        entry: dict[str, Any] = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                                 "client": None, "subject": subject, "issuer": issuer, "refused": reason}
        if left_out:
            entry["refusals_left_out"] = left_out
        self._write(entry)

    def _write(self, entry: dict[str, Any]) -> None:
        # Readable text (北京) stays; what a terminal would obey (a client's U+009B, U+202E) becomes \\u009b.
        # A client's lone surrogate ("\\ud800" in its JSON), which UTF-8 cannot hold, is written as sent: escaped.
        line = json_terminal_safe(json.dumps(entry, ensure_ascii=False, default=str))
        with self._lock:
            try:
                if isinstance(self._stream, int):
                    self._append(line)
                else:
                    self._stream.write(line + "\n")
                    self._stream.flush()
            except (OSError, ValueError) as exc:  # ValueError: a stream closed under us
                self._failed(exc)
                return
            if self.unwritable is not None:
                self.unwritable = None
                _say(f"toolrun: the audit log {self.name} is written again; calls run again")

    def _append(self, line: str) -> None:
        """One line onto the file. A buffered stream kept what a full disk refused and sent it glued to a later
        line: the first line written again, the one of a call that ran, was part of one no JSON reader reads."""
        data = ("\n" if self._cut else "").encode() + (line + "\n").encode("utf-8")
        written = 0
        try:
            while written < len(data):
                written += os.write(self._stream, data[written:])  # type: ignore[arg-type]
        finally:
            self._cut = 0 < written < len(data) or (self._cut and written == 0)

    def _failed(self, exc: Exception) -> None:
        why = getattr(exc, "strerror", None) or str(exc)
        if self.unwritable is None:
            _say(f"error: cannot write the audit log {self.name} ({why}): calls are refused until it can be "
                 "written — free space on its disk, or restart with --audit naming a file that can be")
        self.unwritable = why  # the stream may send what it kept of the line with a later one; the rest is lost

    def close(self) -> None:
        if isinstance(self._stream, int):
            with contextlib.suppress(OSError):
                os.close(self._stream)
        elif self._owned:
            with contextlib.suppress(OSError, ValueError):  # a last line that cannot be written: said already
                self._stream.close()


def _same_file(one: int, other: int) -> bool:
    try:
        return os.path.samestat(os.fstat(one), os.fstat(other))
    except OSError:
        return False


def _say(line: str) -> None:
    """A line for the server's operator on stderr, unless stderr is the log that fails."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
