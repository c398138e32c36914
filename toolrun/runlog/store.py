"""The run log: every recipe, ask and chat run in one SQLite database, written as it happens.

One connection per writer, WAL journal and a busy timeout: runs in several processes write
to the same file at once without failing or losing rows. Opening never refuses a writer
that merely came second: switching a new file to WAL, which SQLite does not wait for, is
retried until ``BUSY_TIMEOUT_S``, and the schema is made or migrated under the write lock.
Every write is one short ``BEGIN IMMEDIATE`` transaction (``toolrun.runlog.writer`` puts a
turn's events in one). New logs use incremental vacuum, so ``prune`` gives space back.
Values arrive here already redacted (``toolrun.runlog.writer`` redacts with the run's secrets).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import Problem, UserError
from toolrun.core.private_files import create_private, make_private_folders
from toolrun.core.text import without_terminal_escapes
from toolrun.runlog.schema import migrate

if TYPE_CHECKING:
    from toolrun.runlog.search import SearchHit

LOGS_ENV = "TOOLRUN_LOGS"
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another's transaction before giving up
FAILED = ("failed", "expect_failed", "interrupted")
# Han, kana, hangul: indexed one character a token so a word matches inside a sentence.
CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))
# The same characters as UTF-8 byte sequences (each three bytes, the first never a continuation
# byte, so a match starts on a character): as a class of 40,000 code points the pattern took
# Python's re 3 to 10 ms to compile, in every run that writes the log; as bytes well under one,
# and compiled at the first text indexed: a run writing the log indexes nothing (a search indexes it).
@functools.cache
def _cjk_utf8() -> re.Pattern[bytes]:
    return re.compile(
        rb"(\xe3[\x81-\x83\x90-\xbf][\x80-\xbf]"  # U+3040-30FF, U+3400-3FFF
        rb"|\xe4(?:[\x80-\xb5\xb8-\xbf][\x80-\xbf]|\xb6[\x80-\xbf])"  # U+4000-4DBF, U+4E00-4FFF
        rb"|[\xe5-\xe9\xeb\xec][\x80-\xbf][\x80-\xbf]"  # U+5000-9FFF, U+B000-CFFF
        rb"|\xea[\xb0-\xbf][\x80-\xbf]"  # U+AC00-AFFF
        rb"|\xed(?:[\x80-\x9d][\x80-\xbf]|\x9e[\x80-\xaf])"  # U+D000-D7AF
        rb"|\xef[\xa4-\xab][\x80-\xbf])"  # U+F900-FAFF
    )


def default_log_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$TOOLRUN_LOGS``, else ``$XDG_DATA_HOME/toolrun/logs.db``, else ``~/.local/share/toolrun/logs.db``."""
    env = os.environ if environ is None else environ
    if env.get(LOGS_ENV):
        return Path(env[LOGS_ENV]).expanduser()
    data_home = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"
    return data_home / "toolrun" / "logs.db"


def search_text(text: str) -> str:
    """Text as the index stores it: as a terminal shows it (ANSI escape sequences left out: a tool's coloured
    ``\\x1b[31mRED`` is found by ``RED``), CJK characters (``CJK_RANGES``) spaced apart, the rest as written."""
    text = without_terminal_escapes(text)
    if text.isascii():
        return text
    # surrogatepass: a lone surrogate (JSON may hold one) goes through unchanged, as before.
    # split gives the text between CJK characters and each character apart; joined by spaces, each
    # character stands as " c ": what sub(rb" \1 ") wrote, without a template expanded per character.
    pieces = _cjk_utf8().split(text.encode("utf-8", "surrogatepass"))
    return b" ".join(pieces).decode("utf-8", "surrogatepass")


def match_query(text: str) -> str:
    """A user's search words as an FTS5 query: every word must occur (as a phrase, CJK in order)."""
    phrases = []
    for word in text.split():
        tokens = search_text(word).split()
        if tokens:
            phrases.append('"' + " ".join(tokens).replace('"', '""') + '"')
    return " AND ".join(phrases)


