"""``RunLogWriter``: a run observer that writes each event of a run to the run log as it happens.

One transaction per event (run start, model answer, call start, call end, turn end, notice,
run end), so a run killed with SIGKILL still has every finished turn in the log. Every
value is redacted with the run's own secrets before it is written. A log that stops
accepting writes (a full disk) never stops the run: the first error is kept in ``problem``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from toolrun.core.messages import Message, ModelResponse, OpaquePart, TextPart, ToolCall, ToolResult
from toolrun.core.secrets import redact
from toolrun.loop.context_window import ContextEvent
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.runner import RunObserver
from toolrun.replay.divergence import Divergence
from toolrun.runlog.store import RunLog


def message_json(message: Message) -> list[dict[str, Any]]:
    """A message's parts as plain JSON (the log's ``messages.content``)."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            arguments = part.arguments if part.arguments is not None else part.raw_arguments
            parts.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": arguments})
        elif isinstance(part, ToolResult):
            parts.append({"type": "tool_result", "call_id": part.call_id, "name": part.name,
                          "content": part.content, "is_error": part.is_error})
        elif isinstance(part, OpaquePart):
            parts.append({"type": "opaque", "provider": part.provider})
    return parts


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def run_status(result: RunResult) -> str:
    """``ok``, ``failed`` (no answer) or ``expect_failed`` (an answer that failed a check)."""
    if result.failed:
        return "failed"
    return "expect_failed" if result.expect_failures else "ok"


