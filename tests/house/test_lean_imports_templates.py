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

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env
from tests.house.conftest import REPLAYS, InventoryReplays

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
