"""Traces reach a real OTLP receiver: the Phoenix server (PyPI ``arize-phoenix``) run on loopback.

Phoenix lives in its own virtual environment (it pins its own web stack), made once in the test
packages' cache folder (``phoenix_server.py``). The checks: a replayed ``toolrun recipe
recipes/inventory.yaml`` and the tool calls served by ``toolrun mcp --http`` arrive as spans
with the GenAI conventions' names and attributes, nested as they ran.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from tests.cli.test_cli_recipe import INVENTORY, ROOT, clean_env
from tests.integration.phoenix_server import PhoenixServer, phoenix_server
from tests.mcp_helpers import http_server

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("phoenix")]


@pytest.fixture(scope="module")
def phoenix() -> Iterator[PhoenixServer]:
    with phoenix_server() as server:
        yield server


def tracing_env(phoenix: PhoenixServer, project: str) -> dict[str, str]:
    """The standard OpenTelemetry environment pointing at Phoenix, one Phoenix project per test."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url, "OTEL_SERVICE_NAME": f"toolrun-{project}",
            "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}", "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "60"}  # a loaded Phoenix may take seconds to take a batch


def received_spans(phoenix: PhoenixServer, project: str, wanted: dict[str, int], timeout: float = 90) -> list[dict[str, Any]]:
    """The spans Phoenix holds for ``project`` (OTLP JSON shape), once it has ``wanted`` (span name -> count)."""
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        answer = httpx.get(f"{phoenix.url}/v1/projects/{project}/spans/otlpv1", params={"limit": 100}, timeout=30)
        if answer.status_code == 200:
            spans = answer.json()["data"]
            names = [span["name"] for span in spans]
            if all(names.count(name) >= count for name, count in wanted.items()):
                return spans
        time.sleep(1)
    raise AssertionError(f"Phoenix holds {[s.get('name') for s in spans]} of {project}, not {wanted}:\n{phoenix.said()}")


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    """An OTLP JSON span's attributes as a plain dict."""
    found: dict[str, Any] = {}
    for item in span.get("attributes") or []:
        value = item["value"]  # {"string_value": "x", "int_value": null, ...}: the one set
        found[item["key"]] = next((v for v in value.values() if v is not None), None) if isinstance(value, dict) else value
    return found


def test_a_replayed_recipe_arrives_as_an_invoke_agent_span_with_its_chat_and_execute_tool_spans(
        phoenix: PhoenixServer, tmp_path: Any) -> None:
    env = clean_env(**tracing_env(phoenix, "recipe"), TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "toolrun", "recipe", str(INVENTORY), "--no-log"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "replaying" in done.stderr and "玫瑰" in done.stdout

    spans = received_spans(phoenix, "recipe", {"invoke_agent inventory": 1})  # the run's span ends last
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert sorted((name, len(found)) for name, found in by_name.items()) == [
        ("chat gpt-4o-mini", 2), ("execute_tool get_flower_inventory", 3), ("invoke_agent inventory", 1)]
    [run] = by_name["invoke_agent inventory"]
    assert attributes(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attributes(run)["gen_ai.agent.name"] == "inventory"
    for chat in by_name["chat gpt-4o-mini"]:
        chat_attributes = attributes(chat)
        assert chat["parent_span_id"] == run["span_id"]
        assert chat_attributes["gen_ai.operation.name"] == "chat" and chat_attributes["gen_ai.provider.name"] == "openai"
        assert chat_attributes["gen_ai.request.model"] == "gpt-4o-mini"
        assert int(chat_attributes["gen_ai.usage.input_tokens"]) > 0 and int(chat_attributes["gen_ai.usage.output_tokens"]) > 0
    call_ids = set()
    for call in by_name["execute_tool get_flower_inventory"]:
        call_attributes = attributes(call)
        assert call["parent_span_id"] == run["span_id"] and call["trace_id"] == run["trace_id"]
        assert call_attributes["gen_ai.operation.name"] == "execute_tool"
        assert call_attributes["gen_ai.tool.name"] == "get_flower_inventory"
        call_ids.add(call_attributes["gen_ai.tool.call.id"])
        assert "gen_ai.tool.call.arguments" not in call_attributes  # content only when asked for
    assert len(call_ids) == 3


def test_tool_calls_served_by_toolrun_mcp_arrive_under_the_sdks_tools_call_spans(phoenix: PhoenixServer) -> None:
    env = {**tracing_env(phoenix, "gateway"), "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    with http_server("--tools-dir", str(ROOT / "tools.d"), "--tools", "get_flower_*", env=env) as server:

        async def calls() -> None:
            async with Client(server.url) as client:
                for city in ("北京", "上海"):
                    answer = await client.call_tool("get_flower_inventory", {"city": city})
                    assert not answer.is_error

        anyio.run(calls)
    # stopped: its last batch was sent at exit
    spans = received_spans(phoenix, "gateway", {"tools/call get_flower_inventory": 2, "execute_tool get_flower_inventory": 2})
    served = [span for span in spans if span["name"] == "tools/call get_flower_inventory"]
    executed = [span for span in spans if span["name"] == "execute_tool get_flower_inventory"]
    assert len(served) == 2 and len(executed) == 2
    assert {span["parent_span_id"] for span in executed} == {span["span_id"] for span in served}
    for span in executed:
        found = attributes(span)
        assert found["gen_ai.tool.name"] == "get_flower_inventory" and found["gen_ai.tool.call.id"]
        expected = {'{"city": "北京"}': "玫瑰: 100", '{"city": "上海"}': "百合: 80"}[found["gen_ai.tool.call.arguments"]]
        assert expected in found["gen_ai.tool.call.result"]  # content: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
