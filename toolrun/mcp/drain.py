"""SIGTERM drains the HTTP server: the balancer stops sending work, calls finish, then the process exits.

uvicorn on its own stops taking connections at SIGTERM and cuts what still runs after its
graceful-shutdown timeout (2 s here before), so a replica taken out of a pool lost every call
longer than that. The drain, in order:

1. ``/readyz`` answers 503 (``health``); every request is still served.
2. ``drain_delay`` passes: longer than the balancer's check interval times its ``fall``
   count, so by then it sends new sessions elsewhere.
3. The listening socket closes; idle connections close, busy ones after their response.
4. Calls under way finish, each up to its tool's timeout (``call_timeout``: the longest of the tools
   served then — a tool added while the server ran included).
5. uvicorn's own shutdown: the event streams still open (a session's GET stream, a
   2026-07-28 ``subscriptions/listen``) end — sse-starlette ends them when uvicorn's
   ``should_exit`` is set, which is why it is set only now — their clients reconnect
   through the balancer; the sessions end and the process exits with status 0.

A second SIGTERM, or SIGINT (Ctrl-C), skips the rest: uvicorn's shutdown at once, which
cuts the event streams, calls' included.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn

from toolrun.mcp.health import Readiness

RESPONSE_GRACE_SECONDS = 0.5  # for a finished call's result to be written before streams are cut
POLL_SECONDS = 0.05


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining at SIGTERM (see the module) instead of stopping."""

    def __init__(self, config: uvicorn.Config, *, readiness: Readiness, drain_delay: float,
                 calls_in_flight: Callable[[], int], call_timeout: Callable[[], float],
                 report: Callable[[str], None] = lambda line: None) -> None:
        super().__init__(config)
        self.readiness = readiness
        self.report = report  # the operator's lines: when the drain starts, and how it ended
        self.drain_delay = drain_delay
        self.calls_in_flight = calls_in_flight
        self.call_timeout = call_timeout
        self._drain: asyncio.Task[None] | None = None
        self.drained = False  # True once the drain ran to its end (the tests read it)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self.readiness.draining and not self.should_exit:
            # Not recorded as uvicorn's captured signal: after a drain the process exits 0, not by SIGTERM.
            self.readiness.draining = True
            return
        super().handle_exit(sig, frame)

    def begin_drain(self) -> None:
        """What SIGTERM does: ``/readyz`` 503 at once, the rest of the drain from the next tick."""
        self.readiness.draining = True

    async def on_tick(self, counter: int) -> bool:
        if self.readiness.draining and self._drain is None and not self.should_exit:
            self._drain = asyncio.ensure_future(self._run_drain())
        return await super().on_tick(counter)

    async def _run_drain(self) -> None:
        call_timeout = self.call_timeout()
        self.report(f"toolrun: draining: /readyz answers 503; new connections are taken for {self.drain_delay:g} s more, "
                    f"then calls under way ({self.calls_in_flight()} now) have up to {call_timeout:g} s to finish")
        await asyncio.sleep(self.drain_delay)
        self._stop_taking_work()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + call_timeout
        while self.calls_in_flight() > 0 and loop.time() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        cut = self.calls_in_flight()
        await asyncio.sleep(RESPONSE_GRACE_SECONDS)
        self.report("toolrun: drained; stopping" if not cut
                    else f"toolrun: drained; stopping, {cut} call{'s' if cut != 1 else ''} still running cut short")
        self.drained = True
        # Only now: uvicorn's shutdown begins, and sse-starlette (which watches this flag) ends every event
        # stream cleanly — set earlier, it would also have cut the streams carrying the calls' results.
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._drain is not None and not self._drain.done():
            # A second SIGTERM, or SIGINT, before the drain's end: its calls are cut, which its own last line,
            # written as they ended, would have called drained
            self._drain.cancel()
            running = self.calls_in_flight()
            self.report("toolrun: the drain was cut short by a second signal: stopping now" + (
                f", {running} call{'s' if running != 1 else ''} still running cut short" if running else ""))
        await super().shutdown(sockets)

    def _stop_taking_work(self) -> None:
        """The first half of uvicorn's shutdown: no new connection, idle ones closed, busy ones closed when done."""
        for listener in self.servers:
            listener.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()


def shutdown_bound() -> int:
    """uvicorn's graceful-shutdown timeout, once the drain is over: what is left are event streams ending."""
    return 3
