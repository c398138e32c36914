"""The run log with many writers: opening never refuses a second process, every row lands
whole, a turn's events are one transaction, and ``logs prune`` gives space back."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import invoke
from tests.run_log_writer_process import write_run
from toolrun.runlog import RunLog, RunLogWriter

ROOT = Path(__file__).resolve().parents[2]


def test_open_waits_for_a_writer_holding_a_new_file_in_rollback_mode(tmp_path: Path) -> None:
    """SQLite answers a switch to WAL at once with 'database is locked' while another connection
    writes the fresh file: the open retries within the busy timeout instead of failing."""
    db = tmp_path / "logs.db"
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE first_writer (x)")  # a rollback-journal write lock on the new file
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    try:
        log = RunLog.open(db)
    finally:
        release.join()
        other.close()
    try:
        assert log.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert log.connection.execute("PRAGMA user_version").fetchone()[0] >= 1
    finally:
        log.close()


def writers(db: Path, processes: int, runs: int, calls: int) -> None:
    """``processes`` processes create, migrate and write one log at once; each must exit 0."""
    started = [subprocess.Popen([sys.executable, "-m", "tests.run_log_writer_process", str(db), str(runs), str(calls)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for _ in range(processes)]
    for process in started:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr


def assert_whole(db: Path, runs: int, calls: int) -> None:
    """Every run ended ok with its one turn, all its calls finished and its answer."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT r.id, r.status, r.final, (SELECT COUNT(*) FROM turns t WHERE t.run_id = r.id AND t.ended_at IS NOT NULL), "
            "(SELECT COUNT(*) FROM tool_calls c WHERE c.run_id = r.id AND c.result LIKE '玫瑰: %' AND c.ended_at IS NOT NULL), "
            "(SELECT COUNT(*) FROM messages m WHERE m.run_id = r.id) FROM runs r").fetchall()
    assert len(rows) == runs
    for run_id, status, final, turns, finished_calls, messages in rows:
        assert (status, turns, finished_calls, messages) == ("ok", 1, calls, 1), run_id
        assert final.startswith("done ")


def test_several_processes_create_and_write_one_log_at_once(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    writers(db, processes=2, runs=3, calls=5)  # the whole race, small: the 20-process check is integration
    assert_whole(db, runs=6, calls=5)


@pytest.mark.integration
def test_twenty_processes_write_one_log_at_once_repeatedly(tmp_path: Path) -> None:
    for round_number in range(5):
        db = tmp_path / f"logs-{round_number}.db"
        writers(db, processes=20, runs=3, calls=20)
        assert_whole(db, runs=60, calls=20)


def test_a_turn_of_many_calls_is_one_transaction(tmp_path: Path) -> None:
    """A run of one 40-call turn: the run's start, the turn's end and the run's end — not one commit an event."""
    log = RunLog.open(tmp_path / "logs.db")
    commits: list[str] = []
    log.connection.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)

    async def run() -> None:  # on an event loop, as the loop calls it: nothing waits long enough to be flushed early
        assert write_run(log, 0, 40) is None

    asyncio.run(run())
    log.connection.set_trace_callback(None)
    assert len(commits) == 3
    run_row = log.get_run(1)
    assert run_row is not None and len(run_row["turns"][0]["tool_calls"]) == 40
    assert [hit.run_id for hit in log.search("玫瑰")] == [1]  # the calls' results are in the index
    log.close()


def test_a_waiting_event_is_written_soon_while_the_loop_is_idle(tmp_path: Path) -> None:
    """A slow call shows in the log while it runs: its start is written within a fraction of a second."""
    from toolrun.core.messages import Message, ModelResponse, ToolCall, Usage

    db = tmp_path / "logs.db"
    log = RunLog.open(db)

    async def run() -> None:
        writer = RunLogWriter(log, command="recipe")
        writer.on_run_start(recipe="slow", model="scripted:x", mode="live")
        call = ToolCall("call_1", "slow_report", {"city": "北京"}, "{}")
        writer.on_model_response(0, ModelResponse(Message("assistant", [call]), "tool_calls", Usage(1, 1, 1)))
        writer.on_tool_call_start(call)
        with sqlite3.connect(db) as reader:
            assert reader.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 0  # waiting in memory
            deadline = time.monotonic() + 10
            while not reader.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]:
                assert time.monotonic() < deadline, "the waiting call start was never written"
                await asyncio.sleep(0.02)  # the loop is idle, as while a slow tool runs

    asyncio.run(run())
    log.close()


def test_prune_removes_old_runs_with_their_search_rows_and_shrinks_the_log(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    log = RunLog.open(db)
    for number in range(12):
        assert write_run(log, number, 40) is None
    keep = write_run(log, 99, 1)
    assert keep is None
    old = time.time() - 40 * 86400
    log.connection.execute("UPDATE runs SET started_at = ?, ended_at = ? WHERE recipe NOT LIKE '%-99'", (old, old))
    assert len(log.search("玫瑰")) == 13  # every run in the index, so its search rows are there to remove
    log.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    log.close()
    size = db.stat().st_size

    result = invoke("logs", "prune", "--older-than", "30d", "--logs", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    pruned = json.loads(result.stdout)
    assert pruned["runs"] == 12 and pruned["incremental"] is True
    assert db.stat().st_size < size / 2, (size, db.stat().st_size)
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
        assert connection.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 1  # the kept run's
        assert {row[0] for row in connection.execute("SELECT run_id FROM search")} == {13}
        assert connection.execute("PRAGMA freelist_count").fetchone()[0] == 0


def test_prune_of_a_log_made_before_incremental_vacuum_says_so_and_vacuum_converts_it(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    with sqlite3.connect(db) as connection:  # as an older toolrun made it: no auto_vacuum
        connection.execute("PRAGMA auto_vacuum=NONE")
        connection.execute("CREATE TABLE placeholder (x)")
        connection.execute("DROP TABLE placeholder")
    log = RunLog.open(db)
    for number in range(5):
        assert write_run(log, number, 40) is None
    log.connection.execute("UPDATE runs SET ended_at = 1")
    log.close()

    result = invoke("logs", "prune", "--older-than", "1d", "--logs", str(db))
    assert result.exit_code == 0, result.stderr
    assert "removed 5 runs older than 1d" in result.stderr
    assert "note: this log was made before toolrun gave pruned space back" in result.stderr
    assert "--vacuum" in result.stderr
    converted = invoke("logs", "prune", "--older-than", "1d", "--vacuum", "--logs", str(db), "--json")
    assert converted.exit_code == 0, converted.stderr
    assert json.loads(converted.stdout)["incremental"] is True
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA auto_vacuum").fetchone()[0] == 2


def test_prune_keeps_a_run_still_being_written_and_refuses_a_bad_duration(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    log = RunLog.open(db)
    writer = RunLogWriter(log, command="recipe")
    writer.on_run_start(recipe="running", model="scripted:x", mode="live")  # this process: alive
    log.connection.execute("UPDATE runs SET started_at = 1")
    log.close()
    result = invoke("logs", "prune", "--older-than", "1h", "--logs", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["runs"] == 0
    bad = invoke("logs", "prune", "--older-than", "a while", "--logs", str(db))
    assert bad.exit_code == 2 and "write it as 30d, 2w, 12h or 90m" in bad.stderr and "Traceback" not in bad.stderr
