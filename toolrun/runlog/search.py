"""``toolrun logs search``: the runs whose indexed text mentions every word, each with an excerpt.

A run writing the log leaves the full-text index alone (tokenising its calls' text cost it
nearly as much as writing them); a search first indexes the runs not indexed yet, a few hundred
a transaction, from their rows: prompt, vars, recipe, turn texts, tool calls with their
results, answer and error. A run still being written is indexed as far as it got and again
at the next search, until it ends or its process is gone (a killed run is indexed whole).
Apart from ``toolrun.runlog.store`` so a run that only writes the log does not import it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from toolrun.core.text import without_terminal_escapes
from toolrun.runlog.store import RunLog, match_query, process_alive, search_text

RUNS_AT_ONCE = 200  # runs indexed in one transaction: writers wait for one batch at most
_INSERT_SEARCH = "INSERT INTO search (run_id, field, original, text) VALUES (?, ?, ?, ?)"


@dataclass
class SearchHit:
    """A run that matched a search, the field that matched and an excerpt of it."""

    run_id: int
    field: str
    excerpt: str


def search_runs(connection: sqlite3.Connection, text: str, *, limit: int = 20) -> list[SearchHit]:
    """Runs that mention every word of ``text`` (in their prompt, answers, tool arguments or
    results — not necessarily in one place), newest first, each with an excerpt of its first match."""
    words = [word for word in text.split() if match_query(word)]
    if not words:
        return []
    matching: set[int] | None = None
    first: dict[int, int] = {}  # run id -> the index row of its first match of the first word
    for number, word in enumerate(words):  # ids only: the text is read for the runs shown, not every match
        rows = connection.execute("SELECT run_id, MIN(rowid) FROM search WHERE search MATCH ? GROUP BY run_id",
                                  (match_query(word),)).fetchall()
        if number == 0:
            first = {int(run_id): rowid for run_id, rowid in rows}
        runs = {int(row[0]) for row in rows}
        matching = runs if matching is None else matching & runs
    hits = []
    for run_id in sorted(matching or (), reverse=True)[:limit]:
        row = connection.execute("SELECT field, original FROM search WHERE rowid = ?", (first[run_id],)).fetchone()
        hits.append(SearchHit(run_id, row["field"], _excerpt(row["original"], words[0])))
    return hits


def index_pending_runs(log: RunLog) -> int:
    """Put every run not indexed yet into the search index; returns how many were indexed.

    A log this process may only read (another user's, a read-only file) is searched as it is.
    """
    connection = log.connection
    pending = [row[0] for row in connection.execute("SELECT id FROM runs WHERE indexed = 0 ORDER BY id")]
    try:
        for start in range(0, len(pending), RUNS_AT_ONCE):
            with log.transaction() as writing:
                for run_id in pending[start:start + RUNS_AT_ONCE]:
                    _index_run(writing, run_id)
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_READONLY:
            raise
    return len(pending)


def _index_run(connection: sqlite3.Connection, run_id: int) -> None:
    run = connection.execute("SELECT status, pid, prompt, vars, recipe, final, error FROM runs "
                             "WHERE id = ? AND indexed = 0", (run_id,)).fetchone()
    if run is None:  # another search indexed it meanwhile
        return
    connection.execute("DELETE FROM search WHERE run_id = ?", (run_id,))  # as far as it got at an earlier search
    fields: list[tuple[str, Any]] = [("prompt", run["prompt"])]
    if run["vars"] not in (None, "{}"):
        fields.append(("vars", run["vars"]))
    fields.append(("recipe", run["recipe"]))
    fields += [(f"turn {turn} text", text) for turn, text in connection.execute(
        "SELECT turn, text FROM turns WHERE run_id = ? ORDER BY turn", (run_id,))]
    lines = [f"{name} {arguments} → {result}" if result else f"{name} {arguments}" for name, arguments, result in
             connection.execute("SELECT name, arguments, result FROM tool_calls WHERE run_id = ? ORDER BY turn, seq",
                                (run_id,))]
    fields += [("tool calls", "\n".join(lines)), ("final answer", run["final"]), ("error", run["error"])]
    connection.executemany(_INSERT_SEARCH, [(run_id, field, text, search_text(text)) for field, text in fields if text])
    if run["status"] != "running" or not run["pid"] or not process_alive(run["pid"]):
        connection.execute("UPDATE runs SET indexed = 1 WHERE id = ?", (run_id,))


def _excerpt(text: str, word: str, width: int = 60) -> str:
    """Where ``word`` is in ``text``, as a terminal shows the text (escape sequences left out, as the index has it)."""
    flat = " ".join(without_terminal_escapes(text).split())
    at = flat.lower().find(word.lower())
    start = max(0, at - width // 2) if at >= 0 else 0
    piece = flat[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
