"""One run as a timeline: from the run log, or from a ``--transcript`` JSON Lines file.

Both give the same plain dict, the shape of ``toolrun logs show ID --json``::

    {recipe, model, mode, status, started_at, ended_at, prompt, final, error, stop_reason,
     usage: {input_tokens, output_tokens, requests}, notices: [{kind, message}],
     turns: [{turn, stop_reason, text, usage, requested_at, answered_at, ended_at,
              tool_calls: [{id, name, arguments, result, is_error, duration_ms, started_at, ended_at}]}],
     expect_failures: [str],   # why the recipe's expect checks failed ([] when they passed)
     estimated: bool}   # true when the times had to be guessed (a transcript without "at")

Times are seconds since the epoch.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from toolrun.core.errors import Problem, UserError
from toolrun.runlog import RunLog
from toolrun.view.call_outcome import expect_failures_of
from toolrun.view.transcript_fields import LATEST_TIME, event_problems


def timeline_from_log(log: RunLog, run_id: int | None = None) -> dict[str, Any]:
    """Run ``run_id`` of the log (None: the newest); UserError when there is no such run."""
    if run_id is None:
        latest = log.list_runs(limit=1)
        if not latest:
            raise UserError(Problem(log.path, None, "the run log holds no run yet", "run a recipe, ask or chat first"))
        run_id = latest[0]["id"]
    run = log.get_run(run_id)
    if run is None:
        raise UserError(Problem(None, None, f"no run {run_id} in the log {log.path}", "see the ids with: toolrun logs"))
    run["estimated"] = False
    run["expect_failures"] = expect_failures_of(log, run_id)
    return run



def timeline_from_transcript(path: Path) -> dict[str, Any]:
    """The run a ``--transcript`` file tells, event by event; UserError listing every problem of a file that is
    not one: lines that are not JSON objects, fields of a type ``--transcript`` never writes (a hand edit)."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")  # JSON Lines: only \n ends a line (not U+2028)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(Problem(path, None, f"cannot read this transcript ({exc})", "name a file --transcript wrote")) from None
    events: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            problems.append(Problem(path, number, "not a JSON line", "name a file --transcript wrote"))
            continue
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            problems.append(Problem(path, number, "a transcript line is an object with an \"event\" name",
                                    "name a file --transcript wrote"))
            continue
        if not events and event["event"] != "run_start":
            problems.append(Problem(path, number, "a transcript starts with a run_start event",
                                    "name a file --transcript wrote"))
        problems += event_problems(path, number, event)
        events.append(event)
    if not events and not problems:
        problems.append(Problem(path, None, "the transcript is empty", "name a file --transcript wrote"))
    if problems:
        raise UserError.bounded(problems)
    return _TranscriptReader().read(events)


