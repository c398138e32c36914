"""The catalog loader against real YAML files in a temp dir, and the real console script."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from toolrun.catalog.loader import load_catalog, load_catalog_or_raise, tool_files
from toolrun.catalog.parameter_checks import parameter_schema_problems
from toolrun.catalog.tool_schema import tool_schema
from toolrun.core.durations import parse_duration
from toolrun.core.errors import UserError
from toolrun.core.yamlsource import load_yaml_file, plain

TOOLRUN = Path(sys.executable).parent / "toolrun"
ROOT = Path(__file__).resolve().parents[2]


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


GOOD_SHELL = """
name: count_stock
description: Counts the stock lines of one city. Use it for stock questions; not for prices.
parameters:
  type: object
  properties:
    city: {type: string, description: City name}
  required: [city]
backend:
  shell:
    argv: [grep, -c, "{{ city }}", stock.txt]
"""


# --- a folder of broken files: every problem, with its file and line, at once ----------------

BROKEN_FILES = {
    "a_syntax.yaml": """
        name: broken
        description: a tool
          backend: wrongly indented
        """,
    "b_typos.yaml": """
        name: typo_tool
        descripton: Counts things.
        parameters:
          type: object
          properties:
            city: {type: string, descriptoin: City}
        backend:
          shell: {argv: [echo, hi], timout: 5s}
        """,
    "c_bad_name.yaml": """
        name: get weather!
        description: Weather of a city.
        backend: {python: "json:dumps"}
        """,
    "d_dup_one.yaml": """
        name: same_name
        description: The first one.
        backend: {python: "json:dumps"}
        """,
    "e_dup_two.yml": """
        name: same_name
        description: The second one.
        backend: {python: "json:dumps"}
        """,
    "f_bad_schema.yaml": """
        name: bad_schema
        description: Has a parameter schema that is not JSON Schema.
        parameters:
          type: object
          properties:
            city: {type: strin}
            count: {type: integer, minimum: "zero"}
        backend: {python: "json:dumps"}
        """,
    "g_placeholder.yaml": """
        name: undeclared
        description: Uses a placeholder that is not a parameter.
        parameters:
          type: object
          properties:
            city: {type: string}
        backend:
          http:
            method: GET
            url: "https://api.example.com/items/{cty}"
        """,
    "h_two_backends.yaml": """
        name: two_backends
        description: Declares two backends.
        backend:
          python: "json:dumps"
          shell: {argv: [ls]}
        """,
    "i_no_backend.yaml": """
        name: no_backend
        description: Forgot how it runs.
        """,
    "j_toolset.yaml": """
        defaults:
          timeout: 5s
        tools:
          - name: good_one
            description: A good tool in a toolset.
            backend: {python: "json:dumps"}
          - name: broken_one
            description: A broken tool among good ones.
            max_output: lots
            backend: {python: "json:dumps"}
          - name: good_two
            description: Another good tool.
            backend: {python: "json:dumps"}
        """,
}

# (file, line, words that must be in the message) for every problem above
EXPECTED = [
    ("a_syntax.yaml", 3, "YAML syntax error"),
    ("b_typos.yaml", 2, "unknown key 'descripton'"),
    ("b_typos.yaml", 6, "unknown JSON Schema keyword 'descriptoin'"),
    ("b_typos.yaml", 8, "unknown key 'timout'"),
    ("b_typos.yaml", 1, "missing the required key 'description'"),
    ("c_bad_name.yaml", 1, "get weather!"),
    ("e_dup_two.yml", 1, "duplicate tool name 'same_name'"),
    ("f_bad_schema.yaml", 6, "'strin' is not a JSON Schema type"),
    ("f_bad_schema.yaml", 7, "minimum"),
    ("g_placeholder.yaml", 10, "'cty', which is not a declared parameter"),
    ("h_two_backends.yaml", 3, "backend has 2 keys (python, shell)"),
    ("i_no_backend.yaml", 1, "missing the required key 'backend'"),
    ("j_toolset.yaml", 9, "tools[1].max_output"),
]


@pytest.fixture
def broken_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools.d"
    for name, text in BROKEN_FILES.items():
        write(directory, name, text)
    write(directory, ".hidden.yaml", "this: is ignored: because hidden")
    write(directory, "notes.txt", "not a tool file")
    return directory


def test_every_problem_of_every_file_is_reported_with_file_and_line(broken_dir: Path) -> None:
    result = load_catalog(broken_dir)
    reported = [(Path(str(p.file)).name, p.line, p.message) for p in result.problems]
    for file, line, words in EXPECTED:
        assert any(f == file and at == line and words in m for f, at, m in reported), (file, line, words, reported)
    assert len(result.problems) == len(EXPECTED), "\n".join(str(p) for p in result.problems)


def test_typos_get_did_you_mean(broken_dir: Path) -> None:
    fixes = {p.message: p.fix for p in load_catalog(broken_dir).problems}
    assert fixes["unknown key 'descripton'"] == "did you mean 'description'?"
    assert fixes["unknown key 'timout' in backend.shell"] == "did you mean 'timeout'?"


def test_duplicate_names_name_both_places(broken_dir: Path) -> None:
    duplicate = next(p for p in load_catalog(broken_dir).problems if "duplicate" in p.message)
    assert Path(str(duplicate.file)).name == "e_dup_two.yml"
    assert "d_dup_one.yaml:1" in duplicate.message


def test_a_broken_tool_does_not_hide_its_good_neighbours(broken_dir: Path) -> None:
    catalog = load_catalog(broken_dir).catalog
    assert "good_one" in catalog and "good_two" in catalog
    assert "broken_one" not in catalog
    assert catalog.get("good_two").timeout == 5.0  # toolset defaults still merged
    assert catalog.get("same_name").description == "The first one."


def test_load_catalog_or_raise_lists_all_problems(broken_dir: Path) -> None:
    with pytest.raises(UserError) as caught:
        load_catalog_or_raise(broken_dir)
    assert len(caught.value.problems) == len(EXPECTED)


def test_console_script_reports_all_problems_exit_2_no_traceback(broken_dir: Path) -> None:
    completed = subprocess.run(
        [str(TOOLRUN), "tools", "list", "--tools-dir", str(broken_dir)], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    listed = [line.split()[0] for line in completed.stdout.splitlines()[1:]]
    assert listed == ["same_name", "good_one", "good_two"]  # what loaded is listed, then every problem
    lines = [line for line in completed.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == len(EXPECTED)
    for file, line, words in EXPECTED:
        prefix = f"error: {broken_dir / file}:{line}: "
        assert any(printed.startswith(prefix) and words in printed for printed in lines), (prefix, words)
    # every message carries a fix after the dash
    assert all(" — " in line for line in lines)


# --- file shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("- name: a\n- name: b\n", "expected a mapping (one tool or a toolset), got a list"),
        ("just a string\n", "expected a mapping"),
        ("tools: []\n", "tools is empty"),
        ("defaults: {timeout: 5s}\n", "missing the required key 'tools'"),
        ("tools: {name: x}\n", "tools must be a list"),
    ],
)
def test_file_shapes_that_are_not_tools(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    problems = load_catalog(tmp_path).problems
    assert len(problems) == 1
    assert words in problems[0].message
    assert problems[0].fix


def test_missing_directory_names_it_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        load_catalog(tmp_path / "nowhere")
    text = str(caught.value)
    assert "nowhere" in text and "--tools-dir" in text


def test_tool_files_sorted_yaml_and_yml_hidden_skipped(tmp_path: Path) -> None:
    for name in ["b.yml", "a.yaml", ".c.yaml", "d.json", "c.YAML.bak"]:
        (tmp_path / name).write_text("x: 1\n", encoding="utf-8")
    (tmp_path / "sub.yaml").mkdir()
    assert [p.name for p in tool_files(tmp_path)] == ["a.yaml", "b.yml"]


def test_empty_directory_is_an_empty_catalog(tmp_path: Path) -> None:
    result = load_catalog(tmp_path)
    assert len(result.catalog) == 0 and result.problems == []


# --- good files --------------------------------------------------------------------------------


def test_single_tool_file_builds_a_tool_with_lines(tmp_path: Path) -> None:
    write(tmp_path, "count.yaml", GOOD_SHELL)
    tool = load_catalog_or_raise(tmp_path).get("count_stock")
    assert tool is not None
    assert tool.backend.kind == "shell"
    assert tool.backend.config == {"argv": ["grep", "-c", "{{ city }}", "stock.txt"]}
    assert tool.parameters["required"] == ["city"]
    assert isinstance(tool.parameters, dict) and type(tool.parameters) is dict  # plain, not LineDict
    assert tool.timeout == 30.0 and tool.max_output == 20_000 and not tool.sequential and not tool.confirm
    assert tool.annotations is None
    assert tool.source.file == tmp_path / "count.yaml"
    assert tool.source.line == 1
    assert tool.source.line_of("description") == 2
    assert tool.source.line_of("parameters.properties.city") == 6
    assert tool.source.line_of("backend.shell.argv") == 10
    assert tool.source.line_of("backend.shell.argv.2") == 10


def test_toolset_defaults_are_merged_and_the_tools_own_values_win(tmp_path: Path) -> None:
    write(
        tmp_path,
        "inventory.yaml",
        """
        defaults:
          timeout: 2m
          max_output: 500
          sequential: true
          annotations: {read_only: true, idempotent: true}
          http:
            base_url: https://inventory.example.com/api
            headers: {Authorization: "Bearer ${env:INVENTORY_TOKEN}", Accept: application/json}
            query: {lang: zh}
            timeout: 10s
            retries: 2
            allow_hosts: [inventory.example.com]
          shell:
            cwd: data
            env: {LANG: C.UTF-8, DEPTH: 3}
        tools:
          - name: get_stock
            description: Stock of one city.
            parameters: {type: object, properties: {city: {type: string}}, required: [city]}
            timeout: 500ms
            annotations: {idempotent: false, title: Stock}
            backend:
              http:
                url: /stock/{city}
                headers: {accept: text/plain, X-Trace: "{{ city }}"}
                retries: 0
          - name: grep_stock
            description: Grep the stock file.
            parameters: {type: object, properties: {city: {type: string}}}
            sequential: false
            backend:
              shell:
                argv: [grep, "{{ city }}", stock.txt]
                env: {LANG: en_US.UTF-8, VERBOSE: true}
          - name: echo_tool
            description: A python tool ignores the http and shell defaults.
            backend: {python: "json:dumps"}
        """,
    )
    catalog = load_catalog_or_raise(tmp_path)
    stock, grep, echo = catalog.get("get_stock"), catalog.get("grep_stock"), catalog.get("echo_tool")

    assert stock.timeout == 0.5 and grep.timeout == 120.0
    assert stock.max_output == 500 and stock.sequential is True and grep.sequential is False
    assert stock.annotations.read_only is True and stock.annotations.idempotent is False
    assert stock.annotations.title == "Stock"
    assert stock.backend.config == {
        "url": "/stock/{city}",
        "base_url": "https://inventory.example.com/api",
        # header names are case-insensitive: the tool's "accept" replaces the default "Accept"
        "headers": {"Authorization": "Bearer ${env:INVENTORY_TOKEN}", "accept": "text/plain", "X-Trace": "{{ city }}"},
        "query": {"lang": "zh"},
        "timeout": 10.0,
        "retries": 0,
        "allow_hosts": ["inventory.example.com"],
    }
    assert grep.backend.config == {
        "argv": ["grep", "{{ city }}", "stock.txt"],
        "cwd": "data",
        "env": {"LANG": "en_US.UTF-8", "DEPTH": "3", "VERBOSE": "true"},
    }
    assert echo.backend.config == {"function": "json:dumps"}
    assert echo.annotations.read_only is True  # annotations are defaults for every tool


def test_python_file_function_relative_to_the_yaml_file(tmp_path: Path) -> None:
    write(tmp_path, "flowers.py", "def get_inventory(city):\n    return f'{city}: 100'\n")
    write(
        tmp_path,
        "flowers.yaml",
        """
        name: get_inventory
        description: Flower stock of one city.
        parameters: {type: object, properties: {city: {type: string}}}
        backend: {python: "flowers.py:get_inventory"}
        """,
    )
    write(
        tmp_path,
        "missing.yaml",
        """
        name: get_missing
        description: Points at a file that is not there.
        backend:
          python: "nothere.py:f"
        """,
    )
    result = load_catalog(tmp_path)
    assert result.catalog.get("get_inventory").backend.config == {"function": "flowers.py:get_inventory"}
    [problem] = result.problems
    assert Path(str(problem.file)).name == "missing.yaml" and problem.line == 4
    assert "nothere.py" in problem.message


@pytest.mark.parametrize(
    ("backend", "line", "words"),
    [
        ('shell: {command: "grep -c x file"}', 4, "add shell: true, or write argv as a list"),
        ("shell: {shell: true}", 4, "shell: true needs a 'command'"),
        ("shell: {cwd: /tmp}", 4, "needs 'argv'"),
        ('http: {url: /a, json: {a: 1}, form: {b: "2"}}', 4, "'json' and 'form' are both set"),
        ('http: {url: /a, method: FETCH}', 4, "must be one of GET, POST"),
        ('pyhton: "json:dumps"', 4, "unknown backend 'pyhton'"),
        ('shell: {argv: [echo], timeout: 0s}', 4, "more than 0"),
    ],
)
def test_backend_shape_problems(tmp_path: Path, backend: str, line: int, words: str) -> None:
    write(tmp_path, "t.yaml", f"name: t\ndescription: A tool.\nbackend:\n  {backend}\n")
    problems = load_catalog(tmp_path).problems
    assert any(p.line == line and words in (p.message + " — " + str(p.fix)) for p in problems), [str(p) for p in problems]


def test_placeholder_in_toolset_default_header_is_checked(tmp_path: Path) -> None:
    write(
        tmp_path,
        "set.yaml",
        """
        defaults:
          http:
            base_url: https://api.example.com
            headers: {X-User: "{{ user }}"}
        tools:
          - name: get_a
            description: Gets a.
            backend: {http: {url: /a}}
        """,
    )
    [problem] = load_catalog(tmp_path).problems
    assert "'user', which is not a declared parameter" in problem.message
    assert problem.line == 4


def test_required_names_a_property_that_does_not_exist(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("required: [city]", "required: [city, cty]"))
    [problem] = load_catalog(tmp_path).problems
    assert "'cty'" in problem.message and problem.fix == "did you mean 'city'?" and problem.line == 7


def test_parameters_must_be_an_object_schema(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("  type: object", "  type: array", 1))
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 4 and 'parameters.type must be "object"' in problem.message


def test_no_parameters_means_an_empty_object_schema(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", 'name: now\ndescription: The time now.\nbackend: {shell: {argv: [date]}}\n')
    assert load_catalog_or_raise(tmp_path).get("now").parameters == {"type": "object", "properties": {}}


def test_chinese_text_survives(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", "{type: string, enum: [北京, 上海]}"))
    tool = load_catalog_or_raise(tmp_path).get("count_stock")
    assert tool.parameters["properties"]["city"]["enum"] == ["北京", "上海"]


# --- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), (5, 5.0),
                                               (0.25, 0.25), ("1.5s", 1.5), ("7", 7.0)])
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["30 secs", "-1s", "0s", 0, -3, True, None, "s", [1]])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


# --- the published schema ----------------------------------------------------------------------


def test_published_schema_is_valid_and_described() -> None:
    schema = tool_schema()
    Draft202012Validator.check_schema(schema)

    def properties_without_description(node: object, path: str = "") -> list[str]:
        # Walk schema nodes only: property schemas, $defs, items and if/then/else branches.
        missing = []
        if not isinstance(node, dict):
            return missing
        for name, sub in (node.get("properties") or {}).items():
            if isinstance(sub, dict) and "description" not in sub and "$ref" not in sub:
                missing.append(f"{path}.{name}")
            missing += properties_without_description(sub, f"{path}.{name}")
        for name, sub in (node.get("$defs") or {}).items():
            missing += properties_without_description(sub, f"{path}.$defs.{name}")
        for key in ("items", "additionalProperties", "then", "else"):
            missing += properties_without_description(node.get(key), f"{path}.{key}")
        return missing

    assert properties_without_description(schema) == []


def test_schema_tool_output_validates_good_files_and_rejects_broken(tmp_path: Path, broken_dir: Path) -> None:
    printed = subprocess.run([str(TOOLRUN), "schema", "tool"], capture_output=True, text=True, timeout=60, check=True)
    validator = Draft202012Validator(json.loads(printed.stdout))
    good = [write(tmp_path / "good", "count.yaml", GOOD_SHELL)]
    shipped = sorted(p for p in (ROOT / "tools.d").iterdir() if p.suffix in (".yaml", ".yml"))
    assert {p.name for p in shipped} >= {"flowers.yaml", "disk.yaml", "ops_api.yaml"}
    good += shipped
    for path in good:
        errors = list(validator.iter_errors(plain(load_yaml_file(path))))
        assert errors == [], (path, [e.message for e in errors])
    for name in ["b_typos.yaml", "h_two_backends.yaml", "i_no_backend.yaml", "j_toolset.yaml"]:
        assert list(validator.iter_errors(plain(load_yaml_file(broken_dir / name)))), name


@pytest.fixture
def seeded_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed_tools_d_listings: Callable[[Path], Path]) -> None:
    """A fresh cache folder that knows the ticket server's tool list: loading tools.d starts no server."""
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(seed_tools_d_listings(tmp_path / "cache")))


