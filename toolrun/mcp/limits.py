"""What one HTTP client may hold of the server: sessions (per client and overall), time, connections.

A client (an identity: a static ``--auth`` client's name today, an OIDC subject later) may
hold ``per_client`` sessions; the server holds ``overall``. A client at a limit that opens
another session closes its own least recently used idle one (no request in flight, no open
event stream): a client that crashed and restarted without saying goodbye is not locked
out for the idle timeout. When none of its sessions is idle the new one is refused, saying
which limit. One client never closes another's session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

DEFAULT_MAX_SESSIONS = 1000
DEFAULT_MAX_CLIENT_SESSIONS = 100
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 1000


@dataclass(frozen=True)
class SessionLimits:
    """The number of open sessions allowed overall and to each client (a client's own limit may differ)."""

    overall: int = DEFAULT_MAX_SESSIONS
    per_client: int = DEFAULT_MAX_CLIENT_SESSIONS


@dataclass(frozen=True)
class HttpLimits:
    """Every limit of ``toolrun mcp --http``: sessions, the time to send headers and a body, open connections."""

    sessions: SessionLimits = SessionLimits()
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS


class SessionRefused(Exception):
    """A new session would go over a limit, and none of the client's own sessions is idle."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Session:
    """One open session: who opened it, when it last did anything, and its requests under way."""

    identity: str | None
    last_active: float
    in_flight: int = 0


@dataclass
class SessionLedger:
    """Which identity opened each session, and which sessions are idle; decides admissions."""

    limits: SessionLimits
    clock: Callable[[], float] = time.monotonic
    _sessions: dict[str, _Session] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._sessions)

    def belongs_to(self, session_id: str, identity: str | None) -> bool:
        """False when ``session_id`` was opened by another identity (an unknown id is not this ledger's call)."""
        session = self._sessions.get(session_id)
        return session is None or session.identity == identity

    def count(self, identity: str | None) -> int:
        return sum(1 for session in self._sessions.values() if session.identity == identity)

    def make_room(self, identity: str | None, own_limit: int | None, label: str) -> str | None:
        """Before ``identity`` opens a session: None when there is room, else the id of its own least recently
        used idle session to close. Raises ``SessionRefused`` naming the limit when there is none to close.
        ``own_limit``: this client's limit (None: the default); without an identity only the overall one holds."""
        limit = self.limits.overall if identity is None else (own_limit or self.limits.per_client)
        mine = self.count(identity)
        over_own, over_all = mine >= limit, len(self._sessions) >= self.limits.overall
        if not (over_own or over_all):
            return None
        idle = [(session.last_active, key) for key, session in self._sessions.items()
                if session.identity == identity and session.in_flight == 0]
        if idle:
            return min(idle)[1]
        if over_own and identity is not None:
            raise SessionRefused(f"too many sessions: {label} has {mine} open, its limit, and none is idle; "
                                 "close one (HTTP DELETE) or wait for one to end")
        raise SessionRefused(f"too many sessions: the server has {len(self._sessions)} open, its limit of "
                             f"{self.limits.overall}, and none of yours is idle; try again later")

    def opened(self, session_id: str, identity: str | None) -> None:
        """A session was admitted; its opening request is in flight."""
        self._sessions[session_id] = _Session(identity, self.clock(), in_flight=1)

    def begin(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight += 1
            session.last_active = self.clock()

    def end(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.in_flight = max(0, session.in_flight - 1)
            session.last_active = self.clock()

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


def resolve_session_limits(overall: int | None, per_client: int | None,
                           own_limits: Sequence[tuple[str, int | None]] | None = None) -> SessionLimits:
    """The session limits from the options and, with ``--auth``, the clients' own (name, max_sessions).

    Without ``overall``: the default, or the sum of every client's limit when that is more, so no
    client can be locked out by the others. Without ``per_client``: the default, or half of a
    smaller ``overall``. Raises ``ValueError`` when one client could fill the server alone (its
    limit not below the overall one)."""
    if per_client is None:
        per_client = DEFAULT_MAX_CLIENT_SESSIONS if overall is None else min(DEFAULT_MAX_CLIENT_SESSIONS, overall // 2)
    if own_limits is None:  # without --auth every request is one anonymous client: only the overall limit holds
        return SessionLimits(overall or DEFAULT_MAX_SESSIONS, max(per_client, 1))
    limits = [("--max-client-sessions", per_client)] + [(f"client {name!r}: max_sessions", own or per_client)
                                                        for name, own in own_limits]
    if overall is None:
        overall = max(DEFAULT_MAX_SESSIONS, sum(limit for _, limit in limits[1:]) + 1)
    for what, limit in limits:
        if not 1 <= limit < overall:
            raise ValueError(f"{what} {limit} is not between 1 and the server's --max-sessions {overall}: "
                             "one client could fill the server alone")
    return SessionLimits(overall, per_client)
