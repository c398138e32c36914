"""The search index is filled by ``logs search``, not by the run writing the log: a search first
indexes the runs not indexed yet, whole when they ended (or their process is gone), as far as
they got while they still run."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.cli.test_cli_recipe import invoke
from tests.run_log_writer_process import write_run
from toolrun.core.messages import Message, ModelResponse, ToolCall, Usage
from toolrun.loop.results import ToolCallRecord, TurnRecord
from toolrun.runlog import RunLog, RunLogWriter
from toolrun.runlog.schema import MIGRATIONS
from toolrun.runlog.search import index_pending_runs


def counts(log: RunLog) -> tuple[int, int]:
    """(search rows, runs marked indexed)."""
    return (log.connection.execute("SELECT COUNT(*) FROM search").fetchone()[0],
            log.connection.execute("SELECT COUNT(*) FROM runs WHERE indexed = 1").fetchone()[0])


def run_by_hand(log: RunLog, recipe: str, prompt: str, cities: list[str], first_result: str
                ) -> tuple[RunLogWriter, list[ToolCall]]:
    """A writer's run, driven event by event: one turn asking ``get_stock`` for each of ``cities``, of which
    only the first call has run (and answered ``first_result``). The writer and the turn's calls."""
    writer = RunLogWriter(log, command="recipe", prompt=prompt)
    writer.on_run_start(recipe=recipe, model="scripted:x", mode="live")
    calls = [ToolCall(f"call_{n}", "get_stock", {"city": city}, "{}") for n, city in enumerate(cities, 1)]
    writer.on_model_response(0, ModelResponse(Message("assistant", list(calls)), "tool_calls", Usage(1, 1, 1)))
    call_ends(writer, calls[0], first_result)
    return writer, calls


def call_ends(writer: RunLogWriter, call: ToolCall, result: str) -> None:
    """``call`` starts and ends with ``result``, as the run loop reports it."""
    writer.on_tool_call_start(call)
    writer.on_tool_call_end(ToolCallRecord(call.id, call.name, call.arguments, result, False, 1))


def test_a_run_writes_no_search_rows_and_the_first_search_indexes_it_once(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "logs.db")
    try:
        assert write_run(log, 1, 3) is None
        assert counts(log) == (0, 0)  # the run paid for its rows only
        for word in ("北京有什么花", "城2", "玫瑰", "done", "writer"):  # prompt, arguments, results, answer, recipe
            assert [hit.run_id for hit in log.search(word)] == [1], word
        first_rows = log.connection.execute("SELECT rowid FROM search WHERE run_id = 1").fetchall()
        assert first_rows and counts(log)[1] == 1
        assert write_run(log, 2, 1) is None
        assert [hit.run_id for hit in log.search("玫瑰")] == [2, 1]
        assert log.connection.execute("SELECT rowid FROM search WHERE run_id = 1").fetchall() == first_rows  # not again
    finally:
        log.close()


def test_a_run_still_writing_is_indexed_as_far_as_it_got_and_again_next_time(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "logs.db")
    writer, (_, second) = run_by_hand(log, "live", "北京有什么花?", ["北京", "深圳"], "玫瑰: 100")
    writer.flush()
    try:
        assert [hit.run_id for hit in log.search("玫瑰")] == [1]
        assert log.search("百合") == [] and counts(log)[1] == 0  # this process still writes it: not marked
        call_ends(writer, second, "百合: 7")
        writer.on_turn_end(TurnRecord("tool_calls", None, Usage(1, 1, 1), []))
        assert [hit.run_id for hit in log.search("百合")] == [1]  # indexed again, with the call written since
        assert [hit.run_id for hit in log.search("玫瑰")] == [1]  # once: its earlier rows were replaced
        assert log.connection.execute("SELECT COUNT(*) FROM search WHERE field = 'tool calls'").fetchone()[0] == 1
    finally:
        log.close()


def test_a_killed_writer_s_run_is_indexed_whole_once_its_process_is_gone(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "logs.db")
    writer, _ = run_by_hand(log, "killed", "深圳有什么花?", ["深圳"], "郁金香: 150")
    writer.on_turn_end(TurnRecord("tool_calls", None, Usage(1, 1, 1), []))  # then the process dies: no run end
    gone = subprocess.Popen(["true"])
    gone.wait()
    log.connection.execute("UPDATE runs SET pid = ?", (gone.pid,))  # as a SIGKILLed writer leaves its row
    try:
        assert [hit.run_id for hit in log.search("深圳 郁金香")] == [1]
        assert counts(log)[1] == 1 and index_pending_runs(log) == 0  # marked: never indexed again
    finally:
        log.close()


