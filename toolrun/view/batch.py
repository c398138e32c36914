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
"""


def render_batch_page(batch_id: str, runs: list[dict[str, Any]]) -> str:
    """The page of a batch from its runs in the run log (``RunLog.list_runs(session=batch_id)``), oldest first."""
    runs = sorted(runs, key=lambda run: (run["started_at"] or 0, run["id"]))
    counts: dict[str, int] = {}
    for run in runs:
        counts[run["status"]] = counts.get(run["status"], 0) + 1
    recipe = next((run["recipe"] for run in runs if run["recipe"]), "")
    rows = "\n".join(_row(run) for run in runs)
    summary = " · ".join(f'<span class="status-{escape(status)}">{count} {escape(status)}</span>'
                         for status, count in sorted(counts.items()))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(batch_id)} · toolrun batch</title>
<style>{_CSS}{_TABLE_CSS}</style></head>
<body><h1>batch {escape(batch_id)}</h1>
<div class="meta"><span>recipe {escape(recipe or "?")}</span><span>{counted(len(runs), "run")}</span></div>
<div class="meta">{summary}</div>
<table data-runs="{len(runs)}"><thead><tr><th>run</th><th>vars</th><th>model</th><th>outcome</th><th>calls</th>
<th>tokens in/out</th><th>time</th><th>answer or error</th></tr></thead>
<tbody>
{rows}
</tbody></table></body></html>
"""


def _row(run: dict[str, Any]) -> str:
    usage = run["usage"]
    seconds = (run["ended_at"] - run["started_at"]) if run["ended_at"] and run["started_at"] else None
    outcome = run["final"] if run["status"] in ("ok", "expect_failed") else (run["error"] or run["stop_reason"] or "")
    return (f'<tr class="run" data-status="{escape(run["status"])}"><td>{run["id"]}</td>'
            f'<td><code>{escape(json.dumps(run["vars"], ensure_ascii=False))}</code></td>'
            f'<td>{escape(run["model"] or "")}</td><td class="status-{escape(run["status"])}">{escape(run["status"])}</td>'
            f'<td class="num">{run.get("calls", 0)}</td>'
            f'<td class="num">{usage["input_tokens"]}/{usage["output_tokens"]}</td>'
            f'<td class="num">{"" if seconds is None else f"{seconds:.2f} s"}</td>'
            f'<td class="answer-cell">{escape(outcome or "")}</td></tr>')
