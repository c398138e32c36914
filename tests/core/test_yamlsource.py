from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from toolrun.core.yamlsource import YamlSyntaxError, line_of, load_yaml_file, load_yaml_text, plain


def test_lines_of_nested_keys_and_items():
    doc = load_yaml_text("a: 1\nb:\n  c: [1, 2]\n  d:\n    - x\n    - y\n", "f.yaml")
    assert line_of(doc, ["b", "d", 1]) == 6
    assert line_of(doc, ["b", "c"]) == 3
    assert line_of(doc, ["b", "missing", "deeper"]) == 2  # nearest parent


def test_syntax_error_names_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nparameters: [1\nother: 2\n", encoding="utf-8")
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_file(bad)
    assert info.value.problem.file == bad
    assert info.value.problem.line in (2, 3)


def test_duplicate_keys_are_an_error_not_a_silent_overwrite():
    with pytest.raises(YamlSyntaxError, match="duplicate key 'name'"):
        load_yaml_text("name: a\nname: b\n", "f.yaml")


def test_plain_copies_into_builtin_types():
    doc = load_yaml_text("a: [ {b: 1} ]", "f.yaml")
    copy = plain(doc)
    assert copy == {"a": [{"b": 1}]} and type(copy) is dict and type(copy["a"]) is list


def test_flow_mapping_error_says_to_quote_the_value():
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_text("name: x\nvars: {when: now: later}\n", "r.yaml")
    assert info.value.problem.line == 2
    assert "quote the value" in info.value.problem.fix


def test_design_example_with_a_question_mark_in_a_flow_mapping_loads():
    # The flower-shop recipe's question; libyaml (PyYAML's wheels) takes it, the pure loader would not.
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml")
    doc = load_yaml_text("vars: {question: 北京、上海和深圳的鲜花库存是多少?}\n", "r.yaml")
    assert doc == {"vars": {"question": "北京、上海和深圳的鲜花库存是多少?"}}


@pytest.mark.parametrize("text", ["2024-06-01", "2024-06-01 10:30:00", "2001-12-14t21:59:43.10-05:00"])
def test_dates_stay_text_as_written(text: str):
    # JSON has no dates: a date object in a schema or template value would break every JSON dump.
    doc = load_yaml_text(f"default: {text}\nenum: [{text}]\n", "f.yaml")
    assert doc == {"default": text, "enum": [text]}
    assert json.loads(json.dumps(plain(doc))) == doc


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: !!binary aGVsbG8=\n", "binary values (!!binary) are not allowed here"),
        ("a: !!set {x, y}\n", "set values (!!set) are not allowed here"),
        ("a: !!omap [x: 1]\n", "omap values"),
        ("a: !!python/object:os.system x\n", "could not determine a constructor"),
    ],
)
def test_values_with_no_json_form_are_a_problem_at_their_line(text: str, words: str):
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_text("name: t\n" + text, "f.yaml")
    problem = info.value.problem
    assert words in problem.message and problem.line == 2
    assert problem.fix.startswith("remove the !! tag")


def test_an_alias_bomb_is_refused_before_it_expands():
    # Nine levels of nine aliases expand to 9**9 values: gigabytes and minutes if constructed.
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_text("\n".join(lines) + "\n", "f.yaml")
    assert "aliases expand to more than" in info.value.problem.message
    assert load_yaml_text("base: &b {a: 1}\nother: *b\n", "f.yaml") == {"base": {"a": 1}, "other": {"a": 1}}


def test_yaml_nested_thousands_deep_is_a_problem_not_a_recursion_error():
    depth = sys.getrecursionlimit() + 100  # the parser recurses once per level: just past Python's limit will do
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_text("a: " + "[" * depth + "]" * depth + "\n", "f.yaml")
    assert info.value.problem.message == "the YAML is nested too deeply to read"


