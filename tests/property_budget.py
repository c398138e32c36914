"""How many examples each hypothesis property test tries."""

from __future__ import annotations

import os


def property_examples(default: int) -> int:
    """Examples per property test: ``default`` (sized so the suite stays quick), or
    ``TOOLRUN_PROPERTY_EXAMPLES`` for a thorough run (e.g. 5000 before changing a checker)."""
    configured = os.environ.get("TOOLRUN_PROPERTY_EXAMPLES")
    return int(configured) if configured else default
