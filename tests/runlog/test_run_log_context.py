"""The run log and ``--transcript`` say what a request under ``settings.context`` left out, and when."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from tests.loop.test_context_window import write_pages_recipe
from toolrun.loop.runner import ObserverGroup
from toolrun.runlog import RunLog
from toolrun.runlog.transcript_log import TranscriptLog
from toolrun.runlog.writer import RunLogWriter
from toolrun.sessions.play import arun


def log_document(db: Path) -> dict:
    connection = sqlite3.connect(db)
    try:
        return json.loads(connection.execute("SELECT document FROM runs WHERE id = 1").fetchone()[0])
    finally:
        connection.close()


def test_each_trimmed_request_is_a_context_notice_in_the_log_and_an_event_in_the_transcript(tmp_path: Path) -> None:
    recipe = write_pages_recipe(tmp_path, pages=3, limit=8000)
    log = RunLog.open(tmp_path / "logs.db")
    transcript = TranscriptLog(tmp_path / "run.jsonl")
    try:
        result = asyncio.run(arun(recipe, observer=ObserverGroup(RunLogWriter(log, command="recipe"), transcript)))
        run = log.get_run(1)
    finally:
        transcript.close()
        log.close()
    assert run is not None and run["status"] == "ok"
    notices = [notice for notice in run["notices"] if notice["kind"] == "context"]
    first_call = result.tool_calls[0].id
    assert [notice["message"].split(":")[0] for notice in notices] == ["context, request 3", "context, request 4"]
    assert "dropped 2 earlier messages (1 call)" in notices[0]["message"]
    assert notices[0]["at"] <= notices[1]["at"]
    stored = log_document(tmp_path / "logs.db")
    assert stored["context"]["events"][0]["dropped_calls"] == [first_call]  # the run's document in the log
    events = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()]
    context = [event for event in events if event["event"] == "context"]
    assert [event["request"] for event in context] == [3, 4] and context[0]["dropped_calls"] == [first_call]
    assert events[-1]["event"] == "run_end" and events[-1]["context"]["events"] == [
        {key: value for key, value in event.items() if key not in ("event", "at")} for event in context]
