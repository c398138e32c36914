"""``toolrun view`` and ``logs show``: a call that never ran is a mark, the wait for approval is drawn apart
from the run, and the failed ``expect`` checks are on the page — from a real run's log, in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import INVENTORY, invoke, toolrun_in_process
from tests.view.test_view import open_in_chromium, turn_section
from toolrun.loop.execution import DENIED_MESSAGE, NO_APPROVER_MESSAGE
from toolrun.view import render_page
from toolrun.view.call_outcome import NEVER_RAN_PREFIXES


def _logged_run(tmp_path: Path) -> tuple[Path, dict]:
    """The inventory recipe with a scripted model: one call the schema refuses (纽约), one that runs; no 玫瑰 in the answer."""
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls:\n    - {name: get_flower_inventory, arguments: {city: 纽约}}\n"
                      "    - {name: get_flower_inventory, arguments: {city: 北京}}\n- text: 纽约没有店。\n",
                      encoding="utf-8")
    db = tmp_path / "logs.db"
    completed = toolrun_in_process("recipe", str(INVENTORY), "--model", f"scripted:{script}", "--logs", str(db))
    assert completed.returncode == 3, completed.stderr  # the recipe's expect wants 玫瑰 and more
    return db, json.loads(invoke("logs", "show", "1", "--logs", str(db), "--json").stdout)


@pytest.mark.integration  # a real Chromium: seconds of CPU each (python -m pytest -m integration)
def test_a_refused_call_is_a_mark_a_wait_is_apart_and_expect_failures_show(tmp_path: Path) -> None:
    db, run = _logged_run(tmp_path)
    assert run["expect_failures"] and "玫瑰" in " ".join(run["expect_failures"])
    shown = invoke("logs", "show", "1", "--logs", str(db)).stdout
    assert "never ran" in shown and "expect failed: " in shown

    # As if the person at the terminal took 5 s to approve the call that ran: it started 5 s earlier.
    ran = next(call for call in run["turns"][0]["tool_calls"] if call["result"] and not call["is_error"])
    ran["started_at"] -= 5.0
    page = tmp_path / "run.html"
    page.write_text(render_page({**run, "estimated": False}), encoding="utf-8")
    rendered = open_in_chromium(page, tmp_path / "profile", screenshot=tmp_path / "run.png")
    assert rendered.console == [] and 'data-ready="1"' in rendered.dom
    turn = turn_section(rendered.dom, 1)
    assert turn.count('class="mark error"') == 1 and "never ran" in turn and 'class="bar error"' not in turn
    waits = re.findall(r'<span class="wait" style="left:([\d.]+)%;width:([\d.]+)%"', turn)
    assert len(waits) == 1, turn  # the refused call waited for nobody
    wait = re.search(r'<span class="wait" style="left:([\d.]+)%;width:([\d.]+)%"', turn)
    bar = re.search(r'<button class="bar " data-call="[^"]+" data-start-ms="([\d.]+)" data-end-ms="([\d.]+)" '
                    r'style="left:([\d.]+)%;width:([\d.]+)%"', turn)
    assert wait and bar, turn
    # The bar is the call's own run (its label's milliseconds), after the wait; not the 5 s at the prompt.
    start_ms, end_ms = float(bar.group(1)), float(bar.group(2))
    assert abs((end_ms - start_ms) - ran["duration_ms"]) <= 1
    assert float(wait.group(2)) > 90 and float(bar.group(3)) >= float(wait.group(2)) - 0.81  # a bar is at least 0.8 % wide
    assert 'id="expect-failures"' in rendered.dom and "玫瑰" in rendered.dom.split('id="expect-failures"')[1]
    assert (tmp_path / "run.png").stat().st_size > 10_000


def test_the_page_knows_every_refusal_the_loop_words() -> None:
    assert DENIED_MESSAGE.startswith(NEVER_RAN_PREFIXES) and NO_APPROVER_MESSAGE.startswith(NEVER_RAN_PREFIXES)
