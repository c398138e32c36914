"""What a person sees while a recipe runs (the terminal side of the CLI): streamed text, one line per tool call, a summary.

The assistant's text goes to stdout (as it streams, or at the end of a turn when the run
does not stream); everything else — tool calls, notices, the summary — goes to stderr, so
``toolrun recipe ... > answer.txt`` keeps only the answer and ``--json`` keeps stdout for
the JSON document.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TextIO

from toolrun.catalog.model import Catalog
from toolrun.cli.color import color_enabled, paint
from toolrun.cli.echo import write_flushed
from toolrun.cli.live_line import LiveElapsed
from toolrun.cli.load_report import load_report
from toolrun.core.daemon_threads import hold_output, release_output
from toolrun.core.json_limits import compact_json
from toolrun.core.messages import ModelResponse, ToolCall, Usage
from toolrun.core.secrets import holds_secrets, redact
from toolrun.core.text import counted, terminal_safe
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.runner import RunObserver
from toolrun.replay.divergence import Divergence

_RESULT_EXCERPT = 100  # characters of a tool result shown on its line


class TerminalDisplay(RunObserver):
    """Prints a run as it happens.

    ``text_out`` receives the assistant's text (None: do not print it, as with ``--json``);
    ``info_out`` receives tool-call lines and the summary.
    """

    def __init__(self, info_out: TextIO, text_out: TextIO | None, *, live: bool | None = None):
        self.info_out = info_out
        self.text_out = text_out
        self._streamed_this_turn = False
        self._text_open = False  # text printed without its final newline yet
        self.color = color_enabled(info_out)
        # The elapsed-time line of slow calls: on a terminal only (None: whether info_out is one).
        self.live = LiveElapsed(info_out) if (_is_terminal(info_out) if live is None else live) else None
        # Call lines wait for the end of the event loop's pass and go out together: a write per line let the
        # tools' threads take the interpreter from the loop at every line. Anything else written, and any
        # tool's own code (write_held_output), comes after them. The lock: a tool's thread may write them,
        # and the live line's ticker writes to the same stream.
        self._lock: AbstractContextManager[Any] = self.live.lock if self.live is not None else threading.Lock()
        self._held: list[str] = []

    def notice(self, message: str) -> None:
        """A line for the person running toolrun (mode, fallbacks, divergences); ``error:``/``warning:`` in colour."""
        self._close_text()
        head, sep, rest = message.partition(" ")
        if head in ("error:", "warning:"):
            self._info(head, head[:-1], sep + rest)
        else:
            self._info(message)

    def calls_stopped(self) -> None:
        """The run was interrupted: no call is running any more, whatever ends were never reported."""
        self.write_held()
        if self.live is not None:
            self.live.stop()

    def on_catalog(self, catalog: Catalog) -> None:
        for line in load_report(catalog):
            self._info(line)

    def on_notice(self, message: str) -> None:
        self.notice(message)

    def on_divergence(self, divergence: Divergence) -> None:
        self.notice(str(divergence))

    def on_text_delta(self, text: str) -> None:
        self._streamed_this_turn = True
        if self.text_out is not None and text:
            self.write_held()
            write_flushed(self.text_out, terminal_safe(redact(text)))
            self._text_open = not text.endswith("\n")

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        text = response.message.text
        if text and not self._streamed_this_turn and self.text_out is not None:
            self.write_held()
            write_flushed(self.text_out, terminal_safe(redact(text)))
            self._text_open = not text.endswith("\n")
        self._close_text()
        self._streamed_this_turn = False

    def on_tool_call_start(self, call: ToolCall) -> None:
        arguments = call.arguments if call.arguments is not None else call.raw_arguments
        self._call_line(f"→ {call.name}", "call", " ", arguments if isinstance(arguments, str) else compact_json(arguments))
        if self.live is not None:
            self.live.started(call.id, call.name)

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        if self.live is not None:
            self.live.ended(record.id)
        if record.is_error:
            self._call_line(f"✗ {record.name}", "error", f" {record.duration_ms} ms: error: ", record.result)
        else:
            self._call_line(f"← {record.name}", "result", f" {record.duration_ms} ms: ", record.result)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The call lines written, and no live line while an approval question is on the terminal."""
        self.write_held()
        if self.live is None:
            yield
            return
        with self.live.paused():
            yield

    def write_held(self) -> None:
        """Write the call lines held back (at the end of the event loop's pass, or before anything else)."""
        with self._lock:
            if not self._held:
                return
            text = "".join(self._held)
            self._held.clear()
            self._put(text)
            release_output(self.write_held)  # only once written: a tool's thread that finds none held runs at once

    def summary(self, result: RunResult, mode: str) -> None:
        """The last line: turns, tool calls and tokens used, and whether it was live."""
        self._close_text()
        self._info(summary_line(result.turns, len(result.tool_calls), result.usage, mode))

    def _close_text(self) -> None:
        if self._text_open and self.text_out is not None:
            self.write_held()
            write_flushed(self.text_out, "\n")
        self._text_open = False

    def _info(self, line: str, style: str | None = None, rest: str = "") -> None:
        """``line`` (in ``style``'s colour) and ``rest``, each escaped before any colour is added."""
        self._write(self._info_text(line, style, rest))

    def _info_text(self, line: str, style: str | None, rest: str) -> str:
        text = paint(terminal_safe(redact(line)), style, self.color) if style else terminal_safe(redact(line))
        return text + terminal_safe(redact(rest)) + "\n"

    def _call_line(self, head: str, style: str, label: str, text: str) -> None:
        """A call's line: ``head`` in ``style``'s colour, then ``label`` (ours) and ``text`` on one short line."""
        if holds_secrets():  # every piece redacted, and the whole rest again: a secret may span label and text
            self._hold(self._info_text(head, style, label + _one_line(text)))
            return
        # Nothing to redact: the same line, without a dozen calls that would each give their text back
        self._hold(paint(terminal_safe(head), style, self.color) + label + _one_line(text, redacted=True) + "\n")

    def _hold(self, line: str) -> None:
        """A call line, written with the others of this pass of the event loop (at once outside any loop)."""
        with self._lock:
            if not self._held:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    self._put(line)
                    return
                loop.call_soon(self.write_held)
                hold_output(self.write_held)
            self._held.append(line)

    def _write(self, text: str) -> None:
        """A line other than a call's, after the call lines held back."""
        with self._lock:
            held, self._held = self._held, []
            self._put("".join(held) + text)
            if held:
                release_output(self.write_held)

    def _put(self, text: str) -> None:
        if self.live is not None:
            self.live.erase()
        write_flushed(self.info_out, text)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def summary_line(turns: list[TurnRecord], tool_calls: int, usage: Usage, mode: str) -> str:
    """``2 turns · 3 tool calls · 330 in / 157 out tokens · replay``."""
    return (f"{counted(len(turns), 'turn')} · {counted(tool_calls, 'tool call')} · "
            f"{usage.input_tokens} in / {usage.output_tokens} out tokens · {mode}")


def _one_line(text: str, *, redacted: bool = False) -> str:
    """A result on one short line: newlines shown as ⏎, long text cut with … (``redacted``: no secret left in it)."""
    flat = terminal_safe((text if redacted else redact(text)).replace("\r", "").replace("\n", " ⏎ "))  # redact before the cut
    return flat if len(flat) <= _RESULT_EXCERPT else flat[: _RESULT_EXCERPT - 1] + "…"
