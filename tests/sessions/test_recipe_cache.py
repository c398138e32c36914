"""An unchanged recipe is read once: the next load comes from the cache with every line kept,
and any change (or a recipe with a problem, or one written just now) is read and checked again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.catalog.test_catalog_scale import HOUR_AGO_NS
from tests.sessions.test_recipe import GOOD_RECIPE, make_project, write
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.errors import LoadError, UserError
from toolrun.sessions import recipe as recipe_module
from toolrun.sessions.recipe import load_recipe


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The recipe files parsed, in order (with a cache folder of the test's own)."""
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    parsed: list[str] = []
    real = recipe_module.load_yaml_file

    def counting(path: Path):
        parsed.append(path.name)
        return real(path)

    monkeypatch.setattr(recipe_module, "load_yaml_file", counting)
    return parsed


def settled(path: Path, offset: int = 0) -> Path:
    """Date the file an hour back: a file changed within the last 2 seconds is never kept."""
    os.utime(path, ns=(HOUR_AGO_NS + offset, HOUR_AGO_NS + offset))
    return path


def test_an_unchanged_recipe_is_parsed_once_and_keeps_its_lines(project: Path, reads: list[str]) -> None:
    path = settled(write(project, GOOD_RECIPE))
    first = load_recipe(path)
    again = load_recipe(path)
    assert reads == ["r.yaml"]
    assert again.document == first.document and again.vars == first.vars and again.settings == first.settings
    assert [(m.role, m.template, m.line) for m in again.messages] == [(m.role, m.template, m.line) for m in first.messages]
    assert again.render_messages({}) == first.render_messages({})
    assert again.document.key_lines == first.document.key_lines
    assert again.document["tools"].item_lines == first.document["tools"].item_lines

    # A tool the catalog lacks is reported at the line of the tools list item, cached or not.
    catalog = load_catalog_or_raise(project / "tools.d")
    catalog.tools.pop("get_flower_inventory")
    with pytest.raises(UserError) as caught:
        again.select_tools(catalog)
    line = first.document["tools"].item_lines[0]
    assert any(problem.line == line for problem in caught.value.problems), caught.value.problems


def test_a_changed_recipe_is_read_again_and_its_new_problem_reported(project: Path, reads: list[str]) -> None:
    path = settled(write(project, GOOD_RECIPE))
    load_recipe(path)
    # Same size, one word changed, a new time: read again, never served stale.
    broken = GOOD_RECIPE.replace("max_turns: 8", "max_turns: X")
    assert len(broken) == len(GOOD_RECIPE)
    settled(write(project, broken), offset=1_000_000)
    with pytest.raises(LoadError) as caught:
        load_recipe(path)
    assert reads == ["r.yaml", "r.yaml"] and "max_turns" in str(caught.value)


def test_a_recipe_with_a_problem_or_written_just_now_is_never_kept(project: Path, reads: list[str]) -> None:
    wrong = settled(write(project, GOOD_RECIPE.replace("max_turns: 8", "max_turns: X"), name="wrong.yaml"))
    for _ in range(2):
        with pytest.raises(LoadError):
            load_recipe(wrong)
    fresh = write(project, GOOD_RECIPE, name="fresh.yaml")  # its time is now
    load_recipe(fresh)
    load_recipe(fresh)
    assert reads == ["wrong.yaml", "wrong.yaml", "fresh.yaml", "fresh.yaml"]


