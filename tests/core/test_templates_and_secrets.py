"""Sandboxed templates and secret redaction: model values stay data, secrets stay out."""

from __future__ import annotations

import pytest

from toolrun.core.secrets import REDACTED, MissingSecret, redact, register_secret
from toolrun.core.templates import TemplateError, check_template, placeholders, render, render_value


def test_model_value_is_never_rendered_as_a_template():
    hostile = "{{ 7*7 }} {% for x in range(3) %}x{% endfor %} ${env:HOME}"
    assert render("city={{ city }}", {"city": hostile}) == f"city={hostile}"


def test_env_reference_is_resolved_from_the_given_environment_only():
    assert render("Bearer ${env:TOKEN_A}", {}, {"TOKEN_A": "abc123xyz"}) == "Bearer abc123xyz"
    with pytest.raises(MissingSecret) as info:
        render("Bearer ${env:TOKEN_B}", {}, {})
    assert info.value.name == "TOKEN_B"


def test_resolved_secret_is_redacted_afterwards():
    render("${env:TOKEN_C}", {}, {"TOKEN_C": "s3cr3t-value-42"})
    assert redact("server said s3cr3t-value-42!") == f"server said {REDACTED}!"
    assert redact({"a": ["x s3cr3t-value-42"]}) == {"a": [f"x {REDACTED}"]}


def test_short_values_are_not_registered_so_ordinary_text_survives():
    register_secret("ab")
    assert redact("abc") == "abc"


def test_sandbox_refuses_attribute_escapes():
    with pytest.raises(TemplateError, match="access to attribute '__class__' of 'str' object is unsafe"):
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}", {})


def test_placeholders_ignore_env_references_and_find_nested_use():
    assert placeholders("{{ city|upper }} {% if n %}{{ n }}{% endif %} ${env:TOKEN}") == {"city", "n"}


def test_undefined_value_and_syntax_error_are_clear():
    with pytest.raises(TemplateError, match="undefined"):
        render("{{ missing }}", {})
    assert "syntax" in check_template("{{ unclosed")
    assert check_template("{{ fine }}") is None


def test_render_value_walks_json_and_keeps_types_of_non_strings():
    value = {"q": "{{ city }}", "n": 3, "list": ["{{ city }}", True]}
    assert render_value(value, {"city": "北京"}) == {"q": "北京", "n": 3, "list": ["北京", True]}


def test_tojson_filter_keeps_unicode():
    assert render("{{ city|tojson }}", {"city": "北京"}) == '"北京"'


def test_dotted_access_on_a_mapping_finds_the_key_before_a_dict_method():
    response = {"json": {"items": [1, 2, 3], "keys": "k"}}
    assert render("{{ response.json.items | length }} {{ response.json.keys }}", {"response": response}) == "3 k"


def test_a_secret_is_redacted_in_the_encodings_it_travels_in():
    # An HTTP tool puts the secret in a query string: the server may echo it back URL-encoded.
    secret = "s3cr3t/with+special=chars&é\"x"
    register_secret(secret)
    import base64
    import json
    import urllib.parse

    encoded = [
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        base64.b64encode(secret.encode()).decode(),
    ]
    for form in encoded:
        assert redact(f"echo: {form}!") == f"echo: {REDACTED}!", form


@pytest.mark.parametrize("source", ["{{ a * n }}", "{{ n * a }}", "{{ [a] * n }}", "{{ 10 ** n }}", "{{ a * 3 * n }}"])
def test_a_template_cannot_make_a_huge_value_from_model_numbers(source: str):
    # The model chooses n: "x" * 10**9 would take a gigabyte, 10 ** 10**8 minutes of CPU.
    with pytest.raises(TemplateError, match="too large"):
        render(source, {"a": "xxxxxxxxxx", "n": 100_000_000})
    assert render("{{ a * 2 }}|{{ 2 ** 10 }}|{{ 3 * 4 }}", {"a": "ab"}) == "abab|1024|12"
