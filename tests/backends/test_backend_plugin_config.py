"""A backend plugin gets what a built-in gets: its config parsed and checked, its warnings in the lint.

The plugin is a real installed distribution (an entry point in ``toolrun.backends``) in a temp
folder, and ``toolrun`` runs as a subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = '''
from dataclasses import dataclass

from toolrun.backends import BackendWarning
from toolrun.plugins import Backend, BackendOutput, ConfigProblem


@dataclass(frozen=True)
class GreetingConfig:
    greeting: str
    shout: bool


class GreetingBackend(Backend):
    kind = "greeting"
    arguments_through_templates = True

    def placeholders(self, tool):
        return {"name"}

    def parse(self, config):
        if not isinstance(config.get("greeting"), str):
            return [ConfigProblem("greeting", "greeting must be a string", "e.g. greeting: Hello")]
        return GreetingConfig(config["greeting"], bool(config.get("shout")))

    def warnings(self, tool):
        if not self.config_of(tool).shout:
            return []
        return [BackendWarning("greeting-shouts", "backend.greeting.shout", "shouting greetings alarm people")]

    async def run(self, tool, arguments, context):
        config = self.config_of(tool)
        text = f"{config.greeting}, {arguments['name']}"
        return BackendOutput(text.upper() if config.shout else text)


class OldStyleBackend(Backend):
    """Written before parse existed: run reads the raw mapping, check returns its own problems."""

    kind = "oldstyle"

    async def run(self, tool, arguments, context):
        return BackendOutput(f"old {tool.backend.config['word']} {self.config_of(tool)['word']}")
'''

TOOLS = '''
tools:
  - name: greet
    description: Greet a person by name. Use this when asked to say hello to someone.
    annotations: {read_only: true}
    parameters:
      type: object
      properties:
        name: {type: string, description: "The person's name, for example Ada"}
        mood: {type: string, description: Not used by the greeting at all}
      required: [name]
    backend:
      greeting: {greeting: Hello, shout: true}
  - name: old
    description: Say an old word back. Use this when asked for the old word of the day.
    annotations: {read_only: true}
    parameters: {type: object, properties: {}}
    backend:
      oldstyle: {word: ye}
'''


def _install(site: Path) -> None:
    dist_info = site / "toolrun_greeting-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: toolrun-greeting\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[toolrun.backends]\ngreeting = toolrun_greeting:GreetingBackend\noldstyle = toolrun_greeting:OldStyleBackend\n")
    (site / "toolrun_greeting.py").write_text(PLUGIN)


def _toolrun(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TOOLRUN_CACHE_DIR": str(site / "cache")}
    return subprocess.run([sys.executable, "-m", "toolrun", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def _setup(tmp_path: Path, tools: str = TOOLS) -> tuple[Path, Path]:
    site, tools_dir = tmp_path / "site", tmp_path / "tools.d"
    site.mkdir()
    tools_dir.mkdir()
    _install(site)
    (tools_dir / "greet.yaml").write_text(tools)
    return site, tools_dir


def test_a_plugin_backends_warnings_are_linted_like_a_built_ins(tmp_path: Path) -> None:
    site, tools_dir = _setup(tmp_path)
    linted = _toolrun(site, "tools", "lint", "--json", "--tools-dir", str(tools_dir))
    report = json.loads(linted.stdout)
    assert report["problems"] == [], linted.stderr
    rules = {(f["tool"], f["rule"], f["line"]) for f in report["findings"] if f["severity"] == "warning"}
    assert ("greet", "greeting-shouts", 13) in rules  # its own warning, at its key's line
    assert ("greet", "unused-parameter", 10) in rules  # and the backend-neutral rules, asked of it by interface


def test_a_plugin_runs_with_its_typed_config_and_an_old_style_one_keeps_working(tmp_path: Path) -> None:
    site, tools_dir = _setup(tmp_path)
    greeted = _toolrun(site, "call", "greet", "--arg", "name=Ada", "--tools-dir", str(tools_dir))
    assert greeted.stdout.strip() == "HELLO, ADA", greeted.stderr
    old = _toolrun(site, "call", "old", "--tools-dir", str(tools_dir))
    assert old.stdout.strip() == "old ye ye", old.stderr


def test_a_plugin_config_that_does_not_parse_is_a_load_problem_at_its_line(tmp_path: Path) -> None:
    site, tools_dir = _setup(tmp_path, TOOLS.replace("{greeting: Hello, shout: true}", "{greeting: 3}"))
    linted = _toolrun(site, "tools", "lint", "--json", "--tools-dir", str(tools_dir))
    assert linted.returncode == 2
    [problem] = json.loads(linted.stdout)["problems"]
    assert "greeting must be a string" in problem["message"] and problem["line"] == 13