@pytest.mark.usefixtures("seeded_cache")
def test_shipped_tools_dir_loads_cleanly() -> None:
    shipped = ROOT / "tools.d"
    assert {p.name for p in tool_files(shipped)} >= {"flowers.yaml", "disk.yaml", "ops_api.yaml"}
    result = load_catalog(shipped)
    assert result.problems == [], "\n".join(str(p) for p in result.problems)
    assert "get_flower_inventory" in result.catalog.tools


# --- the fast path for plain parameter schemas never accepts what the metaschema rejects ----------

SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string", "enum": ["北京"], "description": "City"}}, "required": ["city"]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True}}},
    {"type": "object", "properties": {"x": {"type": ["string", "null"]}}, "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": ["string", "string"]}}},
    {"type": "object", "properties": {"x": {"type": []}}},
    {"type": "object", "properties": {"x": {"type": "strin"}}},
    {"type": "object", "properties": {"x": {"minLength": -1}}},
    {"type": "object", "properties": {"x": {"minLength": 1.5}}},
    {"type": "object", "properties": {"x": {"minimum": "zero"}}},
    {"type": "object", "properties": {"x": {"multipleOf": 0}}},
    {"type": "object", "properties": {"x": {"enum": "a"}}},
    {"type": "object", "properties": {"x": {"description": 3}}},
    {"type": "object", "properties": {"x": {"uniqueItems": "yes"}}},
    {"type": "object", "properties": {"x": {"items": 3}}},
    {"type": "object", "properties": "city"},
    {"type": "object", "required": ["a", "a"]},
    {"type": "object", "required": "a"},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
    {"type": "object", "properties": {"x": {"pattern": "^[a-z]+$"}}},
    {"type": "object", "properties": {"x": True}},
    # shapes of real-world schemas (OpenAPI-derived tools, BFCL): $defs/$ref, unions, annotations
    {"type": "object", "properties": {"f": {"$ref": "#/$defs/Filter"}},
     "$defs": {"Filter": {"type": "object", "properties": {"k": {"type": "string"}}}}},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "examples": ["a"]}}},
    {"type": "object", "properties": {"x": {"oneOf": [{"$ref": "#/$defs/A"}, {"const": 3}]}}, "$defs": {"A": True}},
    {"type": "object", "properties": {"x": {"type": "string", "nullable": True, "example": "abc", "x-oaiMeta": {"a": 1}}}},
    {"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "maximum": 2.5, "deprecated": True}}},
    {"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": True, "minimum": 0}}},
    {"type": "object", "properties": {"x": {"type": "dict"}}},
    {"type": "object", "properties": {"x": {"anyOf": []}}},
    {"type": "object", "properties": {"x": {"allOf": {"type": "string"}}}},
    {"type": "object", "properties": {"x": {"$ref": 3}}},
    {"type": "object", "properties": {"x": {"examples": "a"}}},
    {"type": "object", "properties": {"x": {"readOnly": "no"}}},
    {"type": "object", "$defs": {"A": {"type": "strng"}}},
    {"type": "object", "$recursiveAnchor": True},
    {"type": "object", "$id": "#not-an-id"},
    {"type": "object", "definitions": {"A": {"type": 3}}},
    {"type": "object", "dependentRequired": {"a": ["b", "b"]}},
    {"type": "object", "prefixItems": [{"type": "string"}], "maxContains": -2},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_fast_schema_check_agrees_with_the_metaschema(schema: dict) -> None:
    from toolrun.catalog.parameter_checks import _metaschema_errors

    full = list(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))
    fast = list(_metaschema_errors(schema))
    assert bool(fast) == bool(full)
    # every error of the node-by-node check is one the whole-schema check also finds
    full_paths = {tuple(error.absolute_path) for error in full}
    assert {steps for steps, _ in fast} <= full_paths


