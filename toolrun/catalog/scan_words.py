"""What a name scan learned of the files it read but did not load, kept in columns.

Each file's key, its status key, whether it is an MCP server's, and the words it spells (each
between spaces), all files' words in one string: a ``call`` that loads it builds no string per
file, and finds the files that spell its name with one search of that string. A dict of one
tuple per file took 14 ms to unmarshal for 4,852 BFCL files; these columns about 4.
"""

from __future__ import annotations

import bisect
from typing import Any

Known = tuple[tuple[int, ...], bool, str]  # status key, an MCP server's, its words


class ScanWords:
    """The words of the files a name scan read; ``put`` adds to them, ``payload`` is what is written."""

    def __init__(self, keys: list[str], stamps: list[tuple[int, ...]], servers: set[int], text: str,
                 starts: list[int]) -> None:
        self.keys, self.stamps, self.servers, self.text, self.starts = keys, stamps, servers, text, starts
        self.position = {key: index for index, key in enumerate(keys)}
        self.added: dict[str, Known] = {}  # put in this process: they win over the columns
        self.changed = False

    @classmethod
    def empty(cls) -> ScanWords:
        return cls([], [], set(), "", [0])

    @classmethod
    def from_payload(cls, loaded: Any) -> ScanWords | None:
        """The words of a payload as ``payload`` wrote it; None when it is not one."""
        try:
            keys, stamps, servers, text, starts = (loaded[name] for name in ("keys", "stamps", "servers", "text", "starts"))
        except (TypeError, KeyError):
            return None
        if not (isinstance(keys, list) and isinstance(stamps, list) and isinstance(servers, list)
                and isinstance(text, str) and isinstance(starts, list)
                and len(keys) == len(stamps) == len(starts) - 1):
            return None
        return cls(keys, stamps, set(servers), text, starts)

    def payload(self) -> dict[str, Any]:
        """The columns of every file known, those put in this process included."""
        keys = sorted(set(self.keys) | set(self.added))
        known = [self.get(key) or ((), False, "") for key in keys]
        starts = [0]
        for _, _, words in known:
            starts.append(starts[-1] + len(words))
        return {"keys": keys, "stamps": [entry[0] for entry in known],
                "servers": [index for index, entry in enumerate(known) if entry[1]],
                "text": "".join(entry[2] for entry in known), "starts": starts}

    def get(self, key: str) -> Known | None:
        if key in self.added:
            return self.added[key]
        index = self.position.get(key)
        if index is None:
            return None
        return self.stamps[index], index in self.servers, self.text[self.starts[index]:self.starts[index + 1]]

    def spelling(self, needles: list[str]) -> set[int]:
        """The column places of the files whose words hold one of ``needles`` (each a word between spaces)."""
        found: set[int] = set()
        for needle in needles:
            at = self.text.find(needle)
            while at != -1:  # a match starts at its word's leading space: inside the file that spells it
                found.add(bisect.bisect_right(self.starts, at) - 1)
                at = self.text.find(needle, at + 1)
        return found

    def put(self, key: str, known: Known) -> None:
        self.added[key] = known
        self.changed = True

    def keep_only(self, present: set[str]) -> None:
        """Forget the files not in ``present`` (their keys)."""
        if (set(self.keys) | set(self.added)) <= present:
            return
        for key in set(self.added) - present:
            del self.added[key]
        self.keys = [key for key in self.keys if key in present]
        kept = self.from_payload(self.payload())
        if kept is not None:
            self.keys, self.stamps, self.servers, self.text, self.starts = (kept.keys, kept.stamps, kept.servers,
                                                                           kept.text, kept.starts)
            self.position, self.added = kept.position, {}
        self.changed = True

    def __len__(self) -> int:
        return len(set(self.keys) | set(self.added))
