"""Bearer JWTs from an OpenID provider: its keys by discovery, and each token checked with pyjwt.

The keys come from ``{issuer}/.well-known/openid-configuration`` -> ``jwks_uri`` and are
kept five minutes; a token signed with a key id not among them fetches them again, at most
once a minute (a provider rotating its keys is followed without a restart; a flood of made-up
key ids costs one fetch a minute). Keys older than five minutes are fetched again at the next
token, so a key the provider withdraws is refused; a provider that cannot be reached then
leaves the keys as they were (asked again once a minute). Only asymmetric algorithms are accepted, and only the
one the key is for: ``alg: none`` and an HMAC "signed" with a public key are refused.
Fetches are https (http only on loopback), without redirects, bounded in size and time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from toolrun.core.text import excerpt
from toolrun.core.version import USER_AGENT
from toolrun.mcp.oidc_rules import OidcSettings, fetchable_url

KEY_REFRESH_INTERVAL = 60.0  # seconds between two fetches of the keys, whatever the tokens say
KEY_MAX_AGE = 300.0  # seconds the keys are kept without asking again: a key the issuer withdraws is refused after
FETCH_TIMEOUT = 10.0
MAX_DOCUMENT_BYTES = 512 * 1024  # a key set of a few dozen keys is under 20 KB
CLOCK_SKEW_LEEWAY = 30  # seconds of clock difference allowed on exp, nbf and iat
# The algorithms each kind of key verifies; HS* is absent on purpose (a public key is no secret).
ALGORITHMS_BY_KEY_TYPE = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512", "ES256K"),
    "OKP": ("EdDSA",),
}

Fetch = Callable[[str], dict[str, Any]]


class TokenRefused(Exception):
    """A token that does not admit its bearer: ``reason`` in a few words, ``subject`` as the token claims it."""

    def __init__(self, reason: str, subject: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.subject = subject


class FetchFailed(Exception):
    """The issuer's metadata or keys could not be read."""


@dataclass(frozen=True)
class VerifiedToken:
    """A token that checked out: who it names, and the globs of the tools its claims give."""

    subject: str
    issuer: str
    tools: tuple[str, ...]
    # Whom the sessions belong to: the claim that named the subject and its whole value (``subject`` is cut
    # for display), so a user whose sub equals a client's client_id, or two long subjects alike in their
    # first 200 characters, are not one identity.
    identity: str = ""


def fetch_json(url: str) -> dict[str, Any]:
    """A JSON object from ``url``: https (http on loopback only), no redirects, at most 512 KB in 10 s."""
    if not fetchable_url(url):
        raise FetchFailed(f"{url} is not https (plain http is allowed only on loopback)")
    deadline = time.monotonic() + FETCH_TIMEOUT
    body = bytearray()
    try:
        with httpx.Client(timeout=FETCH_TIMEOUT, follow_redirects=False, headers={"user-agent": USER_AGENT}) as client, \
                client.stream("GET", url, headers={"accept": "application/json"}) as response:
            if response.status_code != 200:
                raise FetchFailed(f"{url} answered HTTP {response.status_code}")
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES or time.monotonic() > deadline:
                    raise FetchFailed(f"{url} sent more than {MAX_DOCUMENT_BYTES // 1024} KB or took over {FETCH_TIMEOUT:.0f} s")
    except httpx.HTTPError as exc:
        raise FetchFailed(f"cannot reach {url}: {exc}") from None
    try:
        document = json.loads(body)
    except ValueError:
        raise FetchFailed(f"{url} did not send JSON") from None
    if not isinstance(document, dict):
        raise FetchFailed(f"{url} did not send a JSON object")
    return document


