"""Templates that are only literal text, ``${env:NAME}`` and ``{{ name }}`` are filled in, checked
and searched for names without Jinja2: to exactly what Jinja2 makes, checked against Jinja2 itself on random texts and values.
Everything else (filters, dots, tags, comments, undefined names, other values) still goes
through Jinja2, errors included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jinja2 import meta

from tests.property_budget import property_examples
from toolrun.core import templates
from toolrun.core.secrets import MissingSecret, Redactor, redacting
from toolrun.core.templates import TemplateError, check_template, placeholders, render

SETTINGS = settings(max_examples=property_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["a", "b", "city", "_x", "a1", "class", "for", "range", "dict", "self", "loop", "true", "None",
         "not", "in", "__toolrun_env__"]
identifiers = st.sampled_from(NAMES) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
spaces = st.text(st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\u3000"]), max_size=3)
variables = st.builds(lambda left, name, right: f"{{{{{left}{name}{right}}}}}", spaces, identifiers, spaces)
FRAGMENTS = ["{{ a }}", "{{a}}", "{{ a.b }}", "{{ a|upper }}", "{{ a[0] }}", "{{ -a }}", "{{- a }}", "{{ a -}}",
             "{{+ a }}", "{{ 1 }}", "{{ 'x' }}", "{{{ a }}}", "{{ a }}}", "{", "}", "{{", "}}", "{%", "%}", "{#", "#}",
             "{% if a %}x{% endif %}", "{# note #}", "${env:HOME}", "${env:TOKEN}", "${env:UNSET}", "${env:",
             "{${env:TOKEN}", "${env:HOME}}", "{{ ${env:HOME} }}", "__toolrun_env__['HOME']", "$", "\r\n", "\r", "\n", "\t", " ",
             "x", "é", "北京", "\u2028", "\x00"]
texts = st.lists(variables | st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=8).map("".join)
plain_values = (st.none() | st.booleans() | st.integers() | st.sampled_from([10**5000, -(10**5000)])
                | st.floats() | st.text(max_size=8))
values = plain_values | st.lists(plain_values, max_size=2) | st.dictionaries(st.text(max_size=3), plain_values, max_size=2)
arguments = st.dictionaries(identifiers, values, max_size=5)


def jinja_placeholders(source: str) -> set[str]:
    parsed = templates._environment().parse(templates._prepare(source))
    return set(meta.find_undeclared_variables(parsed)) - {templates._ENV_VARIABLE}


ENVIRON = {"HOME": "/home/ann", "TOKEN": "{{ a }} ${env:HOME}"}  # a secret is data, whatever it holds


def _outcome(render_with: Callable[[], str | None]) -> Any:
    try:
        return render_with()
    except (MissingSecret, TemplateError) as exc:
        return (type(exc).__name__, str(exc))


@given(texts, arguments)
@example("Q: {{ question }}\n\n", {"question": "北京、上海和深圳的鲜花库存是多少?"})
@example("{{ a }}{{b}} {{\ta\n}}", {"a": 3, "b": None})
@example("{{ a }}", {"a": 10**5000})
@example("{{ a }}", {"a": float("nan")})
@example("Bearer ${env:TOKEN} {{ a }}", {"a": "x", "$env:TOKEN": "the model's"})
@example("${env:UNSET}{{ a }}", {"a": "x"})
@example("{{ missing }} ${env:UNSET}", {})
@example("{{ a }}{{ missing }}{{ other }}", {"a": 10**5000})
@SETTINGS
def test_substitution_is_exactly_what_jinja2_renders(source: str, values: dict[str, Any]) -> None:
    substituted = _outcome(lambda: templates._substituted(source, values, ENVIRON))
    if substituted is None:
        return
    assert substituted == _outcome(lambda: templates._rendered_in_sandbox(source, values, ENVIRON))
    assert _outcome(lambda: render(source, values, ENVIRON)) == substituted


@given(texts, arguments)
@example("Bearer ${env:TOKEN} {{ a }}", {"a": "x"})
@example("{{ a }}${env:HOME}{{ b }}", {"a": "x"})  # b undefined: Jinja2 words the error, the secret still read
@example("${env:HOME}{{ a }}${env:UNSET}", {"a": "x"})
@SETTINGS
def test_every_secret_jinja2_would_read_is_registered_for_redaction(source: str, values: dict[str, Any]) -> None:
    # A secret reaches the rendered text only after it is registered: redaction keeps it out of every output.
    def registered(render_with: Callable[[], str]) -> tuple[Any, frozenset[str]]:
        redactor = Redactor()
        with redacting(redactor):
            try:
                outcome: Any = render_with()
            except (MissingSecret, TemplateError, ValueError) as exc:
                outcome = (type(exc), str(exc))
        return outcome, redactor.secrets

    if templates._plain_parts(source) is None:
        return
    assert registered(lambda: render(source, values, ENVIRON)) == \
        registered(lambda: templates._rendered_in_sandbox(source, values, ENVIRON))


@given(texts)
@example("Q: {{ question }}")
@example("plain text, no tag at all\n")
@SETTINGS
def test_a_plain_template_parses_and_names_what_jinja2_names(source: str) -> None:
    if templates._plain_parts(source) is None:
        return
    templates._compile(source)  # Jinja2 parses it too: check_template's None is right
    assert check_template(source) is None
    if templates.is_template(source):
        assert placeholders(source) == jinja_placeholders(source)


@pytest.mark.parametrize(("source", "values", "expected"), [
    ("{{ question }}", {"question": "北京?"}, "北京?"),
    ("Hi {{ name }}!\n\n", {"name": "Ann"}, "Hi Ann!\n\n"),  # the trailing newlines kept, as Jinja2 keeps them here
    ("{{ n }} {{ f }} {{ t }} {{ z }}", {"n": -3, "f": 0.5, "t": True, "z": None}, "-3 0.5 True None"),
    ("a { b } {{x}}}", {"x": "y"}, "a { b } y}"),
    ("Bearer ${env:TOKEN}", {}, "Bearer {{ a }} ${env:HOME}"),  # a secret's value is never read as a template
    ("${env:HOME}/{{ a }}", {"a": "x"}, "/home/ann/x"),
])
def test_literal_text_and_names_are_filled_in_without_jinja2(source: str, values: dict[str, Any], expected: str) -> None:
    assert templates._substituted(source, values, ENVIRON) == expected


@pytest.mark.parametrize(("source", "values"), [
    ("{{ question | upper }}", {"question": "x"}),  # a filter
    ("{{ a.b }}", {"a": {"b": 1}}),  # a dot
    ("{% if a %}x{% endif %}", {"a": 1}),
    ("x {# note #}", {}),
    ("{{ a }}", {"a": [1, 2]}),  # a value Jinja2 shows its own way
    ("{{ a }}\r\n", {"a": "x"}),  # Jinja2 turns \r\n into \n
    ("{{{ a }}", {"a": "x"}),  # Jinja2 reads "{{" at the first brace
    ("{{ true }}", {"true": "x"}),  # a constant, not a name
    ("{{ __toolrun_env__['HOME'] }}", {}),  # the look-up a ${env:} reference becomes, written by hand
    ("${env:bad-name}", {}),  # malformed: Jinja2's path words the error
])
def test_anything_more_goes_through_jinja2(source: str, values: dict[str, Any]) -> None:
    assert templates._substituted(source, values, ENVIRON) is None


def test_the_names_left_to_jinja2_include_its_globals() -> None:
    # Jinja2's placeholders leave its globals out; a Jinja2 that adds one must not be filled in here.
    assert set(templates._environment().globals) == templates.JINJA_GLOBALS


def test_errors_are_still_jinja2_s() -> None:
    with pytest.raises(TemplateError, match="template uses an undefined value: 'missing' is undefined"):
        render("Q: {{ missing }}", {"question": "x"})
    with pytest.raises(TemplateError, match="template uses an undefined value: 'missing' is undefined"):
        render("Q: {{ missing | upper }}", {"question": "x"})
    assert check_template("{{ unclosed") == "template syntax error: unexpected end of template, expected 'end of print " \
                                            "statement'. (line 1 of the template)"
    assert render("{{ question | upper }}\n", {"question": "abc"}) == "ABC\n"