def test_a_catalog_of_over_a_thousand_tools_loads(tmp_path: Path) -> None:
    # Correctness at scale only; the speed is measured by benchmarks/load_large_catalog.py.
    for file_index in range(100):
        tools = "".join(
            f"""
  - name: get_item_{file_index}_{tool_index}
    description: Returns item {tool_index} of shelf {file_index}. Use it when the id is known.
    parameters: {{type: object, properties: {{id: {{type: string, description: Item id}}}}, required: [id]}}
    backend: {{http: {{url: "/items/{{id}}"}}}}
"""
            for tool_index in range(11)
        )
        (tmp_path / f"shelf_{file_index:03d}.yaml").write_text(
            f"defaults:\n  http: {{base_url: 'https://shelf{file_index}.example.com'}}\ntools:{tools}", encoding="utf-8"
        )
    result = load_catalog(tmp_path)
    assert result.problems == []
    assert len(result.catalog) == 1100
    last = result.catalog.get("get_item_99_10")
    assert last.backend.config["base_url"] == "https://shelf99.example.com"
    assert last.source.line == 2 + 10 * 5 + 2


def test_shell_command_variable_for_an_undeclared_argument_points_at_the_command(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t.yaml",
        """
        name: count
        description: Counts a city's stock lines.
        parameters: {type: object, properties: {city: {type: string}}}
        backend:
          shell:
            shell: true
            command: grep -c "$TOOLRUN_ARG_CTY" stock.txt
        """,
    )
    [problem] = load_catalog(tmp_path).problems
    assert "'cty', which is not a declared parameter" in problem.message
    assert problem.line == 7 and problem.fix == "did you mean 'city'?"


