"""What an MCP server last answered to ``tools/list``, kept per toolset file so that loading the
catalog does not start the server: commands that never call its tools never start it.

One private file per toolset in the cache folder (``mcp-tools-<digest of the file's path>.json``)
holds the listing (names, descriptions, schemas, hints) under a key made of the toolset file's
bytes, its server's command or url, the names of its ``env`` entries (never their values), the
folder it starts in and the status of the files its command names (``server.py``): any change
there asks the server again. A server that failed to start is remembered for
``FAILED_START_MEMORY_SECONDS``, so a hung server does not cost every command its timeout.
Calls always go to the live server; only the catalog is served from here.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.core.cache_folder import cache_directory
from toolrun.core.digests import blake2b, hex_key
from toolrun.core.private_files import make_private_folders, replace_file

FAILED_START_MEMORY_SECONDS = 60.0
LISTING_FORMAT = 1


@dataclass(frozen=True)
class ListedTool:
    """One tool as a server listed it (the fields the catalog builds a Tool from)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # why the protocol's types reject the server's entry of it (one line); "" when usable


@dataclass
class ServerListing:
    """The cached answer of one toolset's server: its tools, or when and why it last failed to start."""

    tools: list[ListedTool] | None = None
    failure: str | None = None
    failed_at: float = 0.0

    def failed_recently(self, now: float) -> bool:
        return self.failure is not None and 0 <= now - self.failed_at < FAILED_START_MEMORY_SECONDS


def listing_key(file: Path, config: Mapping[str, Any]) -> str:
    """What the listing depends on: the toolset file, how its server starts, the files its command names."""
    try:
        text = file.read_bytes()
    except OSError:
        text = b""
    cwd = config.get("cwd")
    folder = (file.parent / cwd) if isinstance(cwd, str) else file.parent
    command = config.get("command")
    parts = [command] if isinstance(command, str) else list(command or [])
    named_files = []
    for part in parts[1:]:  # `python server.py`: an edited server may list other tools
        with contextlib.suppress(OSError, ValueError):
            status = (folder / str(part)).stat()
            named_files.append((str(part), status.st_size, status.st_mtime_ns))
    described = json.dumps({"format": LISTING_FORMAT, "file": str(file.resolve()), "command": [str(p) for p in parts],
                            "url": config.get("url"), "env": sorted(str(k) for k in (config.get("env") or {})),
                            "folder": str(folder.resolve()), "named": named_files}, ensure_ascii=False)
    return blake2b(described.encode() + b"\0" + text, digest_size=32).hexdigest()


def _listing_path(file: Path) -> Path | None:
    folder = cache_directory()
    if folder is None:
        return None
    name = hex_key(str(file.resolve()))
    return folder / f"mcp-tools-{name}.json"


def read_listing(file: Path, key: str | None) -> ServerListing | None:
    """The cached listing of ``file``'s server when its key is ``key`` (None: whatever key it has)."""
    path = _listing_path(file)
    if path is None:
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if key is not None and stored.get("key") != key:
            return None
        tools = stored.get("tools")
        listed = None if tools is None else [ListedTool(t["name"], t["description"], dict(t["input_schema"]), t.get("title"),
                                                        dict(t.get("annotations") or {}), str(t.get("problem") or ""))
                                             for t in tools]
        return ServerListing(listed, stored.get("failure"), float(stored.get("failed_at") or 0.0))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # missing, damaged or foreign: ask the server
        return None


def write_listing(file: Path, key: str, listing: ServerListing) -> None:
    """Keep ``listing`` for ``file`` (a private file, replaced atomically); a cache that cannot be written is skipped."""
    path = _listing_path(file)
    if path is None:
        return
    # a usable tool has no "problem": its entry is as it always was (and as the recorded listings in tests are)
    tools = None if listing.tools is None else [{key: value for key, value in vars(tool).items()
                                                 if key != "problem" or value} for tool in listing.tools]
    document = {"key": key, "tools": tools, "failure": listing.failure, "failed_at": listing.failed_at}
    with contextlib.suppress(OSError, TypeError, ValueError):  # a schema that is no JSON cannot be kept: asked again next time
        data = json.dumps(document, ensure_ascii=False).encode("utf-8")
        make_private_folders(path.parent)
        replace_file(path, data)


def listing_changes(before: list[ListedTool], after: list[ListedTool]) -> str | None:
    """How the server's tools differ from the cached ones, in a few words; None when they do not."""
    old, new = {tool.name: tool for tool in before}, {tool.name: tool for tool in after}
    if old == new:
        return None
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    changed = sorted(name for name in set(old) & set(new) if old[name] != new[name])
    parts = [f"{label} {', '.join(names)}" for label, names in
             (("added", added), ("removed", removed), ("changed", changed)) if names]
    return "; ".join(parts)


def now() -> float:
    """Wall-clock seconds: a failed start is remembered across processes."""
    return time.time()
