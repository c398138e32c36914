"""Decompression bombs and odd content codings from the servers toolrun reads (docs/security.md).

Every HTTP read — an http tool, a provider answer (whole and streamed), the importer's fetch
of a document, an MCP server reached by url — gets the same treatment from a real loopback
server: one coding at most, only gzip and deflate, decoded bytes bounded while inflating.
Held means a one-line error (result, ProviderError, OpenAPIError), memory near a plain call's.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.backend_helpers import call, make_tool
from tests.loopback import Reply
from tests.property_budget import property_examples
from toolrun.backends.mcp_http import bounded_client
from toolrun.backends.mcp_server import McpServerUnavailable, list_server_tools
from toolrun.core.content_decoding import BodyTooLarge, RefusedBody, content_coding, decoded, decoded_sync
from toolrun.core.errors import ProviderError
from toolrun.openapi.document import OpenAPIError, read_location
from toolrun.providers.transport import HttpxTransport, WireRequest

pytestmark = pytest.mark.xdist_group("http-bombs")  # --dist loadgroup: the bombs are compressed once, on one worker
BOMB_BYTES = 96 * 1024 * 1024  # decoded size of each bomb, past the largest cap (64 MB); ~430 KB on the wire, 1 KB stacked

_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "deflate": lambda data: zlib.compress(data),
    "identity": lambda data: data,
}


def _deflated(size: int, wbits: int) -> bytes:
    compressor = zlib.compressobj(1, zlib.DEFLATED, wbits)
    block = bytes(1024 * 1024)
    return b"".join([compressor.compress(block) for _ in range(size // len(block))] + [compressor.flush()])


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    """Content-Encoding -> a body that decodes to BOMB_BYTES or more."""
    gzipped = _deflated(BOMB_BYTES, zlib.MAX_WBITS | 16)
    return {
        "gzip": gzipped,
        "x-gzip": gzipped,
        "deflate": _deflated(BOMB_BYTES, zlib.MAX_WBITS),
        "deflate-raw": _deflated(BOMB_BYTES, -zlib.MAX_WBITS),  # sent as "deflate", as some servers do
        "gzip, gzip": gzip.compress(gzipped, 9, mtime=0),  # 96 MB twice over: httpx inflated it in one call
    }


def _bomb_server(loopback, bombs: dict[str, bytes], coding: str, content_type: str = "application/json"):
    header = "deflate" if coding == "deflate-raw" else coding
    return loopback(lambda request: Reply(200, bombs[coding], {"Content-Type": content_type,
                                                               "Content-Encoding": header}))


def _one_line_refusal(text: str) -> None:
    assert "\n" not in text and len(text) < 300, text
    assert "decodes to more than" in text or "refused" in text, text


# ------------------------------------------------------------------ the http backend


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "deflate-raw", "gzip, gzip"])
def test_an_http_tool_refuses_a_decompression_bomb_with_one_line(tmp_path, loopback, bombs, coding):
    server = _bomb_server(loopback, bombs, coding)
    outcome = call(make_tool("http", {"url": server.url}, folder=tmp_path), {})
    assert outcome.is_error
    _one_line_refusal(outcome.result)


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, br", "deflate, gzip", "identity, gzip, gzip"])
def test_an_http_tool_refuses_unknown_and_stacked_codings(tmp_path, loopback, header):
    server = loopback(lambda request: Reply(200, b"\x28\xb5\x2f\xfd" + bytes(64), {"Content-Encoding": header}))
    outcome = call(make_tool("http", {"url": server.url}, folder=tmp_path), {})
    assert outcome.is_error and "content encoding" in outcome.result and "\n" not in outcome.result


@pytest.mark.parametrize("header", ["gzip", "deflate", "identity"])
def test_an_http_tool_still_reads_an_ordinary_compressed_answer(tmp_path, loopback, header):
    body = _COMPRESSORS[header](b'{"ok": true}')
    server = loopback(lambda request: Reply(200, body, {"Content-Type": "application/json",
                                                        "Content-Encoding": header}))
    outcome = call(make_tool("http", {"url": server.url}, folder=tmp_path), {})
    assert (outcome.result, outcome.is_error) == ('{"ok": true}', False)
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"  # nothing it cannot bound


_PEAK_RSS = """
import os, resource, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = child.communicate(timeout=120)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)  # MB, Linux reports KB
print((out + err).decode().strip().replace(chr(10), " | "))
"""


def _peak_rss_of_call(tmp_path: Path, url: str) -> tuple[int, str]:
    """Peak RSS (MB) of ``toolrun call`` fetching ``url`` in its own process, and what it printed."""
    tmp_path.mkdir()
    (tmp_path / "tools.yaml").write_text(textwrap.dedent(f"""
        tools:
          - name: fetch
            description: Fetch the test page.
            backend:
              http: {{url: "{url}"}}
        """), encoding="utf-8")
    command = [sys.executable, "-c", _PEAK_RSS, sys.executable, "-m", "toolrun", "call", "fetch",
               "--tools-dir", str(tmp_path)]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), **os.environ}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    peak, printed = done.stdout.splitlines()[:2]
    return int(peak), printed


@pytest.mark.integration  # measures a process's peak memory over many-megabyte bombs
def test_a_bomb_costs_an_http_tool_no_more_memory_than_its_body_cap(tmp_path, loopback, bombs):
    """Measured: a plain call peaks at 41 MB; the 256 MB gzip bomb at 57 MB (the 16 MB cap), the stacked one at
    41 MB (refused unread). Before bounded decoding: 114 MB and 554 MB (GBs for a bigger bomb)."""
    plain = loopback(lambda request: Reply(200, {"ok": True}))
    baseline, _ = _peak_rss_of_call(tmp_path / "plain", plain.url)
    for coding in ("gzip", "gzip, gzip"):
        server = _bomb_server(loopback, bombs, coding)
        peak, printed = _peak_rss_of_call(tmp_path / coding.replace(", ", "-"), server.url)
        assert "decodes to more than" in printed or "refused" in printed, printed
        assert peak - baseline < 64, f"{coding}: {peak} MB against {baseline} MB for a plain call"


# ------------------------------------------------------------------ the provider transport


def _provider_read(url: str, *, stream: bool) -> str:
    async def go() -> str:
        transport = HttpxTransport(max_retries=0, timeout=30)
        try:
            request = WireRequest("POST", url, {}, {"model": "m"}, stream=stream)
            if stream:
                return "".join([line async for line in transport.stream(request)])
            return json.dumps((await transport.send(request)).body)
        finally:
            await transport.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_a_provider_answer_that_is_a_bomb_is_a_provider_error(loopback, bombs, coding, stream):
    server = _bomb_server(loopback, bombs, coding, "text/event-stream" if stream else "application/json")
    with pytest.raises(ProviderError) as raised:
        _provider_read(server.url, stream=stream)
    assert "\n" not in str(raised.value)
    if coding == "gzip, gzip":
        assert "stacks content encodings" in str(raised.value)
    else:
        assert any(reason in str(raised.value) for reason in ("larger than 64 MB", "longer than 16 MB"))


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_answer_in_an_unknown_coding_is_a_provider_error(loopback, stream):
    server = loopback(lambda request: Reply(200, b"\x28\xb5\x2f\xfd" + bytes(32), {"Content-Encoding": "zstd"}))
    with pytest.raises(ProviderError, match="unsupported content encoding"):
        _provider_read(server.url, stream=stream)


def test_an_ordinary_gzipped_provider_stream_is_read_line_by_line(loopback):
    events = "data: {\"a\": \"é\"}\n\ndata: [DONE]\n\n".encode()
    server = loopback(lambda request: Reply(200, gzip.compress(events), {"Content-Encoding": "gzip",
                                                                         "Content-Type": "text/event-stream"}))
    assert _provider_read(server.url, stream=True) == 'data: {"a": "é"}data: [DONE]'


# ------------------------------------------------------------------ the importer's fetch


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_an_openapi_document_that_is_a_bomb_is_one_clean_error(loopback, bombs, coding):
    server = _bomb_server(loopback, bombs, coding)
    with pytest.raises(OpenAPIError) as raised:
        read_location(f"{server.url}/openapi.json")
    message = raised.value.problems[0].message
    assert "\n" not in message and ("decodes to more than 64 MB" in message or "content encodings" in message)


def test_an_ordinary_gzipped_openapi_document_is_read(loopback):
    server = loopback(lambda request: Reply(200, gzip.compress(b'{"openapi": "3.1.0"}'), {"Content-Encoding": "gzip"}))
    assert read_location(f"{server.url}/openapi.json") == '{"openapi": "3.1.0"}'


# ------------------------------------------------------------------ an MCP server reached by url


def test_the_mcp_http_client_reads_a_bomb_only_up_to_its_cap(loopback, bombs):
    server = _bomb_server(loopback, bombs, "gzip, gzip")
    stacked = loopback(lambda request: Reply(200, bombs["gzip"], {"Content-Encoding": "gzip"}))

    async def read(url: str) -> str:
        async with bounded_client({}, 30, {}) as client:
            try:
                return str(len((await client.get(url)).content))
            except httpx2.DecodingError as exc:
                return str(exc)

    assert "stacks content encodings" in asyncio.run(read(server.url))
    assert "decodes to more than 64 MB" in asyncio.run(read(stacked.url))


def test_an_mcp_server_answering_with_a_bomb_is_unavailable_not_a_crash(tmp_path, loopback, bombs):
    server = _bomb_server(loopback, bombs, "gzip, gzip")
    with pytest.raises(McpServerUnavailable) as raised:
        list_server_tools({"url": f"{server.url}/mcp", "timeout": 10}, tmp_path)
    print(str(raised.value))
    assert "stacks content encodings" in str(raised.value) and "\n" not in str(raised.value)


# ------------------------------------------------------------------ the decoder itself


_TOKENS = st.sampled_from(["gzip", "GZIP", "x-gzip", "deflate", "identity", "br", "zstd", "compress", "", " ", "aes128gcm"])


@settings(max_examples=property_examples(200), deadline=None)
@given(st.lists(_TOKENS, max_size=5), st.sampled_from([",", ", ", " ,"]))
def test_a_content_encoding_header_names_one_decodable_coding_or_is_refused(tokens: list[str], separator: str):
    header = separator.join(tokens)
    codings = [t.strip().lower() for t in tokens if t.strip() and t.strip().lower() != "identity"]
    try:
        coding = content_coding(header)
    except RefusedBody as exc:
        assert len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"), header
        assert "\n" not in str(exc)
        return
    assert len(codings) <= 1
    assert coding == ({"x-gzip": "gzip"}.get(codings[0], codings[0]) if codings else "identity")




@settings(max_examples=property_examples(150), deadline=None)
@given(st.binary(max_size=4000), st.sampled_from(sorted(_COMPRESSORS)), st.integers(1, 700),
       st.integers(1, 5000), st.integers(0, 3))
def test_decoding_in_any_pieces_gives_the_body_or_stops_at_the_limit(data, coding, piece, limit, repeat):
    body = data * (repeat + 1) * 20  # repetitive: compresses well, like a bomb
    raw = _COMPRESSORS[coding](body)
    chunks = [raw[i:i + piece] for i in range(0, len(raw), piece)]
    out = bytearray()
    try:
        for decoded_piece in decoded_sync(chunks, coding, limit):
            out += decoded_piece
    except BodyTooLarge:
        assert len(body) > limit and len(out) <= limit and body.startswith(bytes(out))
        return
    assert bytes(out) == body and len(body) <= limit


def test_decoding_gives_the_event_loop_a_turn_between_pieces():
    bomb = _deflated(32 * 1024 * 1024, zlib.MAX_WBITS | 16)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def raw():
        yield bomb

    async def go() -> int:
        task = asyncio.get_running_loop().create_task(ticker())
        with pytest.raises(BodyTooLarge):
            async for _ in decoded(raw(), "gzip", 16 * 1024 * 1024):
                pass
        task.cancel()
        return ticks

    assert asyncio.run(go()) >= 200  # 16 MB in 64 KB steps: 256 turns, none of them holding the loop for long
