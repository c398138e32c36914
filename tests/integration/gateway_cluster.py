"""Replicas of ``toolrun mcp --http`` behind a real haproxy running the shipped ``deploy/haproxy.cfg``.

Used by ``test_gateway_replicas.py`` and ``benchmarks/gateway.py``. Every replica serves one
tool, ``work``, which waits the milliseconds it is given and answers with the process id of
the replica that ran it: a client sees which replica holds its session. The shipped
configuration is used as it is, but for its ``bind`` line (a free loopback port) and its
``server`` lines (the replicas started here).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.mcp_helpers import ROOT, HttpServer, http_server, stop_process

SHIPPED_CONFIG = ROOT / "deploy" / "haproxy.cfg"
WORK_TOOL = """\
name: work
description: >-
  Waits the given milliseconds and answers with the process id of the server that ran it.
  Use it to load-test the gateway; do not use it for anything else, it changes nothing.
parameters:
  type: object
  properties:
    ms: {type: integer, minimum: 0, maximum: 60000, description: Milliseconds to wait.}
  required: [ms]
  additionalProperties: false
annotations: {read_only: true}
backend:
  python: work.py:work
"""
WORK_CODE = """\
import asyncio
import os


async def work(ms):
    await asyncio.sleep(ms / 1000)
    return {"pid": os.getpid()}
"""


def haproxy_binary() -> str:
    """haproxy from the Debian package (``apt-get install haproxy``; .ci/run installs it)."""
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    assert found, "haproxy is not installed: apt-get install haproxy (the integration stage of .ci/run does)"
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_work_tools(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "work.yaml").write_text(WORK_TOOL, encoding="utf-8")
    (folder / "work.py").write_text(WORK_CODE, encoding="utf-8")
    return folder


def balancer_config(port: int, replicas: list[str]) -> str:
    """The shipped configuration, bound to ``127.0.0.1:port`` and listing ``replicas`` (``host:port``)."""
    text = SHIPPED_CONFIG.read_text(encoding="utf-8")
    text, binds = re.subn(r"(?m)^(\s*)bind \S+$", rf"\g<1>bind 127.0.0.1:{port}", text)
    servers = "".join(f"    server replica{index} {address}\n" for index, address in enumerate(replicas, 1))
    text, listed = re.subn(r"(?m)^\s*server replica\d+ \S+\n", "", text)
    assert binds == 1 and listed >= 1, "deploy/haproxy.cfg no longer has the bind and server lines this harness replaces"
    return text.rstrip("\n") + "\n" + servers


@dataclass
class Cluster:
    """The balancer's URL, the replica processes, and the balancer's own process."""

    url: str
    replicas: list[HttpServer]
    balancer: subprocess.Popen[str]

    def pids(self) -> list[int]:
        return [replica.process.pid for replica in self.replicas]


def _wait_for_port(port: int, process: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"haproxy exited: {process.stderr.read() if process.stderr else ''}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"haproxy did not listen on {port} within {timeout} s")


@contextmanager
def gateway_cluster(folder: Path, replicas: int = 3, *replica_args: str) -> Iterator[Cluster]:
    """``replicas`` servers of the ``work`` tool behind haproxy; everything stopped at exit."""
    tools = write_work_tools(folder / "tools")
    with ExitStack() as stack:
        started = [stack.enter_context(http_server("--tools-dir", str(tools), "--audit", os.devnull, *replica_args))
                   for _ in range(replicas)]
        addresses = [server.url.removeprefix("http://").removesuffix("/mcp") for server in started]
        port = free_port()
        config = folder / "haproxy.cfg"
        config.write_text(balancer_config(port, addresses), encoding="utf-8")
        # -db: in the foreground, so it is this harness's child and stops with it.
        balancer = subprocess.Popen([haproxy_binary(), "-db", "-f", str(config)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_port(port, balancer)
            yield Cluster(f"http://127.0.0.1:{port}/mcp", started, balancer)
        finally:
            stop_process(balancer)


