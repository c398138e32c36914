"""Single sign-on for ``toolrun mcp``: the ``oidc`` section, its rules, and tokens checked against an issuer's keys.

The keys are generated here with ``cryptography`` and served by a fake issuer at the network
edge (the ``fetch`` seam); tests/integration/test_oidc_gateway.py runs a real OpenID provider.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.loopback import Recorded, Reply
from toolrun.core.errors import LoadError
from toolrun.mcp.access import load_access_list
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.http import RequestGate
from toolrun.mcp.oidc import (
    KEY_MAX_AGE,
    KEY_REFRESH_INTERVAL,
    FetchFailed,
    IssuerKeys,
    TokenRefused,
    TokenVerifier,
    fetch_json,
)
from toolrun.mcp.oidc_rules import ClaimRule, OidcSettings, claim_at
from toolrun.mcp.server import CALLER_SCOPE_KEY

ISSUER = "https://sso.example.com/realms/ops"
AUDIENCE = "https://tools.example.com/mcp"


_KEYS: dict[tuple[str, int], Any] = {}
_KEY_NUMBERS = itertools.count()  # each rotation another key than the one before


def _private_key(kind: str, number: int) -> Any:
    # An RSA key takes ~0.2 s to make: a handful, made once, serve every test of the module.
    slot = (kind, number % 4)
    if slot not in _KEYS:
        _KEYS[slot] = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" \
            else ec.generate_private_key(ec.SECP256R1())
    return _KEYS[slot]


class FakeIssuer:
    """An issuer's discovery document and key set, with keys made here; ``fetch`` is the network edge."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.fetched: list[str] = []
        self.rotate("key-1")

    def rotate(self, kid: str, kind: str = "RSA") -> None:
        self.keys = {kid: _private_key(kind, next(_KEY_NUMBERS))}
        self.kid = kid

    def jwks(self) -> dict[str, Any]:
        published = []
        for kid, private in self.keys.items():
            algorithm = jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
            jwk = json.loads(algorithm.to_jwk(private.public_key()))
            published.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": published}

    def fetch(self, url: str) -> dict[str, Any]:
        self.fetched.append(url)
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": ISSUER, "jwks_uri": ISSUER + "/certs"}
        return self.jwks()

    def token(self, *, kid: str | None = None, algorithm: str | None = None, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300, **claims}
        payload = {name: value for name, value in payload.items() if value is not None}  # None: leave the claim out
        private = self.keys[self.kid]
        algorithm = algorithm or ("RS256" if isinstance(private, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(payload, key if key is not None else private, algorithm=algorithm,
                          headers={"kid": kid or self.kid})


RULES = (ClaimRule("realm_access.roles", "sre", True, ("*",)),
         ClaimRule("scope", "tools:read", True, ("get_*", "list_*")),
         ClaimRule("sub", "nightly-bot", False, ("get_status",)))


def verifier_for(issuer: FakeIssuer, clock: Any = time.monotonic) -> TokenVerifier:
    settings = OidcSettings(ISSUER, AUDIENCE, RULES)
    return TokenVerifier(settings, IssuerKeys(ISSUER, fetch=issuer.fetch, clock=clock))


def test_rules_first_match_wins_and_no_match_gives_no_tools() -> None:
    settings = OidcSettings(ISSUER, AUDIENCE, RULES)
    assert settings.tools_for({"realm_access": {"roles": ["dev", "sre"]}, "scope": "tools:read"}) == ("*",)
    assert settings.tools_for({"scope": "openid tools:read profile"}) == ("get_*", "list_*")
    assert settings.tools_for({"scope": "tools:reader"}) == ()  # membership of a word, not a substring
    assert settings.tools_for({"sub": "nightly-bot"}) == ("get_status",)
    assert settings.tools_for({"sub": "nightly-bot-2"}) == ()
    assert settings.tools_for({"realm_access": {"roles": "sre"}}) == ("*",)  # a one-word string
    assert settings.tools_for({"realm_access": ["sre"]}) == ()
    assert claim_at({"https://example.com/groups": ["x"]}, "https://example.com/groups") == ["x"]


def test_a_valid_token_names_its_subject_and_gets_its_tools() -> None:
    issuer = FakeIssuer()
    verified = verifier_for(issuer).verify(issuer.token(realm_access={"roles": ["sre"]}))
    assert (verified.subject, verified.tools) == ("alice", ("*",))
    ec_issuer = FakeIssuer()
    ec_issuer.rotate("ec-1", "EC")
    assert verifier_for(ec_issuer).verify(ec_issuer.token(scope="tools:read")).tools == ("get_*", "list_*")
    client_token = issuer.token(sub=None, client_id="nightly-bot")
    assert verifier_for(issuer).verify(client_token).subject == "nightly-bot"


def _unsigned(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'kid': 'key-1'})}.{part(claims)}."