def test_a_bad_default_is_reported_once_for_the_file(tmp_path: Path) -> None:
    tools = "".join(f"\n  - name: t{i}\n    description: Tool {i}.\n    backend: {{python: 'json:dumps'}}" for i in range(3))
    (tmp_path / "set.yaml").write_text(f"defaults:\n  timeout: 0s\ntools:{tools}\n", encoding="utf-8")
    problems = load_catalog(tmp_path).problems
    assert [(p.line, p.message) for p in problems] == [(2, "defaults.timeout: a duration must be more than 0, got '0s'")]


def test_a_key_in_the_wrong_place_says_where_it_belongs(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t.yaml",
        """
        name: a
        description: A.
        base_url: https://api.example.com
        backend:
          http: {url: /a, argv: [ls]}
        """,
    )
    fixes = {(p.line, p.message): p.fix for p in load_catalog(tmp_path).problems}
    assert fixes == {
        (3, "unknown key 'base_url'"): "'base_url' belongs under backend.http or defaults.http",
        (5, "unknown key 'argv' in backend.http"): "'argv' belongs under backend.shell",
    }


def test_required_is_checked_in_nested_objects_too(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t.yaml",
        """
        name: order
        description: Places an order.
        parameters:
          type: object
          properties:
            items:
              type: array
              items:
                type: object
                properties: {sku: {type: string}, quantity: {type: integer}}
                required: [sku, quantiy]
        backend: {python: "json:dumps"}
        """,
    )
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 11
    assert "parameters.properties.items.items.required names 'quantiy'" in problem.message
    assert problem.fix == "did you mean 'quantity'?"


