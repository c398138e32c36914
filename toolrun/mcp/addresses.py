"""``--http HOST:PORT`` parsing and what counts as loopback (no SDK needed: checked before it loads)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from toolrun.core.errors import Problem, UserError

_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def parse_address(text: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``"[::1]:8080"`` -> (host, port); ``UserError`` otherwise."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip()
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(Problem(None, None, f"--http {text!r} is not HOST:PORT",
                                "write it like --http 127.0.0.1:8765 (port 0 picks a free one)"))
    return host.strip("[]") if host.startswith("[") else host, int(port_text)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: only this machine can connect."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_origins(host: str, port: int) -> list[str]:
    """The browser origins that may call the server: its own address, and this machine's when on loopback."""
    origins = [f"http://{host}:{port}", f"https://{host}:{port}"]
    if is_loopback(host):
        origins += [f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    return origins


def check_origin(text: str) -> str:
    """An ``--allow-origin`` value as a browser sends it (``https://inspector.example.com:6274``); UserError otherwise."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username is not None:
        raise UserError(Problem(None, None, f"--allow-origin {text!r} is not an origin",
                                "write a scheme, host and port as a browser sends them, e.g. "
                                "--allow-origin http://localhost:6274 (one option per origin; '*' is not accepted)"))
    host = parts.hostname.lower()
    shown_host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown_host}" + (f":{port}" if port is not None else "")
