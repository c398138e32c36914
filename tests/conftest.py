from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loopback import Handler, LoopbackServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"


@pytest.fixture
def loopback() -> Iterator:
    """Start real loopback HTTP servers; every one is stopped at teardown."""
    servers: list[LoopbackServer] = []

    def start(handler: Handler) -> LoopbackServer:
        server = LoopbackServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES
