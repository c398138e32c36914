"""How ``toolrun mcp --http`` runs as a service: metrics address, drain delay, sessions or none.

Checked before the SDK loads, like the other options: a bad ``--metrics-listen`` is a
one-line error. Metrics name tools, so they are refused on a wildcard address (which is
the public one too) and on the ``--http`` address itself.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from toolrun.core.errors import Problem, UserError

DEFAULT_DRAIN_DELAY = 5.0  # longer than deploy/haproxy.cfg's checks (every 1 s, down after 2 failures)


@dataclass(frozen=True)
class ServiceOptions:
    """``--metrics-listen`` (None: no metrics), ``--drain-delay`` seconds, ``--stateless``."""

    metrics_listen: tuple[str, int] | None = None
    drain_delay: float = DEFAULT_DRAIN_DELAY
    stateless: bool = False


def parse_metrics_address(text: str, public: tuple[str, int] | None) -> tuple[str, int]:
    """``--metrics-listen [HOST:]PORT`` -> (host, port); a bare port is on 127.0.0.1. UserError when it is
    not an address, is a wildcard, or is the public ``--http`` address."""
    host, sep, port_text = text.strip().rpartition(":")
    host = (host.strip("[]") if sep else "127.0.0.1").strip()
    if not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(Problem(None, None, f"--metrics-listen {text!r} is not [HOST:]PORT",
                                "write it like --metrics-listen 127.0.0.1:9464 (a bare port listens on 127.0.0.1)"))
    if listens_everywhere(host):
        raise UserError(Problem(None, None, f"--metrics-listen {text!r} listens on every interface, the public one "
                                            "too: metrics name the tools you serve",
                                "name one interface: 127.0.0.1, or the internal address your Prometheus scrapes"))
    if public is None:
        raise UserError(Problem(None, None, "--metrics-listen is for a server over HTTP",
                                "add --http HOST:PORT, or leave --metrics-listen out"))
    if (host, int(port_text)) == public and public[1] != 0:
        raise UserError(Problem(None, None, f"--metrics-listen {text!r} is the --http address: metrics are never "
                                            "served on the public address",
                                "give the metrics a port of their own, e.g. --metrics-listen 127.0.0.1:9464"))
    return host, int(port_text)


def listens_everywhere(host: str) -> bool:
    """Whether a socket bound to ``host`` listens on every interface: 0.0.0.0 or ``::`` however written, as
    the socket layer reads them (``0``, ``0.0``, ``0x0``, ``0:0::0``, the IPv4-mapped ``::ffff:0.0.0.0``)."""
    if not host:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            return socket.inet_aton(host) == bytes(4)  # the C library's reading of the short and hex forms
        except OSError:
            return False  # a name: bound as whatever it resolves to
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_unspecified or (mapped is not None and mapped.is_unspecified)
