"""``toolrun view``: the timeline page of a real run, opened in a real headless Chromium.

The browser test needs the system's Chromium (Debian package ``chromium``; .ci/run installs
it) and skips, saying so, only when none can be found.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ANSWER, INVENTORY, clean_env, invoke, toolrun_in_process
from toolrun.view import render_page, timeline_from_transcript

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CITIES = ("北京", "上海", "深圳")


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


@dataclass
class Rendered:
    dom: str
    console: list[str]  # console messages the browser logged (errors among them)


def open_in_chromium(page: Path, profile: Path, screenshot: Path | None = None) -> Rendered:
    """The DOM after the page's script ran, and what the browser logged to its console."""
    browser = find_chromium()
    if browser is None:
        pytest.skip("no Chromium found (apt-get install chromium; .ci/run does it)")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--enable-logging=stderr", "--v=0", "--window-size=1200,900"]
    # One launch both dumps the DOM and takes the screenshot: each launch costs over a CPU second.
    shot = [f"--screenshot={screenshot}"] if screenshot is not None else []
    done = subprocess.run([*flags, *shot, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert screenshot is None or screenshot.is_file(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    return Rendered(done.stdout, console)


def turn_section(dom: str, number: int) -> str:
    match = re.search(rf'<section class="turn" id="turn-{number}"[^>]*>.*?</section>', dom, re.S)
    assert match, f"turn {number} is not on the page"
    return match.group(0)


def bars(section: str) -> list[tuple[float, float]]:
    return [(float(start), float(end)) for start, end in
            re.findall(r'<button class="bar[^"]*" data-call="[^"]+" data-start-ms="([\d.]+)" data-end-ms="([\d.]+)"', section)]


@pytest.fixture
def inventory_run(tmp_path: Path) -> tuple[Path, Path]:
    """The shipped inventory recipe, replayed offline: its run log and its transcript."""
    db, transcript = tmp_path / "logs.db", tmp_path / "inventory.jsonl"
    completed = toolrun_in_process("recipe", str(INVENTORY), "--logs", str(db), "--transcript", str(transcript))
    assert completed.returncode == 0, completed.stderr
    return db, transcript


@pytest.mark.integration  # a real Chromium: seconds of CPU each (python -m pytest -m integration)
def test_the_inventory_timeline_in_headless_chromium(tmp_path: Path, inventory_run: tuple[Path, Path]) -> None:
    db, transcript = inventory_run
    pages = {"log": tmp_path / "from-log.html", "transcript": tmp_path / "from-transcript.html"}
    assert invoke("view", "1", "--logs", str(db), "-o", str(pages["log"])).exit_code == 0
    assert invoke("view", str(transcript), "-o", str(pages["transcript"])).exit_code == 0
    for source, page in pages.items():
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'\b(src|href)=|@import|url\(', html), "the page must need nothing from outside"
        rendered = open_in_chromium(page, tmp_path / f"profile-{source}",
                                    screenshot=tmp_path / f"{source}.png" if source == "log" else None)
        assert rendered.console == [], rendered.console
        assert 'data-ready="1"' in rendered.dom and "data-script-errors" not in rendered.dom
        first = turn_section(rendered.dom, 1)
        assert 'data-drawn-overlap="3"' in first, f"{source}: the browser did not draw three overlapping bars"
        intervals = bars(first)
        assert len(intervals) == 3
        assert max(start for start, _ in intervals) < min(end for _, end in intervals), intervals
        for city in CITIES:
            assert f"{city} · " in first
        assert "玫瑰: 100, 郁金香: 150" in first  # the result, one click away
        answer = re.search(r'<div class="answer" id="final-answer">(.*?)</div>', rendered.dom, re.S)
        assert answer and answer.group(1) == ANSWER
        assert "330 in / 157 out tokens" in rendered.dom and "95 in / 67 out tokens" in rendered.dom
    # The log keeps the recipe's messages: its page shows what the run asked.
    assert '<span class="muted">prompt</span>\n北京、上海和深圳的鲜花库存是多少?' in pages["log"].read_text(encoding="utf-8")
    assert (tmp_path / "log.png").stat().st_size > 10_000


@pytest.mark.integration  # a real Chromium: seconds of CPU each (python -m pytest -m integration)
def test_the_console_check_sees_a_script_error(tmp_path: Path, inventory_run: tuple[Path, Path]) -> None:
    page = tmp_path / "broken.html"
    html = render_page(timeline_from_transcript(inventory_run[1]))
    page.write_text(html.replace("</body>", "<script>noSuchFunction();</script></body>"), encoding="utf-8")
    rendered = open_in_chromium(page, tmp_path / "profile")
    assert "noSuchFunction" in rendered.dom  # the page's own error catcher
    assert any("noSuchFunction" in line for line in rendered.console)


@pytest.mark.integration  # a real Chromium: seconds of CPU each (python -m pytest -m integration)
def test_errors_are_red_and_unfinished_calls_say_so(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls:\n    - {name: get_flower_inventory, arguments: {city: 广州}}\n"
                      "    - {name: get_flower_inventory, arguments: {city: 北京}}\n- text: 广州没有店。\n", encoding="utf-8")
    db = tmp_path / "logs.db"
    completed = toolrun_in_process("recipe", str(INVENTORY), "--model", f"scripted:{script}", "--logs", str(db))
    assert completed.returncode == 3, completed.stderr  # answered; the recipe's expect wants 玫瑰 and more
    page = invoke("view", "--logs", str(db), "-o", "-")  # no id: the newest run
    assert page.exit_code == 0
    # 广州 is not in the enum: the call never ran, a red mark rather than a bar
    assert page.stdout.count('class="mark error"') == 1 and page.stdout.count('class="bar "') == 1
    assert 'class="call error"' in page.stdout and "error result" in page.stdout
    assert "广州没有店。" in page.stdout and "expect_failed" in page.stdout

    run = json.loads(invoke("logs", "show", "1", "--logs", str(db), "--json").stdout)
    run["turns"][0]["tool_calls"][1].update(result=None, ended_at=None, duration_ms=None, is_error=None)
    run.update(final=None, error=None, status="unfinished")
    html = render_page({**run, "estimated": False})
    assert html.count('class="bar unfinished"') == 1 and "(no result: the call did not finish)" in html
    assert "No answer: the run did not finish." in html


BARRIER_TOOLS = """\
tools:
  - name: read_stock
    description: >-
      Returns the stock of one city's shop, slowly. Use it to read stock; call it once per
      city. Do not use it to change anything.
    parameters: {type: object, properties: {city: {type: string, description: City}}, required: [city]}
    annotations: {read_only: true}
    backend: {python: "shop.py:read_stock"}
  - name: close_books
    description: >-
      Closes the day's books for every shop; nothing may read stock meanwhile. Use it once at
      the end of the day. Do not use it to read stock.
    parameters: {type: object, properties: {}}
    sequential: true
    annotations: {read_only: false, destructive: false, idempotent: true}
    backend: {python: "shop.py:close_books"}
"""


def test_a_sequential_barrier_is_a_bar_no_other_bar_overlaps(tmp_path: Path) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "shop.yaml").write_text(BARRIER_TOOLS, encoding="utf-8")
    (tools / "shop.py").write_text("import time\n\ndef read_stock(city):\n    time.sleep(0.05)\n    return city\n\n"
                                   "def close_books():\n    time.sleep(0.05)\n    return 'closed'\n", encoding="utf-8")
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls:\n    - {name: read_stock, arguments: {city: 北京}}\n"
                      "    - {name: read_stock, arguments: {city: 上海}}\n    - {name: close_books, arguments: {}}\n"
                      "    - {name: read_stock, arguments: {city: 深圳}}\n- text: done\n", encoding="utf-8")
    db = tmp_path / "logs.db"
    completed = toolrun_in_process("ask", "close the day", "--model", f"scripted:{script}", "--tools-dir", str(tools),
                        "--logs", str(db), "--yes", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    page = invoke("view", "--logs", str(db), "-o", "-").stdout
    first = bars(turn_section(page, 1))
    beijing, shanghai, barrier, shenzhen = first
    assert beijing[0] < shanghai[1] and shanghai[0] < beijing[1]  # the two reads before it ran together
    for other in (beijing, shanghai, shenzhen):
        assert other[1] <= barrier[0] or barrier[1] <= other[0], (barrier, other)  # the barrier ran alone
    assert shenzhen[0] >= barrier[1]


def test_a_transcript_without_times_is_drawn_with_estimated_times(tmp_path: Path,
                                                                  inventory_run: tuple[Path, Path]) -> None:
    old = tmp_path / "old.jsonl"
    lines = [json.loads(line) for line in inventory_run[1].read_text(encoding="utf-8").splitlines()]
    for event in lines:
        for key in ("at", "started_at", "ended_at"):
            event.pop(key, None)
    old.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in lines), encoding="utf-8")
    run = timeline_from_transcript(old)
    assert run["estimated"] and [len(t["tool_calls"]) for t in run["turns"]] == [3, 0]
    assert "times estimated" in render_page(run)


