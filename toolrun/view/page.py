"""The timeline of one run as one self-contained HTML page: inline CSS and a little inline
script, no network, no external file — it opens from a mail attachment or a CI artifact.

Each turn shows its usage and its tool calls as bars on the turn's own time axis (calls
that overlap ran concurrently; a ``sequential`` barrier shows as a gap no bar crosses; a
slow tool is a long bar). A bar opens its call's arguments and result; errors are red.
Everything drawn is rendered here, in Python, so the page reads without its script; the
script only opens a call on click and measures what the browser drew (``data-drawn-overlap``).
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

from toolrun.core.text import terminal_safe
from toolrun.view.call_outcome import DENIED_PREFIX, never_ran

_MIN_BAR_PERCENT = 0.8  # a 1 ms call among 800 ms ones is still a bar you can click
_WAIT_SHOWN_MS = 50  # a call that waited longer than this before it ran (an approval prompt) shows the wait

_CSS = """
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bar:#3b82f6; --bar-hi:#1d4ed8; --err:#dc2626;
        --bg:#ffffff; --panel:#f8fafc; --model:#cbd5e1; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans CJK SC", "PingFang SC", sans-serif;
       color: var(--fg); background: var(--bg); margin: 0; padding: 24px 32px 48px; max-width: 1100px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 0; }
