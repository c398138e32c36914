"""toolrun as an MCP client against servers written with the SDK (tests/mcp_client_servers.py), over
streamable HTTP and the legacy HTTP+SSE transport: every page of tools/list, who it says it is,
and what it sends first."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolrun
from tests.mcp_client_servers import PIXEL_PNG, SEEN_METHODS, protocol_server, recording_methods, served
from toolrun.core.content import ContentBlock, capped_blocks
from toolrun.core.messages import Message, ModelRequest, ToolCall, ToolResult
from toolrun.providers.scripted import ScriptedModel

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


def test_closing_a_servers_connections_ends_their_session_and_the_next_call_opens_another(
        tmp_path: Path, streamable_url: str) -> None:
    from toolrun.backends.mcp_server import server_hub

    url = streamable_url + "?closing=1"  # a connection of its own
    catalog = toolrun.load_catalog(toolset(tmp_path, url))
    SEEN_METHODS.clear()
    assert toolrun.call(catalog, "filler_0", {}).result == "filler 0"
    server_hub().close_where(lambda spec: spec.url == url)
    assert SEEN_METHODS[-1] == "DELETE"  # the session ended at the server, not at the process's exit
    assert toolrun.call(catalog, "filler_0", {}).result == "filler 0"
    assert SEEN_METHODS[SEEN_METHODS.index("DELETE"):].count("initialize") == 1  # a new session


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


# ---------------------------------------------------------------- images, audio and resources


PIXEL_BASE64 = base64.b64encode(PIXEL_PNG).decode()


def test_an_image_passes_through_a_call_beside_its_text(tmp_path: Path, streamable_url: str) -> None:
    catalog = toolrun.load_catalog(toolset(tmp_path, streamable_url))
    called = toolrun.call(catalog, "pixel", {})
    assert called.result == "one red pixel" and not called.is_error
    assert [block.wire for block in called.blocks] == [{"type": "image", "data": PIXEL_BASE64, "mimeType": "image/png"}]
    shown = called.to_json()
    assert shown["result"] == "one red pixel" and shown["content"][0]["data"] == PIXEL_BASE64


def test_call_json_keeps_result_a_string_and_adds_content(tmp_path: Path, streamable_url: str) -> None:
    from click.testing import CliRunner

    from toolrun.cli import main

    toolset(tmp_path, streamable_url)
    done = CliRunner().invoke(main, ["call", "pixel", "--tools-dir", str(tmp_path), "--json"], catch_exceptions=False)
    printed = json.loads(done.stdout)
    assert printed["result"] == "one red pixel"
    assert printed["content"] == [{"type": "image", "data": PIXEL_BASE64, "mimeType": "image/png"}]
    plain = CliRunner().invoke(main, ["call", "pixel", "--tools-dir", str(tmp_path)], catch_exceptions=False)
    assert plain.stdout == "one red pixel\n"
    assert "the tool also returned an image (image/png, 70 bytes); --json prints them under content" in plain.stderr


def test_a_recipe_sends_the_image_to_the_model_and_keeps_it_in_the_transcript(tmp_path: Path, streamable_url: str) -> None:
    (tmp_path / "tools.d").mkdir()
    toolset(tmp_path / "tools.d", streamable_url)
    recipe = tmp_path / "look.yaml"
    recipe.write_text("name: look\nmodel: openai:gpt-4o-mini\nmessages: [{user: What colour is the pixel?}]\n",
                      encoding="utf-8")
    model = ScriptedModel([ScriptedModel.calls([("pixel", {})]), "red"])
    result = toolrun.run(recipe, model=model)
    sent = model.requests[1].messages[-1].tool_results[0]
    assert sent.content == "one red pixel" and sent.blocks[0].base64_data == PIXEL_BASE64
    assert result.tool_calls[0].to_json()["content"][0]["mimeType"] == "image/png"


def pixel_result() -> ToolResult:
    image = ContentBlock({"type": "image", "data": PIXEL_BASE64, "mimeType": "image/png"})
    audio = ContentBlock({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"})
    return ToolResult("call_1", "pixel", "one red pixel", provider_id="call_1", blocks=[image, audio])


AUDIO_NOTE = "[the tool also returned an audio (audio/wav, 3 bytes), which this model cannot be shown]"


def test_anthropic_gets_the_image_as_an_image_block_of_the_tool_result() -> None:
    from toolrun.providers.anthropic import wire_messages

    [user] = wire_messages([Message("tool", [pixel_result()])])
    assert user["content"][0]["content"] == [
        {"type": "text", "text": "one red pixel\n" + AUDIO_NOTE},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_BASE64}}]


def test_openai_responses_gets_input_text_and_input_image_as_the_output() -> None:
    from toolrun.providers.openai_responses import input_items

    [item] = input_items([Message("tool", [pixel_result()])])
    assert item["output"] == [{"type": "input_text", "text": "one red pixel\n" + AUDIO_NOTE},
                              {"type": "input_image", "image_url": f"data:image/png;base64,{PIXEL_BASE64}"}]


def test_gemini_gets_the_image_as_inline_data_of_the_function_response() -> None:
    from toolrun.providers.gemini import wire_contents

    call = ToolCall("call_1", "pixel", {}, "{}")
    [_, user] = wire_contents([Message("assistant", [call]), Message("tool", [pixel_result()])])
    response = user["parts"][0]["functionResponse"]
    assert response["response"] == {"output": "one red pixel\n" + AUDIO_NOTE}
    assert response["parts"] == [{"inlineData": {"mimeType": "image/png", "data": PIXEL_BASE64}}]


def test_openai_chat_and_ollama_get_a_note_naming_type_and_size() -> None:
    from toolrun.providers.ollama import ollama_messages
    from toolrun.providers.openai_chat import chat_messages

    request = ModelRequest("m", None, [Message("tool", [pixel_result()])], [])
    expected = ("one red pixel\n[the tool also returned an image (image/png, 70 bytes), which this model cannot be "
                "shown]\n" + AUDIO_NOTE)
    assert chat_messages(request)[0]["content"] == expected
    assert ollama_messages(request)[0]["content"] == expected


def test_blocks_over_the_byte_cap_are_named_and_dropped() -> None:
    small = {"type": "image", "data": PIXEL_BASE64, "mimeType": "image/png"}
    large = {"type": "resource", "resource": {"uri": "file:///big.txt", "mimeType": "text/plain", "text": "x" * 100}}
    kept, notes = capped_blocks([small, large, small], limit=150)
    assert [block.wire for block in kept] == [small, small]
    assert notes == ["[the tool also returned a resource file:///big.txt (text/plain, 100 bytes), dropped: over the "
                     "150 bytes toolrun keeps of one result's images, audio and resources]"]


def test_toolrun_mcp_serves_the_image_on_unchanged(tmp_path: Path, streamable_url: str) -> None:
    from mcp import Client

    from toolrun.core.secrets import Redactor, redacting
    from toolrun.mcp.audit import AuditLog
    from toolrun.mcp.live_catalog import LiveCatalog
    from toolrun.mcp.server import CatalogServer

    server = CatalogServer(LiveCatalog(toolset(tmp_path, streamable_url)), audit=AuditLog(io.StringIO()))
    answers: list[Any] = []

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode="legacy") as client:
                answers.append(await client.call_tool("pixel", {}))

    anyio.run(main)
    [text, image] = answers[0].content
    assert text.text == "one red pixel"
    assert image.type == "image" and image.data == PIXEL_BASE64 and image.mime_type == "image/png"


def test_the_run_log_keeps_the_blocks_of_a_tool_result() -> None:
    from toolrun.runlog.writer import message_json

    [part] = message_json(Message("tool", [pixel_result()]))
    assert part["content"] == "one red pixel" and [block["type"] for block in part["blocks"]] == ["image", "audio"]


# ---------------------------------------------------------------- notifications/tools/list_changed


@pytest.fixture
def growing_url() -> Iterator[str]:
    """A server of its own: add_late_tool changes its tool list for good."""
    with served(protocol_server("growing").streamable_http_app()) as base:
        yield base + "/mcp"


def test_a_recipe_is_offered_a_tool_the_server_adds_from_the_next_request(tmp_path: Path, growing_url: str) -> None:
    (tmp_path / "tools.d").mkdir()
    toolset(tmp_path / "tools.d", growing_url)
    recipe = tmp_path / "grow.yaml"
    recipe.write_text("name: grow\nmodel: openai:gpt-4o-mini\nmessages: [{user: Grow.}]\n", encoding="utf-8")
    notices: list[str] = []

    class Notices(toolrun.RunObserver):
        def on_notice(self, message: str) -> None:
            notices.append(message)

    model = ScriptedModel([ScriptedModel.calls([("add_late_tool", {})]), ScriptedModel.calls([("late_tool", {})]), "grown"])
    result = toolrun.run(recipe, model=model, observer=Notices())
    assert "late_tool" not in [tool.name for tool in model.requests[0].tools]
    assert "late_tool" in [tool.name for tool in model.requests[1].tools]
    assert [call.result for call in result.tool_calls] == ["added late_tool", "late"]
    assert "the tools changed (an MCP server said so): added late_tool" in notices


def test_toolrun_mcp_lists_a_tool_the_server_behind_it_adds(tmp_path: Path, growing_url: str) -> None:
    from mcp import Client

    from toolrun.core.secrets import Redactor, redacting
    from toolrun.mcp.audit import AuditLog
    from toolrun.mcp.live_catalog import LiveCatalog
    from toolrun.mcp.server import CatalogServer

    server = CatalogServer(LiveCatalog(toolset(tmp_path, growing_url)), audit=AuditLog(io.StringIO()))
    seen: list[Any] = []

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode="legacy") as client:
                seen.append([tool.name for tool in (await client.list_tools()).tools])
                await client.call_tool("add_late_tool", {})  # its list_changed came before its result
                seen.append([tool.name for tool in (await client.list_tools()).tools])
                seen.append((await client.call_tool("late_tool", {})).content[0].text)

    anyio.run(main)
    assert "late_tool" not in seen[0] and "late_tool" in seen[1]
    assert seen[2] == "late"


def test_a_chat_offers_the_added_tool_at_the_next_question(tmp_path: Path, growing_url: str) -> None:
    from toolrun.sessions.chat import ChatSession

    script = tmp_path / "chat.script.yaml"
    script.write_text("- tool_calls: [{name: add_late_tool, arguments: {}}]\n- text: added\n"
                      "- tool_calls: [{name: late_tool, arguments: {}}]\n- text: called it\n", encoding="utf-8")
    (tmp_path / "tools").mkdir()
    session = ChatSession.open(model=f"scripted:{script}", tools_dir=toolset(tmp_path / "tools", growing_url))
    first = anyio.run(session.answer, "Grow.")
    assert first.final == "added" and "late_tool" not in [tool.name for tool in session.tools]
    second = anyio.run(session.answer, "Call the new one.")
    assert [call.result for call in second.tool_calls] == ["late"] and "late_tool" in [tool.name for tool in session.tools]


def test_a_session_without_the_sdk_internals_the_listing_uses_is_listed_by_the_sdk_and_a_paging_loop_stops() -> None:
    from types import SimpleNamespace

    from toolrun.backends.mcp_tool_list import list_every_tool

    class LoopingPages:  # a later SDK's session (no _stamp, _dispatcher), its server answering every page alike
        async def list_tools(self, params: Any = None) -> Any:
            return SimpleNamespace(tools=[SimpleNamespace(name="again")], next_cursor="same")

    with pytest.raises(ValueError, match="gave the cursor 'same' twice"):
        anyio.run(list_every_tool, LoopingPages())


def test_sdk_internals_of_another_shape_leave_the_listing_to_the_sdk(tmp_path: Path, streamable_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_types
    from mcp.client.session import ClientSession

    absorb = ClientSession._absorb_tool_listing

    def later_absorb(self: Any, result: Any, *, whole: bool) -> Any:  # a later SDK: the name kept, its keyword renamed
        return absorb(self, result, complete=whole)

    async def later_list_tools(self: Any, *, params: Any = None) -> Any:  # and its own list_tools agreeing
        result = await self.send_request(mcp_types.ListToolsRequest(params=params), mcp_types.ListToolsResult)
        return self._absorb_tool_listing(result, whole=params is None and result.next_cursor is None)

    monkeypatch.setattr(ClientSession, "_absorb_tool_listing", later_absorb)
    monkeypatch.setattr(ClientSession, "list_tools", later_list_tools)
    catalog = toolrun.load_catalog(toolset(tmp_path, streamable_url, "later_sdk.yaml"))
    assert list(catalog.tools) == ALL_TOOLS
    identity = toolrun.call(catalog, "client_identity", {})
    assert not identity.is_error and json.loads(identity.result)["name"] == "toolrun"


async def _whole_body(receive: Any) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    return body


def _calls(body: bytes, tool: str) -> bool:
    """Whether a JSON-RPC message ``body`` calls ``tool``."""
    return f'"name":"{tool}"'.encode() in body.replace(b" ", b"")


def _replaying(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that hands the app ``body``, read already, then what ``receive`` gets."""
    replayed = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def replay() -> Any:
        return next(replayed, None) or await receive()

    return replay


