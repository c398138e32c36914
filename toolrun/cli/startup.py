"""What the ``toolrun`` script does before it imports a command: compiled code is kept in
toolrun's cache folder, so a short command does not spend most of its time compiling.

Two kinds of code are compiled again by every Python process unless something keeps them:

- **Modules**, when Python may not write bytecode beside the sources
  (``PYTHONDONTWRITEBYTECODE``, common in containers): with an editable install every
  command would compile each module it imports. Their bytecode goes to ``bytecode/`` in
  the cache folder (Python's own ``sys.pycache_prefix``; ``toolrun.core.cache_folder.keep_bytecode``,
  which the script calls before it imports this module).
- **Dataclass methods**: ``@dataclass`` writes ``__init__``, ``__repr__``, ``__eq__`` ... as
  source text and compiles it with ``exec`` when the class is made; for the texts a recipe
  run compiles (about 150 when this was measured, about 220 now) that was 25-35 ms of CPU,
  7-12 % of the whole command (measured with ``benchmarks/startup.py --baseline`` against a
  checkout without it). The compiled code of each text is kept in
  ``dataclass-code-<command>-<python>-<bytecode magic>-<format>.marshal``: the same text gives the same code
  object, so the classes come out exactly as before, only without compiling them again.

Both are the same kind of file as Python's own ``.pyc`` (marshalled code objects), in a
folder only the user writes. ``TOOLRUN_CACHE_DIR=off`` turns both off; a
``PYTHONPYCACHEPREFIX`` of the user's own is left as it is.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import marshal
import sys
from binascii import crc32  # already imported on the way to asyncio (ssl, base64)
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
from typing import Any

from toolrun.cli.command_table import COMMAND_GROUPS, COMMANDS, command_words
from toolrun.core.cache_folder import cache_directory

# 2: the file starts with the CRC-32 of the rest. 1 (no number in the name) had a BLAKE2b digest,
# which cost 1.3 % of a replayed recipe: the reference C code hashing the whole 340 KB file.
FILE_FORMAT = 2
CHECK_SIZE = 4
MAX_KEPT_CODE = 4096  # texts kept; past this (many toolrun versions used) the file starts afresh


def keep_compiled_code(args: list[str] | None = None) -> None:
    """Keep dataclass code in the cache folder (see the module's docstring); ``args``, the command line,
    names its file (see ``command_name``). Module bytecode is ``keep_bytecode``'s, called before this module loads."""
    folder = cache_directory()
    if folder is None:
        return
    # code objects are read back only by the Python that wrote them: its bytecode magic names the file
    python = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}"
    command = command_name(args or [])
    # what earlier toolruns wrote: one file shared by all commands, then one a command without the format
    replaces = (folder / f"dataclass-code-{python}.marshal", folder / f"dataclass-code-{command}-{python}.marshal")
    DataclassCode(folder / f"dataclass-code-{command}-{python}-{FILE_FORMAT}.marshal", replaces).install()


def command_name(args: list[str]) -> str:
    """The command ``args`` run (``recipe``, ``tools`` ...), naming its own dataclass-code file: a replayed
    recipe uses about 220 of the texts, and with every command's code in one file it read and unmarshalled
    850 (2.3 times the bytes, 0.5-1.2 ms) for them. Anything else (no command, a mistyped one) is "other"."""
    first = next(command_words(args), "")
    return first if first in COMMANDS or first in COMMAND_GROUPS else "other"


class DataclassCode:
    """The code ``dataclasses`` compiles, kept by source text in one file."""

    def __init__(self, path: Path, replaces: tuple[Path, ...] = ()) -> None:
        self.path = path
        # files of an earlier format, removed when this file is first made (not at each write after:
        # an earlier toolrun still in use writes its own again once, and keeps it)
        self.replaces = replaces
        self.existed = False
        self.codes: dict[str, CodeType] = {}
        self.added = False

    def install(self) -> None:
        """Load the kept code and stand in for ``exec`` inside the ``dataclasses`` module only."""
        if "exec" in vars(dataclasses):
            return  # already installed (or dataclasses has an exec of its own): leave it
        loaded = self._read()
        if isinstance(loaded, dict) and len(loaded) <= MAX_KEPT_CODE:
            self.codes = {text: code for text, code in loaded.items()
                          if isinstance(text, str) and isinstance(code, CodeType)}
        dataclasses.exec = self.exec  # type: ignore[attr-defined]  # a module global shadows the builtin
        atexit.register(self.save)

    def _read(self) -> Any:
        """The kept code, or None: a file whose check does not match is never unmarshalled (a
        damaged code object can crash the interpreter), and one that does not read is ignored.
        The check is against damage (a torn or altered file), as for a ``.pyc``, which has none:
        the folder is the user's own."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        self.existed = True
        check, payload = data[:CHECK_SIZE], data[CHECK_SIZE:]
        if len(check) != CHECK_SIZE or _check_of(payload) != check:
            return None
        try:
            return marshal.loads(payload)
        except Exception:  # written by something else after all: compile as usual
            return None

    def exec(self, source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
        """``exec`` as ``dataclasses`` calls it, compiling each source text once."""
        if not isinstance(source, str):
            builtins.exec(source, globals, locals)
            return
        code = self.codes.get(source)
        if code is None:
            # As exec(text) in dataclasses compiles it: that module has no __future__ imports.
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.codes[source] = code
            self.added = True
        builtins.exec(code, globals, locals)

    def save(self) -> None:
        """Write the file if this process compiled new code; a cache that cannot be written is skipped."""
        if not self.added:
            return
        from toolrun.core.private_files import replace_file  # start-up: only a process that compiled new code writes

        codes = self.codes if len(self.codes) <= MAX_KEPT_CODE else {}
        try:
            payload = marshal.dumps(codes)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(self.path, _check_of(payload) + payload)
        except (OSError, ValueError):
            return
        for earlier in () if self.existed else self.replaces:
            with contextlib.suppress(OSError):
                earlier.unlink(missing_ok=True)


def _check_of(payload: bytes) -> bytes:
    return crc32(payload).to_bytes(CHECK_SIZE, "big")