def test_view_says_what_is_wrong(tmp_path: Path) -> None:
    missing = invoke("view", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2 and "no such transcript file, and not a run id" in missing.stderr
    not_jsonl = tmp_path / "x.jsonl"
    not_jsonl.write_text("hello\n", encoding="utf-8")
    bad = invoke("view", str(not_jsonl))
    assert bad.exit_code == 2 and f"{not_jsonl}:1: not a JSON line" in bad.stderr
    db = tmp_path / "logs.db"
    assert toolrun_in_process("recipe", str(INVENTORY), "--logs", str(db), env=clean_env()).returncode == 0
    assert invoke("view", "7", "--logs", str(db)).exit_code == 2


def test_a_hand_edited_transcript_of_the_wrong_types_is_bad_input_naming_each_line_and_field(
        tmp_path: Path, inventory_run: tuple[Path, Path]) -> None:
    events = [json.loads(line) for line in inventory_run[1].read_text(encoding="utf-8").splitlines()]
    responses = [n for n, event in enumerate(events) if event["event"] == "model_response"]
    calls = [n for n, event in enumerate(events) if event["event"] == "tool_call"]
    events[responses[1]]["text"] = 42
    events[responses[0]]["tool_calls"] = {"id": "call_1"}
    events[calls[0]]["turn"] = '1"><script>alert(1)</script>'  # drawn into an id attribute
    events[calls[1]]["started_at"] = "yesterday"
    events[calls[2]]["duration_ms"] = float("nan")
    events[-1]["turns"] = [{"usage": {"input_tokens": "95"}}]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(event, ensure_ascii=False) + "\n" for event in events), encoding="utf-8")
    result = invoke("view", str(edited), "-o", str(tmp_path / "page.html"))
    assert result.exit_code == 2 and "internal error" not in result.stderr, result.stderr
    with edited.open("a", encoding="utf-8") as file:
        file.write("{oops\n")  # a line that is not JSON hides none of the others
    result = invoke("view", str(edited), "-o", str(tmp_path / "page.html"))
    line = {n: n + 1 for n in range(len(events))}
    for expected in (f"{edited}:{line[responses[1]]}: model_response event: \"text\" is the number 42, where a "
                     "transcript has a text",
                     f"{edited}:{line[responses[0]]}: model_response event: \"tool_calls\" is an object, where a "
                     "transcript has a list of calls",
                     f"{edited}:{line[calls[0]]}: tool_call event: \"turn\" is a text",
                     f"{edited}:{line[calls[1]]}: tool_call event: \"started_at\" is a text, where a transcript has "
                     "a time in seconds since 1970",
                     f"{edited}:{line[calls[2]]}: tool_call event: \"duration_ms\" is the number nan",
                     f"{edited}:{len(events)}: run_end event: \"turns[0].usage.input_tokens\" is a text",
                     f"{edited}:{len(events) + 1}: not a JSON line"):
        assert expected in result.stderr, result.stderr
    assert "7 problems." in result.stderr and not (tmp_path / "page.html").exists()


