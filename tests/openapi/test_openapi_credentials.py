"""The import's help with credentials: ``--header``, ``--auth-env``, ``--env-prefix``, a summary that
names every variable the file reads and every operation sent none, and ``security: []`` operations
that really get none (the null override of the toolset's default)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.loopback import Recorded, Reply
from toolrun.cli import main
from toolrun.openapi import OpenAPIError, import_openapi
from toolrun.openapi.credential_options import looks_like_secret

FLEET = """\
openapi: 3.0.3
info: {title: Fleet, version: "1"}
servers: [{url: "URL"}]
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
security: [{bearer: []}]
paths:
  /health: {get: {operationId: health, security: [], responses: {"200": {description: ok}}}}
  /trucks: {get: {operationId: listTrucks, responses: {"200": {description: ok}}}}
"""


def _spec(tmp_path: Path, text: str, url: str = "https://fleet.example.com") -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(textwrap.dedent(text).replace("URL", url), encoding="utf-8")
    return path


def _cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def _echo_authorization(request: Recorded) -> Reply:
    return Reply(200, {"authorization": request.headers.get("authorization")})


def test_security_empty_operations_get_no_credentials_and_are_listed(tmp_path: Path, loopback) -> None:
    server = loopback(_echo_authorization)
    folder = tmp_path / "tools.d"
    outcome = _cli("import", "openapi", str(_spec(tmp_path, FLEET, server.url)), "-o", str(folder / "fleet.yaml"))
    assert outcome.exit_code == 0, outcome.output
    assert "without credentials: GET /health (health)" in outcome.stderr
    text = (folder / "fleet.yaml").read_text()
    health = yaml.safe_load(text)["tools"][0]
    assert health["backend"]["http"]["headers"] == {"Authorization": None}
    assert "Without credentials:\n#   GET /health (health)" in text

    def called(name: str) -> dict:
        result = _cli("call", name, "--tools-dir", str(folder), "--json", env={"FLEET_TOKEN": "tok-1"})
        return json.loads(json.loads(result.stdout)["result"])

    assert called("health") == {"authorization": None}
    sent = called("listTrucks")["authorization"]
    assert sent.startswith("Bearer ") and "tok-1" not in sent  # sent, and redacted from what the model reads


def test_auth_env_env_prefix_and_a_templated_base_url_are_all_in_the_summary(tmp_path: Path) -> None:
    result = import_openapi(_spec(tmp_path, FLEET), auth_env="FLEET_PAT", env_prefix="OPS",
                            base_url="${env:OPS_FLEET_URL}/v1")
    assert result.variables == {"OPS_FLEET_URL": "the API's base URL (--base-url)", "FLEET_PAT": "a bearer token"}
    defaults = yaml.safe_load(result.text)["defaults"]["http"]
    assert defaults["headers"] == {"Authorization": "Bearer ${env:FLEET_PAT}"}
    prefixed = import_openapi(_spec(tmp_path, FLEET), env_prefix="OPS_")
    assert list(prefixed.variables) == ["OPS_TOKEN"]


NO_SCHEMES = """\
openapi: 3.0.3
info: {title: Netlify's API documentation, version: "1"}
servers: [{url: "https://api.netlify.example/api/v1"}]
paths:
  /sites: {get: {operationId: listSites, responses: {"200": {description: ok}}}}
"""


def test_a_document_without_security_schemes_gets_a_word_and_auth_env_gives_it_a_token(tmp_path: Path) -> None:
    bare = import_openapi(_spec(tmp_path, NO_SCHEMES))
    assert any(note.startswith("the document declares no security schemes") for note in bare.notes)
    assert bare.variables == {} and "headers" not in yaml.safe_load(bare.text)["defaults"]["http"]
    given = import_openapi(_spec(tmp_path, NO_SCHEMES), auth_env="NETLIFY_TOKEN")
    assert list(given.variables) == ["NETLIFY_TOKEN"]
    assert yaml.safe_load(given.text)["defaults"]["http"]["headers"] == {"Authorization": "Bearer ${env:NETLIFY_TOKEN}"}
    assert not any("no security schemes" in note for note in given.notes)


def test_header_adds_to_every_tool_and_replaces_the_document_s_header(tmp_path: Path) -> None:
    result = import_openapi(_spec(tmp_path, FLEET), headers=["X-GitHub-Api-Version: 2022-11-28",
                                                            "authorization: token ${env:FLEET_PAT}"])
    assert yaml.safe_load(result.text)["defaults"]["http"]["headers"] == {
        "X-GitHub-Api-Version": "2022-11-28", "authorization": "token ${env:FLEET_PAT}"}
    assert result.variables == {"FLEET_PAT": "the authorization header (--header)"}  # FLEET_TOKEN is read no more


@pytest.mark.parametrize("header", ["Authorization: Bearer abc", "X-Api-Key: 12345", "X-Thing: ghp_abcdef",
                                    "X-Signed: a8f5f167f44f4964e6c998dee827110c9a8b"])
def test_a_header_that_looks_like_a_secret_is_refused_unless_it_reads_the_environment(tmp_path: Path,
                                                                                        header: str) -> None:
    outcome = _cli("import", "openapi", str(_spec(tmp_path, FLEET)), "--header", header)
    assert outcome.exit_code == 2
    assert "looks like a secret" in outcome.stderr and "${env:NAME}" in outcome.stderr
    assert header.split(": ")[1] not in outcome.stderr  # the secret is not repeated on the terminal either


def test_what_looks_like_a_secret() -> None:
    assert not looks_like_secret("Accept", "application/vnd.github+json")
    assert not looks_like_secret("X-GitHub-Api-Version", "2022-11-28")
    assert not looks_like_secret("Authorization", "Bearer ${env:GITHUB_TOKEN}")
    assert looks_like_secret("Cookie", "session=1")


@pytest.mark.parametrize("options", [{"headers": ["no colon"]}, {"headers": ["X: {{ city }}"]},
                                     {"auth_env": "my-token"}, {"env_prefix": "1ABC"}])
def test_a_malformed_option_is_an_error_with_a_fix(tmp_path: Path, options: dict) -> None:
    with pytest.raises(OpenAPIError) as raised:
        import_openapi(_spec(tmp_path, FLEET), **options)
    assert raised.value.problems[0].fix


def test_a_password_in_the_document_s_url_or_the_base_url_is_never_written_into_the_file(tmp_path: Path,
                                                                                       loopback) -> None:
    # The toolset is meant to be committed: a document read from https://user:pw@host/... used to give the file
    # a base_url and a header comment with the password (and the query's token) in them.
    text = textwrap.dedent(FLEET).replace("servers: [{url: \"URL\"}]\n", "servers: [{url: /v1}]\n")
    server = loopback(lambda request: Reply(200, text, {"Content-Type": "application/yaml"})
                      if request.path == "/openapi.yaml" else Reply(404, "no such document"))
    where = server.url.replace("http://", "http://admin:pa55word@") + "/openapi.yaml?token=tok-0123456789&v=2"
    out = tmp_path / "fleet.yaml"
    outcome = _cli("import", "openapi", where, "-o", str(out))
    assert outcome.exit_code == 0, outcome.output
    written = out.read_text(encoding="utf-8")
    assert "pa55word" not in written and "admin" not in written and "tok-0123456789" not in written
    assert yaml.safe_load(written)["defaults"]["http"]["base_url"] == server.url + "/v1"
    assert "the user name and password in the API's URL were left out of the file" in outcome.stderr
    missing = _cli("import", "openapi", where.replace("openapi.yaml", "gone.yaml"), "-o", str(tmp_path / "gone.yaml"))
    assert missing.exit_code == 2 and "pa55word" not in missing.stderr and "tok-0123456789" not in missing.stderr
    for base_url, what in (("https://bob:hunter2@api.example.com/v1", "a user name and password"),
                           ("https://api.example.com/v1?api_key=abcdef0123456789abcdef", "the query parameter api_key")):
        refused = _cli("import", "openapi", str(_spec(tmp_path, FLEET)), "--base-url", base_url,
                       "-o", str(tmp_path / "refused.yaml"))
        assert refused.exit_code == 2 and f"the base URL holds {what}" in refused.stderr
        assert not (tmp_path / "refused.yaml").exists()


def test_a_password_in_the_document_s_url_is_not_in_a_refusal_either(tmp_path: Path, loopback) -> None:
    # A relative redirect keeps the URL's login, and the refusal of a hop (a redirect loop) named the hop whole:
    # the document's own refusal, and a $ref's, which also said where as the document's URL with its login.
    text = textwrap.dedent(FLEET).replace("servers: [{url: \"URL\"}]\n", "servers: [{url: /v1}]\n")
    text = text.replace("operationId: listTrucks,", "operationId: listTrucks, parameters: [{$ref: 'loop.yaml#/Limit'}],")

    def answer(request: Recorded) -> Reply:
        if request.path == "/openapi.yaml":
            return Reply(200, text, {"Content-Type": "application/yaml"})
        return Reply(302, "", {"Location": "loop.yaml?again=1"})  # relative: the login stays in the next URL
    server = loopback(answer)
    login = server.url.replace("http://", "http://admin:pa55word@")
    for where in (f"{login}/loop.yaml?token=tok-0123456789", f"{login}/openapi.yaml"):
        refused = _cli("import", "openapi", where, "-o", str(tmp_path / "fleet.yaml"))
        assert refused.exit_code == 2 and "refused" in refused.stderr, refused.output
        assert "pa55word" not in refused.stderr and "tok-0123456789" not in refused.stderr, refused.stderr
