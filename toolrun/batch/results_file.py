"""The results file: JSON Lines, one line per finished run, and what ``--resume`` reads back.

Each line goes out in one ``write`` to a file opened for appending, so a crash or a
SIGKILL leaves whole lines and, at worst, one unterminated tail, which the reader drops.
A run is known by its key (row content, model, repeat), never by its line number.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from toolrun.core.errors import Problem, UserError
from toolrun.core.private_files import open_private, replace_file
from toolrun.core.text import surrogates_escaped


def read_results(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a results file; an unterminated or unreadable last line is dropped."""
    if not path.exists():
        return []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(Problem(path, None, f"cannot read the results file ({exc.strerror or exc})",
                                "check the path given with --out")) from None
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or the half line of a crash
    results: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise UserError(Problem(path, number, "this line of the results file is not JSON",
                                    "resume with the file a batch wrote, or start afresh with another --out")) from None
        if not isinstance(value, dict) or "key" not in value:
            raise UserError(Problem(path, number, "this line is not a batch result (it has no \"key\")",
                                    "resume with the file a batch wrote, or start afresh with another --out"))
        results.append(value)
    return results


class ResultsFile:
    """Appends result lines, each in one write; ``keep`` rewrites the file first (for a resume)."""

    def __init__(self, path: Path, *, keep: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        try:
            if keep is not None:
                self._rewrite(keep)
            self._fd = open_private(path, os.O_WRONLY | os.O_APPEND | (0 if keep is not None else os.O_TRUNC))
        except OSError as exc:
            raise UserError(Problem(path, None, f"--out: cannot write this file ({exc.strerror or exc})",
                                    "choose a path in a folder you can write to")) from None

    def _rewrite(self, lines: list[dict[str, Any]]) -> None:
        # a new file renamed over the old, with its mode: a crash during the rewrite keeps the old one whole
        replace_file(self.path, b"".join(encode(line) for line in lines))

    def append(self, line: dict[str, Any]) -> None:
        """Write one result line (one ``write`` call: never half a line in the file)."""
        data = encode(line)
        written = os.write(self._fd, data)
        while written < len(data):  # a short write (a full disk) still ends its line, or raises
            written += os.write(self._fd, data[written:])

    def close(self) -> None:
        os.close(self._fd)


def encode(line: dict[str, Any]) -> bytes:
    """One result as a line of JSON Lines (Chinese stays Chinese)."""
    # a lone surrogate (a byte a tool could not decode, a model's broken escape) as its \\u escape: UTF-8 holds that
    return (surrogates_escaped(json.dumps(line, ensure_ascii=False, default=str)) + "\n").encode("utf-8")
