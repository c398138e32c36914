"""Files that hold run data (arguments, results, answers): readable by their owner only.

A new file is created 0600 in one step (``os.open`` with the mode, no chmod afterwards and
no window in between); folders toolrun creates for it are 0700. What the user already has
keeps its mode: an existing file written again, a folder the user chose.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700
# as tempfile.mkstemp opens its file (O_NOFOLLOW and O_BINARY where the system has them)
_TEMPORARY_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def make_private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents 0700; folders that exist are left as they are."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_FOLDER_MODE)
        except FileExistsError:  # made meanwhile by another process: theirs to keep
            continue


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of ``path`` with ``O_CREAT``: a new file is 0600, an existing one keeps its mode."""
    return os.open(path, flags | os.O_CREAT, PRIVATE_FILE_MODE)


def create_private(path: Path) -> None:
    """Make sure ``path`` exists: a new empty file 0600, an existing one untouched."""
    os.close(open_private(path, os.O_WRONLY))


def mode_to_keep(path: Path) -> int:
    """The mode a file replacing ``path`` should have: that of ``path`` if it exists, else 0600."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return PRIVATE_FILE_MODE


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8): a new file is 0600, an existing one keeps its mode."""
    with open(open_private(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as stream:
        stream.write(text)


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file beside it, named after it, then a rename (a crash
    never leaves half a file). It keeps the mode of the file it replaces, 0600 when new. Raises OSError;
    the temporary file never stays behind."""
    handle, temporary = _new_temporary_file(path)
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), mode_to_keep(path))  # 0600 as created, or the mode of the file replaced
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _new_temporary_file(path: Path) -> tuple[int, Path]:
    """A new file beside ``path``, named after it, 0600, opened for writing: ``tempfile.mkstemp``'s rules (a
    random name, created exclusively, never through a link) without importing tempfile, random and shutil."""
    for _ in range(100):
        temporary = path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(temporary, _TEMPORARY_FLAGS, PRIVATE_FILE_MODE), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name beside {path}")