def test_text_is_searched_as_a_terminal_shows_it_and_stored_as_it_came(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "logs.db")
    coloured = "\x1b[1;31mRED\x1b[0m alert on \x1b]8;;https://ops.example/a\x1b\\checkout\x1b]8;;\x1b\\"
    writer, _ = run_by_hand(log, "coloured", "状态?", ["北京"], coloured)
    writer.on_turn_end(TurnRecord("tool_calls", None, Usage(1, 1, 1), []))
    try:
        for words in ("RED", "red alert", "checkout", "RED checkout"):
            assert [hit.run_id for hit in log.search(words)] == [1], words
        (hit,) = log.search("RED")
        assert "\x1b" not in hit.excerpt and "RED alert on checkout" in hit.excerpt
        assert log.search("31mRED") == [] and log.search("ops.example") == []  # the escapes themselves are not text
        stored = log.get_run(1)["turns"][0]["tool_calls"][0]["result"]
        assert stored == coloured  # what the tool printed, kept as it was
    finally:
        log.close()
    found = invoke("logs", "search", "RED", "--logs", str(tmp_path / "logs.db"), "--json")
    assert [hit["id"] for hit in json.loads(found.stdout)] == [1], found.stderr


def test_a_run_indexed_with_its_escape_sequences_is_indexed_again(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    with sqlite3.connect(db) as connection:  # schema 4, its runs indexed with the escapes as part of their words
        for migration in MIGRATIONS[:4]:
            for statement in migration:
                connection.execute(statement)
        connection.execute("PRAGMA user_version = 4")
        for run_id, result in ((1, "\x1b[31mRED\x1b[0m"), (2, "plain RED")):
            connection.execute("INSERT INTO runs (id, command, started_at, status, indexed) VALUES (?, 'recipe', 1, 'ok', 1)",
                               (run_id,))
            connection.execute("INSERT INTO tool_calls (run_id, turn, seq, call_id, name, arguments, result, is_error) "
                               "VALUES (?, 1, 1, 'c', 'status', '{}', ?, 0)", (run_id, result))
            line = f"status {{}} → {result}"
            connection.execute("INSERT INTO search (run_id, field, original, text) VALUES (?, 'tool calls', ?, ?)",
                               (run_id, line, line))
    log = RunLog.open(db)
    try:
        assert counts(log) == (2, 1)  # the coloured run is to be indexed again, the other keeps its rows
        assert [hit.run_id for hit in log.search("RED")] == [2, 1]
        assert counts(log) == (2, 2)
    finally:
        log.close()


def test_a_log_from_before_lazy_indexing_keeps_its_search_rows_and_gains_none(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    with sqlite3.connect(db) as connection:  # schema 1, as the writer then left a run: indexed as it went
        for statement in MIGRATIONS[0]:
            connection.execute(statement)
        connection.execute("PRAGMA user_version = 1")
        connection.execute("INSERT INTO runs (command, prompt, started_at, status) VALUES ('recipe', '兰花', 1, 'ok')")
        connection.execute("INSERT INTO search (run_id, field, original, text) VALUES (1, 'prompt', '兰花', ' 兰  花 ')")
    log = RunLog.open(db)
    try:
        assert counts(log) == (1, 1)
        assert [hit.run_id for hit in log.search("兰花")] == [1] and counts(log) == (1, 1)
    finally:
        log.close()


def test_a_log_this_process_may_only_read_is_searched_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    writing = RunLog.open(db)
    assert write_run(writing, 1, 1) is None
    writing.search("玫瑰")
    assert write_run(writing, 2, 1) is None  # not indexed yet
    writing.close()
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    connection.row_factory = sqlite3.Row
    reading = RunLog(db, connection)
    try:
        assert [hit.run_id for hit in reading.search("玫瑰")] == [1]
    finally:
        reading.close()


def test_the_run_document_in_the_log_leaves_its_turns_to_the_tables(tmp_path: Path) -> None:
    log = RunLog.open(tmp_path / "logs.db")
    try:
        assert write_run(log, 1, 2) is None
        document = json.loads(log.connection.execute("SELECT document FROM runs").fetchone()[0])
        assert "turns" not in document and document["final"].startswith("done ")
        run = log.get_run(1)
        assert run is not None and [c["result"] for c in run["turns"][0]["tool_calls"]] == [f"玫瑰: {document['final'][5:]}"] * 2
    finally:
        log.close()