class RunLog:
    """An open run-log database. Writers call ``transaction``; readers the query methods."""

    def __init__(self, path: Path, connection: sqlite3.Connection):
        self.path = path
        self.connection = connection

    @classmethod
    def open(cls, path: str | Path, *, create_folder: bool = True) -> RunLog:
        """Open (and create or migrate) the database; UserError when it cannot be opened."""
        path = Path(path)
        try:
            if create_folder:
                make_private_folders(path.parent)
            elif not path.parent.is_dir():
                raise UserError(Problem(path, None, f"--logs: the folder {path.parent} does not exist",
                                        "create it first, or choose a path in an existing folder"))
            create_private(path)  # SQLite gives the -wal and -shm files it makes the database file's mode
            connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            # No foreign_keys: checking each call's run on insert was a fifth of what the insert cost;
            # prune, the one place that deletes runs, turns them on for the cascade.
            connection.execute("PRAGMA synchronous=NORMAL")  # WAL keeps committed rows through a process crash
            # Before the first table exists, or it never takes: a new log gives pruned space back. Only
            # then: on a log with tables it changes nothing, yet writes a transaction every open.
            if connection.execute("PRAGMA user_version").fetchone()[0] == 0:
                connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
            deadline = time.monotonic() + BUSY_TIMEOUT_S
            retry_busy(lambda: _use_wal(connection), deadline)
            retry_busy(lambda: migrate(connection, path), deadline)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(Problem(path, None, f"cannot open the run log ({exc})",
                                    "choose another file with --logs or TOOLRUN_LOGS, or skip the log with --no-log")) from None
        return cls(path, connection)

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write: taken with the write lock up front (no lock upgrade to deadlock on), committed whole."""
        retry_busy(lambda: self.connection.execute("BEGIN IMMEDIATE"), time.monotonic() + BUSY_TIMEOUT_S)
        try:
            yield self.connection
        except BaseException:
            if self.connection.in_transaction:  # SQLite ends it itself on some errors (a full disk): the error is that one
                self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    # -- reading ------------------------------------------------------------------------

    def list_runs(self, *, limit: int = 20, recipe: str | None = None, tool: str | None = None,
                  errors: bool = False, session: str | None = None) -> list[dict[str, Any]]:
        """Runs newest first, each with its counts of turns, calls and failing calls.

        ``session``: only the runs of one chat session or one batch (its batch id).
        """
        where, params = [], []
        if session is not None:
            where.append("r.session = ?")
            params.append(session)
        if recipe is not None:
            where.append("r.recipe = ?")
            params.append(recipe)
        if tool is not None:
            where.append("EXISTS (SELECT 1 FROM tool_calls c WHERE c.run_id = r.id AND c.name = ?)")
            params.append(tool)
        if errors:  # a run still "running" is unfinished when its process is gone: told apart below
            where.append(f"(r.status IN ({','.join('?' * len(FAILED))}, 'running') "
                         "OR EXISTS (SELECT 1 FROM tool_calls c WHERE c.run_id = r.id AND c.is_error))")
            params.extend(FAILED)
        sql = ("SELECT r.*, (SELECT COUNT(*) FROM turns t WHERE t.run_id = r.id) AS turn_count, "
               "(SELECT COUNT(*) FROM tool_calls c WHERE c.run_id = r.id) AS call_count, "
               "(SELECT COUNT(*) FROM tool_calls c WHERE c.run_id = r.id AND c.is_error) AS error_count "
               "FROM runs r" + (" WHERE " + " AND ".join(where) if where else "") +
               " ORDER BY r.started_at DESC, r.id DESC")
        if not errors:
            return [_summary(row) for row in self.connection.execute(sql + " LIMIT ?", [*params, limit])]
        runs: list[dict[str, Any]] = []
        for row in self.connection.execute(sql, params):  # read lazily, up to the limit
            run = _summary(row)
            if run["status"] != "running" or run["errors"]:  # one in progress has not failed (yet)
                runs.append(run)
                if len(runs) == limit:
                    break
        return runs

    def list_batches(self, *, limit: int = 20) -> list[dict[str, Any]]:
        """Batches newest first, one entry each: id, recipe, first start, last end, and tokens (of every attempt:
        each was spent). Its runs count by the outcome of their latest attempt — ``runs``, ``ok``,
        ``expect_failed``, ``running``, ``failed_or_unfinished`` (failed, interrupted, or never finished) — and
        ``attempts`` counts every run logged: an interrupted run and its rerun by ``--resume``, a failed run and
        its retry, are one run and two attempts. (A batch logged before runs kept their key counts each attempt
        as a run.)"""
        rows = self.connection.execute(
            "SELECT session, MIN(recipe) AS recipe, COUNT(*) AS attempts, SUM(NOT superseded) AS runs, "
            "SUM(NOT superseded AND status = 'ok') AS ok, SUM(NOT superseded AND status = 'expect_failed') AS expect_failed, "
            "SUM(NOT superseded AND status = 'running') AS running, MIN(started_at) AS started_at, "
            "MAX(ended_at) AS ended_at, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens "
            "FROM runs WHERE command = 'batch' AND session IS NOT NULL GROUP BY session "
            "ORDER BY MIN(started_at) DESC LIMIT ?", (limit,)).fetchall()
        batches = []
        for row in rows:
            running = self._still_running(row["session"]) if row["running"] else 0
            batches.append({
                "batch": row["session"], "recipe": row["recipe"], "runs": row["runs"], "ok": row["ok"],
                "expect_failed": row["expect_failed"], "running": running,
                "failed_or_unfinished": row["runs"] - row["ok"] - row["expect_failed"] - running,
                "attempts": row["attempts"], "started_at": row["started_at"], "ended_at": row["ended_at"],
                "usage": {"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"]}})
        return batches

    def _still_running(self, batch: str) -> int:
        """How many runs of ``batch`` are running now: their latest attempt says so and its process is alive."""
        return sum(count for pid, count in self.connection.execute(
            "SELECT pid, COUNT(*) FROM runs WHERE command = 'batch' AND session = ? AND status = 'running' "
            "AND NOT superseded GROUP BY pid", (batch,)) if pid and process_alive(pid))

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """One run in full: turns with their calls, messages, notices; None when there is no such run."""
        row = self.connection.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        run = _summary(row)
        calls: dict[int, list[dict[str, Any]]] = {}
        for call in self.connection.execute("SELECT * FROM tool_calls WHERE run_id = ? ORDER BY turn, seq", (run_id,)):
            calls.setdefault(call["turn"], []).append({
                "id": call["call_id"], "name": call["name"], "arguments": _loads(call["arguments"]),
                "result": call["result"], "is_error": None if call["is_error"] is None else bool(call["is_error"]),
                "duration_ms": call["duration_ms"], "started_at": call["started_at"], "ended_at": call["ended_at"],
            })
        run["turns"] = [{
            "turn": turn["turn"], "stop_reason": turn["stop_reason"], "text": turn["text"],
            "usage": {"input_tokens": turn["input_tokens"], "output_tokens": turn["output_tokens"]},
            "requested_at": turn["requested_at"], "answered_at": turn["answered_at"], "ended_at": turn["ended_at"],
            "tool_calls": calls.get(turn["turn"], []),
            # under settings.tool_selection: the names the request offered, or "all"
            **({"tools_offered": _loads(turn["tools_offered"])} if turn["tools_offered"] is not None else {}),
        } for turn in self.connection.execute("SELECT * FROM turns WHERE run_id = ? ORDER BY turn", (run_id,))]
        run["messages"] = [{"role": m["role"], "parts": _loads(m["content"])} for m in self.connection.execute(
            "SELECT role, content FROM messages WHERE run_id = ? ORDER BY seq", (run_id,))]
        run["notices"] = [{"at": n["at"], "kind": n["kind"], "message": n["message"]} for n in self.connection.execute(
            "SELECT * FROM notices WHERE run_id = ? ORDER BY rowid", (run_id,))]
        return run

    def search(self, text: str, *, limit: int = 20) -> list[SearchHit]:
        """Runs that mention every word of ``text`` (in their prompt, answers, tool arguments or
        results — not necessarily in one place), newest first, each with an excerpt of its first match."""
        from toolrun.runlog.search import index_pending_runs, search_runs  # a run writing the log does without them

        index_pending_runs(self)
        return search_runs(self.connection, text, limit=limit)


def supersede_earlier_attempts(connection: sqlite3.Connection, run_id: int, batch: str | None, run_key: str | None) -> None:
    """Mark the earlier attempts of the batch run ``run_key`` as superseded by run ``run_id`` (in the transaction
    that writes it): an interrupted or failed run tried again counts once, by its latest attempt."""
    if batch is not None and run_key is not None:
        connection.execute("UPDATE runs SET superseded = 1 WHERE session = ? AND run_key = ? AND id < ? AND NOT superseded",
                           (batch, run_key, run_id))


def retry_busy(action: Callable[[], object], deadline: float) -> None:
    """``action`` again after a short random pause while SQLite says busy or locked, until ``deadline``.

    SQLite's busy timeout covers waiting for a lock, but not every busy answer: a journal
    mode change, for one, fails at once while another process writes.
    """
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        import random  # start-up: only a busy log is retried

        time.sleep(random.uniform(0.005, 0.05))  # apart, so racing processes do not retry in step


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class _NotWal(sqlite3.OperationalError):
    """SQLite answered a WAL switch with the old mode: another connection held the file."""

    sqlite_errorcode = sqlite3.SQLITE_BUSY


def _use_wal(connection: sqlite3.Connection) -> None:
    """WAL, set once by whichever process gets there first (a change SQLite does not wait for)."""
    if connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    if connection.execute("PRAGMA journal_mode=WAL").fetchone()[0] != "wal":
        raise _NotWal("database is locked (the journal mode could not be changed to WAL)")


def _summary(row: sqlite3.Row) -> dict[str, Any]:
    keys = row.keys()
    status = row["status"]
    if status == "running" and row["pid"] and not process_alive(row["pid"]):
        status = "unfinished"  # the process that wrote it is gone: killed or crashed mid-run
    summary = {
        "id": row["id"], "command": row["command"], "session": row["session"], "run_key": row["run_key"],
        "recipe": row["recipe"],
        "model": row["model"], "mode": row["mode"], "vars": _loads(row["vars"]), "prompt": row["prompt"],
        "started_at": row["started_at"], "ended_at": row["ended_at"], "status": status,
        "stop_reason": row["stop_reason"], "final": row["final"], "error": row["error"],
        "usage": {"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"], "requests": row["requests"]},
    }
    for count in ("turn_count", "call_count", "error_count"):
        if count in keys:
            summary[count.removesuffix("_count") + "s"] = row[count]
    return summary


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a run row "running" whose process is gone never finished)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, belongs to someone else
        return True
    return True


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
