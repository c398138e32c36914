"""call_timeout: each call times out on its own deadline, as under asyncio.timeout, with one timer per loop."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from toolrun.core.call_timeouts import call_timeout


async def _sleep_under(seconds: float, sleep: float) -> str:
    with call_timeout(seconds):
        await asyncio.sleep(sleep)
    return "done"


def test_a_block_past_its_deadline_raises_timeout_error_and_leaves_its_task_uncancelled() -> None:
    async def main() -> tuple[float, int]:
        started = time.perf_counter()
        with pytest.raises(TimeoutError):
            await _sleep_under(0.05, 10)
        task = asyncio.current_task()
        assert task is not None
        return time.perf_counter() - started, task.cancelling()

    waited, cancelling = asyncio.run(main())
    assert 0.04 <= waited < 2
    assert cancelling == 0


def test_each_call_keeps_its_own_deadline_whatever_the_order_they_start_in() -> None:
    async def main() -> list[Any]:
        # the long deadline first: the short one that comes after must still fire on its own time
        calls = [_sleep_under(30, 0.3), _sleep_under(0.05, 10), _sleep_under(30, 0.01), _sleep_under(0.1, 10)]
        return await asyncio.gather(*calls, return_exceptions=True)

    started = time.perf_counter()
    outcomes = asyncio.run(main())
    assert [type(o).__name__ if isinstance(o, BaseException) else o for o in outcomes] == [
        "done", "TimeoutError", "done", "TimeoutError"]
    assert time.perf_counter() - started < 2


def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    async def main() -> None:
        task = asyncio.create_task(_sleep_under(30, 10))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_block_that_swallows_the_cancellation_ends_normally_as_under_asyncio_timeout() -> None:
    async def stubborn() -> str:
        with call_timeout(0.02):
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                return "kept going"
        return "not reached"

    async def main() -> tuple[str, int]:
        result = await stubborn()
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    assert asyncio.run(main()) == ("kept going", 0)


def test_calls_running_together_share_one_timer() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        timers = 0
        call_at: Callable[..., Any] = loop.call_at

        def counting_call_at(*args: Any, **kwargs: Any) -> Any:
            nonlocal timers
            timers += 1
            return call_at(*args, **kwargs)

        loop.call_at = counting_call_at  # type: ignore[method-assign]
        await asyncio.gather(*(_sleep_under(30, 0) for _ in range(100)))  # sleep(0) sets no timer of its own
        return timers

    assert asyncio.run(main()) == 1  # asyncio.timeout: 100


def test_short_calls_beside_a_long_one_leave_one_live_timer_not_one_each() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        made: list[asyncio.TimerHandle] = []
        call_at: Callable[..., Any] = loop.call_at

        def keeping_call_at(*args: Any, **kwargs: Any) -> Any:
            made.append(call_at(*args, **kwargs))
            return made[-1]

        loop.call_at = keeping_call_at  # type: ignore[method-assign]
        long_call = asyncio.create_task(_sleep_under(3600, 10))
        await asyncio.sleep(0)
        for _ in range(20):  # each short call's timer fires after it ended, and finds the long deadline waiting
            await _sleep_under(0.005, 0)
            await asyncio.sleep(0.006)
        long_call.cancel()
        return sum(1 for timer in made if not timer.cancelled() and timer.when() > loop.time())

    # the long call's sleep and its deadline; before, one more for each short call (22 here)
    assert asyncio.run(main()) == 2


def test_outside_a_task_it_says_so() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def in_a_callback() -> None:
            try:
                call_timeout(1)
            except RuntimeError as exc:
                future.set_result(None)
                assert "inside a task" in str(exc)

        loop.call_soon(in_a_callback)
        await future

    asyncio.run(main())


def test_a_loop_closed_with_a_call_still_inside_its_timeout_is_not_kept_alive() -> None:
    # A loop run by hand can be closed with a task still waiting inside the block: nothing of this
    # module may keep that loop (and its tasks) alive.
    loop = asyncio.new_event_loop()
    entered: asyncio.Future[None] = loop.create_future()

    async def stuck(entered: asyncio.Future[None]) -> None:
        with call_timeout(30):
            entered.set_result(None)
            await asyncio.sleep(3600)

    task = loop.create_task(stuck(entered))
    loop.run_until_complete(entered)
    loop.close()
    dead = weakref.ref(loop)
    del loop, task, entered
    gc.collect()
    assert dead() is None
