"""The JSON Schemas toolrun ships (``toolrun/schemas/*.schema.json``), read as text.

Base, so recipes, the catalog and ``toolrun schema`` read them one way without importing
each other.
"""

from __future__ import annotations

from importlib import resources


def packaged_schema_text(name: str) -> str | None:
    """The text of ``toolrun/schemas/<name>.schema.json``, or None when it is not packaged."""
    resource = resources.files("toolrun") / "schemas" / f"{name}.schema.json"
    try:
        return resource.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None
