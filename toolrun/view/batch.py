"""A batch as one self-contained HTML page: a table with one line per run (row vars, model,
outcome, calls, tokens, time, answer), each linking to ``toolrun view ID`` of that run."""

from __future__ import annotations

import json
from typing import Any

from toolrun.core.text import counted
from toolrun.view.page import _CSS, escape

_TABLE_CSS = """
table { border-collapse: collapse; width: 100%; font-size: 13px; margin-top: 16px; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); position: sticky; top: 0; }
td.answer-cell { max-width: 420px; white-space: pre-wrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.superseded { opacity: 0.6; }
"""


def render_batch_page(batch_id: str, runs: list[dict[str, Any]]) -> str:
    """The page of a batch from its runs in the run log (``RunLog.list_runs(session=batch_id)``), oldest first.

    A run tried more than once (interrupted then resumed, failed then retried) has a line per attempt; the
    counts at the top are of runs, by their latest attempt, as ``toolrun logs batches`` counts them.
    """
    runs = sorted(runs, key=lambda run: (run["started_at"] or 0, run["id"]))
    latest = _latest_attempts(runs)
    counts: dict[str, int] = {}
    for run in latest.values():
        counts[run["status"]] = counts.get(run["status"], 0) + 1
    recipe = next((run["recipe"] for run in runs if run["recipe"]), "")
    rows = "\n".join(_row(run, _later_attempt(run, latest)) for run in runs)
    summary = " · ".join(f'<span class="status-{escape(status)}">{count} {escape(status)}</span>'
                         for status, count in sorted(counts.items()))
    attempts = f"<span>{counted(len(runs), 'attempt')}</span>" if len(runs) != len(latest) else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(batch_id)} · toolrun batch</title>
<style>{_CSS}{_TABLE_CSS}</style></head>
<body><h1>batch {escape(batch_id)}</h1>
<div class="meta"><span>recipe {escape(recipe or "?")}</span><span>{counted(len(latest), "run")}</span>{attempts}</div>
<div class="meta">{summary}</div>
<table data-runs="{len(runs)}"><thead><tr><th>run</th><th>vars</th><th>model</th><th>outcome</th><th>calls</th>
<th>tokens in/out</th><th>time</th><th>answer or error</th></tr></thead>
<tbody>
{rows}
</tbody></table></body></html>
"""


def _attempt_of(run: dict[str, Any]) -> str:
    """Which run of the batch a logged run is an attempt of: its key (a run logged without one: itself)."""
    return run.get("run_key") or f"run {run['id']}"


def _latest_attempts(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The latest attempt of each run of the batch (``runs`` oldest first)."""
    latest: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = _attempt_of(run)
        if key not in latest or run["id"] > latest[key]["id"]:
            latest[key] = run
    return latest


def _later_attempt(run: dict[str, Any], latest: dict[str, dict[str, Any]]) -> int | None:
    """The id of the latest attempt of ``run``'s run when ``run`` is an earlier one, else None."""
    newest = latest[_attempt_of(run)]
    return None if newest is run else int(newest["id"])


def _row(run: dict[str, Any], tried_again_as: int | None = None) -> str:
    """One attempt's line; ``tried_again_as``: the id of the run's latest attempt, when this is an earlier one."""
    usage = run["usage"]
    seconds = (run["ended_at"] - run["started_at"]) if run["ended_at"] and run["started_at"] else None
    outcome = run["final"] if run["status"] in ("ok", "expect_failed") else (run["error"] or run["stop_reason"] or "")
    if tried_again_as is not None:
        outcome = f"tried again as run {tried_again_as}" + (f": {outcome}" if outcome else "")
    superseded = " superseded" if tried_again_as is not None else ""
    return (f'<tr class="run{superseded}" data-status="{escape(run["status"])}"><td>{run["id"]}</td>'
            f'<td><code>{escape(json.dumps(run["vars"], ensure_ascii=False))}</code></td>'
            f'<td>{escape(run["model"] or "")}</td><td class="status-{escape(run["status"])}">{escape(run["status"])}</td>'
            f'<td class="num">{run.get("calls", 0)}</td>'
            f'<td class="num">{usage["input_tokens"]}/{usage["output_tokens"]}</td>'
            f'<td class="num">{"" if seconds is None else f"{seconds:.2f} s"}</td>'
            f'<td class="answer-cell">{escape(outcome or "")}</td></tr>')
