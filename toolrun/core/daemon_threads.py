"""Blocking work on a pool of daemon threads, awaited as a future.

Used for sync tool functions and for the approval prompt. Not a ThreadPoolExecutor:
Python's exit joins executor threads, so a tool stuck past its timeout (or a prompt nobody
answers) would keep toolrun alive; a daemon thread is abandoned at exit instead. Threads
are kept for the next job (starting one costs more than a small tool's whole call), up to
32 at once; a job that finds them all busy for 50 ms gets one more of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

try:  # queue's own SimpleQueue and Empty, without the module's other queues (a replayed recipe's start-up)
    from _queue import Empty, SimpleQueue
except ImportError:  # not CPython
    from queue import Empty, SimpleQueue

T = TypeVar("T")
Job = Callable[[], Callable[[], None] | None]  # runs on a worker; returns what to do once the worker is free

IDLE_SECONDS = 30.0  # an idle worker ends after this long: a burst of calls leaves no threads behind
POOL_SIZE = 32  # workers started at once; more only for jobs left waiting (every worker busy, or stuck)
WAIT_SECONDS = 0.05  # how long a job may wait for a busy worker before one more starts for it


class DaemonPool:
    """Daemon worker threads taking jobs from one queue.

    Up to ``size`` workers start as jobs come; past that a job waits for the first free one.
    A job still waiting after ``WAIT_SECONDS`` gets a worker of its own (``relieve``), so
    workers stuck in tools past their timeout never hold the others up for long.
    """

    def __init__(self, size: int = POOL_SIZE, idle_seconds: float = IDLE_SECONDS) -> None:
        self._jobs: SimpleQueue[Job] = SimpleQueue()
        self._lock = threading.Lock()
        self._size = size
        self._workers = 0
        self._idle = 0  # workers waiting for a job and not yet promised one
        self._backlog = 0  # jobs queued that no worker is promised to
        self._idle_seconds = idle_seconds

    def submit(self, job: Job, *, name: str) -> bool:
        """Queue ``job`` for an idle or a new worker; False when it waits for a busy one.

        What the job returns, if anything, is called once the worker is free again: handing
        the outcome over then lets the next job, submitted on seeing it, find this worker idle.
        """
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # that worker is promised this job
                start, waits = False, False
            elif self._workers < self._size:
                self._workers += 1
                start, waits = True, False
            else:
                self._backlog += 1
                start, waits = False, True
        self._jobs.put(job)
        if start:
            self._start(name)
        return not waits

    def relieve(self, name: str) -> None:
        """Start one more worker if a job still waits for one."""
        with self._lock:
            if self._backlog == 0:
                return
            self._backlog -= 1
            self._workers += 1
        self._start(name)

    def _start(self, name: str) -> None:
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        thread = threading.current_thread()
        job = self._jobs.get()
        while True:
            then = job()
            with self._lock:
                waiting = self._backlog > 0
                if waiting:
                    self._backlog -= 1
                else:
                    self._idle += 1
            if then is not None:
                then()
            del job, then  # an idle worker keeps nothing of its last job alive (its future, its loop)
            thread.name = "toolrun-idle"
            if waiting:
                job = self._jobs.get()
                continue
            while True:
                try:
                    job = self._jobs.get(timeout=self._idle_seconds)
                    break
                except Empty:
                    with self._lock:
                        if self._idle > 0:  # nobody was promised this worker: end it
                            self._idle -= 1
                            self._workers -= 1
                            return
                    # a job was promised to an idle worker just now: wait for it


_pool = DaemonPool()


class _LoopInbox:
    """Outcomes handed to one event loop from worker threads: the first one waiting wakes the loop,
    the rest ride along. A wake-up per outcome (``call_soon_threadsafe``: a write to the loop's
    self-pipe and a pass of the loop) made a turn of 1,000 fast sync calls take ~20% more CPU."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # a strong one would keep every finished run's loop alive through _inboxes
        self._outcomes: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._woken = False

    def put(self, settle: Callable[[], None]) -> None:
        with self._lock:
            self._outcomes.append(settle)
            if self._woken:
                return
            self._woken = True
        loop = self._loop()
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            pass  # the loop is closed: the run is over

    def _drain(self) -> None:
        with self._lock:
            outcomes, self._outcomes = self._outcomes, deque()
            self._woken = False
        for settle in outcomes:
            settle()


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopInbox] = weakref.WeakKeyDictionary()
_inboxes_lock = threading.Lock()


def _inbox(loop: asyncio.AbstractEventLoop) -> _LoopInbox:
    with _inboxes_lock:
        inbox = _inboxes.get(loop)
        if inbox is None:
            inbox = _inboxes[loop] = _LoopInbox(loop)
        return inbox


# What terminal displays hold back until the end of an event loop pass (``TerminalDisplay``): each
# registered writer writes its held lines. Kept here, where tools' code is handed to threads.
_held_output: set[Callable[[], None]] = set()


def hold_output(write: Callable[[], None]) -> None:
    """``write`` holds lines back for the terminal: ``write_held_output`` calls it until ``release_output``."""
    _held_output.add(write)


def release_output(write: Callable[[], None]) -> None:
    """``write`` holds nothing back any more."""
    _held_output.discard(write)


def write_held_output() -> None:
    """Write what displays hold back, before a tool's own code runs: what it prints comes after its call's line."""
    if _held_output:
        for write in list(_held_output):
            write()


def in_daemon_thread(function: Callable[[], T], *, name: str) -> asyncio.Future[T]:
    """Run ``function`` on a daemon worker thread named ``name``; a future of its result on the running loop.

    An exception that is not an ``Exception`` (``sys.exit()`` in a tool, say) reaches the
    awaiting task as a RuntimeError, never as the caller's own SystemExit. When the awaiting
    task was cancelled, or its loop is gone, the outcome is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    inbox = _inbox(loop)

    def work() -> Callable[[], None]:
        threading.current_thread().name = name
        try:
            write_held_output()
            settle = partial(_settle, future, future.set_result, function())
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            failure = exc if isinstance(exc, Exception) else RuntimeError(f"raised {type(exc).__name__}")
            settle = partial(_settle, future, future.set_exception, failure)
        return partial(inbox.put, settle)

    # The job runs in a copy of the caller's context: the run's redactor goes with it.
    if not _pool.submit(partial(contextvars.copy_context().run, work), name=name):
        loop.call_later(WAIT_SECONDS, _pool.relieve, name)
    return future


def _settle(future: asyncio.Future[Any], outcome: Callable[[Any], None], value: Any) -> None:
    if not future.done():  # cancelled (a timeout, Ctrl-C): nobody waits for the outcome
        outcome(value)