def test_a_call_stuck_when_the_run_stopped_is_the_long_bar_not_a_stub() -> None:
    """Ctrl-C while a slow call ran: its bar runs to the run's end; a killed run (no end): to the last time known."""
    def call(name: str, started: float, ended: float | None) -> dict:
        return {"id": name, "name": name, "arguments": {}, "result": None if ended is None else "ok",
                "is_error": None if ended is None else False, "started_at": started, "ended_at": ended,
                "duration_ms": None if ended is None else round((ended - started) * 1000)}

    turn = {"turn": 1, "stop_reason": "tool_calls", "text": None, "usage": {}, "requested_at": 99.9,
            "answered_at": 100.0, "ended_at": None,
            "tool_calls": [call("slow_report", 100.0, None), call("get_stock", 100.1, 100.4)]}
    run = {"status": "interrupted", "started_at": 99.9, "ended_at": 102.0, "turns": [turn], "estimated": False}
    stuck, quick = bars(turn_section(render_page(run), 1))
    assert stuck == (0.0, 2000.0) and quick == (100.0, 400.0)
    assert 'class="bar unfinished"' in render_page(run) and "did not finish" in render_page(run)
    killed = {**run, "status": "unfinished", "ended_at": None}
    stuck, quick = bars(turn_section(render_page(killed), 1))
    assert stuck == (0.0, 400.0) and quick == (100.0, 400.0)


