"""What the run log tells of one call beyond its result: did it ever run, and why did the run's checks fail.

Kept apart from the page so that ``toolrun logs show`` reads it without importing the loop.
"""

from __future__ import annotations

import json
from typing import Any

from toolrun.runlog import RunLog

DENIED_PREFIX = "the user denied this call"
# How the loop's refusals begin (loop/execution.py, loop/runner.py): the calls no backend ran. A test keeps them in step.
NEVER_RAN_PREFIXES = (
    "invalid arguments for ", DENIED_PREFIX, "this tool needs a human's approval",
    "approval failed: ", "unknown tool ", "the arguments are not valid JSON", "the arguments were cut off",
    "the arguments nest deeper",
)


def never_ran(call: dict[str, Any]) -> bool:
    """True for a call the loop refused (invalid arguments, denied, unknown tool): no backend ever ran it."""
    return (bool(call.get("is_error")) and call.get("duration_ms") == 0
            and str(call.get("result") or "").startswith(NEVER_RAN_PREFIXES))


def expect_failures_of(log: RunLog, run_id: int) -> list[str]:
    """The reasons the run's ``expect`` checks failed, from the run's JSON document in the log ([] when none)."""
    row = log.connection.execute("SELECT document FROM runs WHERE id = ?", (run_id,)).fetchone()
    try:
        document = json.loads(row[0]) if row and row[0] else {}
    except ValueError:
        return []
    failures = document.get("expect_failures") if isinstance(document, dict) else None
    return [str(failure) for failure in failures] if isinstance(failures, list) else []
