"""GitHub's REST description (13 MB, 1,221 operations; npm `@octokit/openapi`) through
`toolrun import openapi` and back through the loader: the largest public document the importer
handles must keep importing whole, within its limits, and load with no errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.integration.npm_packages import npm_package
from toolrun import load_catalog
from toolrun.cli import main

pytestmark = pytest.mark.integration

OCTOKIT_OPENAPI = "23.0.2"  # api.github.com.json: 1,223 operations, 2 with bodies the http backend cannot send


@pytest.fixture(scope="module")
def github_document() -> Path:
    return npm_package("@octokit/openapi", OCTOKIT_OPENAPI) / "generated" / "api.github.com.json"


def test_github_rest_description_imports_whole_and_loads(github_document: Path, tmp_path: Path) -> None:
    target = tmp_path / "tools.d" / "github.yaml"
    outcome = CliRunner().invoke(main, ["import", "openapi", str(github_document), "-o", str(target)],
                                 catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.stderr
    assert "imported 1221 tools" in outcome.stderr and "2 skipped" in outcome.stderr
    assert "0 errors" in outcome.stderr
    toolset = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert toolset["defaults"]["http"]["base_url"] == "https://api.github.com"
    assert toolset["defaults"]["http"]["allow_hosts"] == ["api.github.com"]  # pinned to the document's server
    tools = toolset["tools"]
    assert len(tools) == 1221
    assert {kind for tool in tools for kind in tool["backend"]} == {"http"}
    catalog = load_catalog(target.parent)
    assert len(catalog.tools) == 1221
    assert catalog.tools["repos_get"].description.startswith("Get a repository")
