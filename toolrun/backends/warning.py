"""``BackendWarning``: what a backend's ``warnings`` tells the lint about one tool.

Apart from ``toolrun.backends.base`` because only the lint of a tool asks for warnings: a
command whose tools come from the catalog cache does not make this (frozen) dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendWarning:
    """A lint warning a backend raises about one tool: its rule, the dotted key it is about, what to do."""

    rule: str
    key_path: str
    message: str
    severity: str = "warning"  # "error" for a mistake no call survives (``${NAME}`` sent as written)