.meta, .muted { color: var(--muted); } .meta span + span::before { content: " · "; }
.status-ok { color: #15803d; } .status-failed, .status-interrupted, .status-unfinished, .status-expect_failed { color: var(--err); }
.prompt, .answer, .notice { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
        margin: 12px 0; white-space: pre-wrap; }
.notice { border-color: #fcd34d; background: #fffbeb; }
.turn { border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; margin: 16px 0; }
.turn-head { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
.said { margin: 8px 0 0; white-space: pre-wrap; }
.axis { position: relative; height: 18px; margin: 10px 0 2px 180px; border-bottom: 1px solid var(--line);
        font-size: 11px; color: var(--muted); }
.axis span { position: absolute; bottom: 2px; transform: translateX(-50%); white-space: nowrap; }
.axis span:first-child { transform: none; } .axis span:last-child { transform: translateX(-100%); }
.row { display: flex; align-items: center; height: 26px; }
.label { width: 180px; flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; padding-right: 8px;
         font-size: 12px; }
.track { position: relative; flex: 1; height: 100%; background: repeating-linear-gradient(90deg, transparent 0 24.8%,
         var(--line) 24.8% 25%); }
.bar { position: absolute; top: 4px; height: 18px; border-radius: 4px; background: var(--bar); color: #fff; font-size: 11px;
       line-height: 18px; padding: 0 5px; overflow: hidden; white-space: nowrap; cursor: pointer; border: 0; }
.bar:hover, .bar:focus { background: var(--bar-hi); outline: none; }
.bar.error { background: var(--err); }
.bar.model { background: var(--model); color: var(--fg); cursor: default; }
.wait { position: absolute; top: 8px; height: 10px; border-radius: 3px; font-size: 10px; line-height: 10px;
        color: var(--muted); overflow: hidden; white-space: nowrap; padding: 0 4px;
        background: repeating-linear-gradient(45deg, #fde68a 0 4px, #fef3c7 4px 8px); }
.mark { position: absolute; top: 3px; width: 16px; height: 20px; padding: 0; border: 0; background: none; cursor: pointer;
        color: var(--err); font-size: 14px; line-height: 20px; }
.mark-label { position: absolute; top: 4px; font-size: 11px; line-height: 18px; color: var(--err); white-space: nowrap; }
.expect { border: 1px solid var(--err); background: #fef2f2; border-radius: 8px; padding: 10px 14px 10px 32px; margin: 12px 0; }
.expect li { white-space: pre-wrap; }
.bar.unfinished { background: repeating-linear-gradient(45deg, var(--bar) 0 6px, #93c5fd 6px 12px); }
details.call { border: 1px solid var(--line); border-radius: 8px; margin: 8px 0 0; padding: 6px 10px; }
details.call.error { border-color: var(--err); background: #fef2f2; }
details.call[open] { box-shadow: 0 0 0 2px #bfdbfe; }
details.call summary { cursor: pointer; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--panel); padding: 8px; border-radius: 6px; margin: 6px 0; }
.final h2 { margin-top: 24px; }
.error-text { color: var(--err); }
"""

# Errors of the page's own script land on <html data-script-errors>, where a test (or a person) finds them.
_HEAD_SCRIPT = """
window.addEventListener("error", function (event) {
  var root = document.documentElement;
  root.dataset.scriptErrors = (root.dataset.scriptErrors || "") + (event.message || "error") + "\\n";
});
"""

_SCRIPT = """
(function () {
  function openCall(id) {
    var details = document.getElementById("call-" + id);
    if (!details) { return; }
    details.open = true;
    details.scrollIntoView({block: "nearest"});
  }
  document.querySelectorAll(".bar[data-call], .mark[data-call]").forEach(function (bar) {
    bar.addEventListener("click", function () { openCall(bar.dataset.call); });
  });
  // What the browser drew: the most bars of one turn that overlap on the screen.
  document.querySelectorAll(".turn").forEach(function (turn) {
    var boxes = Array.prototype.map.call(turn.querySelectorAll(".bar[data-call]"), function (bar) {
      var box = bar.getBoundingClientRect(); return [box.left, box.right];
    });
    var most = 0;
    boxes.forEach(function (a) {
      var over = boxes.filter(function (b) { return b[0] < a[1] && a[0] < b[1]; }).length;
      most = Math.max(most, over);
    });
    turn.dataset.drawnOverlap = String(most);
  });
  document.documentElement.dataset.ready = "1";
})();
"""


def escape(text: str) -> str:
    """``text`` for the page: HTML-escaped, and each control character a tool or a model sent shown as an
    escape (``\\x1b``), as on a terminal: visible on the page, and inert when the page goes to stdout (``-o -``)."""
    return html.escape(terminal_safe(text))


def _recipe_question(run: dict[str, Any]) -> str | None:
    """What a recipe run asked: the text of its user messages before the first answer (from the log)."""
    texts: list[str] = []
    for message in run.get("messages") or []:
        if message.get("role") != "user":
            break
        texts += [part["text"] for part in message.get("parts") or [] if part.get("type") == "text" and part.get("text")]
    return "\n".join(texts) or None


def render_page(run: dict[str, Any]) -> str:
    """The whole HTML document of ``run`` (a timeline dict, see ``toolrun.view.timeline``)."""
    title = f"toolrun · {run.get('recipe') or run.get('command') or 'run'}"
    if run.get("id") is not None:
        title += f" · run {run['id']}"
    body = [_header(run, title)]
    asked = run.get("prompt") or _recipe_question(run)
    if asked:
        body.append(f'<div class="prompt"><span class="muted">prompt</span>\n{escape(asked)}</div>')
    for notice in run.get("notices") or []:
        body.append(f'<div class="notice">{escape(notice["kind"])}: {escape(notice["message"])}</div>')
    for turn in run.get("turns") or []:
        body.append(_turn(turn, run.get("ended_at")))
    body.append(_ending(run))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style><script>{_HEAD_SCRIPT}</script></head>\n"
            f"<body>\n{''.join(body)}\n<script>{_SCRIPT}</script>\n</body></html>\n")


def _header(run: dict[str, Any], title: str) -> str:
    usage = run.get("usage") or {}
    status = run.get("status") or "unfinished"
    facts = [f"<span>{escape(str(run.get('model') or '?'))}</span>", f"<span>{escape(str(run.get('mode') or '?'))}</span>",
             f'<span class="status-{escape(status)}">{escape(status)}</span>']
    if run.get("started_at") and not run.get("estimated"):
        facts.append(f"<span>{datetime.fromtimestamp(run['started_at']).strftime('%Y-%m-%d %H:%M:%S')}</span>")
    if run.get("started_at") and run.get("ended_at"):
        facts.append(f"<span>{_seconds(run['ended_at'] - run['started_at'])}</span>")
    facts.append(f"<span>{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens</span>")
    facts.append(f"<span>{usage.get('requests', 0)} model requests</span>")
    if run.get("estimated"):
        facts.append("<span>times estimated: this transcript has no timestamps</span>")
    return f'<header><h1>{escape(title)}</h1><div class="meta">{"".join(facts)}</div></header>'


def _turn(turn: dict[str, Any], run_ended_at: float | None = None) -> str:
    calls = turn.get("tool_calls") or []
    usage = turn.get("usage") or {}
    model_time = ""
    if turn.get("requested_at") is not None and turn.get("answered_at") is not None:
        model_time = f'<span class="muted">model {_seconds(turn["answered_at"] - turn["requested_at"])}</span>'
    failed = sum(1 for call in calls if call.get("is_error"))
    parts = [f'<section class="turn" id="turn-{turn["turn"]}" data-turn="{turn["turn"]}" data-calls="{len(calls)}">',
             f'<div class="turn-head"><h2>Turn {turn["turn"]}</h2>'
             f'<span class="muted">{escape(str(turn.get("stop_reason")))}</span>'
             f'<span>{usage.get("input_tokens", 0)} in / {usage.get("output_tokens", 0)} out tokens</span>{model_time}'
             f'<span>{len(calls)} tool call{"s" if len(calls) != 1 else ""}'
             f'{f", {failed} failed" if failed else ""}</span></div>']
    if turn.get("text") and calls:
        parts.append(f'<div class="said">{escape(turn["text"])}</div>')
    if calls:
        parts.append(_lanes(calls, run_ended_at))
        parts.extend(_call_details(call) for call in calls)
    parts.append("</section>")
    return "".join(parts)


def _lanes(calls: list[dict[str, Any]], run_ended_at: float | None = None) -> str:
    """The calls as bars on the turn's time axis: first call's start to last call's end.

    A call that never finished runs to when the run was last seen: its end (Ctrl-C), else
    the latest time the turn knows (a killed run) — the call stuck at the end is the long bar.
    """
    starts = [call["started_at"] for call in calls if call.get("started_at") is not None]
    finished = [_finished_end(call) for call in calls if call.get("started_at") is not None and _finished(call)]
    last_seen = max([*starts, *finished, *([run_ended_at] if run_ended_at is not None else [])], default=0.0)

    def end_of(call: dict[str, Any]) -> float:
        return _finished_end(call) if _finished(call) else max(last_seen, float(call["started_at"]))

    ends = [end_of(call) for call in calls if call.get("started_at") is not None]
    origin = min(starts) if starts else 0.0
    span = max(max(ends, default=origin) - origin, 1e-3)
    axis = "".join(f"<span style=\"left:{fraction * 100:.1f}%\">{_ms(span * fraction)}</span>"
                   for fraction in (0, 0.25, 0.5, 0.75, 1))
    rows = [f'<div class="axis">{axis}</div>']
    for call in calls:
        if call.get("started_at") is None:
            continue
        rows.append(_call_row(call, origin, span, end_of(call)))
    return "".join(rows)


def _call_row(call: dict[str, Any], origin: float, span: float, end: float) -> str:
    """One call's row: the time it waited (approval) drawn apart from its run; a call that never ran is a mark."""
    name = escape(str(call.get("name")))
    start = float(call["started_at"])
    run_seconds = call["duration_ms"] / 1000 if call.get("duration_ms") is not None and _finished(call) else end - start
    # Time before the run: an approval prompt (of a call that ran, or one the person denied); a refusal waits for nobody.
    refused = never_ran(call) and not str(call.get("result")).startswith(DENIED_PREFIX)
    waited = 0.0 if refused else max(end - start - run_seconds, 0.0)
    ran_from = start + waited if waited * 1000 >= _WAIT_SHOWN_MS else start
    duration = f"{call['duration_ms']} ms" if call.get("duration_ms") is not None else "did not finish"
    label = f"{_short(call.get('arguments'))} · {duration}"
    parts = []
    if ran_from > start:
        parts.append(f'<span class="wait" style="left:{_percent(start - origin, span):.2f}%;'
                     f'width:{_percent(ran_from - start, span):.2f}%" title="waited {_seconds(ran_from - start)} '
                     f'before it ran (approval)">waited {_seconds(ran_from - start)}</span>')
    timing = f'data-start-ms="{(ran_from - origin) * 1000:.1f}" data-end-ms="{(end - origin) * 1000:.1f}"'
    if never_ran(call):
        left = min(_percent(ran_from - origin, span), 100 - _MIN_BAR_PERCENT)
        parts.append(f'<button class="mark error" data-call="{escape(str(call.get("id")))}" {timing} '
                     f'style="left:{left:.2f}%" title="{name}: never ran — {escape(_short(call.get("result")))}">'
                     f'◆</button><span class="mark-label" style="{_beside_mark(left)}">'
                     f'{escape(_short(call.get("arguments"), 40))} · never ran</span>')
    else:
        width = max(_percent(end - ran_from, span), _MIN_BAR_PERCENT)
        left = min(_percent(ran_from - origin, span), 100 - width)
        kind = "error" if call.get("is_error") else ("unfinished" if call.get("result") is None else "")
        parts.append(f'<button class="bar {kind}" data-call="{escape(str(call.get("id")))}" {timing} '
                     f'style="left:{left:.2f}%;width:{width:.2f}%" title="{name} {escape(label)}">{escape(label)}</button>')
    return (f'<div class="row"><span class="label" title="{name}">{name}</span>'
            f'<div class="track">{"".join(parts)}</div></div>')


def _beside_mark(left: float) -> str:
    """Where a mark's label goes: after it, or before it when the mark is near the right end."""
    return f"left:calc({left:.2f}% + 16px)" if left < 60 else f"right:calc({100 - left:.2f}% + 2px)"


def _percent(seconds: float, span: float) -> float:
    return seconds / span * 100


def _call_details(call: dict[str, Any]) -> str:
    arguments = call.get("arguments")
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, indent=2)
    error = " error" if call.get("is_error") else ""
    duration = f"{call['duration_ms']} ms" if call.get("duration_ms") is not None else "did not finish"
    duration = "never ran" if never_ran(call) else duration
    result = "(no result: the call did not finish)" if call.get("result") is None else call["result"]
    mark = "✗" if call.get("is_error") else "→"
    return (f'<details class="call{error}" id="call-{escape(str(call.get("id")))}">'
            f'<summary>{mark} <b>{escape(str(call.get("name")))}</b> {escape(_short(arguments))} '
            f'<span class="muted">· {duration} · {escape(str(call.get("id")))}</span></summary>'
            f'<div class="muted">arguments</div><pre>{escape(shown)}</pre>'
            f'<div class="muted">{"error result" if error else "result"}</div><pre>{escape(str(result))}</pre></details>')


def _ending(run: dict[str, Any]) -> str:
    parts = ['<section class="final">']
    if run.get("final"):
        parts.append(f'<h2>Answer</h2><div class="answer" id="final-answer">{escape(run["final"])}</div>')
    if run.get("error"):
        parts.append(f'<h2>Error</h2><div class="answer error-text" id="run-error">{escape(run["error"])}</div>')
    if not run.get("final") and not run.get("error"):
        parts.append('<p class="muted">No answer: the run did not finish.</p>')
    failures = run.get("expect_failures") or []
    if failures:
        items = "".join(f"<li>{escape(str(failure))}</li>" for failure in failures)
        parts.append(f'<h2>Expect checks that failed</h2><ul class="expect" id="expect-failures">{items}</ul>')
    parts.append("</section>")
    return "".join(parts)


def _finished(call: dict[str, Any]) -> bool:
    return call.get("ended_at") is not None or call.get("duration_ms") is not None


def _finished_end(call: dict[str, Any]) -> float:
    if call.get("ended_at") is not None:
        return float(call["ended_at"])
    return float(call["started_at"]) + (call.get("duration_ms") or 0) / 1000


def _short(value: Any, width: int = 60) -> str:
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))  # {"city": "北京"} reads as 北京
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"