def test_no_recipe_is_kept_when_the_cache_is_off(project: Path, reads: list[str],
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", "off")
    path = settled(write(project, GOOD_RECIPE))
    load_recipe(path)
    load_recipe(path)
    assert reads == ["r.yaml", "r.yaml"] and not (tmp_path / "cache").exists()


def test_a_damaged_cache_file_is_ignored(project: Path, reads: list[str], tmp_path: Path) -> None:
    path = settled(write(project, GOOD_RECIPE))
    load_recipe(path)
    (kept,) = (tmp_path / "cache").glob("recipe-*.marshal")
    kept.write_bytes(b"\x00not marshal")
    assert load_recipe(path).vars["shop"] == "花花"
    assert reads == ["r.yaml", "r.yaml"]


def test_a_damaged_cache_file_is_read_again_never_served(project: Path, reads: list[str], tmp_path: Path) -> None:
    path = settled(write(project, GOOD_RECIPE))
    first = load_recipe(path)
    (cached,) = (tmp_path / "cache").glob("recipe-*")
    data = cached.read_bytes()
    assert b"get_flower_inventory" in data
    cached.write_bytes(data.replace(b"get_flower_inventory", b"get_flower_inventorX"))
    again = load_recipe(path)
    assert again.document == first.document
    assert reads == ["r.yaml", "r.yaml"]


SCRIPT = "- tool_calls:\n    - {name: get_flower_inventory, arguments: {city: 北京}}\n- text: 玫瑰 100\n"


@pytest.fixture
def script_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The model scripts parsed, in order (with a cache folder of the test's own)."""
    from toolrun.providers import scripted_file

    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    parsed: list[str] = []
    real = scripted_file.load_yaml_file

    def counting(path: Path):
        parsed.append(path.name)
        return real(path)

    monkeypatch.setattr(scripted_file, "load_yaml_file", counting)
    return parsed


def _answers(script: Path) -> list[object]:
    from toolrun.sessions.play import _scripted_model

    model = _scripted_model(script)
    return [(part.name, part.arguments) if hasattr(part, "arguments") else part.text
            for answer in model.script for part in answer.message.parts]


def test_an_unchanged_script_is_parsed_once_and_plays_the_same(project: Path, script_reads: list[str]) -> None:
    script = settled(write(project, SCRIPT, name="turns.yaml"))
    first = _answers(script)
    assert _answers(script) == first == [("get_flower_inventory", {"city": "北京"}), "玫瑰 100"]
    assert script_reads == ["turns.yaml"]

    # Same size, another city, a new time: read again, never played stale.
    settled(write(project, SCRIPT.replace("北京", "上海"), name="turns.yaml"), offset=1_000_000)
    assert _answers(script)[0] == ("get_flower_inventory", {"city": "上海"})
    assert script_reads == ["turns.yaml", "turns.yaml"]


def test_a_script_with_a_problem_is_never_kept_and_its_line_is_reported(project: Path, script_reads: list[str]) -> None:
    script = settled(write(project, SCRIPT.replace("name: get_flower_inventory, ", ""), name="turns.yaml"))
    for _ in range(2):
        with pytest.raises(LoadError) as caught:
            _answers(script)
        assert caught.value.problems[0].line == 2 and "needs a name" in caught.value.problems[0].message
    assert script_reads == ["turns.yaml", "turns.yaml"]


EVERY_KIND_OF_TURN = """\
- 先查库存。
- text: 我来查。
  tool_calls:
    - {name: get_flower_inventory, arguments: {city: 北京, days: [1, 2.5], exact: true, note: null}}
    - {name: get_flower_inventory, arguments: '{"city": "上海"'}
    - {name: list_cities}
- output: {city: 北京, roses: 100}
"""


def _played(script: Path) -> list[object]:
    """Everything a script's model answers with, as the run sees it."""
    from toolrun.sessions.play import _scripted_model

    return [(answer.stop_reason, [vars(part) for part in answer.message.parts]) if not isinstance(answer, str) else answer
            for answer in _scripted_model(script).script]


def test_a_cached_script_plays_every_kind_of_turn_as_the_file_does(project: Path, script_reads: list[str]) -> None:
    script = settled(write(project, EVERY_KIND_OF_TURN, name="turns.yaml"))
    read = _played(script)
    assert _played(script) == read  # the second from the kept turns
    assert script_reads == ["turns.yaml"]
    assert read[1][1][1] == {"id": "", "name": "get_flower_inventory", "provider_id": None, "provider_data": {},
                             "unreadable": None,
                             "arguments": {"city": "北京", "days": [1, 2.5], "exact": True, "note": None},
                             "raw_arguments": '{"city": "北京", "days": [1, 2.5], "exact": true, "note": null}'}
    assert read[1][1][2]["arguments"] is None and read[1][1][2]["raw_arguments"] == '{"city": "上海"'
    assert read[1][1][3]["arguments"] == {} and read[2] == ("stop", [{"text": '{"city": "北京", "roses": 100}'}])
