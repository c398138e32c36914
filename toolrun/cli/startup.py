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
  ``dataclass-code-<command>-<python>-<bytecode magic>.marshal``: the same text gives the same code object, so the
  classes come out exactly as before, only without compiling them again.

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
import os
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
from typing import Any

from toolrun.cli.command_table import COMMAND_GROUPS, COMMANDS, command_words
from toolrun.core.cache_folder import cache_directory
from toolrun.core.digests import blake2b

DIGEST_SIZE = 32  # the file starts with the BLAKE2b digest of the rest
MAX_KEPT_CODE = 4096  # texts kept; past this (many toolrun versions used) the file starts afresh


def keep_compiled_code(args: list[str] | None = None) -> None:
    """Keep dataclass code in the cache folder (see the module's docstring); ``args``, the command line,
    names its file (see ``command_name``). Module bytecode is ``keep_bytecode``'s, called before this module loads."""
    folder = cache_directory()
    if folder is None:
        return
    # code objects are read back only by the Python that wrote them: its bytecode magic names the file
    name = f"dataclass-code-{command_name(args or [])}-{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}.marshal"
    DataclassCode(folder / name).install()


def command_name(args: list[str]) -> str:
    """The command ``args`` run (``recipe``, ``tools`` ...), naming its own dataclass-code file: a replayed
    recipe uses about 220 of the texts, and with every command's code in one file it read and unmarshalled
    850 (2.3 times the bytes, 0.5-1.2 ms) for them. Anything else (no command, a mistyped one) is "other"."""
    first = next(command_words(args), "")
    return first if first in COMMANDS or first in COMMAND_GROUPS else "other"


class DataclassCode:
    """The code ``dataclasses`` compiles, kept by source text in one file."""

    def __init__(self, path: Path) -> None:
        self.path = path
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
        """The kept code, or None: a file whose digest does not match is never unmarshalled (a
        damaged code object can crash the interpreter), and one that does not read is ignored."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        digest, payload = data[:DIGEST_SIZE], data[DIGEST_SIZE:]
        if len(digest) != DIGEST_SIZE or blake2b(payload, digest_size=DIGEST_SIZE).digest() != digest:
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
        import tempfile  # start-up: only a process that compiled new code writes, and tempfile costs random and shutil

        codes = self.codes if len(self.codes) <= MAX_KEPT_CODE else {}
        try:
            payload = marshal.dumps(codes)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".dataclass-code-", suffix=".tmp")
        except (OSError, ValueError):
            return
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(blake2b(payload, digest_size=DIGEST_SIZE).digest() + payload)
            os.replace(temporary, self.path)
            # the one file all commands shared before each had its own: nothing reads it any more
            self.path.with_name(f"dataclass-code-{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}.marshal").unlink(
                missing_ok=True)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