def test_a_number_longer_than_python_reads_is_a_problem_at_its_line(tmp_path: Path):
    huge = "1" + "0" * 5000  # int() stops at 4,300 digits with a ValueError, not a YAML error
    with pytest.raises(YamlSyntaxError, match="a number longer than") as info:
        load_yaml_text(f"name: x\nmaximum: {huge}\n", "f.yaml")
    assert info.value.problem.line == 2


UNCLOSED_THEN_ANOTHER_QUOTE = """\
name: get_x
description: >-
  Something long.
parameters:
  type: object
  properties:
    city:
      description: "The city
      type: string
    unit:
      type: string
      description: "Celsius or F"
  required: [city]
"""


def test_an_unclosed_quote_is_reported_where_it_opens_not_where_the_parser_stops() -> None:
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text(UNCLOSED_THEN_ANOTHER_QUOTE, "t.yaml")
    assert caught.value.problem.line == 8
    assert "not closed" in caught.value.problem.message and "line 12" in caught.value.problem.message
    at_the_end = "\n".join(UNCLOSED_THEN_ANOTHER_QUOTE.splitlines()[:9]) + "\n"  # no quote after it: end of stream
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text(at_the_end, "t.yaml")
    assert caught.value.problem.line == 8 and "close the quote" in str(caught.value.problem.fix)


@pytest.mark.parametrize(("value", "closing"), [('{python: "a.py:f"', "}"), ("[a, b", "]")])
def test_a_bracket_never_closed_is_reported_where_it_opens_not_past_the_last_line(value: str, closing: str) -> None:
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text(f"name: x\ndescription: hi\nbackend: {value}\n", "t.yaml")
    assert caught.value.problem.line == 3  # the file has 3 lines; the parser stops at its end
    assert "not closed" in caught.value.problem.message and f"close it with {closing}" in str(caught.value.problem.fix)


@pytest.mark.parametrize(("value", "closing"), [("{type: object, required: [host]", "}"), ("[a, b", "]")])
def test_a_bracket_left_open_at_its_line_end_is_reported_where_it_opens(value: str, closing: str) -> None:
    # the next line's key is where the parser stops; the mistake is the bracket two lines up
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text(f"name: x\nparameters: {value}\nbackend: {{shell: {{argv: [echo]}}}}\n", "t.yaml")
    problem = caught.value.problem
    assert problem.line == 2 and "still open at line 3" in problem.message
    assert f"close it with {closing} on this line" in str(problem.fix)


def test_a_flow_mapping_over_several_lines_still_loads() -> None:
    assert load_yaml_text("a: {b: 1,\n   c: 2}\n", "t.yaml") == {"a": {"b": 1, "c": 2}}


def test_other_parser_errors_keep_their_line_when_every_quote_is_closed() -> None:
    text = "name: 'it''s' \ndescription: \"a \\\"b\\\"\"\nparameters:\n  type: object\n - x\n"
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text(text, "t.yaml")
    assert caught.value.problem.line == 5


def test_an_unquoted_colon_in_a_text_gets_the_quoting_hint() -> None:
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_text("name: x\ndescription: Returns the weather. Note: cities only.\n", "t.yaml")
    assert caught.value.problem.line == 2
    assert 'quote the whole value ("...")' in str(caught.value.problem.fix) and '": "' in str(caught.value.problem.fix)


def test_a_file_not_in_utf8_is_reported_at_the_line_of_its_first_bad_byte(tmp_path: Path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: cafe\n# owner: José\ndescription: x\n".encode("cp1252"))
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_file(latin)
    problem = info.value.problem
    assert (problem.file, problem.line) == (latin, 2)
    assert problem.message == "not UTF-8 text (byte 0xe9: invalid continuation byte)"
    assert "iconv -f cp1252 -t utf-8" in (problem.fix or "")
    wide = tmp_path / "wide.yaml"
    wide.write_bytes("name: cafe\n".encode("utf-16"))
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml_file(wide)
    assert (info.value.problem.line, info.value.problem.message) == (1, "UTF-16 text, not UTF-8")
