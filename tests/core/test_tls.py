"""One TLS context per process, still verifying, still following SSL_CERT_FILE.

A real HTTPS server on 127.0.0.1 with a certificate made by ``openssl`` for this test: a
provider transport refuses it until ``SSL_CERT_FILE`` names that certificate, and transports
made under the same settings share one context (building one loads the whole CA bundle).
"""

from __future__ import annotations

import asyncio
import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolrun.core.errors import ProviderError
from toolrun.core.tls import shared_ssl_context
from toolrun.providers.transport import HttpxTransport, WireRequest

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/v1", cert
    server.shutdown()
    server.server_close()


def _post(url: str) -> int:
    async def go() -> int:
        transport = HttpxTransport(max_retries=0, timeout=5.0)
        try:
            return (await transport.send(WireRequest("POST", url, {}, {"q": 1}))).status
        finally:
            await transport.aclose()

    return asyncio.run(go())


def test_the_shared_context_verifies_and_follows_ssl_cert_file(https_server: tuple[str, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    url, cert = https_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(ProviderError, match="(?i)certificate|ssl"):
        _post(url)  # a self-signed certificate is not trusted by default
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert _post(url) == 200
    monkeypatch.delenv("SSL_CERT_FILE")
    with pytest.raises(ProviderError, match="(?i)certificate|ssl"):
        _post(url)  # the trusting context is not served once the setting is gone


def test_transports_made_under_the_same_settings_share_one_context(https_server: tuple[str, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = shared_ssl_context()
    assert shared_ssl_context() is default
    monkeypatch.setenv("SSL_CERT_FILE", str(https_server[1]))
    assert shared_ssl_context() is not default
