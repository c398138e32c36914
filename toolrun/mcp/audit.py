"""The audit log of a server: one JSON line per call — time, client, tool, arguments, outcome.

The same line goes to a file or a terminal (stderr): JSON whose every character a terminal
acts on (C0/C1 controls, line separators, bidi controls) is a ``\\u`` escape.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from toolrun.core.private_files import open_private
from toolrun.core.text import json_terminal_safe


class AuditLog:
    """Appends one JSON object per line to a file (or stderr); arguments arrive already redacted."""

    def __init__(self, stream: TextIO, *, owned: bool = False) -> None:
        self._stream = stream
        self._owned = owned
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | None) -> AuditLog:
        """The log at ``path`` (appended to), or on stderr when ``path`` is None."""
        if path is None:
            return cls(sys.stderr)
        descriptor = open_private(path, os.O_WRONLY | os.O_APPEND)  # every argument and result: 0600
        return cls(open(descriptor, "a", encoding="utf-8", buffering=1), owned=True)

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
        """One line for a bearer token refused at the door (HTTP 401): who it claimed to be, and why."""
        entry = {"time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                 "client": None, "subject": subject, "issuer": issuer, "refused": reason}
        self._write(entry)

    def _write(self, entry: dict[str, Any]) -> None:
        # Readable text (北京) stays; what a terminal would obey (a client's U+009B, U+202E) becomes \\u009b.
        line = json_terminal_safe(json.dumps(entry, ensure_ascii=False, default=str))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def close(self) -> None:
        if self._owned:
            self._stream.close()
