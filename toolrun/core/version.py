"""toolrun's version, and the User-Agent every request toolrun sends carries unless a tool sets its own."""

from __future__ import annotations

VERSION = "0.1.0"  # kept equal to pyproject.toml's and toolrun.__version__ (tests/test_user_agent.py)
USER_AGENT = f"toolrun/{VERSION}"  # an API owner sees which client called, not python-httpx