def test_openapi_annotation_keywords_are_not_reported_as_typos(tmp_path: Path) -> None:
    # example/discriminator/xml/externalDocs come from OpenAPI; JSON Schema ignores them, they are no misspelling.
    schema = (
        "{type: string, description: City name, example: 北京, discriminator: {propertyName: kind},"
        " xml: {name: city}, externalDocs: {url: 'https://example.com'}}"
    )
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", schema))
    assert load_catalog(tmp_path).problems == []


@pytest.mark.parametrize(
    ("schema", "words", "fix"),
    [
        ("{type: dict, description: City name}", "'dict' is not a JSON Schema type", "write type: object"),
        ("{type: float, description: City name}", "'float' is not a JSON Schema type", "write type: number"),
        ("{type: any, description: City name}", "'any' is not a JSON Schema type", "remove 'type' to accept any value"),
        ("{type: number, minimum: 0, exclusiveMinimum: true}", "true is the draft-04 form",
         "write exclusiveMinimum: <the minimum value> and remove minimum"),
        ("{type: object, $recursiveAnchor: true}", "draft 2019-09 keyword", "remove it: a plain $ref"),
        ("{type: string, enum: [a, b], description: 3}", "must be of type string, not an integer 3", "write a string value here"),
    ],
)
def test_invalid_parameter_schemas_say_how_to_fix_them(tmp_path: Path, schema: str, words: str, fix: str) -> None:
    # Shapes from real catalogs: BFCL's Python type names, OpenAPI 3.0's boolean exclusiveMinimum.
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", schema))
    [problem] = load_catalog(tmp_path).problems
    assert words in problem.message and fix in problem.fix and problem.line == 6


