"""How many examples each hypothesis property test tries.

Each test names its thorough count. The fast suite (``python -m pytest``) tries a share of it
(``FAST_SHARE``) so that it stays under a minute; the integration stage runs the same property
modules again at twice the thorough count (``tests/integration/test_property_depth.py``).
"""

from __future__ import annotations

import os

FAST_SHARE = 0.4


def property_examples(thorough: int) -> int:
    """Examples per property test: ``thorough`` times ``TOOLRUN_PROPERTY_SCALE`` (``FAST_SHARE`` unless set),
    at least 10; or exactly ``TOOLRUN_PROPERTY_EXAMPLES`` (e.g. 5000 before changing a checker)."""
    configured = os.environ.get("TOOLRUN_PROPERTY_EXAMPLES")
    if configured:
        return int(configured)
    scale = float(os.environ.get("TOOLRUN_PROPERTY_SCALE") or FAST_SHARE)
    return max(10, round(thorough * scale))
