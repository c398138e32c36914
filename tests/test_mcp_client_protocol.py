"""toolrun as an MCP client against servers written with the SDK (tests/mcp_client_servers.py), over
streamable HTTP and the legacy HTTP+SSE transport: every page of tools/list, who it says it is,
and what it sends first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolrun
from tests.mcp_client_servers import SEEN_METHODS, protocol_server, recording_methods, served

ALL_TOOLS = ["client_identity", "pixel", "filler_0", "filler_1", "filler_2", "add_late_tool"]


@pytest.fixture(scope="module")
def streamable_url() -> Iterator[str]:
    with served(recording_methods(protocol_server("streamable").streamable_http_app())) as base:
        yield base + "/mcp"


@pytest.fixture(scope="module")
def legacy_base() -> Iterator[str]:
    """One 2024-11-05 server with its SSE stream at /sse and, a second time, at /events."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    server = protocol_server("legacy")
    app = Starlette(routes=[Mount("/at-events", app=server.sse_app(sse_path="/events")), Mount("/", app=server.sse_app())])
    with served(app) as base:
        yield base


def toolset(folder: Path, url: str, name: str = "remote.yaml") -> Path:
    (folder / name).write_text(f"mcp_server:\n  url: {url}\n  timeout: 20s\n", encoding="utf-8")
    return folder


def test_every_page_of_tools_list_is_read(tmp_path: Path, streamable_url: str) -> None:
    catalog = toolrun.load_catalog(toolset(tmp_path, streamable_url))
    assert list(catalog.tools) == ALL_TOOLS  # three pages of two


def test_the_client_sends_initialize_first_and_names_itself_toolrun(tmp_path: Path, streamable_url: str) -> None:
    SEEN_METHODS.clear()
    catalog = toolrun.load_catalog(toolset(tmp_path, streamable_url + "?fresh=1"))  # its own connection
    identity = json.loads(toolrun.call(catalog, "client_identity", {}).result)
    assert identity == {"name": "toolrun", "version": toolrun.__version__}
    assert SEEN_METHODS[0] == "initialize" and "server/discover" not in SEEN_METHODS


def test_a_legacy_sse_url_is_spoken_to_over_http_and_sse(tmp_path: Path, legacy_base: str) -> None:
    catalog = toolrun.load_catalog(toolset(tmp_path, legacy_base + "/sse"))
    assert list(catalog.tools) == ALL_TOOLS
    assert json.loads(toolrun.call(catalog, "client_identity", {}).result)["name"] == "toolrun"


def test_a_server_that_refuses_the_streamable_post_is_tried_as_legacy_sse(tmp_path: Path, legacy_base: str) -> None:
    catalog = toolrun.load_catalog(toolset(tmp_path, legacy_base + "/at-events/events"))
    assert toolrun.call(catalog, "filler_1", {}).result == "filler 1"


def test_a_404_suggests_the_legacy_sse_url(tmp_path: Path, legacy_base: str) -> None:
    with pytest.raises(toolrun.LoadError) as raised:
        toolrun.load_catalog(toolset(tmp_path, legacy_base + "/no-such-endpoint"))
    message = str(raised.value)
    assert "HTTP 404" in message and "a legacy HTTP+SSE server's url ends in /sse" in message
