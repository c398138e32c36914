"""``--transcript FILE``: a run written as it happens, one JSON event per line (JSON Lines).

Each line is flushed when its event happens, so a crash or a Ctrl-C loses nothing that was
already done. Every line is a JSON object with an ``"event"`` key, secrets redacted,
``ensure_ascii=False``, and an ``"at"`` key: when it was written, in seconds since the
epoch (``toolrun view`` draws the timeline from these):

``run_start``       ``{recipe, model, mode, started_at}``
``model_response``  ``{turn, stop_reason, text, usage: {input_tokens, output_tokens},
                    tool_calls: [{id, name, arguments}]}`` — what the model asked for
``tool_call``       ``{turn, id, name, arguments, result, is_error, duration_ms}`` — one
                    finished call (calls of one turn may finish in any order), with
                    ``started_at`` and ``ended_at`` (seconds since the epoch)
``divergence``      ``{exchange, kind, path, recorded, now, message}`` — replay only
``notice``          ``{message}`` — e.g. the replay fallback
``context``         ``{request, tokens_before, tokens_after, limit, dropped_messages, dropped_calls,
                    cleared_calls, cut_calls, summarized}`` — what a request under ``settings.context``
                    left out (only the keys that say something)
``interrupted``     ``{message}`` — the run was stopped (Ctrl-C) before it finished
``run_end``         the whole run document (``toolrun recipe --json``) (``final``, ``stop_reason``, ``usage``,
                    ``turns``, ``error`` ...) plus ``divergences`` when replaying
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from toolrun.core.errors import Problem, UserError
from toolrun.core.messages import ModelResponse, ToolCall
from toolrun.core.private_files import open_private
from toolrun.core.secrets import redact
from toolrun.core.text import json_terminal_safe
from toolrun.loop.results import RunResult, ToolCallRecord
from toolrun.loop.runner import RunObserver
from toolrun.replay.divergence import Divergence

if TYPE_CHECKING:
    from toolrun.loop.context_window import ContextEvent


class TranscriptLog(RunObserver):
    """Appends the events of one run to a JSON Lines file, flushing after each line.

    The file is created when the run starts (``on_run_start``), after the recipe and the
    catalog have loaded: bad input leaves no empty transcript behind. A path that cannot be
    written is bad input (``UserError``), raised before any model is asked.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stream: TextIO | None = None
        self._turn = 0
        self._call_started: dict[str, float] = {}

    def open(self) -> None:
        """Create the file now (``on_run_start`` does it when the run starts)."""
        if self._stream is not None:
            return
        if not self.path.parent.exists():  # a typo in a folder name must not grow a new folder tree
            raise UserError(Problem(self.path, None, f"--transcript: the folder {self.path.parent} does not exist",
                                    "create it first, or choose a path in an existing folder"))
        try:
            descriptor = open_private(self.path, os.O_WRONLY | os.O_TRUNC)
            self._stream = open(descriptor, "w", encoding="utf-8")
        except OSError as exc:
            raise UserError(Problem(self.path, None, f"--transcript: cannot write this file ({exc.strerror or exc})",
                                    "choose a path in a folder you can write to")) from None

    def write(self, event: str, **fields: Any) -> None:
        """One event line, flushed to the operating system at once."""
        if self._stream is None:
            return
        line = json.dumps(redact({"event": event, "at": round(time.time(), 6), **fields}), ensure_ascii=False, default=str)
        line = json_terminal_safe(line)  # U+2028, NEL, CSI as \u escapes: one event a line, safe to `tail -f`
        self._stream.write(line + "\n")
        self._stream.flush()

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        self.open()
        self.write("run_start", recipe=recipe, model=model, mode=mode,
                   started_at=datetime.now(UTC).isoformat(timespec="seconds"))

    def on_notice(self, message: str) -> None:
        self.write("notice", message=message)

    def on_divergence(self, divergence: Divergence) -> None:
        self.write("divergence", **divergence.to_json())

    def on_context(self, event: ContextEvent) -> None:
        self.write("context", **event.to_json())

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        self._turn = turn_index + 1
        self.write(
            "model_response",
            turn=self._turn,
            stop_reason=response.stop_reason,
            text=response.message.text,
            usage={"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
            tool_calls=[
                {"id": call.id, "name": call.name,
                 "arguments": call.arguments if call.arguments is not None else call.raw_arguments}
                for call in response.message.tool_calls
            ],
        )

    def on_tool_call_start(self, call: ToolCall) -> None:
        self._call_started[call.id] = time.time()

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        ended = time.time()
        started = self._call_started.pop(record.id, ended - record.duration_ms / 1000)
        self.write("tool_call", turn=self._turn, **record.to_json(), started_at=round(started, 6), ended_at=round(ended, 6))

    def on_run_end(self, result: RunResult) -> None:
        self.write("run_end", **result.to_json())

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