def test_an_interrupted_transcript_counts_the_requests_and_tokens_it_saw(tmp_path: Path,
                                                                       inventory_run: tuple[Path, Path]) -> None:
    lines = inventory_run[1].read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[-1])["event"] == "run_end"
    stopped = tmp_path / "stopped.jsonl"
    stopped.write_text("\n".join([*lines[:-1], json.dumps({"event": "interrupted", "at": json.loads(lines[-2])["at"],
                                                           "message": "the run was interrupted (Ctrl-C)"})]) + "\n",
                       encoding="utf-8")
    run = timeline_from_transcript(stopped)
    assert run["status"] == "interrupted" and run["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    assert "330 in / 157 out tokens" in render_page(run) and "2 model requests" in render_page(run)
    assert timeline_from_transcript(inventory_run[1])["usage"] == {"input_tokens": 330, "output_tokens": 157,
                                                                   "requests": 2}


def echo_tool_folder(tmp_path: Path) -> Path:
    """A tools folder with one shell tool, echo_text, that prints its text back."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "echo.yaml").write_text(
        "tools:\n  - name: echo_text\n    description: Echoes its text back; for tests only.\n"
        "    parameters: {type: object, properties: {text: {type: string}}}\n"
        "    backend: {shell: {argv: [echo, '{{ text }}']}}\n", encoding="utf-8")
    return tools


def test_control_characters_a_tool_and_the_model_sent_are_shown_not_sent(tmp_path: Path) -> None:
    """ESC and BEL from a tool or a model are escapes on the page: `-o -` on a terminal cannot retitle or clear it."""
    tools = echo_tool_folder(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text('- tool_calls:\n    - {name: echo_text, arguments: {text: "a\\e]0;owned\\a<b>b"}}\n'
                      '- text: "done \\e[2J<i>x</i>"\n', encoding="utf-8")
    db = tmp_path / "logs.db"
    ran = invoke("ask", "hi", "--model", f"scripted:{script}", "--tools-dir", str(tools), "--logs", str(db))
    assert ran.exit_code == 0, ran.stderr
    page = invoke("view", "--logs", str(db), "-o", "-")
    assert page.exit_code == 0, page.stderr
    assert "\x1b" not in page.stdout and "\x07" not in page.stdout
    assert "a\\x1b]0;owned\\x07&lt;b&gt;b" in page.stdout and "done \\x1b[2J&lt;i&gt;x&lt;/i&gt;" in page.stdout


def test_a_transcript_whose_tool_printed_line_separators_and_terminal_controls_is_drawn(tmp_path: Path) -> None:
    """A tool's output with U+2028, NEL or CSI: the transcript stays one event a line, safe to tail on a terminal."""
    tools = echo_tool_folder(tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text('- tool_calls:\n    - {name: echo_text, arguments: {text: "a\\u2028b\\x85c\\x9b31md\\u2029e"}}\n'
                      "- text: done\n", encoding="utf-8")
    transcript = tmp_path / "run.jsonl"
    ran = invoke("ask", "hi", "--model", f"scripted:{script}", "--tools-dir", str(tools), "--no-log",
                 "--transcript", str(transcript))
    assert ran.exit_code == 0, ran.stderr
    text = transcript.read_text(encoding="utf-8")
    assert not set(text) & {"\u2028", "\u2029", "\x85", "\x9b"}  # written as \u escapes, as the audit log does
    assert all(json.loads(line) for line in text.split("\n") if line)
    drawn = invoke("view", str(transcript), "-o", str(tmp_path / "page.html"))
    assert drawn.exit_code == 0, drawn.stderr  # was "run.jsonl:4: not a JSON line"


def test_a_transcript_whose_notices_have_a_null_message_is_drawn(tmp_path: Path, inventory_run: tuple[Path, Path]) -> None:
    # A missing or null field is fine in a transcript; a null notice message ended in an internal error.
    lines = inventory_run[1].read_text(encoding="utf-8").splitlines()
    lines[1:1] = [json.dumps({"event": "notice", "at": None, "message": None}),
                  json.dumps({"event": "divergence", "message": None})]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = invoke("view", str(edited), "-o", str(tmp_path / "page.html"))
    assert result.exit_code == 0, result.stderr
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert '<div class="notice">notice: </div>' in page and '<div class="notice">divergence: </div>' in page