def _refusal(verifier: TokenVerifier, token: str) -> TokenRefused:
    with pytest.raises(TokenRefused) as caught:
        verifier.verify(token)
    return caught.value


def test_every_bad_token_is_refused_with_its_reason_and_claimed_subject() -> None:
    issuer = FakeIssuer()
    verifier = verifier_for(issuer)
    now = int(time.time())
    public_pem = issuer.keys["key-1"].public_key().public_bytes(serialization.Encoding.PEM,
                                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
    stranger = FakeIssuer()
    stranger.rotate("key-1")  # the same key id, another key: a forged signature
    cases = {
        "expired": issuer.token(exp=now - 120),
        "not valid yet": issuer.token(nbf=now + 3600),
        "wrong audience": issuer.token(aud="https://other.example.com/mcp"),
        "wrong issuer": issuer.token(iss="https://evil.example.com"),
        "algorithm 'none' is not accepted": _unsigned({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 60}),
        "algorithm 'HS256' is not accepted": _hmac(public_pem),
        "signed with a key the issuer does not publish": issuer.token(kid="key-unknown"),
        "bad signature": stranger.token(),
        "not a well-formed JWT": "abc.def.ghi",
    }
    for reason, token in cases.items():
        refusal = _refusal(verifier, token)
        assert refusal.reason == reason, (reason, refusal.reason)
        if reason != "not a well-formed JWT":
            assert refusal.subject == "alice"
    assert "required claim" in _refusal(verifier, issuer.token(exp=None)).reason


def _hmac(public_pem: bytes) -> str:
    # pyjwt refuses to sign HS256 with a PEM key, as an attacker's library would not: sign by hand.
    import hashlib
    import hmac

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 60}
    signing_input = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': 'key-1'})}.{part(claims)}"
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def test_an_unknown_key_id_fetches_the_keys_again_at_most_once_a_minute() -> None:
    issuer = FakeIssuer()
    now = [1000.0]
    verifier = verifier_for(issuer, clock=lambda: now[0])
    assert verifier.verify(issuer.token()).subject == "alice"
    assert verifier.keys.fetches == 1
    issuer.rotate("key-2")
    rotated = issuer.token()
    now[0] += 10
    assert _refusal(verifier, rotated).reason == "signed with a key the issuer does not publish"
    for _ in range(20):  # a flood of made-up key ids costs nothing more
        _refusal(verifier, issuer.token(kid="made-up"))
    assert verifier.keys.fetches == 1
    now[0] += 60
    assert verifier.verify(rotated).subject == "alice"
    assert verifier.keys.fetches == 2
    assert verifier.verify(rotated).subject == "alice"  # the new key is kept
    assert verifier.keys.fetches == 2


def test_a_key_the_issuer_withdraws_is_refused_once_the_keys_kept_are_five_minutes_old() -> None:
    # The keys were fetched again only for a key id not among them: a key the provider withdrew (leaked, say)
    # while its other keys stayed published verified tokens for as long as the server ran.
    issuer = FakeIssuer()
    now = [1000.0]
    verifier = verifier_for(issuer, clock=lambda: now[0])
    signed_with_key_1 = issuer.token()
    assert verifier.verify(signed_with_key_1).subject == "alice"
    issuer.rotate("key-2")  # key-1 withdrawn: the provider publishes key-2 only
    now[0] += KEY_MAX_AGE - 1
    assert verifier.verify(signed_with_key_1).subject == "alice"  # the keys kept are still fresh enough
    assert verifier.keys.fetches == 1
    now[0] += 1
    assert _refusal(verifier, signed_with_key_1).reason == "signed with a key the issuer does not publish"
    assert verifier.keys.fetches == 2
    assert verifier.verify(issuer.token()).subject == "alice"  # key-2, fetched with the others
    assert verifier.keys.fetches == 2


