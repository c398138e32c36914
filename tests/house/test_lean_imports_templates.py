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

from tests.cli.test_cli_recipe import ROOT, clean_env

# Runs the command in this process, then writes the names of the modules imported to argv[1].
REPORT_MODULES = """
import atexit, json, sys
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(sorted(sys.modules))))
from toolrun.cli import main
main(sys.argv[2:])
"""
HEAVY = ("jinja2", "toolrun.core.template_sandbox", "toolrun.catalog.lint_rules", "toolrun.catalog.similarity")


def modules_after(tmp_path: Path, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``toolrun ARGS`` in the checkout, without a provider key: the command's result and the modules it imported."""
    report = tmp_path / "modules.json"
    env = clean_env(TOOLRUN_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    completed = subprocess.run([sys.executable, "-c", REPORT_MODULES, str(report), *args], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=60)
    return completed, set(json.loads(report.read_text(encoding="utf-8")))


def test_the_offline_inventory_replay_imports_no_jinja2_nor_lint_rules(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # The first run fills the catalog cache; the second is the usual, warm run.
    cold, cold_modules = modules_after(tmp_path, cache, "recipe", "recipes/inventory.yaml")
    warm, warm_modules = modules_after(tmp_path, cache, "recipe", "recipes/inventory.yaml")
    for completed in (cold, warm):
        assert completed.returncode == 0, completed.stderr
        assert completed.stderr.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"
    assert warm.stdout == cold.stdout and "北京的鲜花库存为" in warm.stdout
    # The cold run lints every tool of tools.d and checks their templates (ops_api.yaml's use filters): the check can fail.
    assert {"jinja2", "toolrun.catalog.lint_rules"} <= cold_modules
    assert not set(HEAVY) & warm_modules, sorted(set(HEAVY) & warm_modules)


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
