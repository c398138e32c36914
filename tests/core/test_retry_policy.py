"""The one retry policy of the provider transport and the http backend: which failures retry, how long to wait."""

from __future__ import annotations

from toolrun.core.retry_policy import RetryPolicy

TRANSPORT = RetryPolicy(2, frozenset({429, 500, 503}), 60.0, should_retry_header=True)
BACKEND = RetryPolicy(2, frozenset({429, 503}), 5.0)


def test_retries_stop_after_the_last_allowed_attempt():
    assert [TRANSPORT.may_retry(attempt) for attempt in range(4)] == [True, True, False, False]
    assert not TRANSPORT.retries_status(503, {}, 2)


def test_only_the_listed_statuses_retry():
    assert TRANSPORT.retries_status(500, {}, 0) and not BACKEND.retries_status(500, {}, 0)
    assert not TRANSPORT.retries_status(400, {}, 0)


def test_the_servers_should_retry_word_wins_where_the_caller_honours_it():
    assert TRANSPORT.retries_status(400, {"x-should-retry": "true"}, 0)
    assert not TRANSPORT.retries_status(503, {"x-should-retry": "false"}, 0)
    assert BACKEND.retries_status(503, {"x-should-retry": "false"}, 0)  # the http backend never read it


def test_retry_after_is_honoured_and_a_longer_wait_than_the_bound_is_reported():
    assert TRANSPORT.wait_for_status({"Retry-After": "3"}, 0) == 3.0
    assert TRANSPORT.wait_for_status({"retry-after-ms": "250"}, 0) == 0.25
    assert BACKEND.too_long(BACKEND.wait_for_status({"Retry-After": "3600"}, 0))


def test_backoff_has_jitter_and_never_outlives_the_bound():
    waits = {TRANSPORT.wait_after_failure(1) for _ in range(20)}
    assert len(waits) > 1 and all(0.75 <= wait <= 1.25 for wait in waits)  # 1 s at attempt 1, ±25 %
    assert RetryPolicy(5, frozenset(), 0.5).wait_after_failure(4) == 0.5