def refusing_a_post_of(app: Any, tool: str) -> Any:
    """``app``, answering 500 to the POST that carries a call of ``tool`` (the SDK's legacy client then stops sending)."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = await _whole_body(receive)
        if _calls(body, tool):
            await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/plain")]})
            return await send({"type": "http.response.body", "body": b"broken"})
        return await app(scope, _replaying(body, receive), send)

    return wrapped


def test_a_legacy_sse_post_the_server_refuses_fails_the_call_at_once_with_the_reason(tmp_path: Path) -> None:
    import time

    server = protocol_server("legacy")
    with served(refusing_a_post_of(server.sse_app(), "filler_1")) as base:
        catalog = toolrun.load_catalog(toolset(tmp_path, base + "/sse"))
        assert toolrun.call(catalog, "filler_0", {}).result == "filler 0"
        started = time.monotonic()
        refused = toolrun.call(catalog, "filler_1", {})
        assert refused.is_error and time.monotonic() - started < 10  # the toolset's timeout is 20 s
        assert refused.result == (f"the MCP server {base}/sse could not be sent the call (the next call starts it "
                                  f"again); Error in post_writer: HTTP 500 Internal Server Error (POST {base}/messages/)")
        assert toolrun.call(catalog, "filler_0", {}).result == "filler 0"  # a new session


def breaking_the_stream_after_a_call_of(app: Any, tool: str, ran: list[str]) -> Any:
    """``app``, whose SSE stream breaks (the connection dropped mid-body) once a call of ``tool`` has been
    accepted and run: the answer is lost, the call is not."""
    broken = {"now": False}

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["method"] == "GET":
            async def sending(message: dict[str, Any]) -> None:
                if broken["now"] and message["type"] == "http.response.body":
                    raise ConnectionResetError("the stream broke")  # uvicorn drops the connection mid-body
                await send(message)

            return await app(scope, receive, sending)
        body = await _whole_body(receive)
        if _calls(body, tool):
            ran.append(tool)
            broken["now"] = True
        return await app(scope, _replaying(body, receive), send)

    return wrapped


def test_a_legacy_sse_stream_that_breaks_after_the_call_was_sent_does_not_say_it_was_not_sent(tmp_path: Path) -> None:
    # The POST was accepted: the server may have run the call. "could not be sent the call" would invite the
    # model to make it again (a second ticket, a second payment).
    ran: list[str] = []
    server = protocol_server("legacy")
    with served(breaking_the_stream_after_a_call_of(server.sse_app(), "filler_1", ran)) as base:
        catalog = toolrun.load_catalog(toolset(tmp_path, base + "/sse"))
        broken = toolrun.call(catalog, "filler_1", {})
        assert ran == ["filler_1"]
        assert broken.is_error
        assert "could not be sent" not in broken.result, broken.result
        assert "lost its stream of answers during the call: the call may have run" in broken.result, broken.result
