"""The ranking index kept beside the catalog cache (``toolrun.catalog.ranking_cache``): served only while
every tool file has the stamps it was made from."""

from __future__ import annotations

import json
import marshal
import os
import time
from pathlib import Path

import pytest

from toolrun.catalog.cache import cache_file
from toolrun.catalog.ranking_cache import SUFFIX, kept_ranking, load_ranking_index
from toolrun.catalog.tool_ranking import ToolIndex, ToolText
from toolrun.core.cache_folder import cache_directory

SAMPLE = Path(__file__).parent.parent / "fixtures" / "bfcl" / "sample.json"
LONG_AGO = time.time() - 3600  # a file written this long ago is kept by the catalog cache (a recent one is not)


def _tool_file(directory: Path, name: str, description: str) -> Path:
    file = directory / f"{name}.yaml"
    file.write_text(f"name: {name}\ndescription: {description}\nbackend:\n  shell:\n    argv: [echo, {name}]\n",
                    encoding="utf-8")
    os.utime(file, (LONG_AGO, LONG_AGO))
    return file


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools.d"
    directory.mkdir()
    _tool_file(directory, "city_report", "Returns the weather of a city, by its name.")
    _tool_file(directory, "convert_currency", "Converts an amount of money to another currency.")
    _tool_file(directory, "list_files", "Lists the files of a folder on this computer.")
    return directory


def _ranking(directory: Path, text: str) -> tuple[list[str], str]:
    """The tools ranked for ``text`` (scoring above 0) and where the index came from: "kept" or "loaded"."""
    source: list[str] = []
    index = load_ranking_index(directory, on_loaded=lambda catalog: source.append("loaded"),
                               on_kept=lambda tools, warnings: source.append("kept"))
    return [tool.name for tool in index.rank(text) if tool.score > 0], source[0]


def test_an_unchanged_catalog_is_ranked_from_the_kept_index(tools_dir: Path) -> None:
    assert _ranking(tools_dir, "weather in Paris") == (["city_report"], "loaded")
    assert _ranking(tools_dir, "weather in Paris") == (["city_report"], "kept")
    assert _ranking(tools_dir, "euros to dollars, the currency") == (["convert_currency"], "kept")


def test_a_same_size_edit_with_the_mtime_set_back_changes_the_ranking_served(tools_dir: Path) -> None:
    _ranking(tools_dir, "weather")
    assert _ranking(tools_dir, "traffic") == ([], "kept")
    file = tools_dir / "city_report.yaml"
    before = file.stat()
    file.write_text(file.read_text().replace("weather", "traffic"))  # the same number of bytes
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))  # `touch -r`: only the ctime says it changed
    assert file.stat().st_size == before.st_size and file.stat().st_mtime_ns == before.st_mtime_ns
    assert _ranking(tools_dir, "traffic") == (["city_report"], "loaded")
    assert _ranking(tools_dir, "weather") == ([], "kept")


def test_a_file_added_or_removed_is_seen(tools_dir: Path) -> None:
    _ranking(tools_dir, "weather")
    _tool_file(tools_dir, "street_traffic", "Returns the traffic on a street.")
    assert _ranking(tools_dir, "traffic") == (["street_traffic"], "loaded")
    (tools_dir / "street_traffic.yaml").unlink()
    assert _ranking(tools_dir, "traffic") == ([], "loaded")


def test_a_damaged_kept_index_is_built_again(tools_dir: Path) -> None:
    _ranking(tools_dir, "weather")
    folder = cache_directory()
    assert folder is not None
    kept = cache_file(tools_dir, folder, SUFFIX)
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF
    kept.write_bytes(bytes(data))
    assert kept_ranking(tools_dir) is None
    assert _ranking(tools_dir, "weather in Paris") == (["city_report"], "loaded")
    assert kept_ranking(tools_dir) is not None  # written again


def test_a_recently_written_file_is_not_vouched_for(tools_dir: Path) -> None:
    (tools_dir / "list_files.yaml").touch()  # within the mtime's tick a change could go unseen: not kept
    assert _ranking(tools_dir, "weather")[1] == "loaded"
    assert kept_ranking(tools_dir) is None


def test_a_kept_index_ranks_exactly_as_the_index_it_was_made_from() -> None:
    sample = json.loads(SAMPLE.read_text())
    # twice the sample's tools: past the size where pseudo-relevance feedback joins in
    tools = [ToolText(tool["name"] + suffix, tool["description"], tool["parameters"])
             for suffix in ("", "_v2") for tool in sample["tools"]]
    index = ToolIndex(tools)
    kept = ToolIndex.from_state(marshal.loads(marshal.dumps(index.state())))
    for question in sample["questions"]:
        assert kept.rank(question["question"]) == index.rank(question["question"])


def test_a_state_of_another_shape_is_refused() -> None:
    state = ToolIndex([ToolText("a_tool", "Does a thing.")]).state()
    with pytest.raises(ValueError, match="not a ranking index"):
        ToolIndex.from_state(("0:other", *state[1:]))
    with pytest.raises(ValueError, match="not a ranking index"):
        ToolIndex.from_state(state[:-1])
