from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loopback import Handler, LoopbackServer
from toolrun.secrets import Redactor, redacting

FIXTURES = Path(__file__).resolve().parent / "fixtures"


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
    """tests/fixtures: recorded provider traffic and official specs (see its README.md)."""
    return FIXTURES


@pytest.fixture(autouse=True)
def run_scope() -> Iterator[Redactor]:
    """Each test is one scope with its own redactor, as a run is: a secret a test registers is
    redacted in what it runs, and never seen by another test."""
    with redacting(Redactor()) as redactor:
        yield redactor
