"""``RunLogWriter``: a run observer that writes each event of a run to the run log as it happens.

Events are kept in memory and written together: at the run's start, at the end of every
turn, at the run's end, and ``FLUSH_AFTER_S`` after an event that is still waiting (so a
slow call shows in the log while it runs). A turn of a thousand calls is one transaction,
not two thousand, and a run killed with SIGKILL still has every finished turn in the log.
Every value is redacted with the run's own secrets before it is written. A log that stops
accepting writes (a full disk) never stops the run: the first error is kept in ``problem``.
The full-text index is left to ``logs search`` (``toolrun.runlog.search``), and the run's
document is written without its turns, which the turns and tool_calls rows hold.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolrun.core.json_limits import compact_encoder
from toolrun.core.messages import Message, ModelResponse, OpaquePart, TextPart, ToolCall, ToolResult
from toolrun.core.secrets import active_redactor, redact
from toolrun.core.text import surrogates_escaped
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.runner import RunObserver
from toolrun.replay.divergence import Divergence
from toolrun.runlog.store import RunLog, supersede_earlier_attempts

if TYPE_CHECKING:
    from toolrun.loop.context_window import ContextEvent

FLUSH_AFTER_S = 0.2  # the longest an event waits in memory while the loop is idle (a slow call runs)
_INSERT_CALL = ("INSERT OR REPLACE INTO tool_calls (run_id, turn, seq, call_id, name, arguments, result, is_error, "
                "started_at, ended_at, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


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
            shown = {"type": "tool_result", "call_id": part.call_id, "name": part.name,
                     "content": part.content, "is_error": part.is_error}
            if part.blocks:  # images, audio, resources: kept (already capped where the tool answered)
                shown["blocks"] = [block.wire for block in part.blocks]
            parts.append(shown)
        elif isinstance(part, OpaquePart):
            parts.append({"type": "opaque", "provider": part.provider})
    return parts


# json.dumps(ensure_ascii=False, default=str), its encoder made once: the values come from JSON.
_json = compact_encoder(default=str)


def run_status(result: RunResult) -> str:
    """``ok``, ``failed`` (no answer) or ``expect_failed`` (an answer that failed a check)."""
    if result.failed:
        return "failed"
    return "expect_failed" if result.expect_failures else "ok"


class RunLogWriter(RunObserver):
    """Writes one run (or, for a chat, one run per answer) to ``log``.

    ``command`` says which command ran it; ``session`` groups a chat's answers (a batch's runs);
    ``run_key`` is the batch run this is an attempt of; ``vars`` and ``prompt`` are what the person asked for.
    """

    def __init__(self, log: RunLog, *, command: str, vars: Mapping[str, Any] | None = None,
                 prompt: str | None = None, session: str | None = None, run_key: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.log = log
        self.command = command
        self.session = session
        self.run_key = run_key
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
        self._secrets_seen = 0  # how many secrets the run had when its messages were redacted
        self._statements: list[tuple[str, Sequence[Any]]] = []  # writes waiting, in order
        self._new_calls: dict[str, list[Any]] = {}  # call id -> its tool_calls row, not written yet
        self._replace_messages = False  # the next write deletes the run's messages before writing them all again
        self._flush_timer: asyncio.TimerHandle | None = None

    # -- writing ------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every waiting event in one transaction (the loop calls this by itself)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if not (self._statements or self._new_calls or self._messages) or self.run_id is None:
            return
        statements, calls = self._statements, list(self._new_calls.values())
        self._statements, self._new_calls = [], {}
        if self.problem is not None:
            return  # one failure is reported; writing on would only fill gaps with noise
        try:
            try:
                self._write(statements, calls)
            except UnicodeEncodeError:  # a lone surrogate: sqlite takes only UTF-8
                self._write(storable(statements), storable(calls), escape=True)
        except sqlite3.Error as exc:
            self.problem = f"the run log {self.log.path} stopped accepting writes ({exc}); this run is incomplete there"

    def _write(self, statements: list[tuple[str, Sequence[Any]]], calls: list[list[Any]], *, escape: bool = False) -> None:
        """One transaction of the waiting writes; the messages count as written once it is committed."""
        start = 0 if self._replace_messages else self._messages_written
        messages = [(self.run_id, start + i, role, content) for i, (role, content) in enumerate(self._messages)]
        with self.log.transaction() as connection:
            if self._replace_messages:
                connection.execute("DELETE FROM messages WHERE run_id = ?", (self.run_id,))
            if messages:
                connection.executemany("INSERT INTO messages (run_id, seq, role, content) VALUES (?, ?, ?, ?)",
                                       storable(messages) if escape else messages)
            if calls:
                connection.executemany(_INSERT_CALL, calls)
            _execute_in_order(connection, statements)
        self._replace_messages = False
        self._messages_written = start + len(messages)
        self._messages.clear()

    def _queue(self, sql: str, params: Sequence[Any]) -> None:
        self._statements.append((sql, params))
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flush_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside an event loop: nothing would flush later
            self.flush()
            return
        self._flush_timer = loop.call_later(FLUSH_AFTER_S, self.flush)

    # -- the run's events ---------------------------------------------------------------

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        now = self.clock()
        self._mark = now
        self._turn = 0
        self._messages.clear()  # a chat writes one run per answer: each has its own messages
        self._messages_written = 0
        vars_json, prompt = _json(redact(self.vars)), redact(self.prompt)
        self._asked = (vars_json, prompt)
        if self.problem is not None:
            return
        row = (self.command, self.session, self.run_key, recipe, model, mode, vars_json, prompt, now, os.getpid())
        try:  # written at once: the run's id is needed for every row that follows
            try:
                self.run_id = self._insert_run(row)
            except UnicodeEncodeError:  # a lone surrogate (a scripted:FILE or recipe path under a C locale)
                self.run_id = self._insert_run(storable(row))
        except sqlite3.Error as exc:
            self.problem = f"the run log {self.log.path} stopped accepting writes ({exc}); this run is incomplete there"

    def _insert_run(self, row: Sequence[Any]) -> int:
        with self.log.transaction() as connection:
            cursor = connection.execute(
                "INSERT INTO runs (command, session, run_key, recipe, model, mode, vars, prompt, started_at, status, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)", row)
            run_id = int(cursor.lastrowid or 0)
            supersede_earlier_attempts(connection, run_id, self.session, self.run_key)
            return run_id

    def on_message(self, message: Message) -> None:
        if self.run_id is None:
            return
        self._messages.append((message.role, _json(redact(message_json(message)))))
        self._secrets_seen = _secret_count()
        self._flush_soon()

    def on_notice(self, message: str) -> None:
        self._note("notice", message)

    def on_divergence(self, divergence: Divergence) -> None:
        self._note("divergence", str(divergence))

    def on_context(self, event: ContextEvent) -> None:
        self._note("context", str(event))  # what a request left out to fit, and when (the note's time)

    def _note(self, kind: str, message: str) -> None:
        if self.run_id is None:
            return
        self._queue("INSERT INTO notices (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
                    (self.run_id, self.clock(), kind, redact(message)))

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        if self.run_id is None:
            return
        self._turn, self._seq = turn_index + 1, 0
        run_id, turn, usage = self.run_id, self._turn, response.usage
        text = redact(response.message.text)
        self._statements.append((
            "INSERT OR REPLACE INTO turns (run_id, turn, requested_at, answered_at, stop_reason, text, "
            "input_tokens, output_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, turn, self._mark, self.clock(), response.stop_reason, text, usage.input_tokens, usage.output_tokens)))
        self._statements.append(("UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                                 "requests = requests + 1 WHERE id = ?", (usage.input_tokens, usage.output_tokens, run_id)))
        self._flush_soon()

    def on_tool_call_start(self, call: ToolCall) -> None:
        if self.run_id is None:
            return
        self._seq += 1
        arguments = _json(redact(call.arguments if call.arguments is not None else call.raw_arguments))
        self._new_calls[call.id] = [self.run_id, self._turn, self._seq, call.id, call.name, arguments,
                                    None, None, self.clock(), None, None]
        self._flush_soon()

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        if self.run_id is None:
            return
        now, result = self.clock(), redact(record.result)
        row = self._new_calls.get(record.id)
        if row is not None:  # started since the last write: one row, written whole
            row[6:] = [result, int(record.is_error), row[8], now, record.duration_ms]
        else:
            self._statements.append(("UPDATE tool_calls SET result = ?, is_error = ?, ended_at = ?, duration_ms = ? "
                                     "WHERE run_id = ? AND call_id = ?",
                                     (result, int(record.is_error), now, record.duration_ms, self.run_id, record.id)))
        self._flush_soon()

    def on_turn_end(self, turn: TurnRecord) -> None:
        if self.run_id is None:
            return
        now = self.clock()
        self._mark = now  # the next request goes out now
        offered = None if turn.tools_offered is None else _json(turn.tools_offered)
        self._statements.append(("UPDATE turns SET ended_at = ?, tools_offered = ? WHERE run_id = ? AND turn = ?",
                                 (now, offered, self.run_id, self._turn)))
        self.flush()  # a finished turn is in the log before the next request goes out

    def on_run_end(self, result: RunResult) -> None:
        if self.run_id is None:
            return
        run_id, now = self.run_id, self.clock()
        final, error = result.redact(result.final), result.redact(result.error)
        # a secret the run read after it started (a tool's ${env:...}) is kept from its vars and prompt too
        asked = (_json(result.redact(self.vars)), result.redact(self.prompt))
        if asked != self._asked:
            self._statements.append(("UPDATE runs SET vars = ?, prompt = ? WHERE id = ?", (*asked, run_id)))
        self._statements.append((
            "UPDATE runs SET ended_at = ?, status = ?, stop_reason = ?, final = ?, error = ?, input_tokens = ?, "
            "output_tokens = ?, requests = ?, document = ?, recipe = ?, model = ?, mode = ? WHERE id = ?",
            (now, run_status(result), result.stop_reason, final, error, result.usage.input_tokens,
             result.usage.output_tokens, result.usage.requests, _json(_document(result)), result.recipe, result.model,
             result.mode, run_id)))
        self._rewrite_messages(result)
        self.flush()

    def _rewrite_messages(self, result: RunResult) -> None:
        """The messages again, when the run learned a secret after some were written (or some never came)."""
        secrets = len(result.redactor.secrets) if result.redactor is not None else _secret_count()
        if secrets == self._secrets_seen and self._messages_written + len(self._messages) == len(result.messages):
            return  # every message is written or waiting, redacted with every secret the run knows
        self._replace_messages = True
        self._messages = [(m.role, _json(result.redact(message_json(m)))) for m in result.messages]

    def interrupted(self) -> None:
        """The run was stopped (Ctrl-C) before it finished: say so in the log."""
        if self.run_id is None:
            return
        self._statements.append(("UPDATE runs SET status = 'interrupted', ended_at = ? WHERE id = ? AND status = 'running'",
                                 (self.clock(), self.run_id)))
        self.flush()


def _document(result: RunResult) -> dict[str, Any]:
    """The run's ``--json`` document less its turns: the turns and tool_calls rows hold them (``logs show --json``)."""
    document = replace(result, turns=[]).to_json()  # a shallow copy: the calls are not made into dicts to be dropped
    del document["turns"]
    return document


def _execute_in_order(connection: sqlite3.Connection, statements: list[tuple[str, Sequence[Any]]]) -> None:
    """Each statement in turn; a run of the same statement as one ``executemany``."""
    start = 0
    while start < len(statements):
        sql, end = statements[start][0], start + 1
        while end < len(statements) and statements[end][0] == sql:
            end += 1
        if end - start == 1:
            connection.execute(sql, statements[start][1])
        else:
            connection.executemany(sql, [params for _, params in statements[start:end]])
        start = end


def storable(value: Any) -> Any:
    """``value`` (a row, rows, a text) with each lone surrogate as its ``\\uXXXX`` escape, which sqlite can
    store: inside JSON (messages, arguments, vars) that is the same string read back; in a plain text, a
    readable stand-in (Python keeps a byte a C locale cannot decode as one, in a path or a tool's output)."""
    if isinstance(value, str):
        return surrogates_escaped(value)
    if isinstance(value, (list, tuple)):
        return type(value)(storable(item) for item in value)
    return value


def _secret_count() -> int:
    redactor = active_redactor()
    return 0 if redactor is None else len(redactor.secrets)
