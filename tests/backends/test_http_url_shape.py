"""An http tool's url is checked at load without httpx when it has a plain shape: the scheme read then must be
the one httpx reads, on any string, and a url of any other shape is still read (and its error worded) by httpx."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.property_budget import property_examples
from toolrun.backends import http_config
from toolrun.backends.http_config import scheme_httpx_reads

SETTINGS = settings(max_examples=property_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])

schemes = st.sampled_from(["http://", "https://", ""]) | st.sampled_from(["HTTPS://", "ftp://", "http:/", "x"])
hosts = (st.sampled_from(["api.example.com", "localhost", "a-b.c", "1.2.3", "-a", "a..b", "1.2.3.4x"])
         | st.from_regex(r"[A-Za-z0-9.-]{1,10}", fullmatch=True)
         | st.sampled_from(["1.2.3.4", "999.1.1.1", "[::1]", "[zz]", "bücher.de", "a_b", ""]) | st.text(max_size=6))
ports = st.sampled_from(["", ":8080", ":0", ":65535", ":99999", ":08"]) | st.sampled_from([":123456", ":", ":x"])
paths = (st.from_regex(r"(/[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,6}){0,3}(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]{0,6})?", fullmatch=True)
         | st.sampled_from(["//x", "/a b", "/é", "/a\tb", "/{", "/x\x7f", "?q=1"]) | st.text(max_size=4))
urls = st.builds(lambda *parts: "".join(parts), schemes, hosts, ports, paths) | st.text(max_size=12)


@given(urls)
@example("/services/x/status")
@example("https://ops.internal.example.com/api/v1")
@example("https://999.1.1.1/x")
@example("https://a.b:99999/x")
@example("/" * 2 + "host/x")
@SETTINGS
def test_a_plain_url_s_scheme_is_the_one_httpx_reads(url: str) -> None:
    if http_config._PLAIN_URL.fullmatch(url) is not None:
        assert_httpx_reads(url)


def assert_httpx_reads(url: str) -> None:
    plain = http_config._PLAIN_URL.fullmatch(url)
    assert plain is not None
    assert httpx.URL(url).scheme == (plain.group("scheme") or "")  # and httpx reads it without an error


@given(st.from_regex(http_config._PLAIN_URL, fullmatch=True))
@SETTINGS
def test_every_url_of_the_plain_shape_is_read_by_httpx_with_the_same_scheme(url: str) -> None:
    assert_httpx_reads(url)


@pytest.mark.parametrize(("url", "expected"), [
    ("/services/x/status", ""),
    ("https://ops.internal.example.com/api/v1?x=1", "https"),
    ("http://localhost:8080/", "http"),
    ("http://10.0.0.5:8080/v1/items", "http"),  # an internal service by address: plain too
    ("HTTPS://a.example/x", "https"),  # not plain: httpx reads it
    ("ftp://files.example/x", "ftp"),
])
def test_scheme_httpx_reads(url: str, expected: str) -> None:
    assert scheme_httpx_reads(url) == expected


@pytest.mark.parametrize(("url", "words"), [
    ("https://999.1.1.1/x", "Invalid IPv4 address: '999.1.1.1'"),
    ("https://a.example/x\ty", "Invalid non-printable ASCII character in URL"),
    ("https://a.example/" + "x" * 70000, "URL too long"),
])
def test_a_url_httpx_refuses_is_refused_in_httpx_s_words(url: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        scheme_httpx_reads(url)