def test_a_bad_keyword_deep_in_a_large_schema_is_found_at_its_line(tmp_path: Path) -> None:
    properties = "".join(f"    p{index}: {{type: string, description: Field {index}}}\n" for index in range(200))
    text = (
        "name: big\ndescription: Stores a record. Use it to save one record; not for reading.\n"
        "parameters:\n  type: object\n  properties:\n" + properties
        + "    last: {type: array, items: {type: tuple}}\nbackend: {python: 'json:dumps'}\n"
    )
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 206 and "parameters.properties.last.items.type" in problem.message
    assert problem.fix == "write type: array"


@pytest.mark.parametrize("description", ['""', '"   "'])
def test_a_blank_description_is_an_error_that_says_what_to_write(tmp_path: Path, description: str) -> None:
    write(tmp_path, "t.yaml", f"name: t\ndescription: {description}\nbackend: {{python: 'json:dumps'}}\n")
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 2 and "description must be a text that is not empty" in problem.message
    assert problem.fix.startswith("write what the tool does, when to use it and when not")


_OK_START = "name: t\ndescription: Does a thing. Use it for things; not for other things.\n"


@pytest.mark.parametrize(
    ("text", "line", "words", "fix"),
    [
        (_OK_START + "\tbackend: {python: 'json:dumps'}\n", 3, "tab", "indent with spaces"),
        (_OK_START + "timeout: .inf\nbackend: {python: 'json:dumps'}\n", 3, "timeout", "write it like 30s"),
        (_OK_START + "timeout: .nan\nbackend: {python: 'json:dumps'}\n", 3, "timeout", "write it like 30s"),
        (
            _OK_START + "parameters: {type: object, properties: {on: {type: string}}, required: [on]}\n"
            "backend: {python: 'json:dumps'}\n",
            3, "not a boolean true", 'quote it ("on"',
        ),
        (
            _OK_START + "parameters: {type: object, properties: {a: {$ref: '#/$defs/Nope'}}}\n"
            "backend: {python: 'json:dumps'}\n",
            3, "$ref '#/$defs/Nope' points to nothing", "add Nope under parameters.$defs",
        ),
        (
            _OK_START + "parameters: {type: object, properties: {a: {type: number, enum: [1, .NaN]}}}\n"
            "backend: {python: 'json:dumps'}\n",
            3, "enum is .nan, which is not a number JSON can carry", "write a number",
        ),
        (
            _OK_START + "parameters: {type: object, properties: {a: {type: string, pattern: '([a-z'}}}\n"
            "backend: {python: 'json:dumps'}\n",
            3, "not a valid regular expression", "fix the pattern",
        ),
        (
            _OK_START + "backend: {http: {url: 'https://x.example.com/', headers: {A: 'Bearer ${env:}'}}}\n",
            3, "malformed ${env:...}", "write ${env:NAME}",
        ),
        (
            _OK_START + "backend: {http: {url: 'https://x.example.com/', headers: {A: 'Bearer ${env:my-token}'}}}\n",
            3, "malformed ${env:...}", "write ${env:NAME}",
        ),
        (
            _OK_START + "parameters: {type: object, properties: {a: {type: string}}}\n"
            "backend: {shell: {argv: [echo, '{{ a ']}}\n",
            4, "template syntax error", "close every {{ with }}",
        ),
    ],
)
def test_more_mistakes_each_with_line_and_fix(tmp_path: Path, text: str, line: int, words: str, fix: str) -> None:
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    [problem] = load_catalog(tmp_path).problems
    assert words in problem.message and problem.line == line
    assert problem.fix and fix in problem.fix


def test_a_python_file_with_a_syntax_error_points_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import os\ndef f(:\n    pass\n", encoding="utf-8")
    write(tmp_path, "t.yaml", _OK_START + "backend: {python: 'bad.py:f'}\n")
    [problem] = load_catalog(tmp_path).problems
    assert "bad.py does not parse" in problem.message and problem.line == 3
    assert problem.fix == "fix the syntax error at bad.py line 2"


def test_a_broken_symlink_is_reported_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "loop1.yaml").symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(tmp_path / "loop1.yaml")
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "missing.yaml")
    (tmp_path / "folder.yaml").mkdir()  # a directory is not a tool file: skipped
    problems = load_catalog(tmp_path).problems
    assert [(p.file.name, "cannot read the file" in p.message) for p in problems] == [
        ("gone.yaml", True), ("loop1.yaml", True), ("loop2.yaml", True)
    ]


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("ChaDri.change_drink", "ChaDri_change_drink"), ("get weather", "get_weather"), ("x" * 70, "x" * 64)],
)
def test_an_invalid_name_gets_a_valid_one_suggested(tmp_path: Path, name: str, suggestion: str) -> None:
    # BFCL-style dotted names (module.function) are common in catalogs written for other tools.
    write(tmp_path, "t.yaml", f"name: '{name}'\n" + _OK_START.split("\n", 1)[1] + "backend: {python: 'json:dumps'}\n")
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 1 and problem.fix == f"rename it, e.g. {suggestion}"


