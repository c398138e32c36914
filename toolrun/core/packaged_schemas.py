"""The JSON Schemas toolrun ships (``toolrun/schemas/*.schema.json``), read as text.

Base, so recipes, the catalog and ``toolrun schema`` read them one way without importing
each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Where an install on disk keeps them (every install pip makes); importlib.resources reads any other kind.
_SCHEMA_FOLDER = Path(__file__).resolve().parent.parent / "schemas"


def packaged_schema_text(name: str) -> str | None:
    """The text of ``toolrun/schemas/<name>.schema.json``, or None when it is not packaged."""
    file_name = f"{name}.schema.json"
    if _SCHEMA_FOLDER.is_dir():
        try:
            return (_SCHEMA_FOLDER / file_name).read_text(encoding="utf-8")
        except OSError:
            return None
    # a zipped install: importlib.resources (with tempfile and zipfile, 4-8 ms to import) reads inside it
    from importlib import resources

    try:
        return (resources.files("toolrun") / "schemas" / file_name).read_text(encoding="utf-8")
    except OSError:
        return None


def packaged_schema(name: str) -> dict[str, Any]:
    """``toolrun/schemas/<name>.schema.json`` as a dict; ``RuntimeError`` when the install lacks it."""
    text = packaged_schema_text(name)
    if text is None:  # pragma: no cover - a broken install
        raise RuntimeError(f"toolrun/schemas/{name}.schema.json is missing from the installed package")
    schema: dict[str, Any] = json.loads(text)
    return schema