class RunLogWriter(RunObserver):
    """Writes one run (or, for a chat, one run per answer) to ``log``.

    ``command`` says which command ran it; ``session`` groups a chat's answers; ``vars``
    and ``prompt`` are what the person asked for.
    """

    def __init__(self, log: RunLog, *, command: str, vars: Mapping[str, Any] | None = None,
                 prompt: str | None = None, session: str | None = None, clock: Callable[[], float] = time.time):
        self.log = log
        self.command = command
        self.session = session
        self.vars = dict(vars or {})
        self.prompt = prompt
        self.clock = clock
        self.run_id: int | None = None
        self.problem: str | None = None  # the first write that failed, for a warning at the end
        self._turn = 0
        self._seq = 0
        self._mark = 0.0  # when the current model request was sent
        self._asked: tuple[str, str | None] = ("", None)  # vars and prompt as written at the start, redacted
        self._messages: list[tuple[str, str]] = []  # (role, content) not written yet
        self._messages_written = 0

    def _write(self, write: Callable[[sqlite3.Connection], object]) -> None:
        if self.problem is not None:
            return  # one failure is reported; writing on would only fill gaps with noise
        try:
            with self.log.transaction() as connection:
                self._write_messages(connection)
                write(connection)
        except sqlite3.Error as exc:
            self.problem = f"the run log {self.log.path} stopped accepting writes ({exc}); this run is incomplete there"

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        now = self.clock()
        self._mark = now
        self._turn = 0
        self._messages.clear()  # a chat writes one run per answer: each has its own messages
        self._messages_written = 0
        vars_json, prompt = _json(redact(self.vars)), redact(self.prompt)
        self._asked = (vars_json, prompt)

        def write(connection: sqlite3.Connection) -> None:
            cursor = connection.execute(
                "INSERT INTO runs (command, session, recipe, model, mode, vars, prompt, started_at, status, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
                (self.command, self.session, recipe, model, mode, vars_json, prompt, now, os.getpid()))
            self.run_id = int(cursor.lastrowid or 0)
            self.log.index(connection, self.run_id, "prompt", prompt)
            if self.vars:
                self.log.index(connection, self.run_id, "vars", vars_json)
            self.log.index(connection, self.run_id, "recipe", recipe)

        self._write(write)

    def on_message(self, message: Message) -> None:
        if self.run_id is None:
            return
        self._messages.append((message.role, _json(redact(message_json(message)))))
        if self._turn == 0:  # the run's first messages: kept now, even if the first answer never comes
            self._write(lambda connection: None)
        # later ones go with the event that follows them (the answer, the turn's end): no transaction of their own

    def _write_messages(self, connection: sqlite3.Connection) -> None:
        if not self._messages or self.run_id is None:
            return
        start, run_id = self._messages_written, self.run_id
        connection.executemany("INSERT INTO messages (run_id, seq, role, content) VALUES (?, ?, ?, ?)",
                               [(run_id, start + i, role, content) for i, (role, content) in enumerate(self._messages)])
        self._messages_written += len(self._messages)
        self._messages.clear()

    def on_notice(self, message: str) -> None:
        self._note("notice", message)

    def on_divergence(self, divergence: Divergence) -> None:
        self._note("divergence", str(divergence))

    def on_context(self, event: ContextEvent) -> None:
        self._note("context", str(event))  # what a request left out to fit, and when (the note's time)

    def _note(self, kind: str, message: str) -> None:
        if self.run_id is None:
            return
        run_id, now, text = self.run_id, self.clock(), redact(message)
        self._write(lambda c: c.execute("INSERT INTO notices (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
                                        (run_id, now, kind, text)))

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        if self.run_id is None:
            return
        self._turn, self._seq = turn_index + 1, 0
        run_id, turn, requested, now = self.run_id, self._turn, self._mark, self.clock()
        text = redact(response.message.text)
        usage = response.usage

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO turns (run_id, turn, requested_at, answered_at, stop_reason, text, "
                "input_tokens, output_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, turn, requested, now, response.stop_reason, text, usage.input_tokens, usage.output_tokens))
            connection.execute("UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                               "requests = requests + 1 WHERE id = ?", (usage.input_tokens, usage.output_tokens, run_id))
            self.log.index(connection, run_id, f"turn {turn} text", text)

        self._write(write)

    def on_tool_call_start(self, call: ToolCall) -> None:
        if self.run_id is None:
            return
        self._seq += 1
        run_id, turn, seq, now = self.run_id, self._turn, self._seq, self.clock()
        arguments = _json(redact(call.arguments if call.arguments is not None else call.raw_arguments))
        self._write(lambda c: c.execute(
            "INSERT OR REPLACE INTO tool_calls (run_id, turn, seq, call_id, name, arguments, started_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (run_id, turn, seq, call.id, call.name, arguments, now)))

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        if self.run_id is None:
            return
        run_id, now = self.run_id, self.clock()
        result, arguments = redact(record.result), _json(redact(record.arguments))

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "UPDATE tool_calls SET result = ?, is_error = ?, ended_at = ?, duration_ms = ? "
                "WHERE run_id = ? AND call_id = ?", (result, int(record.is_error), now, record.duration_ms, run_id, record.id))
            self.log.index(connection, run_id, f"{record.name} call", f"{record.name} {arguments}")
            self.log.index(connection, run_id, f"{record.name} result", result)

        self._write(write)

    def on_turn_end(self, turn: TurnRecord) -> None:
        if self.run_id is None:
            return
        run_id, number, now = self.run_id, self._turn, self.clock()
        self._mark = now  # the next request goes out now
        self._write(lambda c: c.execute("UPDATE turns SET ended_at = ? WHERE run_id = ? AND turn = ?", (now, run_id, number)))

    def on_run_end(self, result: RunResult) -> None:
        if self.run_id is None:
            return
        run_id, now = self.run_id, self.clock()
        document = result.to_json()  # redacted by the run's own redactor
        messages = [(m.role, _json(result.redact(message_json(m)))) for m in result.messages]
        final, error = result.redact(result.final), result.redact(result.error)
        # a secret the run read after it started (a tool's ${env:...}) is kept from its vars and prompt too
        asked = (_json(result.redact(self.vars)), result.redact(self.prompt))

        def write(connection: sqlite3.Connection) -> None:
            if asked != self._asked:
                connection.execute("UPDATE runs SET vars = ?, prompt = ? WHERE id = ?", (*asked, run_id))
                connection.execute("DELETE FROM search WHERE run_id = ? AND field IN ('vars', 'prompt')", (run_id,))
                self.log.index(connection, run_id, "prompt", asked[1])
                if self.vars:
                    self.log.index(connection, run_id, "vars", asked[0])
            connection.execute(
                "UPDATE runs SET ended_at = ?, status = ?, stop_reason = ?, final = ?, error = ?, input_tokens = ?, "
                "output_tokens = ?, requests = ?, document = ?, recipe = ?, model = ?, mode = ? WHERE id = ?",
                (now, run_status(result), result.stop_reason, final, error, result.usage.input_tokens,
                 result.usage.output_tokens, result.usage.requests, _json(document), result.recipe, result.model,
                 result.mode, run_id))
            connection.execute("DELETE FROM messages WHERE run_id = ?", (run_id,))
            connection.executemany("INSERT INTO messages (run_id, seq, role, content) VALUES (?, ?, ?, ?)",
                                   [(run_id, seq, role, content) for seq, (role, content) in enumerate(messages)])
            self.log.index(connection, run_id, "final answer", final)
            self.log.index(connection, run_id, "error", error)

        self._write(write)

    def interrupted(self) -> None:
        """The run was stopped (Ctrl-C) before it finished: say so in the log."""
        if self.run_id is None:
            return
        run_id, now = self.run_id, self.clock()
        self._write(lambda c: c.execute("UPDATE runs SET status = 'interrupted', ended_at = ? WHERE id = ? "
                                        "AND status = 'running'", (now, run_id)))
