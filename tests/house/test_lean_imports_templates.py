"""Once the catalog cache is warm, the offline replay of recipes/inventory.yaml imports
neither Jinja2 (its message is ``"{{ question }}"``: literal text and a name; the http and
shell tools beside its tool are cached) nor the lint rules (every tool of tools.d is kept
in the cache with its findings), nor the similarity search (one tool has no look-alike).
Not timed: what is imported is checked, in a real process run as a user runs the command.
A template that needs more still renders through Jinja2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env
from tests.house.conftest import REPLAYS, InventoryReplays
from tests.loopback import Recorded, Reply

HEAVY = ("jinja2", "toolrun.core.template_sandbox", "toolrun.catalog.lint_rules", "toolrun.catalog.similarity")


@pytest.mark.xdist_group(REPLAYS)
def test_the_offline_inventory_replay_imports_no_jinja2_nor_lint_rules(inventory_replays: InventoryReplays) -> None:
    # The first run fills the catalog cache; the second is the usual, warm run.
    cold, warm = inventory_replays.cold, inventory_replays.warm
    for replay in (cold, warm):
        assert replay.status == 0, replay.stderr
        assert replay.stderr.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"
    assert warm.stdout == cold.stdout and "北京的鲜花库存为" in warm.stdout
    # The cold run lints every tool of tools.d and checks their templates (ops_api.yaml's use filters): the check can fail.
    assert {"jinja2", "toolrun.catalog.lint_rules"} <= cold.modules
    assert not set(HEAVY) & warm.modules, sorted(set(HEAVY) & warm.modules)


# Loads a recipe and renders its messages, then prints them and whether Jinja2 was imported.
RENDER_MESSAGES = """
import json, sys
from toolrun.sessions.recipe import load_recipe
texts = [message.text for message in load_recipe(sys.argv[1]).render_messages()]
print(json.dumps({"texts": texts, "jinja2": "jinja2" in sys.modules}))
"""


def rendered(recipe: Path) -> dict:
    completed = subprocess.run([sys.executable, "-c", RENDER_MESSAGES, str(recipe)], cwd=ROOT,
                               env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_a_message_with_a_filter_renders_through_jinja2_and_a_plain_one_without(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text('messages:\n  - user: "{{ question | upper }}, {{ n }}\\n"\n'
                      "vars: {question: how many roses?, n: 3}\n", encoding="utf-8")
    assert rendered(recipe) == {"texts": ["HOW MANY ROSES?, 3\n"], "jinja2": True}
    recipe.write_text('messages:\n  - user: "{{ question }}, {{n}}\\n"\n'
                      "vars: {question: how many roses?, n: 3}\n", encoding="utf-8")
    assert rendered(recipe) == {"texts": ["how many roses?, 3\n"], "jinja2": False}


# Loads (in a fresh cache) and lints a folder of http tools, reports what that imported, then calls one.
LOAD_LINT_AND_CALL = """
import json, sys
import toolrun
from toolrun.catalog.lint import lint_catalog
catalog = toolrun.load_catalog(sys.argv[1])
findings = [finding.message for finding in lint_catalog(catalog) if finding.severity == "error"]
loaded = sorted(name for name in ("httpx", "httpcore", "urllib.request", "jinja2") if name in sys.modules)
result = toolrun.call(catalog, "get_item", {"item_id": "a/b", "q": "roses"})
without_q = toolrun.call(catalog, "get_item", {"item_id": "c"})  # an optional query left out
print(json.dumps({"tools": sorted(catalog.tools), "errors": findings, "loaded": loaded, "result": result.result,
                  "without_q": without_q.result, "is_error": result.is_error or without_q.is_error,
                  "httpx_at_the_call": "httpx" in sys.modules, "jinja2_at_the_call": "jinja2" in sys.modules}))
"""

HTTP_TOOLS = """
defaults:
  http:
    base_url: "${env:ITEMS_URL}"
    headers: {Authorization: "Bearer ${env:ITEMS_TOKEN}", Accept: application/json}
tools:
  - name: get_item
    description: Returns one item of the items API by its id. Use it when asked about a single item.
    parameters:
      type: object
      properties:
        item_id: {type: string, description: The item's id.}
        q: {type: string, description: A word to look for in the item.}
      required: [item_id]
    backend:
      http: {method: GET, url: "/items/{item_id}", query: {q: "{{ q }}"}}
  - name: list_items
    description: Lists the items of the items API, newest first. Use it when asked which items there are.
    parameters: {type: object, properties: {}}
    backend:
      http: {method: GET, url: "http://10.20.30.40:8080/v1/items?limit=20"}
"""


def test_http_tools_load_lint_and_call_without_jinja2_and_import_httpx_only_to_send(tmp_path: Path, loopback: Any) -> None:
    # Plain urls and templates ("{{ q }}", "Bearer ${env:ITEMS_TOKEN}"): their checks need neither httpx nor Jinja2,
    # which cost a catalog's first load (and the load after every edit of the file) about a fifth of its time.
    def handler(request: Recorded) -> Reply:
        return Reply(200, {"path": request.path, "q": request.query.get("q"),
                                      "auth": {k.lower(): v for k, v in request.headers.items()}.get("authorization")})

    server = loopback(handler)
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "items.yaml").write_text(HTTP_TOOLS, encoding="utf-8")
    completed = subprocess.run([sys.executable, "-c", LOAD_LINT_AND_CALL, str(tmp_path / "tools.d")], cwd=tmp_path,
                               env=clean_env(PYTHONPATH=str(ROOT), TOOLRUN_CACHE_DIR=str(tmp_path / "cache"),
                                             ITEMS_URL=server.url, ITEMS_TOKEN="s3cr3t-token"),
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["tools"] == ["get_item", "list_items"] and report["errors"] == []
    assert report["loaded"] == []
    assert report["is_error"] is False and report["httpx_at_the_call"] is True
    assert json.loads(report["result"]) == {"path": "/items/a%2Fb", "q": ["roses"], "auth": "Bearer ***"}
    assert json.loads(report["without_q"]) == {"path": "/items/c", "q": None, "auth": "Bearer ***"}
    # a path parameter, a secret and an optional value left out are filled in without Jinja2 too
    assert report["jinja2_at_the_call"] is False
