"""``/healthz`` and ``/readyz`` beside ``/mcp``: what a load balancer and an orchestrator ask.

``/healthz`` answers 200 while the process serves requests at all. ``/readyz`` answers 200
once the catalog has loaded and until SIGTERM starts the drain, 503 otherwise: a balancer
checking it stops sending new sessions before the process stops taking connections
(``drain``). Both are answered before the Origin and token checks (a balancer's check
carries neither) and say nothing about the catalog beyond "ready".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


@dataclass
class Readiness:
    """Whether the server should get new work: the catalog loaded and no drain under way."""

    loaded: bool = False
    draining: bool = False

    @property
    def ready(self) -> bool:
        return self.loaded and not self.draining

    def state(self) -> str:
        return "draining" if self.draining else "ready" if self.loaded else "loading"


class HealthRoutes:
    """ASGI middleware: answers ``GET``/``HEAD`` ``/healthz`` and ``/readyz``, passes everything else on."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (HEALTH_PATH, READY_PATH):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"status": "use GET"}, scope["method"] == "HEAD")
            return
        if path == HEALTH_PATH:
            await _answer(send, 200, {"status": "alive"}, scope["method"] == "HEAD")
            return
        status = 200 if self.readiness.ready else 503
        await _answer(send, status, {"status": self.readiness.state()}, scope["method"] == "HEAD")


async def _answer(send: Send, status: int, document: dict[str, str], head_only: bool) -> None:
    body = json.dumps(document).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head_only else body})
