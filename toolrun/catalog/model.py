"""The catalog: the tools of one tools directory, by name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from toolrun.tool import Tool


@dataclass
class Catalog:
    """The tools of one tools directory, by name, in load order."""

    tools: dict[str, Tool] = field(default_factory=dict)
    directory: Path | None = None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)
