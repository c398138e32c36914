"""A real HTTP server on 127.0.0.1 for tests: it answers from a Python function and stops itself.

Usage (see the ``loopback`` fixture in conftest.py)::

    def handler(request: Recorded) -> Reply: ...
    server = loopback(handler)        # fixture: started, stopped at teardown
    server.url                        # "http://127.0.0.1:PORT"
    server.requests                   # every Recorded request, in order
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    client_port: int = 0  # the client's side of the connection: requests on one kept-alive connection share it
    raw_query: str = ""  # the query as it came, before decoding (?ids=a,b%2Cc)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """A response. ``chunks`` streams the body in pieces (SSE/NDJSON) with a flush each."""

    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes as is
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[str] | None = None
    delay: float = 0.0
    cut_after: int | None = None  # with chunks: drop the connection after this many, body unfinished
    chunk_delay: float = 0.0  # with chunks: seconds to wait before every chunk after the first


Handler = Callable[[Recorded], Reply]


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up early (a cut stream, a cancelled run) is normal in these tests."""

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class LoopbackServer:
    def __init__(self, handler: Handler):
        self.handler = handler
        self.requests: list[Recorded] = []
        outer = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle on, the body waits ~40 ms for the client's ACK.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                recorded = Recorded(self.command, parts.path, parse_qs(parts.query),
                                    {k.lower(): v for k, v in self.headers.items()}, body, self.client_address[1],
                                    parts.query)
                outer.requests.append(recorded)
                reply = outer.handler(recorded)
                if reply.delay:
                    threading.Event().wait(reply.delay)
                if reply.chunks is not None:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for number, chunk in enumerate(reply.chunks):
                        if number == reply.cut_after:
                            break
                        if number and reply.chunk_delay:
                            threading.Event().wait(reply.chunk_delay)
                        data = chunk.encode("utf-8")
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    if reply.cut_after is not None:
                        self.close_connection = True  # a broken stream: no final empty chunk
                        return
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if isinstance(reply.body, (dict, list)):
                    data = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
                    content_type = "application/json"
                elif isinstance(reply.body, str):
                    data, content_type = reply.body.encode("utf-8"), "text/plain; charset=utf-8"
                else:
                    data, content_type = reply.body or b"", "application/octet-stream"
                self.send_response(reply.status)
                headers = {"Content-Type": content_type, **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

        self._server = _QuietServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._wake_up, self._stop_signal = socket.socketpair()  # stop() writes, the serving loop wakes and ends
        self._thread = threading.Thread(target=self._serve_until_stopped, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port; a second stop does nothing."""
        if self._stop_signal.fileno() == -1:
            return
        if self._thread.ident is not None:
            self._stop_signal.send(b"\0")
            self._thread.join()
        self._server.server_close()
        self._wake_up.close()
        self._stop_signal.close()

    def _serve_until_stopped(self) -> None:
        """``serve_forever`` without its poll: waiting on the listening socket and on the one ``stop`` writes
        to, a stop ends the loop at once (shutdown() waited for the next poll, and tests stop hundreds of
        servers), and an idle server costs no CPU."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            selector.register(self._wake_up, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._wake_up in ready:
                    return
                self._server.handle_request()  # a connection is waiting: accepted at once, served on its thread