@pytest.mark.parametrize(("key", "shown"), [("200", "200"), ("null", "null"), ("on", "true"), ("1.5", "1.5")])
def test_a_property_name_yaml_reads_as_a_number_or_boolean_says_to_quote_it(tmp_path: Path, key: str, shown: str) -> None:
    # Unquoted, YAML makes these keys 200, None, True: lint and export crashed on them.
    write(tmp_path, "t.yaml", _OK_START + f"parameters:\n  type: object\n  properties:\n    {key}: {{type: string}}\n"
          "backend: {python: 'json:dumps'}\n")
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 6 and f"the name {shown} is not text" in problem.message
    assert problem.fix == (f"quote it: \"{key}\"" if key != "on" else 'quote it as you wrote it, e.g. "on" or "yes"')


def test_every_problem_of_the_broken_folder_has_a_fix(broken_dir: Path) -> None:
    (broken_dir / "loop.yaml").symlink_to(broken_dir / "loop.yaml")
    problems = load_catalog(broken_dir).problems
    assert problems and [str(p) for p in problems if not p.fix] == []


def test_a_bfcl_style_tool_has_all_its_schema_problems_reported_at_once(tmp_path: Path) -> None:
    # BFCL writes type: dict at every level; the top-level one must not hide the nested ones.
    write(tmp_path, "t.yaml", """
        name: calculate_area
        description: Calculates the area of a triangle. Use it for triangles; not for other shapes.
        parameters:
          type: dict
          properties:
            base: {type: float, description: The base}
            corner: {type: tuple, items: {type: float}, description: A corner}
            shape: {type: dict, properties: {kind: {type: str}}, description: Extra}
          required: [base]
        backend:
          shell:
            argv: [echo, "{{ base }}", "{{ heigth }}"]
        """)
    problems = load_catalog(tmp_path).problems
    assert [(p.line, p.fix) for p in problems] == [
        (4, "tool parameters are always 'type: object' with the arguments under 'properties'"),
        (6, "write type: number"),
        (7, "write type: array"),
        (7, "write type: number"),
        (8, "write type: object"),
        (8, "write type: string"),
        (12, "declare 'heigth' under parameters.properties, or fix the template"),
    ]


# --- a null-valued keyword: YAML flow style cut a text at its comma ----------------------------


def test_a_comma_in_a_flow_style_description_is_a_load_error_that_says_to_quote(tmp_path: Path) -> None:
    schema = "{type: string, description: City name, in English, e.g. Paris}"
    file = write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", schema))
    result = load_catalog(tmp_path)
    assert "count_stock" not in result.catalog.tools
    [problem] = result.problems
    assert problem.file == file and problem.line == 6
    assert "parameters.properties.city" in problem.message
    assert '"in English"' in problem.message and '"e.g. Paris"' in problem.message
    assert problem.fix is not None and "quote" in problem.fix
    assert 'description: "City name, in English, e.g. Paris"' in problem.fix


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ("{type: string, enum: [a, b], description: One of a, b}", '"b" has no value'),
        ("{type: string, description:}", '"description" has no value'),
        ("{type: object, properties: {a: {type: string}, b}}", '"b" has no value'),
        ("{type: array, items: {type: string, description: A name, or a nickname}}", '"or a nickname" has no value'),
    ],
)
def test_every_null_valued_keyword_is_a_load_error(tmp_path: Path, schema: str, words: str) -> None:
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", schema))
    [problem] = load_catalog(tmp_path).problems
    assert words in problem.message and problem.line == 6
    assert problem.fix is not None and "quote" in problem.fix


def test_null_is_a_fine_value_for_default_const_and_extensions(tmp_path: Path) -> None:
    schema = "{type: [string, 'null'], description: City name, default: null, x-internal: null}"
    write(tmp_path, "t.yaml", GOOD_SHELL.replace("{type: string, description: City name}", schema))
    assert load_catalog(tmp_path).problems == []


def _parameter_schemas(node: object) -> Iterator[object]:
    if isinstance(node, dict):
        if isinstance(node.get("parameters"), dict):
            yield node["parameters"]
        for value in node.values():
            yield from _parameter_schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _parameter_schemas(value)


@pytest.mark.usefixtures("seeded_cache")
def test_the_shipped_tools_and_documented_examples_have_no_null_valued_keyword() -> None:
    # The README and docs show flow style: none of their tool examples may be cut at a comma.
    assert load_catalog(ROOT / "tools.d").problems == []
    checked = 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "tools.d" / "README.md"]:
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            try:
                document = yaml.safe_load(block)
            except yaml.YAMLError:
                continue  # an excerpt, not a whole file
            for schema in _parameter_schemas(document):
                checked += 1
                problems = parameter_schema_problems(schema, doc, "example", lambda *steps: None)
                assert not [p for p in problems if "has no value" in p.message], (doc.name, problems)
    assert checked >= 5


def test_a_shell_tool_may_accept_more_exit_codes_and_shape_its_result(tmp_path: Path) -> None:
    shaped = GOOD_SHELL.replace(
        "    argv: [grep, -c, \"{{ city }}\", stock.txt]\n",
        "    argv: [grep, -c, --, \"{{ city }}\", stock.txt]\n    ok_exit_codes: [0, 1]\n"
        "    result: \"{{ city }}: {{ stdout | trim }} lines\"\n")
    write(tmp_path, "t.yaml", shaped)
    (tmp_path / "stock.txt").write_text("北京 玫瑰\n", encoding="utf-8")
    catalog = load_catalog_or_raise(tmp_path)
    import toolrun

    assert toolrun.call(catalog, "count_stock", {"city": "深圳"}).result == "深圳: 0 lines"
    write(tmp_path, "t.yaml", shaped.replace("[0, 1]", "[0, one]"))
    [problem] = load_catalog(tmp_path).problems
    assert problem.line == 11 and 'backend.shell.ok_exit_codes[1] must be an integer, not a string "one"' in problem.message
    write(tmp_path, "t.yaml", shaped.replace("{{ stdout | trim }}", "{{ stdotu }}"))
    [typo] = load_catalog(tmp_path).problems
    assert typo.line == 12 and "the template uses 'stdotu'" in typo.message