class IssuerKeys:
    """The issuer's signing keys by key id, found by discovery, fetched again on an unknown id (once a minute)."""

    def __init__(self, issuer: str, *, fetch: Fetch = fetch_json, refresh_interval: float = KEY_REFRESH_INTERVAL,
                 max_age: float = KEY_MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._refresh_interval = refresh_interval
        self._max_age = max_age
        self._clock = clock
        self._keys: list[dict[str, Any]] = []
        self._last_fetch: float | None = None  # the last attempt
        self._fetched_at: float | None = None  # the last fetch that brought the keys
        self._lock = threading.Lock()
        self.last_error: str | None = None  # why the last fetch failed, for the operator
        self.fetches = 0

    def candidates(self, kid: str | None) -> list[dict[str, Any]]:
        """The keys that may have signed a token with this ``kid`` (every key when it names none)."""
        if self._stale():
            with self._lock:
                if self._stale():
                    self._refresh()
        found = self._matching(kid)
        if not found:
            with self._lock:  # one fetch at a time; a second caller finds the keys the first fetched
                found = self._matching(kid)
                if not found and self._may_fetch():
                    self._refresh()
                    found = self._matching(kid)
        return found

    def _matching(self, kid: str | None) -> list[dict[str, Any]]:
        return [key for key in self._keys if kid is None or key.get("kid") == kid]

    def _may_fetch(self) -> bool:
        return self._last_fetch is None or self._clock() - self._last_fetch >= self._refresh_interval

    def _stale(self) -> bool:
        """Kept longer than ``max_age``: the issuer may have withdrawn one of them (asked at most once a minute)."""
        return self._fetched_at is not None and self._clock() - self._fetched_at >= self._max_age and self._may_fetch()

    def _refresh(self) -> None:
        self._last_fetch = self._clock()
        self.fetches += 1
        try:
            metadata = self._fetch(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
            if metadata.get("issuer") != self.issuer:
                raise FetchFailed(f"the discovery document names issuer {metadata.get('issuer')!r}, not {self.issuer!r}")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise FetchFailed("the discovery document has no jwks_uri")
            keys = self._fetch(jwks_uri).get("keys")
            if not isinstance(keys, list):
                raise FetchFailed(f"{jwks_uri} has no list of keys")
        except FetchFailed as exc:
            self.last_error = str(exc)  # keep the keys we had: a provider briefly down refuses no known key
            return
        self._keys = [key for key in keys if isinstance(key, dict) and key.get("kty") in ALGORITHMS_BY_KEY_TYPE
                      and key.get("use", "sig") == "sig"]
        self._fetched_at = self._last_fetch
        self.last_error = None


class TokenVerifier:
    """Checks a bearer JWT against the issuer's keys, audience and time, and gives it tools by the rules."""

    def __init__(self, settings: OidcSettings, keys: IssuerKeys | None = None) -> None:
        self.settings = settings
        self.keys = keys or IssuerKeys(settings.issuer)

    def verify(self, token: str) -> VerifiedToken:
        """The token's subject and tools; ``TokenRefused`` saying why not. May fetch the keys (blocking)."""
        header, claimed = _unverified(token)
        subject = _subject(claimed)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or not any(algorithm in algs for algs in ALGORITHMS_BY_KEY_TYPE.values()):
            raise TokenRefused(f"algorithm {excerpt(str(algorithm), 20)!r} is not accepted", subject)
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        keys = [key for key in self.keys.candidates(kid) if algorithm in ALGORITHMS_BY_KEY_TYPE[key["kty"]]
                and key.get("alg", algorithm) == algorithm]
        if not keys:
            raise TokenRefused("signed with a key the issuer does not publish" if kid else "no key of the issuer fits",
                               subject)
        claims = self._decode(token, keys, algorithm, subject)
        named = _naming_claim(claims)
        if named is None:
            raise TokenRefused("the token names no subject (sub or client_id)")
        claim, value = named
        return VerifiedToken(excerpt(value, 200), self.settings.issuer, self.settings.tools_for(claims),
                             identity=f"{self.settings.issuer}#{claim}={value}")

    def _decode(self, token: str, keys: list[dict[str, Any]], algorithm: str, subject: str | None) -> dict[str, Any]:
        refusal = TokenRefused("bad signature", subject)
        for key in keys:
            try:
                signing_key = jwt.PyJWK(key, algorithm=algorithm)
                claims: dict[str, Any] = jwt.decode(
                    token, signing_key, algorithms=[algorithm], audience=self.settings.audience,
                    issuer=self.settings.issuer, leeway=CLOCK_SKEW_LEEWAY,
                    options={"require": ["exp", "iss", "aud"]})
                return claims
            except jwt.InvalidSignatureError:
                continue  # another key with the same id (or none) may fit
            except jwt.PyJWTError as exc:
                refusal = TokenRefused(_reason(exc), subject)
                break
        raise refusal


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims as written, unchecked: for the algorithm, the key id and the audit line."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise TokenRefused("not a well-formed JWT") from None
    return header, claims if isinstance(claims, dict) else {}


def _naming_claim(claims: dict[str, Any]) -> tuple[str, str] | None:
    """(claim, value) of the claim that names the token's subject. A client-credentials token may name its
    client only (client_id, RFC 9068; azp)."""
    for name in ("sub", "client_id", "azp"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return name, value
    return None


def _subject(claims: dict[str, Any]) -> str | None:
    """The token's subject as an audit line shows it (cut at 200 characters)."""
    named = _naming_claim(claims)
    return excerpt(named[1], 200) if named is not None else None


def _reason(error: jwt.PyJWTError) -> str:
    reasons: list[tuple[type[jwt.PyJWTError], str]] = [
        (jwt.ExpiredSignatureError, "expired"), (jwt.ImmatureSignatureError, "not valid yet"),
        (jwt.InvalidAudienceError, "wrong audience"), (jwt.InvalidIssuerError, "wrong issuer"),
        (jwt.InvalidAlgorithmError, "algorithm not accepted"), (jwt.MissingRequiredClaimError, "a required claim is missing"),
        (jwt.InvalidIssuedAtError, "issued in the future"), (jwt.InvalidKeyError, "the issuer's key is unusable"),
    ]
    for kind, reason in reasons:
        if isinstance(error, kind):
            return f"{reason} ({excerpt(str(error), 80)})" if kind is jwt.MissingRequiredClaimError else reason
    return "not a valid token"