def test_keys_kept_past_their_age_stay_while_the_issuer_cannot_be_reached() -> None:
    issuer = FakeIssuer()
    now = [1000.0]
    down = [False]

    def fetch(url: str) -> dict[str, Any]:
        if down[0]:
            raise FetchFailed(f"cannot reach {url}")
        return issuer.fetch(url)

    verifier = TokenVerifier(OidcSettings(ISSUER, AUDIENCE, RULES), IssuerKeys(ISSUER, fetch=fetch, clock=lambda: now[0]))
    assert verifier.verify(issuer.token()).subject == "alice"
    down[0] = True
    now[0] += KEY_MAX_AGE
    for _ in range(5):  # a provider briefly down refuses no known key, and is asked once a minute, not per token
        assert verifier.verify(issuer.token()).subject == "alice"
    assert verifier.keys.fetches == 2 and "cannot reach" in (verifier.keys.last_error or "")
    down[0] = False
    now[0] += KEY_REFRESH_INTERVAL
    assert verifier.verify(issuer.token()).subject == "alice"
    assert verifier.keys.fetches == 3 and verifier.keys.last_error is None


def test_a_discovery_document_naming_another_issuer_gives_no_keys() -> None:
    issuer = FakeIssuer()

    def lying(url: str) -> dict[str, Any]:
        return {"issuer": "https://evil.example.com", "jwks_uri": ISSUER + "/certs"} if "openid" in url else issuer.jwks()

    keys = IssuerKeys(ISSUER, fetch=lying)
    assert keys.candidates("key-1") == []
    assert "names issuer 'https://evil.example.com'" in (keys.last_error or "")


def test_keys_are_fetched_over_https_only_bounded_in_size(loopback) -> None:
    with pytest.raises(FetchFailed, match="not https"):
        fetch_json("http://sso.example.com/.well-known/openid-configuration")
    server = loopback(lambda request: Reply(body="x" * (600 * 1024)) if request.path == "/big" else
                      Reply(status=302, headers={"location": "https://elsewhere.example.com"}) if request.path == "/moved"
                      else Reply(body={"keys": []}))
    with pytest.raises(FetchFailed, match="more than 512 KB"):
        fetch_json(server.url + "/big")
    with pytest.raises(FetchFailed, match="HTTP 302"):
        fetch_json(server.url + "/moved")
    assert [request.path for request in server.requests if isinstance(request, Recorded)] == ["/big", "/moved"]


def auth_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "auth.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_oidc_section_loads_beside_static_clients(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BOT_TOKEN", "bot-token-0123456789")
    access = load_access_list(auth_file(tmp_path, """
        clients:
          - {name: bot, token: "${env:BOT_TOKEN}"}
        oidc:
          issuer: https://sso.example.com/realms/ops
          rules:
            - {claim: realm_access.roles, contains: sre, tools: ["*"]}
            - {claim: sub, equals: nightly-bot, tools: [get_status]}
    """), resource_url=AUDIENCE)
    assert [client.name for client in access.clients] == ["bot"]
    assert access.oidc == OidcSettings(ISSUER, AUDIENCE, (ClaimRule("realm_access.roles", "sre", True, ("*",)),
                                                          ClaimRule("sub", "nightly-bot", False, ("get_status",))))
    only_oidc = load_access_list(auth_file(tmp_path, f"oidc: {{issuer: '{ISSUER}', audience: api://tools, rules: "
                                                     "[{claim: groups, contains: sre, tools: ['*']}]}\n"))
    assert only_oidc.clients == [] and only_oidc.oidc is not None and only_oidc.oidc.audience == "api://tools"