class _TranscriptReader:
    """Builds the timeline from events; guesses times (and says so) for a transcript without them."""

    def __init__(self) -> None:
        self.run: dict[str, Any] = {"status": "unfinished", "notices": [], "turns": [], "final": None, "error": None,
                                    "stop_reason": None, "prompt": None, "ended_at": None, "estimated": False,
                                    "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}}
        self.mark = 0.0  # when the current model request went out

    def read(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        readers = {"run_start": self._run_start, "notice": self._notice, "divergence": self._divergence,
                   "model_response": self._model_response, "tool_call": self._tool_call,
                   "interrupted": self._interrupted, "run_end": self._run_end}
        for event in events:
            reader = readers.get(event["event"])  # an event this toolrun does not draw (context) is skipped
            if reader is not None:
                reader(event)
        if any(_guessed(turn) for turn in self.run["turns"]):
            self._guess_times()
        return self.run

    def _run_start(self, event: dict[str, Any]) -> None:
        started = event.get("at") or _epoch(event.get("started_at"))
        self.run.update(recipe=event.get("recipe"), model=event.get("model"), mode=event.get("mode"),
                        started_at=started, command="recipe")
        self.mark = started or 0.0

    def _notice(self, event: dict[str, Any]) -> None:
        self.run["notices"].append({"kind": "notice", "message": event.get("message") or ""})  # null: none

    def _divergence(self, event: dict[str, Any]) -> None:
        self.run["notices"].append({"kind": "divergence", "message": event.get("message") or ""})

    def _model_response(self, event: dict[str, Any]) -> None:
        at = event.get("at")
        usage, total = event.get("usage") or {}, self.run["usage"]  # so far: run_end, if any, has the run's own
        total.update(input_tokens=total["input_tokens"] + (usage.get("input_tokens") or 0),
                     output_tokens=total["output_tokens"] + (usage.get("output_tokens") or 0),
                     requests=total["requests"] + 1)
        self.run["turns"].append({
            "turn": event.get("turn", len(self.run["turns"]) + 1), "stop_reason": event.get("stop_reason"),
            "text": event.get("text"), "usage": event.get("usage") or {"input_tokens": 0, "output_tokens": 0},
            "requested_at": self.mark if at is not None else None, "answered_at": at, "ended_at": at,
            "tool_calls": [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments"), "result": None,
                            "is_error": None, "duration_ms": None, "started_at": None, "ended_at": None}
                           for c in event.get("tool_calls") or []],
        })
        self.mark = at or self.mark

    def _tool_call(self, event: dict[str, Any]) -> None:
        turn = self._turn(event.get("turn"))
        if turn is None:
            return
        call = next((c for c in turn["tool_calls"] if c["id"] == event.get("id")), None)
        if call is None:
            call = {"id": event.get("id"), "name": event.get("name")}
            turn["tool_calls"].append(call)
        call.update(arguments=event.get("arguments"), result=event.get("result"), is_error=event.get("is_error"),
                    duration_ms=event.get("duration_ms"), started_at=event.get("started_at"),
                    ended_at=event.get("ended_at"))
        if call["ended_at"] is not None:
            turn["ended_at"] = max(turn["ended_at"] or 0, call["ended_at"])
            self.mark = max(self.mark, call["ended_at"])

    def _interrupted(self, event: dict[str, Any]) -> None:
        self.run.update(status="interrupted", ended_at=event.get("at"))

    def _run_end(self, event: dict[str, Any]) -> None:
        failed = event.get("stop_reason") in ("error", "max_turns")
        status = "failed" if failed else ("expect_failed" if event.get("expect_failures") else "ok")
        self.run["expect_failures"] = [str(failure) for failure in event.get("expect_failures") or []]
        self.run.update(final=event.get("final"), error=event.get("error"), stop_reason=event.get("stop_reason"),
                        usage=event.get("usage") or self.run["usage"], status=status, ended_at=event.get("at"),
                        recipe=event.get("recipe") or self.run.get("recipe"))
        for turn, document in zip(self.run["turns"], event.get("turns") or [], strict=False):
            turn["usage"] = document.get("usage") or turn["usage"]

    def _turn(self, number: Any) -> dict[str, Any] | None:
        for turn in self.run["turns"]:
            if turn["turn"] == number:
                return turn
        return self.run["turns"][-1] if self.run["turns"] else None

    def _guess_times(self) -> None:
        """A transcript from before times were written: calls of a turn drawn from a common start."""
        self.run["estimated"] = True
        clock = 0.0
        for turn in self.run["turns"]:
            turn["requested_at"], turn["answered_at"] = clock, clock
            longest = 0.0
            for call in turn["tool_calls"]:
                seconds = (call.get("duration_ms") or 0) / 1000
                call["started_at"], call["ended_at"] = clock, clock + seconds
                longest = max(longest, seconds)
            clock += longest
            turn["ended_at"] = clock


def _guessed(turn: dict[str, Any]) -> bool:
    return turn["answered_at"] is None or any(c.get("started_at") is None and c.get("duration_ms") is not None
                                               for c in turn["tool_calls"])


def _epoch(iso: Any) -> float | None:
    """Seconds since 1970 of an ISO time (``started_at`` of a run_start), or None for none a run could start at."""
    try:
        seconds = datetime.fromisoformat(str(iso)).timestamp() if iso else None
    except (ValueError, OverflowError, OSError):
        return None
    return seconds if seconds is not None and 0 <= seconds < LATEST_TIME else None
