"""The ticket server's tool list recorded in tests/fixtures (the fast tests seed caches with it) is still
what the server lists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TICKET_LISTING

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.integration  # starts the ticket MCP server (the SDK's import: seconds)
def test_the_recorded_ticket_listing_is_what_the_server_lists(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TOOLRUN_CACHE_DIR": str(tmp_path / "cache")}
    listed = subprocess.run([sys.executable, "-m", "toolrun", "tools", "list", "--tools-dir", "tools.d", "--refresh"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    kept = [json.loads(path.read_text(encoding="utf-8")) for path in (tmp_path / "cache").glob("mcp-tools-*.json")]
    assert len(kept) == 1 and kept[0]["tools"] == json.loads(TICKET_LISTING.read_text(encoding="utf-8"))["tools"]
