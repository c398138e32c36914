"""The pool of daemon worker threads behind sync tools: reused, never a cap a stuck tool can hold."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import threading
import time
import weakref

from toolrun.core import daemon_threads
from toolrun.core.daemon_threads import DaemonPool, in_daemon_thread


def test_sequential_jobs_reuse_one_worker_thread(monkeypatch) -> None:
    monkeypatch.setattr(daemon_threads, "_pool", DaemonPool())  # no idle workers left by other tests

    async def go() -> set[int]:
        return {await in_daemon_thread(threading.get_ident, name="reuse") for _ in range(20)}

    assert len(asyncio.run(go())) == 1


def test_jobs_beyond_the_pool_size_all_run_together_when_they_must(monkeypatch) -> None:
    # 12 jobs that only finish together, on a pool of 2: waiting jobs get workers of their own.
    monkeypatch.setattr(daemon_threads, "_pool", DaemonPool(size=2))
    barrier = threading.Barrier(12, timeout=10)

    async def go() -> list[int]:
        return await asyncio.gather(*(in_daemon_thread(barrier.wait, name="together") for _ in range(12)))

    assert sorted(asyncio.run(go())) == list(range(12))


def test_outcomes_that_arrive_together_wake_the_loop_once(monkeypatch) -> None:
    # While the loop is busy, 20 jobs finish: one wake-up hands all 20 over, each to its own future.
    monkeypatch.setattr(daemon_threads, "_pool", DaemonPool())
    finished = threading.Semaphore(0)

    def job(number: int) -> int:
        finished.release()
        return number * 2

    async def go() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        wake_ups = 0
        real = loop.call_soon_threadsafe

        def counting(*args, **kwargs):
            nonlocal wake_ups
            wake_ups += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
        futures = [in_daemon_thread(lambda n=n: job(n), name="together") for n in range(20)]
        for _ in range(20):
            assert finished.acquire(timeout=10)  # the loop is blocked here: nothing is handed over yet
        deadline = time.monotonic() + 10
        while len(daemon_threads._inbox(loop)._outcomes) < 20 and time.monotonic() < deadline:
            time.sleep(0.001)  # each worker puts its outcome just after its job returns
        return list(await asyncio.gather(*futures)), wake_ups

    results, wake_ups = asyncio.run(go())
    assert results == [n * 2 for n in range(20)] and wake_ups == 1


def test_a_finished_runs_loop_is_not_kept_alive_by_its_outcomes_inbox() -> None:
    async def go() -> weakref.ref[asyncio.AbstractEventLoop]:
        assert await in_daemon_thread(lambda: 42, name="inbox") == 42
        return weakref.ref(asyncio.get_running_loop())

    loop = asyncio.run(go())
    deadline = time.monotonic() + 10
    while gc.collect() is not None and loop() is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # the worker lets go of its last job just after handing the outcome over
    assert loop() is None


def test_an_idle_worker_ends_and_a_stuck_one_does_not_keep_python_alive() -> None:
    script = textwrap.dedent("""
        import asyncio, threading, time
        from toolrun.core import daemon_threads
        daemon_threads._pool = daemon_threads.DaemonPool(size=4, idle_seconds=0.05)

        async def main():
            await daemon_threads.in_daemon_thread(lambda: None, name="quick")
            try:
                await asyncio.wait_for(daemon_threads.in_daemon_thread(lambda: time.sleep(60), name="stuck"), 0.05)
            except asyncio.TimeoutError:
                pass

        asyncio.run(main())
        def others():
            return sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
        deadline = time.monotonic() + 5
        while others() != ["stuck"] and time.monotonic() < deadline:
            time.sleep(0.01)  # the idle worker ends idle_seconds after its job
        print(others())
    """)
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert finished.returncode == 0 and finished.stderr == ""
    assert finished.stdout.strip() == "['stuck']"  # the idle worker ended; the stuck one is abandoned at exit