def test_subfolders_are_read_in_a_stable_order_hidden_ones_skipped(tmp_path: Path) -> None:
    for name in ["z.yaml", "ops/b.yaml", "ops/a.yml", "ops/deep/c.yaml", "a_dir/x.yaml",
                 ".git/hooks.yaml", "ops/.hidden/h.yaml", "__pycache__/p.yaml"]:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x: 1\n", encoding="utf-8")
    relative = [p.relative_to(tmp_path).as_posix() for p in tool_files(tmp_path)]
    assert relative == ["z.yaml", "a_dir/x.yaml", "ops/a.yml", "ops/b.yaml", "ops/deep/c.yaml"]


def test_a_tool_in_a_subfolder_loads_with_paths_relative_to_its_own_file(tmp_path: Path) -> None:
    write(tmp_path, "nested/flowers.py", "def get_inventory(city):\n    return f'{city}: 100'\n")
    write(tmp_path, "nested/flowers.yaml", """
        name: get_inventory
        description: Flower stock of one city. Use it for stock questions; not for prices.
        parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
        backend: {python: "flowers.py:get_inventory"}
        """)
    write(tmp_path, "other/dup.yaml", """
        name: get_inventory
        description: The same name again.
        backend: {python: "json:dumps"}
        """)
    result = load_catalog(tmp_path)
    [problem] = result.problems
    assert problem.file == tmp_path / "other" / "dup.yaml"
    assert f"also defined at {tmp_path / 'nested' / 'flowers.yaml'}:1" in problem.message
    import toolrun

    assert toolrun.call(result.catalog, "get_inventory", {"city": "北京"}).result == "北京: 100"


def _nested_parameters(levels: int) -> str:
    """``parameters`` whose one property holds an object property, ``levels`` times over (two schema levels each)."""
    lines = ["parameters:", "  type: object"]
    for level in range(levels):
        indent = "  " * (2 * level + 1)
        lines += [f"{indent}properties:", f"{indent}  p:", f"{indent}    type: object", f"{indent}    description: One level."]
    return "\n".join(lines) + "\n"


def _nested_tool(folder: Path, levels: int, argv: str = "[echo, '{{ p }}']") -> Path:
    """``nested.yaml`` in ``folder``: a tool whose parameters nest ``levels`` object properties deep."""
    head = "name: nested\ndescription: Takes a nested value. Use it in tests only; not for real work.\n"
    path = folder / "nested.yaml"
    path.write_text(head + f"backend: {{shell: {{argv: {argv}}}}}\n" + _nested_parameters(levels), encoding="utf-8")
    return path


def test_parameters_nested_hundreds_deep_are_a_problem_of_their_file_not_an_internal_error(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", GOOD_SHELL)
    _nested_tool(tmp_path, 200)
    result = load_catalog(tmp_path)
    assert list(result.catalog.tools) == ["count_stock"]
    [problem] = result.problems
    assert (problem.file, problem.line) == (tmp_path / "nested.yaml", 4)
    assert "parameters nest 401 levels of mappings and lists, more than the 200 toolrun reads" in problem.message
    assert "$defs" in (problem.fix or "")
    env = {"PYTHONPATH": str(ROOT), "TOOLRUN_CACHE_DIR": "off", "PATH": "/usr/bin:/bin"}
    lint = subprocess.run([sys.executable, "-m", "toolrun", "tools", "lint", "--tools-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert lint.returncode == 2, lint.stderr
    assert f"{tmp_path / 'nested.yaml'}:4: tool 'nested': parameters nest 401 levels of mappings" in lint.stderr
    assert "internal error" not in lint.stderr


def test_parameters_as_deep_as_the_deepest_arguments_load(tmp_path: Path) -> None:
    _nested_tool(tmp_path, 64)
    result = load_catalog(tmp_path)
    assert result.problems == [] and list(result.catalog.tools) == ["nested"]


def test_a_call_deeper_than_arguments_may_nest_is_refused_without_saying_no_tool_is_that_deep(tmp_path: Path) -> None:
    # The loader takes parameters deeper than the 64 levels a call's arguments may nest (an object in an object 99
    # times over): the refusal of a call that deep says what the bound is, not that no tool's parameters reach it
    import toolrun

    _nested_tool(tmp_path, 70, argv="[echo, ok]")
    result = load_catalog(tmp_path)
    assert result.problems == [] and list(result.catalog.tools) == ["nested"]
    arguments: dict[str, object] = {}
    for _ in range(69):  # what the schema describes, 70 levels deep
        arguments = {"p": arguments}
    outcome = toolrun.call(result.catalog, "nested", arguments)
    assert outcome.is_error
    assert str(outcome.result) == ("invalid arguments for nested: at $: the arguments nest deeper than 64 levels, "
                                   "more than a call may send")
