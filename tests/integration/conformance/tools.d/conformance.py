"""The functions behind the conformance suite's fixture tools (conformance.yaml beside this file)."""

from __future__ import annotations

import time
from typing import Any

from toolrun import ToolError


def simple_text() -> str:
    return "This is a simple text response for testing."


def error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


def with_progress() -> str:
    # The server reports progress once a second while a call runs; the suite wants three reports.
    time.sleep(3.5)
    return "Progress test completed"


def echo_address(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    return f"{name or 'nobody'} at {address or 'no address'}"
