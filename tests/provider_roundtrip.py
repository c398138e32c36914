"""Play a recipe through the real ``toolrun recipe`` command against a loopback provider,
recording it, then replay the recording offline: used by the provider adapter tests.

The command runs in-process (click's runner): the console script in a real process is
tested by test_cli_recipe.py, and two process start-ups per test cost more than the test.

The recipe asks for the weather of three cities with one python tool written to tmp_path;
the caller supplies the loopback handler that speaks its provider's wire format.
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from toolrun.cli import main

PROVIDER_PREFIXES = ("ANTHROPIC_", "GEMINI_", "GOOGLE_", "OPENAI_", "OLLAMA_")
CITIES = ["北京", "上海", "深圳"]
WEATHER = {"北京": "晴 21°C", "上海": "多云 18°C", "深圳": "小雨 25°C"}

TOOLS_PY = f"""
WEATHER = {WEATHER!r}

def weather(city):
    return WEATHER[city]
"""
TOOLS_YAML = """
name: weather
description: >-
  Returns today's weather of one city. Use it for weather questions about 北京, 上海 or
  深圳; do not use it for forecasts.
parameters:
  type: object
  properties:
    city: {type: string, enum: [北京, 上海, 深圳], description: City name}
  required: [city]
backend: {python: "tools.py:weather"}
"""
RECIPE_YAML = """
name: weather
model: {model}
tools: [weather]
tools_dir: tools.d
system: You answer weather questions. Use the tool; never guess.
messages:
  - user: 北京、上海和深圳今天天气怎么样?
settings: {{max_turns: 4, temperature: 0}}
expect:
  tools_called: [weather]
  final_contains: [晴, 多云, 小雨]
"""


@dataclass
class Roundtrip:
    live: dict[str, Any]
    replay: dict[str, Any]
    cassette: dict[str, Any]


def write_recipe(directory: Path, model: str) -> Path:
    tools = directory / "tools.d"
    tools.mkdir()
    (tools / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    (tools / "weather.yaml").write_text(textwrap.dedent(TOOLS_YAML), encoding="utf-8")
    recipe = directory / "weather.yaml"
    recipe.write_text(textwrap.dedent(RECIPE_YAML.format(model=model)), encoding="utf-8")
    return recipe


def _toolrun(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``toolrun ARGS --json`` with every provider variable of this process unset, ``env`` set."""
    unset: dict[str, str | None] = {name: None for name in os.environ if name.startswith(PROVIDER_PREFIXES)}
    done = CliRunner().invoke(main, args, env={**unset, **env}, catch_exceptions=False)
    assert done.exit_code == 0, f"exit {done.exit_code}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return json.loads(done.stdout)


def record_then_replay(directory: Path, model: str, live_env: dict[str, str], *, stream: bool) -> Roundtrip:
    """Run live (recording), then replay offline with every provider variable removed."""
    recipe = write_recipe(directory, model)
    cassette = directory / "weather.cassette.json"
    stream_flag = "--stream" if stream else "--no-stream"
    live = _toolrun(["recipe", str(recipe), "--json", "--live", stream_flag, "--record", str(cassette)], live_env)
    replay = _toolrun(["recipe", str(recipe), "--json", "--replay", str(cassette)], {})
    return Roundtrip(live, replay, json.loads(cassette.read_text(encoding="utf-8")))


def comparable(document: dict[str, Any], *, keep_ids: bool) -> dict[str, Any]:
    """A transcript without what differs between two honest runs (timings, mode, made-up ids)."""
    document = json.loads(json.dumps(document))
    document.pop("mode", None)
    document.pop("divergences", None)
    for turn in document["turns"]:
        for call in turn["tool_calls"]:
            call.pop("duration_ms", None)
            if not keep_ids:
                call.pop("id", None)
    return document


def assert_replayed_offline(roundtrip: Roundtrip, server: Any, key: str, *, keep_ids: bool) -> None:
    """The replay never reached ``server``, found no divergence and gave the live transcript
    (made-up call ids aside unless ``keep_ids``); the cassette holds no ``key``."""
    assert len(server.requests) == roundtrip.live["usage"]["requests"]  # the live run's requests only
    assert roundtrip.replay["mode"] == "replay" and roundtrip.replay["divergences"] == []
    assert comparable(roundtrip.replay, keep_ids=keep_ids) == comparable(roundtrip.live, keep_ids=keep_ids)
    assert key not in json.dumps(roundtrip.cassette)
