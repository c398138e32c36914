"""Blocking work on a pool of daemon threads, awaited as a future.

Used for sync tool functions and for the approval prompt. Not a ThreadPoolExecutor:
Python's exit joins executor threads, so a tool stuck past its timeout (or a prompt nobody
answers) would keep toolrun alive; a daemon thread is abandoned at exit instead. Threads
are kept for the next job (starting one costs more than a small tool's whole call), and a
job never waits for a busy one: with no idle thread, a new one starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

IDLE_SECONDS = 30.0  # an idle worker ends after this long: a burst of calls leaves no threads behind


class DaemonPool:
    """Daemon worker threads that take jobs from one queue; one more starts when none is idle."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # workers waiting for a job and not yet promised one
        self._idle_seconds = idle_seconds

    def submit(self, job: Callable[[], None], *, name: str) -> None:
        """Run ``job`` on an idle worker, or on a new one; never queued behind a busy worker."""
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that worker is promised this job
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        thread = threading.current_thread()
        job = self._jobs.get()
        while True:
            job()
            thread.name = "toolrun-idle"
            with self._lock:
                self._idle += 1
            while True:
                try:
                    job = self._jobs.get(timeout=self._idle_seconds)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._idle > 0:  # nobody was promised this worker: end it
                            self._idle -= 1
                            return
                    # a job was promised to an idle worker just now: wait for it


_pool = DaemonPool()


def in_daemon_thread(function: Callable[[], T], *, name: str) -> asyncio.Future[T]:
    """Run ``function`` on a daemon worker thread named ``name``; a future of its result on the running loop.

    An exception that is not an ``Exception`` (``sys.exit()`` in a tool, say) reaches the
    awaiting task as a RuntimeError, never as the caller's own SystemExit. When the awaiting
    task was cancelled, or its loop is gone, the outcome is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], Any]) -> None:
        if not future.done():  # cancelled (a timeout, Ctrl-C): nobody waits for the outcome
            outcome()

    def work() -> None:
        threading.current_thread().name = name
        try:
            value = function()
            outcome: Callable[[], Any] = lambda: future.set_result(value)  # noqa: E731
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            failure = exc if isinstance(exc, Exception) else RuntimeError(f"raised {type(exc).__name__}")
            outcome = lambda: future.set_exception(failure)  # noqa: E731
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:
            pass  # the loop is closed: the run is over

    # The job runs in a copy of the caller's context: the run's redactor goes with it.
    context = contextvars.copy_context()
    _pool.submit(lambda: context.run(work), name=name)
    return future
