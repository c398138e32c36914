"""Where an HTTP tool may send a request, checked before every hop.

Refused: schemes other than http/https; link-local addresses (169.254.0.0/16, fe80::/10)
and the cloud metadata endpoints, by name, by address, or by what a name resolves to;
hosts outside ``allow_hosts`` (the tool's list and the recipe's, when given). Redirects are
followed only within one origin (scheme, host, port), so credentials never travel elsewhere.

A name is resolved once, at connect time, by ``CheckedNetwork``: every address it resolves
to is checked and the connection goes to a checked address — a DNS answer that changes
between a check and the connection (rebinding) has nothing to change. A name that does not
resolve is refused, never let through.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from toolrun.core.tls import shared_ssl_context

BLOCKED_HOSTNAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
BLOCKED_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"),  # AWS metadata over IPv6
                               ipaddress.ip_address("100.100.100.200")})  # Alibaba Cloud metadata
LINK_LOCAL_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))


class RefusedRequest(Exception):
    """A request the safety rules do not allow; its message is the error result."""


# IPv6 prefixes whose last 32 bits are an IPv4 address a gateway may reach: NAT64's well-known
# prefix, the IPv4-translated form (SIIT) and the deprecated IPv4-compatible form.
_IPV4_IN_LAST_32_BITS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::ffff:0:0:0/96"),
                         ipaddress.ip_network("::/96"))
# NAT64's local-use prefix is /48 to /96 long, and RFC 6052 puts the IPv4 address at another place
# for each length (skipping bits 64-71): every place is checked.
_NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")
_NAT64_LAYOUTS = ((6, 8, 9, 11), (7, 8, 9, 12), (9, 13, 13, 13), (12, 16, 16, 16))  # byte ranges, /48 /56 /64 /96


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _ips(text: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The address ``text`` spells and every IPv4 address embedded in it (mapped, NAT64, 6to4, Teredo)."""
    try:
        ip = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return []
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            found.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            found.append(ip.sixtofour)
        if ip.teredo is not None:
            found += ip.teredo  # (server, client): the client's address is stored inverted, and decoded here
        if any(ip in network for network in _IPV4_IN_LAST_32_BITS):
            found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip in _NAT64_LOCAL_USE:
            packed = ip.packed
            found += [ipaddress.IPv4Address(packed[a:b] + packed[c:d]) for a, b, c, d in _NAT64_LAYOUTS]
    return found


def is_forbidden_address(text: str) -> bool:
    """True for a link-local or metadata IP address, also spelt inside an IPv6 one (a name is never one)."""
    return any(ip in BLOCKED_ADDRESSES or any(ip in net for net in LINK_LOCAL_NETWORKS) for ip in _ips(text))


def default_port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def host_matches(pattern: str, url: httpx.URL) -> bool:
    """``api.internal``, ``*.example.com``, ``127.0.0.1``, ``::1`` or ``host:8080`` against a URL."""
    pattern = pattern.strip().lower()
    host = url.host.lower()
    pattern_ip = _ip(pattern)
    if pattern_ip is not None:
        return pattern_ip == _ip(host)
    if ":" in pattern:
        return fnmatch.fnmatchcase(f"{host}:{default_port(url)}", pattern)
    return fnmatch.fnmatchcase(host, pattern)


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, default_port(a)) == (b.scheme, b.host, default_port(b))


async def check_destination(url: httpx.URL, allow_lists: list[list[str]]) -> None:
    """Raise RefusedRequest for a scheme, host or address the safety rules forbid."""
    if url.scheme not in ("http", "https"):
        raise RefusedRequest(f"refused: only http and https URLs are allowed, not {url.scheme or 'a relative URL'}")
    host = url.host.lower().rstrip(".")
    if host in BLOCKED_HOSTNAMES or is_forbidden_address(host):
        raise RefusedRequest(f"refused: {host} is a link-local or cloud-metadata address")
    for allow_hosts in allow_lists:
        if not any(host_matches(pattern, url) for pattern in allow_hosts):
            raise RefusedRequest(f"refused: host {host} is not in allow_hosts ({', '.join(allow_hosts)})")
    # A name's addresses are checked where the connection is made (CheckedNetwork), not here:
    # resolving twice would let a rebinding DNS server answer the check and the connection apart.


def _named(host: str) -> str:
    """The host as compared; RefusedRequest when its name or literal address is forbidden."""
    name = host.strip("[]").lower().rstrip(".")
    if name in BLOCKED_HOSTNAMES or is_forbidden_address(name):
        raise RefusedRequest(f"refused: {name} is a link-local or cloud-metadata address")
    return name


def _allowed(name: str, infos: list[Any]) -> list[str]:
    """The addresses getaddrinfo gave for ``name``, each allowed; RefusedRequest when any is forbidden."""
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses or any(is_forbidden_address(address) for address in addresses):
        raise RefusedRequest(f"refused: {name} resolves to a link-local or cloud-metadata address")
    return addresses


def _unresolved(name: str, exc: BaseException) -> httpcore.ConnectError:
    return httpcore.ConnectError(f"cannot resolve {name}: {exc.args[-1] if exc.args else exc}")


async def resolve_checked(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, each allowed; RefusedRequest when any is forbidden."""
    name = _named(host)
    if _ip(name) is not None:
        return [name]
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _unresolved(name, exc) from None
    return _allowed(name, infos)


def resolve_checked_sync(host: str, port: int) -> list[str]:
    """``resolve_checked`` for blocking code (the importer's fetch of a document)."""
    name = _named(host)
    if _ip(name) is not None:
        return [name]
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _unresolved(name, exc) from None
    return _allowed(name, infos)


class CheckedNetwork(httpcore.AsyncNetworkBackend):
    """httpcore's network, connecting only to addresses ``resolve_checked`` allowed."""

    def __init__(self) -> None:
        self._network = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await resolve_checked(host, port):
            try:  # TLS still verifies the certificate against the name: httpcore passes it as SNI
                return await self._network.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_checked returns at least one address
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not used by http tools")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


def checked_transport(ssl_context: ssl.SSLContext) -> httpx.AsyncBaseTransport:
    """An httpx transport whose connections go only where ``resolve_checked`` allowed."""
    transport = httpx.AsyncHTTPTransport(verify=ssl_context, trust_env=False)
    # httpx has no public seam for the network backend; its pool is the one documented place.
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=CheckedNetwork())
    return transport


class CheckedSyncNetwork(httpcore.NetworkBackend):
    """``CheckedNetwork`` for blocking code: connects only to addresses ``resolve_checked_sync`` allowed."""

    def __init__(self) -> None:
        self._network = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        failure: Exception | None = None
        for address in resolve_checked_sync(host, port):
            try:  # TLS still verifies the certificate against the name
                return self._network.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # resolve_checked_sync returns at least one address
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used to read documents")

    def sleep(self, seconds: float) -> None:
        self._network.sleep(seconds)


def checked_sync_transport() -> httpx.HTTPTransport:
    """A blocking httpx transport whose connections go only where ``resolve_checked_sync`` allowed."""
    context = shared_ssl_context()
    transport = httpx.HTTPTransport(verify=context)
    transport._pool = httpcore.ConnectionPool(ssl_context=context, network_backend=CheckedSyncNetwork())
    return transport
