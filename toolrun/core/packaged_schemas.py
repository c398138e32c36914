"""The JSON Schemas toolrun ships (``toolrun/schemas/*.schema.json``), read as text.

Base, so recipes, the catalog and ``toolrun schema`` read them one way without importing
each other.
"""

from __future__ import annotations

import json
from typing import Any


def packaged_schema_text(name: str) -> str | None:
    """The text of ``toolrun/schemas/<name>.schema.json``, or None when it is not packaged."""
    from importlib import resources  # 2-5 ms to import: only when a schema is read, not on a cached start

    resource = resources.files("toolrun") / "schemas" / f"{name}.schema.json"
    try:
        return resource.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None


def packaged_schema(name: str) -> dict[str, Any]:
    """``toolrun/schemas/<name>.schema.json`` as a dict; ``RuntimeError`` when the install lacks it."""
    text = packaged_schema_text(name)
    if text is None:  # pragma: no cover - a broken install
        raise RuntimeError(f"toolrun/schemas/{name}.schema.json is missing from the installed package")
    schema: dict[str, Any] = json.loads(text)
    return schema
