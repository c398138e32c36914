"""Two public descriptions nobody here wrote, imported with the credential summary right: GitHub's REST
description (no securitySchemes: a word about it, and --auth-env gives it a bearer token) and Netlify's
Swagger 2.0 (OAuth2 named after its title unless --auth-env; one `security: []` operation sent none)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.integration.npm_packages import npm_package
from toolrun import load_catalog
from toolrun.cli import main

pytestmark = pytest.mark.integration

OCTOKIT_OPENAPI = "23.0.2"
NETLIFY_OPEN_API = "2.60.0"  # dist/swagger.json: Swagger 2.0, 181 operations, oauth2 `netlifyAuth`


def _import(document: Path, target: Path, *options: str):
    outcome = CliRunner().invoke(main, ["import", "openapi", str(document), "-o", str(target), *options],
                                 catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.stderr
    return outcome, yaml.safe_load(target.read_text(encoding="utf-8"))


def _variables(stderr: str) -> list[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("set "))
    return line.removeprefix("set ").removesuffix(" (see the file's header)").split(", ")


def test_netlify_credentials_and_the_one_public_operation(tmp_path: Path) -> None:
    document = npm_package("@netlify/open-api", NETLIFY_OPEN_API) / "dist" / "swagger.json"
    outcome, toolset = _import(document, tmp_path / "default" / "netlify.yaml")
    assert _variables(outcome.stderr) == ["NETLIFY_S_API_DOCUMENTATION_TOKEN"]
    outcome, toolset = _import(document, tmp_path / "tools.d" / "netlify.yaml", "--auth-env", "NETLIFY_TOKEN")
    assert _variables(outcome.stderr) == ["NETLIFY_TOKEN"]
    assert "  without credentials: GET /ai-gateway/providers (getAIGatewayProviders)" in outcome.stderr.splitlines()
    assert toolset["defaults"]["http"]["headers"] == {"Authorization": "Bearer ${env:NETLIFY_TOKEN}"}
    public = next(tool for tool in toolset["tools"] if tool["name"] == "getAIGatewayProviders")
    assert public["backend"]["http"]["headers"] == {"Authorization": None}
    catalog = load_catalog(tmp_path / "tools.d")
    assert "authorization" not in {k.lower() for k in catalog.tools["getAIGatewayProviders"].backend.config["headers"]}
    assert catalog.tools["listSites"].backend.config["headers"] == {"Authorization": "Bearer ${env:NETLIFY_TOKEN}"}


def test_github_without_security_schemes_gets_a_word_and_a_chosen_token(tmp_path: Path) -> None:
    document = npm_package("@octokit/openapi", OCTOKIT_OPENAPI) / "generated" / "api.github.com.json"
    outcome, toolset = _import(document, tmp_path / "tools.d" / "github.yaml", "--include", "/repos/{owner}/{repo}",
                               "--include", "/user")
    assert "the document declares no security schemes" in outcome.stderr
    assert not any(line.startswith("set ") for line in outcome.stderr.splitlines())
    outcome, toolset = _import(document, tmp_path / "tools.d" / "github.yaml", "--include", "/repos/{owner}/{repo}",
                               "--include", "/user", "--auth-env", "GITHUB_TOKEN",
                               "--header", "X-GitHub-Api-Version: 2022-11-28", "--header", "Accept: application/vnd.github+json")
    assert _variables(outcome.stderr) == ["GITHUB_TOKEN"]
    assert "no security schemes" not in outcome.stderr
    assert toolset["defaults"]["http"]["headers"] == {"Authorization": "Bearer ${env:GITHUB_TOKEN}",
                                                     "X-GitHub-Api-Version": "2022-11-28",
                                                     "Accept": "application/vnd.github+json"}
    refused = CliRunner().invoke(main, ["import", "openapi", str(document), "--header", "Authorization: token ghp_x1"],
                                 catch_exceptions=False)
    assert refused.exit_code == 2 and "looks like a secret" in refused.stderr
