"""Named plugins of one kind (backends, providers): built-ins and third parties alike.

Built-ins are listed as ``"module:attribute"`` targets, exactly as a plugin declares itself
in an entry point group (``toolrun.backends``, ``toolrun.providers``), so both take the same
road; a target's module is imported only when that name is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownPlugin(KeyError):
    """No plugin of this kind is registered under the name; ``known`` lists the ones that are."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        super().__init__(name)
        self.kind = kind
        self.name = name
        self.known = known

    def __str__(self) -> str:  # KeyError would show only the quoted name
        return f"no {self.kind} named {self.name!r} is installed (known: {', '.join(self.known) or 'none'})"


class PluginRegistry(Generic[T]):
    """The plugins of one ``kind``: ``built_in`` targets first, then entry points of ``group``."""

    def __init__(self, kind: str, group: str, built_in: Mapping[str, str]) -> None:
        self.kind = kind
        self.group = group
        self._built_in = dict(built_in)
        self._targets: dict[str, str] | None = None

    def targets(self) -> dict[str, str]:
        """Name -> ``"module:attribute"``, built-ins first; a plugin cannot replace a built-in."""
        if self._targets is None:
            from importlib.metadata import entry_points  # ~10 ms of imports, and a scan of every installed package

            targets = dict(self._built_in)
            for entry in entry_points(group=self.group):
                targets.setdefault(entry.name, entry.value)
            self._targets = targets
        return dict(self._targets)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered; a built-in is known without reading any package metadata."""
        return name in self._built_in or name in self.targets()

    def load(self, name: str) -> T:
        """The object registered as ``name``, its module imported now; ``UnknownPlugin`` otherwise."""
        target = self._built_in.get(name)
        if target is None:  # only a third party's name needs the installed packages' metadata
            targets = self.targets()
            if name not in targets:
                raise UnknownPlugin(self.kind, name, sorted(targets))
            target = targets[name]
        module_name, _, attribute = target.partition(":")
        loaded: Any = importlib.import_module(module_name)
        for part in attribute.split(".") if attribute else ():
            loaded = getattr(loaded, part)
        return loaded
