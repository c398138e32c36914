"""Which calls of one turn may run together.

Calls are split, in the order the model sent them, into batches run one after another;
the calls of one batch run concurrently. A ``sequential: true`` tool is a barrier: the
calls before it finish, it runs alone, the calls after it wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def plan_batches(items: Sequence[T], *, is_sequential: Callable[[T], bool], parallel: bool) -> list[list[T]]:
    """Split ``items`` into ordered batches.

    Consecutive non-sequential items share a batch; a sequential item is a batch of its
    own; with ``parallel=False`` every item is a batch of its own.
    """
    batches: list[list[T]] = []
    current: list[T] = []
    for item in items:
        if not parallel or is_sequential(item):
            if current:
                batches.append(current)
                current = []
            batches.append([item])
        else:
            current.append(item)
    if current:
        batches.append(current)
    return batches
