"""A recipe file as last read and found valid, kept so an unchanged recipe is not parsed again
(and the same for the script of a ``scripted:`` model: a long one is most of an offline run's start;
a script is kept as its checked turns, plain values that need no document and no checks to play).

Reading a recipe means parsing its YAML and holding it to the recipe schema and the
template checks; that work (and PyYAML, jsonschema and jinja2 imported for it) is most of
what starting an offline replay costs. A recipe that passed is kept beside the catalog cache
(one file per recipe path), with its lines, keyed by the file's size, times and inode and by
the code that read it: any change, and the recipe is read and checked again. A file changed
within the last 2 seconds is not kept (it may change again within its clock tick). The kept
file starts with a digest of the rest: a damaged one is read as a miss.
"""

from __future__ import annotations

import marshal
import os
from pathlib import Path
from typing import Any

from toolrun.catalog.cache import changed_recently, checked, code_stamp, digest, replace_file, status_key
from toolrun.core.cache_folder import cache_directory
from toolrun.core.digests import hex_key
from toolrun.core.yamlsource import LineDict, LineList

FORMAT = "recipe-3"


class NotKept(Exception):
    """A value the cache does not know how to keep."""


def cached_document(path: Path, status: os.stat_result) -> LineDict | None:
    """The document of the recipe at ``path`` when it was read and passed before, unchanged since."""
    document = _cached(path, status, "recipe")
    return document if isinstance(document, LineDict) else None


def cached_script(path: Path, status: os.stat_result) -> list[Any] | None:
    """The checked turns of the model script at ``path`` (``scripted_file.script_turns``) when it was read and
    passed before, unchanged since: plain values as kept, no document to check again."""
    turns = _cached(path, status, "script")
    return turns if isinstance(turns, list) else None


def _cached(path: Path, status: os.stat_result, kind: str) -> Any:
    where = _cache_file(path, kind)
    if where is None:
        return None
    try:
        kept = marshal.loads(checked(where.read_bytes()))  # a damaged byte is a miss, never a wrong recipe
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if not isinstance(kept, dict) or kept.get("code") != code_stamp(FORMAT) \
            or kept.get("path") != str(path.resolve()) or kept.get("status") != status_key(status):
        return None
    try:
        return _decoded(kept["document"]) if kind == "recipe" else kept["document"]
    except (KeyError, TypeError, ValueError):
        return None


def keep_document(path: Path, before: os.stat_result, document: LineDict) -> None:
    """Keep the document of a recipe that passed every check; ``before``: its status before it was read."""
    _keep(path, before, "recipe", document)


def keep_script(path: Path, before: os.stat_result, turns: list[Any]) -> None:
    """Keep the checked turns of a model script (plain values: a cached script is played without its
    YAML document, a turn of 1,000 calls rebuilt in a few milliseconds); ``before``: its status before it was read."""
    _keep(path, before, "script", turns)


def _keep(path: Path, before: os.stat_result, kind: str, value: Any) -> None:
    where = _cache_file(path, kind)
    if where is None or changed_recently(before):
        return
    try:
        after = path.stat()
        if status_key(after) != status_key(before):  # changed while it was read
            return
        kept = _encoded(value) if kind == "recipe" else value  # marshal refuses what it cannot keep (ValueError)
        payload = marshal.dumps({"code": code_stamp(FORMAT), "path": str(path.resolve()),
                                 "status": status_key(before), "document": kept})
        where.parent.mkdir(parents=True, exist_ok=True)
        replace_file(where, digest(payload) + payload)
    except (OSError, NotKept, ValueError):
        return  # a cache that cannot be written is skipped


def _cache_file(path: Path, kind: str) -> Path | None:
    folder = cache_directory()
    if folder is None:
        return None
    key = hex_key(str(path.resolve()))
    return folder / f"{kind}-{key}.marshal"


# A mapping is ("d", line, ((key, key line, value), ...)), a sequence ("l", line, item lines, values);
# YAML gives no tuples, so a tuple is always one of these.
def _encoded(value: Any) -> Any:
    if isinstance(value, LineDict):
        return ("d", value.line, tuple((key, value.key_lines.get(key, 0), _encoded(item)) for key, item in value.items()))
    if isinstance(value, LineList):
        return ("l", value.line, tuple(value.item_lines), tuple(_encoded(item) for item in value))
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise NotKept(type(value).__name__)


def _decoded(value: Any) -> Any:
    if not isinstance(value, tuple):
        return value
    if value[0] == "d":
        mapping = LineDict()
        mapping.line, mapping.key_lines = value[1], {}
        for key, line, item in value[2]:
            mapping[key] = _decoded(item)
            mapping.key_lines[key] = line
        return mapping
    if value[0] == "l":
        sequence = LineList(_decoded(item) for item in value[3])
        sequence.line, sequence.item_lines = value[1], list(value[2])
        return sequence
    raise ValueError(f"not a kept value: {value[0]!r}")
