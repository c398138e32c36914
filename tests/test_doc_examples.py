"""The Python examples a user copies (README, ScriptedModel's docstring) run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import toolrun.providers.scripted

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def in_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The repository's root as the working folder, with no provider key (a recipe replays)."""
    monkeypatch.chdir(ROOT)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", "off")


def test_the_scripted_model_docstring_example_runs(in_checkout: None) -> None:
    doc = toolrun.providers.scripted.__doc__ or ""
    lines = doc.split("::\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if line and not line.startswith(" "))
    example = textwrap.dedent("\n".join(lines[:end]))
    assert "ScriptedModel" in example and "assert" in example
    exec(compile(example, "ScriptedModel docstring", "exec"), {})


def test_the_readme_python_examples_run(in_checkout: None) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 2
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"README python example {number}", "exec"), namespace)


def test_every_recipe_option_is_in_the_recipes_options_table() -> None:
    from toolrun.cli.recipe import recipe_command

    table = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8").split("## All options", 1)[1]
    documented = set(re.findall(r"^\| `(--[a-z-]+)", table, flags=re.MULTILINE))
    options = {name for param in recipe_command.params for name in param.opts + param.secondary_opts
               if name.startswith("--")}
    assert options - {"--help"} <= documented | {"--stream", "--no-stream"}
    assert "`--stream` / `--no-stream`" in table
