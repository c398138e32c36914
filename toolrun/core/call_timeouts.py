"""Per-call timeouts that share one timer per event loop.

``asyncio.timeout`` schedules a timer for every block it guards and cancels it on the way out;
with a timer per tool call, a turn of 1,000 fast calls spent about an eighth of its CPU time
on the loop's timer heap (made, pushed, cancelled and popped again per call). Here the
deadlines of every call running on a loop wait in one set, and one timer — set for the
earliest of them — wakes the loop when one is due. A call whose deadline passes behaves as
under ``asyncio.timeout``: its task is cancelled and the block raises ``TimeoutError``; a
cancellation from outside (Ctrl-C, a client's cancel) still comes out as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType


class CallTimeout:
    """``with call_timeout(seconds):`` in a task: past the deadline, the task is cancelled and
    the block raises ``TimeoutError`` (``asyncio.timeout``'s rules, without a timer of its own)."""

    __slots__ = ("when", "_task", "_cancelling", "_watch", "expired")

    def __init__(self, when: float, task: asyncio.Task[object], watch: _DeadlineWatch) -> None:
        self.when = when  # on the loop's clock
        self._task = task
        self._cancelling = 0
        self._watch = watch
        self.expired = False

    def __enter__(self) -> CallTimeout:
        self._cancelling = self._task.cancelling()
        self._watch.add(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._watch.waiting.discard(self)
        # the cancellation was ours and no other came since: the block timed out
        if self.expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()


class _DeadlineWatch:
    """The deadlines of one loop's running calls, and the one timer that wakes the loop for the earliest.

    Holds no reference to the loop: the timer's callback finds it running. A timer set for a deadline whose
    call ended stays and finds nothing due: cancelling it at every call's end would cost more than the one
    wake-up. A timer replaced by an earlier deadline's is cancelled, so the loop holds one live timer per
    watch however the calls' timeouts mix (a long one's timer left behind by each short call's would pile up).
    """

    def __init__(self) -> None:
        self.waiting: set[CallTimeout] = set()
        self._timer: asyncio.TimerHandle | None = None  # the live timer: set for the earliest deadline then, not fired
        self._next = 0.0  # when it goes off

    def add(self, deadline: CallTimeout) -> None:
        self.waiting.add(deadline)
        if self._timer is None or deadline.when < self._next:
            self._set_timer(deadline.when)

    def _set_timer(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._next = asyncio.get_running_loop().call_at(when, self._fire, when), when

    def _fire(self, when: float) -> None:
        self._timer = None  # only the live timer fires: a replaced one was cancelled
        now = max(when, asyncio.get_running_loop().time())  # the loop runs a timer a clock tick early: its time
        due = [deadline for deadline in self.waiting if deadline.when <= now]
        for deadline in due:
            self.waiting.discard(deadline)
            deadline.expire()
        if self.waiting:
            self._set_timer(min(deadline.when for deadline in self.waiting))


# By the loop's id, holding neither: a watch lives while a call is inside a timeout or its timer waits on the
# loop, and either way the loop is alive, so no other loop can have that id meanwhile. Keyed by the loop itself,
# the watch's calls (their tasks hold their loop) would keep a loop closed with one still inside alive for good.
# State of an event loop, not of a run: runs sharing a loop (toolrun mcp) share its one timer, as they share the loop's.
_watches: weakref.WeakValueDictionary[int, _DeadlineWatch] = weakref.WeakValueDictionary()


def call_timeout(seconds: float) -> CallTimeout:
    """A timeout of ``seconds`` from now for the running task, entered with ``with``."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("call_timeout is used inside a task")
    watch = _watches.get(id(loop))
    if watch is None:
        watch = _watches[id(loop)] = _DeadlineWatch()
    return CallTimeout(loop.time() + seconds, task, watch)
