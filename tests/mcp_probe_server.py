"""A small MCP server over stdio, standard library only, for the tests of toolrun's ``mcp_server`` backend.

Tests copy it into a tools folder (``copy_probe_server``) and name it in a toolset file as
``command: [python, probe_server.py]``. It writes its process id to ``server.pid`` in its
folder when it starts, so a test sees whether toolrun started it. Its tools:

- ``whoami``: the process id of the server that answers;
- ``slow``: sleeps ``seconds``, then answers ``slept``;
- ``who``: ``token=`` and the ``TOK`` it was started with;
- ``die``: exits at once, mid-call.

It speaks the protocol's JSON-RPC lines as a server does after ``initialize`` (the handshake
toolrun's client opens with) and answers each call in a thread of its own, so calls overlap.
A server written with the SDK would cost an SDK import (seconds of CPU) at every start; the
interoperation with the SDK's own servers is tested elsewhere (the ticket example server,
tests/mcp_client_servers.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
WHOAMI_DESCRIPTION = ("Returns the process id of this probe server as text. Use it to see which server process "
                      "answers; do not use it for anything else. It changes nothing.")
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "whoami": (WHOAMI_DESCRIPTION, NO_PARAMETERS),
    "slow": ("Sleeps for the given number of seconds, then answers slept. Use it to keep a call running for a "
             "while; do not use it for real work. It changes nothing.",
             {"type": "object", "properties": {"seconds": {"type": "number", "description": "How long to sleep."}},
              "required": ["seconds"], "additionalProperties": False}),
    "who": ("Returns the token this MCP server was started with, as text. Use it when asked which token the "
            "server holds; do not use it for anything else. It changes nothing.", NO_PARAMETERS),
    "die": ("Stops this MCP server at once, for tests. Use it only when asked to stop the server; do not use it "
            "otherwise. It changes nothing else.", NO_PARAMETERS),
}
_write_lock = threading.Lock()


def copy_probe_server(folder: Path) -> Path:
    """This server as ``folder/probe_server.py``."""
    return Path(shutil.copy(__file__, folder / "probe_server.py"))


def _send(message: dict[str, Any]) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def _run_tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "slow":
        time.sleep(float(arguments["seconds"]))
        return "slept"
    if name == "who":
        return "token=" + os.environ.get("TOK", "<none>")
    if name == "die":
        os._exit(3)
    return str(os.getpid())


def _call(request_id: Any, params: dict[str, Any]) -> None:
    text = _run_tool(params["name"], params.get("arguments") or {})
    _send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}], "isError": False}})


def _answer(request_id: Any, method: str, params: dict[str, Any]) -> None:
    if method == "initialize":
        asked = params.get("protocolVersion")
        result: dict[str, Any] = {"protocolVersion": asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[-1],
                                  "capabilities": {"tools": {}}, "serverInfo": {"name": "probe", "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [{"name": name, "description": description, "inputSchema": schema}
                            for name, (description, schema) in TOOLS.items()]}
    elif method == "tools/call" and params.get("name") in TOOLS:
        threading.Thread(target=_call, args=(request_id, params), daemon=True).start()
        return
    elif method == "tools/call":
        _send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"}})
        return
    else:
        _send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
        return
    _send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    Path("server.pid").write_text(str(os.getpid()), encoding="utf-8")
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "method" in message and "id" in message:  # a request; notifications and answers need nothing
            _answer(message["id"], message["method"], message.get("params") or {})
    os._exit(0)  # stdin closed: the client is gone; a call still sleeping is not waited for


if __name__ == "__main__":
    main()
