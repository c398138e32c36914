"""What a run asks before each request: did a server of this process change its tools? While
none did, the answer is a number compared on the event loop, with no thread; after a
``list_changed`` the catalog is loaded again from its folder (in a thread)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from toolrun.backends.tool_list_changes import note_tools_changed
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.sessions.tool_refresh import ServerToolWatch

TOOLS = """\
tools:
  - name: {name}
    description: >-
      Prints the word hello, for a check that the catalog was read again from its folder after
      a server said its tools changed. Use it only in this test; it takes no input at all.
    parameters: {{type: object, properties: {{}}, additionalProperties: false}}
    backend:
      shell:
        argv: [echo, hello]
"""


def looks(watch: ServerToolWatch, times: int) -> tuple[list[object], list[str]]:
    """``times`` answers of ``changed_tools`` in one event loop, and the threads started meanwhile
    (a default executor's workers live until the loop closes; other tests' threads are left out)."""
    async def ask() -> tuple[list[object], list[str]]:
        before = set(threading.enumerate())
        answers = [await watch.changed_tools() for _ in range(times)]
        return answers, [thread.name for thread in threading.enumerate() if thread not in before]
    return asyncio.run(ask())


def test_no_thread_is_started_while_no_server_said_anything(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text(TOOLS.format(name="hello"))
    watch = ServerToolWatch(load_checked_catalog(tmp_path), None)
    answers, threads = looks(watch, 5)
    assert answers == [None] * 5
    assert threads == []


def test_after_a_server_said_its_tools_changed_the_folder_is_read_again(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text(TOOLS.format(name="hello"))
    watch = ServerToolWatch(load_checked_catalog(tmp_path), None)
    (tmp_path / "later.yaml").write_text(TOOLS.format(name="later"))
    note_tools_changed()
    answers, _ = looks(watch, 2)
    first, second = answers
    assert isinstance(first, list) and sorted(tool.name for tool in first) == ["hello", "later"]
    assert second is None  # nothing new since


def test_a_catalog_without_a_folder_takes_no_thread_after_a_change(tmp_path: Path) -> None:
    watch = ServerToolWatch(Catalog(), None)  # built in code: nothing to read again
    note_tools_changed()
    answers, threads = looks(watch, 3)
    assert answers == [None] * 3
    assert threads == []  # the change is seen once, on the loop