def test_oidc_mistakes_are_each_a_problem_with_its_line_and_fix(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as caught:
        load_access_list(auth_file(tmp_path, """
            oidc:
              issuer: http://sso.example.com
              rulez: []
              rules:
                - {claim: groups, contains: sre}
                - {claim: groups, contains: dev, equals: dev, tools: ["*"]}
                - {claim: scope, contans: x, tools: ["*"]}
        """))
    found = {(problem.line, problem.message, problem.fix) for problem in caught.value.problems}
    messages = {(line, message) for line, message, _ in found}
    assert (3, "oidc.issuer must be the issuer's https URL, not 'http://sso.example.com'") in messages
    assert (4, "unknown key 'rulez' in oidc") in messages
    assert (3, "oidc needs an audience: the value tokens carry in aud") in messages
    assert (6, "a rule needs the tools it gives, as a list of names or globs") in messages
    assert (7, "a rule needs exactly one of contains and equals") in messages
    assert (8, "unknown key 'contans' in a rule", "did you mean 'contains'?") in found


class _Echo:
    """The app behind the gate: answers with who the gate admitted."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        caller = scope[CALLER_SCOPE_KEY]
        body = json.dumps({"name": caller.name, "tools": caller.tools, "identity": caller.identity}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def test_the_gate_admits_tokens_by_their_claims_and_audits_refusals(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BOT_TOKEN", "bot-token-0123456789")
    issuer = FakeIssuer()
    access = load_access_list(auth_file(tmp_path, """
        clients: [{name: bot, token: "${env:BOT_TOKEN}", tools: [get_status]}]
        oidc: {issuer: "https://sso.example.com/realms/ops", rules: [{claim: groups, contains: sre, tools: ["*"]}]}
    """), resource_url=AUDIENCE)
    stream = io.StringIO()
    assert access.oidc is not None
    verifier = TokenVerifier(access.oidc, IssuerKeys(ISSUER, fetch=issuer.fetch))
    gate = RequestGate(_Echo(), origins=[], access=access, resource_url=AUDIENCE, audit=AuditLog(stream), verifier=verifier)

    async def requests() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://testserver") as client:
            def bearer(token: str) -> dict[str, str]:
                return {"authorization": f"Bearer {token}"}
            return [await client.get("/.well-known/oauth-protected-resource/mcp"),
                    await client.post("/mcp"),
                    await client.post("/mcp", headers=bearer(issuer.token(groups=["sre"]))),
                    await client.post("/mcp", headers=bearer(issuer.token(sub="bob", groups=["support"]))),
                    await client.post("/mcp", headers=bearer("bot-token-0123456789")),
                    await client.post("/mcp", headers=bearer(issuer.token(sub="mallory", exp=1))),
                    await client.post("/mcp", headers=bearer(issuer.token(sub=None, client_id="alice"))),
                    await client.post("/mcp", headers=bearer(issuer.token(sub="a" * 200 + "-one"))),
                    await client.post("/mcp", headers=bearer(issuer.token(sub="a" * 200 + "-two")))]

    metadata, anonymous, sre, support, bot, expired, service, long_one, long_two = asyncio.run(requests())
    assert metadata.json() == {"resource": AUDIENCE, "authorization_servers": [ISSUER],
                               "bearer_methods_supported": ["header"], "resource_name": "toolrun"}
    challenge = 'Bearer realm="toolrun", resource_metadata="https://tools.example.com/.well-known/oauth-protected-resource/mcp"'
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == challenge
    assert sre.json() == {"name": "alice", "tools": ["*"], "identity": f"oidc:{ISSUER}#sub=alice"}
    # Sessions belong to an identity: a client named like a user, or subjects alike in the part an audit line
    # shows, are not the same one.
    assert service.json()["name"] == "alice" and service.json()["identity"] == f"oidc:{ISSUER}#client_id=alice"
    assert long_one.json()["name"] == long_two.json()["name"]  # both cut for display
    assert long_one.json()["identity"] == f"oidc:{ISSUER}#sub={'a' * 200}-one" != long_two.json()["identity"]
    assert support.json()["tools"] == []  # no rule matches: admitted, with no tools
    assert bot.json() == {"name": "bot", "tools": ["get_status"], "identity": "token:bot"}
    assert expired.status_code == 401 and expired.json()["message"] == "the token was refused: expired"
    assert expired.headers["www-authenticate"] == challenge + ', error="invalid_token"'
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["subject"], line["refused"], line["issuer"]) for line in lines] == [("mallory", "expired", ISSUER)]


def test_a_provider_down_at_start_is_a_warning_not_a_failure() -> None:
    from toolrun.mcp import _token_verifier
    from toolrun.mcp.access import AccessList

    unreachable = "http://127.0.0.1:9/realms/ops"  # the discard port: nothing answers there
    lines: list[str] = []
    verifier = _token_verifier(AccessList([], oidc=OidcSettings(unreachable, AUDIENCE, RULES)), lines.append)
    assert verifier is not None and verifier.keys.fetches == 1
    assert lines[0].startswith(f"warning: no signing keys from {unreachable} (cannot reach ")
    assert lines[0].endswith("its tokens are refused until it answers (asked again at most once a minute)")


def test_a_forged_token_claiming_a_lone_surrogate_is_audited_and_refuses_no_later_call(tmp_path: Path) -> None:
    # anyone may send a token: its claimed subject, "\ud800" in its JSON, made the refusal's audit line fail to
    # encode as UTF-8, and the server refused the next call of every client as if its disk were full
    issuer = FakeIssuer()
    audit = AuditLog.open(tmp_path / "audit.jsonl")
    verifier = TokenVerifier(OidcSettings(ISSUER, AUDIENCE, RULES), IssuerKeys(ISSUER, fetch=issuer.fetch))
    access = load_access_list(auth_file(tmp_path, f"""
        oidc: {{issuer: "{ISSUER}", rules: [{{claim: groups, contains: sre, tools: ["*"]}}]}}
    """), resource_url=AUDIENCE)
    gate = RequestGate(_Echo(), origins=[], access=access, resource_url=AUDIENCE, audit=audit, verifier=verifier)
    forged = _unsigned({"iss": ISSUER, "aud": AUDIENCE, "sub": "\ud800", "exp": int(time.time()) + 300})

    async def request() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://testserver") as client:
            return await client.post("/mcp", headers={"authorization": f"Bearer {forged}"})

    assert asyncio.run(request()).status_code == 401
    audit.close()
    assert audit.unwritable is None
    [line] = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["subject"] == "\ud800"


def test_refused_tokens_from_anyone_are_audited_up_to_a_bound_and_the_rest_counted(tmp_path: Path) -> None:
    # Anyone who reaches the server may send junk tokens: one audit line each filled the disk, after which the
    # server refused every client's calls (an unwritable audit log stops calls).
    issuer = FakeIssuer()
    audit = AuditLog.open(tmp_path / "audit.jsonl")
    now = [1000.0]
    audit.clock = lambda: now[0]
    verifier = TokenVerifier(OidcSettings(ISSUER, AUDIENCE, RULES), IssuerKeys(ISSUER, fetch=issuer.fetch))
    access = load_access_list(auth_file(tmp_path, f"""
        oidc: {{issuer: "{ISSUER}", rules: [{{claim: groups, contains: sre, tools: ["*"]}}]}}
    """), resource_url=AUDIENCE)
    gate = RequestGate(_Echo(), origins=[], access=access, resource_url=AUDIENCE, audit=audit, verifier=verifier)
    burst = AuditLog.REFUSAL_LINES_BURST

    async def junk(count: int) -> list[int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://testserver") as client:
            return [(await client.post("/mcp", headers={"authorization": "Bearer a.b.c"})).status_code
                    for _ in range(count)]

    assert asyncio.run(junk(burst + 15)) == [401] * (burst + 15)  # every one refused, written or not
    now[0] += 2.0  # two more lines' worth of allowance
    assert asyncio.run(junk(3)) == [401] * 3
    audit.close()
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == burst + 2 and all(line["refused"] == "not a well-formed JWT" for line in lines)
    assert [line.get("refusals_left_out") for line in lines[burst:]] == [15, None]
