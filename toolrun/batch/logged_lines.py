"""A run made elsewhere (on a Ray worker) written to the driver's run log from its result line.

A local batch logs each run event by event (``RunLogWriter``); a Ray worker cannot reach
the driver's SQLite file, so the driver logs the finished run from its line: the run, its
tool calls (as one turn, without per-turn timing) and its answer, grouped under the batch id.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from toolrun.runlog import RunLog
from toolrun.runlog.store import supersede_earlier_attempts
from toolrun.runlog.writer import storable


def log_result_line(log: RunLog, line: dict[str, Any], *, recipe: str, mode: str = "ray") -> str | None:
    """Write one finished run to ``log``; returns the problem when the log refuses the write (the batch goes on)."""
    ended = time.time()
    started = ended - line.get("duration_ms", 0) / 1000
    usage = line.get("usage") or {}
    try:
        with log.transaction() as connection:
            cursor = connection.execute(
                "INSERT INTO runs (command, session, run_key, recipe, model, mode, vars, started_at, ended_at, status, "
                "stop_reason, final, error, input_tokens, output_tokens, requests, document) "
                "VALUES ('batch', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                storable((line["batch"], line["key"], recipe, line["model"], mode, _json(line["vars"]), started, ended,
                          line["status"], line["stop_reason"], line["final"], line["error"], usage.get("input_tokens", 0),
                          usage.get("output_tokens", 0), usage.get("requests", 0), _json(line))))
            run_id = int(cursor.lastrowid or 0)
            supersede_earlier_attempts(connection, run_id, line["batch"], line["key"])
            for seq, call in enumerate(line.get("tool_calls") or [], start=1):
                connection.execute(
                    "INSERT OR REPLACE INTO tool_calls (run_id, turn, seq, call_id, name, arguments, result, is_error, "
                    "duration_ms) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?)",
                    storable((run_id, seq, call["id"], call["name"], _json(call["arguments"]), call["result"],
                              int(bool(call["is_error"])), call.get("duration_ms"))))
    except sqlite3.Error as exc:
        return f"the run log {log.path} stopped accepting writes ({exc}); the batch's runs are incomplete there"
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
