"""The run log: real runs of the real command write a real SQLite file; ``toolrun logs`` reads it.

Every run here logs to a database in tmp_path (--logs or TOOLRUN_LOGS); the session-wide
TOOLRUN_LOGS of conftest.py keeps every other test away from the real home too.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import INVENTORY, INVENTORY_CASSETTE, TOOLRUN, clean_env, invoke, toolrun_in_process
from toolrun.core.errors import UserError
from toolrun.runlog import RunLog, default_log_path
from toolrun.runlog.schema import SCHEMA_VERSION
from toolrun.runlog.store import CJK_RANGES, match_query, search_text

SECRET = "s3cr3t-token-NEVER-LOGGED-42"

TOOLS_YAML = """\
tools:
  - name: get_stock
    description: >-
      Returns the flower stock of one city's shop as "flower: count" pairs. Use it when asked
      what a shop has; call it once per city. Do not use it for prices.
    parameters:
      type: object
      properties:
        city: {type: string, description: City of the shop}
      required: [city]
    annotations: {read_only: true}
    backend: {python: "shop.py:get_stock"}
  - name: slow_report
    description: >-
      Writes the slow monthly report for one city and returns its summary line. Use it only
      when a report is asked for; it takes a long time. Do not use it for stock questions.
    parameters:
      type: object
      properties:
        city: {type: string, description: City of the report}
      required: [city]
    annotations: {read_only: true}
    timeout: 120s
    backend: {python: "shop.py:slow_report"}
  - name: whoami
    description: >-
      Returns the token the shop API was called with, for checking the setup. Use it only
      when asked about the credentials in use. Do not use it for anything else.
    parameters: {type: object, properties: {}}
    annotations: {read_only: true}
    backend:
      shell:
        argv: [printenv, SHOP_TOKEN]
        env: {SHOP_TOKEN: "${env:SHOP_TOKEN}"}
"""

SHOP_PY = """\
import time

def get_stock(city):
    return {"北京": "玫瑰: 100", "上海": "百合: 80"}.get(city, "无")

def slow_report(city):
    time.sleep(60)
    return "done"
"""


def shop(tmp_path: Path, script: str, name: str = "shop") -> Path:
    """A tools directory, a scripted model and a recipe that plays it; returns the recipe."""
    tools = tmp_path / "tools.d"
    tools.mkdir(exist_ok=True)
    (tools / "shop.yaml").write_text(TOOLS_YAML, encoding="utf-8")
    (tools / "shop.py").write_text(SHOP_PY, encoding="utf-8")
    (tmp_path / f"{name}.script.yaml").write_text(textwrap.dedent(script), encoding="utf-8")
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(textwrap.dedent(f"""\
        name: {name}
        model: scripted:{name}.script.yaml
        messages: [{{user: 北京和上海有什么花?}}]
    """), encoding="utf-8")
    return recipe


TWO_CITIES = """\
    - tool_calls:
        - {name: get_stock, arguments: {city: 北京}}
        - {name: get_stock, arguments: {city: 上海}}
    - text: 北京有玫瑰，上海有百合。
"""


def logs_json(db: Path, *args: str) -> list | dict:
    result = invoke("logs", *args, "--logs", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_three_runs_listed_newest_first_shown_and_searched(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    env = clean_env(TOOLRUN_LOGS=str(db))
    assert toolrun_in_process("recipe", str(INVENTORY), env=env).returncode == 0
    assert toolrun_in_process("recipe", str(INVENTORY), "--max-turns", "1", env=env).returncode == 1  # fails: turn limit
    assert toolrun_in_process("recipe", str(shop(tmp_path, TWO_CITIES)), env=env).returncode == 0

    runs = logs_json(db)
    assert [(r["id"], r["recipe"], r["status"]) for r in runs] == [(3, "shop", "ok"), (2, "inventory", "failed"),
                                                                  (1, "inventory", "ok")]
    assert runs[2]["mode"] == "replay" and runs[2]["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    assert runs[2]["vars"] == {"question": "北京、上海和深圳的鲜花库存是多少?"}
    assert [r["id"] for r in logs_json(db, "--errors")] == [2]
    assert [r["id"] for r in logs_json(db, "--recipe", "inventory", "-n", "1")] == [2]
    assert [r["id"] for r in logs_json(db, "--tool", "get_stock")] == [3]

    table = invoke("logs", "--logs", str(db))
    assert table.stdout.splitlines()[1].split()[:3] == ["3", *table.stdout.splitlines()[1].split()[1:3]]
    assert "failed" in table.stdout.splitlines()[2]

    shown = invoke("logs", "--logs", str(db), "show", "1")  # the group's --logs counts for its commands
    assert shown.exit_code == 0, shown.stderr
    for city, stock in [("北京", "玫瑰: 100, 郁金香: 150"), ("上海", "百合: 80, 康乃馨: 120"), ("深圳", "向日葵: 200, 玉兰: 90")]:
        assert f'→ get_flower_inventory {{"city": "{city}"}}' in shown.stdout
        assert f"← {stock}" in shown.stdout
    assert "turn 1 · tool_calls · 95 in / 67 out tokens" in shown.stdout
    document = logs_json(db, "show", "1")
    calls = document["turns"][0]["tool_calls"]
    assert len(calls) == 3 and all(c["started_at"] <= c["ended_at"] for c in calls)
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "tool", "assistant"]

    found = invoke("logs", "search", "玫瑰", "--logs", str(db), "--json")
    assert {hit["id"] for hit in json.loads(found.stdout)} == {1, 2, 3}
    assert [hit["id"] for hit in logs_json(db, "search", "百合", "上海")] == [3, 2, 1]
    assert logs_json(db, "search", "郁金香") and [h["id"] for h in logs_json(db, "search", "郁金香")] == [2, 1]
    assert logs_json(db, "search", "nothing-like-this") == []
    assert invoke("logs", "show", "99", "--logs", str(db)).exit_code == 2
    for before in (["--json"], ["-n", "1", "--errors"]):  # printed text, or listed every run: as if not typed
        misplaced = invoke("logs", "--logs", str(db), *before, "show", "1")
        assert misplaced.exit_code == 2 and f"{before[0]}" in misplaced.stderr and "before 'show'" in misplaced.stderr
    assert "toolrun logs show --json" in invoke("logs", "--logs", str(db), "--json", "show", "1").stderr
    unknown = " ".join(invoke("logs", "--logs", str(db), "-n", "1", "--errors", "show", "1").stderr.split())
    assert "'show' has no -n, --errors" in unknown and "toolrun logs show -n" not in unknown, unknown  # not a hint that fails


def test_a_killed_run_keeps_its_finished_turns(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    recipe = shop(tmp_path, """\
        - tool_calls: [{name: get_stock, arguments: {city: 北京}}]
        - tool_calls: [{name: slow_report, arguments: {city: 北京}}]
        - text: never reached
    """)
    process = subprocess.Popen([str(TOOLRUN), "recipe", str(recipe), "--logs", str(db)], env=clean_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the slow call has started: turn 1 is done
            if _slow_call_started(db):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the slow call never started")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
    run = logs_json(db, "show", "1")
    assert run["status"] == "unfinished" and run["ended_at"] is None
    first, second = run["turns"]
    assert first["ended_at"] is not None
    assert [(c["name"], c["result"], c["is_error"]) for c in first["tool_calls"]] == [("get_stock", "玫瑰: 100", False)]
    assert [(c["name"], c["result"]) for c in second["tool_calls"]] == [("slow_report", None)]
    # Every message so far is kept too: the question, the first answer, its results and the second answer.
    assert [m["role"] for m in run["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert run["messages"][0]["parts"] == [{"type": "text", "text": "北京和上海有什么花?"}]
    assert run["messages"][2]["parts"][0]["content"] == "玫瑰: 100"
    assert "did not finish" in invoke("logs", "show", "1", "--logs", str(db)).stdout
    assert [(r["id"], r["status"]) for r in logs_json(db, "--errors")] == [(1, "unfinished")]  # something went wrong


def _slow_call_started(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:  # never creates the file
            return connection.execute("SELECT 1 FROM tool_calls WHERE name = 'slow_report'").fetchone() is not None
    except sqlite3.OperationalError:  # not created yet, or still being migrated
        return False


def test_two_runs_at_once_both_land_whole(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    many = "- tool_calls:\n" + "".join(f"    - {{name: get_stock, arguments: {{city: 城{i}}}}}\n" for i in range(40))
    script = many * 3 + "- text: 都查完了。\n"
    recipes = [shop(tmp_path / name, script, name) for name in ("left", "right") if (tmp_path / name).mkdir() is None]
    processes = [subprocess.Popen([str(TOOLRUN), "recipe", str(r), "--logs", str(db)], env=clean_env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for r in recipes]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    runs = logs_json(db)
    assert sorted(r["recipe"] for r in runs) == ["left", "right"]
    for run in runs:
        assert (run["status"], run["turns"], run["calls"]) == ("ok", 4, 120)


def test_a_strict_replay_failed_after_its_answer_is_a_failed_run_in_the_log(tmp_path: Path) -> None:
    """The recording holds one exchange more than the run asked for: found after the answer, and
    --strict fails the run — with its document and a failed row, not a row left running."""
    db, cassette = tmp_path / "logs.db", tmp_path / "longer.cassette.json"
    recorded = json.loads(INVENTORY_CASSETTE.read_text(encoding="utf-8"))
    recorded["exchanges"].append(recorded["exchanges"][-1])
    cassette.write_text(json.dumps(recorded, ensure_ascii=False), encoding="utf-8")
    completed = toolrun_in_process("recipe", str(INVENTORY), "--replay", str(cassette), "--strict", "--json", "--logs", str(db))
    assert completed.returncode == 1, completed.stderr
    assert "Traceback" not in completed.stderr and "error: the run failed: strict:" in completed.stderr
    document = json.loads(completed.stdout)
    assert document["stop_reason"] == "error" and "the recording holds 3" in document["divergences"][-1]["message"]
    run = logs_json(db, "show", "1")
    assert (run["status"], run["stop_reason"]) == ("failed", "error") and run["ended_at"] is not None
    assert run["error"].startswith("strict: the run diverged") and len(run["turns"]) == 2
    assert [notice["kind"] for notice in run["notices"]] == ["divergence"]


def test_a_batch_counts_its_runs_by_their_latest_attempt_and_every_attempt_apart(tmp_path: Path) -> None:
    from toolrun.batch.logged_lines import log_result_line
    from toolrun.core.messages import Usage
    from toolrun.loop.results import RunResult
    from toolrun.runlog import RunLogWriter

    log = RunLog.open(tmp_path / "logs.db")

    def attempt(key: str, stop_reason: str | None, tokens: int = 1) -> None:
        """One attempt of run ``key`` of batch-1, ended with ``stop_reason`` (None: still running, in this process)."""
        writer = RunLogWriter(log, command="batch", session="batch-1", run_key=key)
        writer.on_run_start(recipe="shop", model="scripted:s", mode="scripted")
        if stop_reason is not None:
            writer.on_run_end(RunResult("ok" if stop_reason == "stop" else None, stop_reason, Usage(tokens, tokens, 1),
                                        [], []))

    try:
        attempt("a", "error")  # failed, then retried on resume: ok
        attempt("a", "stop")
        attempt("b", None)
        log.connection.execute("UPDATE runs SET status = 'interrupted' WHERE id = 3")  # as Ctrl-C leaves it
        attempt("b", "stop")
        attempt("c", "error")  # failed, kept (--no-retry-failed)
        attempt("d", None)  # in progress
        line = {"key": "e", "batch": "batch-1", "model": "m", "vars": {}, "status": "failed", "stop_reason": "error",
                "final": None, "error": "boom", "usage": {"input_tokens": 5, "output_tokens": 5}, "tool_calls": []}
        assert log_result_line(log, line, recipe="shop") is None  # a run on Ray, failed, then its retry: ok
        assert log_result_line(log, {**line, "status": "ok", "final": "好", "error": None}, recipe="shop") is None
        (batch,) = log.list_batches()
        assert {key: batch[key] for key in ("runs", "ok", "expect_failed", "running", "failed_or_unfinished",
                                            "attempts")} == {"runs": 5, "ok": 3, "expect_failed": 0, "running": 1,
                                                             "failed_or_unfinished": 1, "attempts": 8}
        assert batch["usage"] == {"input_tokens": 14, "output_tokens": 14}  # every attempt's tokens were spent
        gone = subprocess.Popen(["true"])
        gone.wait()
        log.connection.execute("UPDATE runs SET pid = ? WHERE run_key = 'd'", (gone.pid,))  # its process was killed
        (batch,) = log.list_batches()
        assert (batch["running"], batch["failed_or_unfinished"]) == (0, 2)
    finally:
        log.close()


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    recipe = shop(tmp_path, "- tool_calls: [{name: whoami, arguments: {}}]\n- text: done\n")
    completed = toolrun_in_process("recipe", str(recipe), "--logs", str(db), env=clean_env(SHOP_TOKEN=SECRET))
    assert completed.returncode == 0, completed.stderr
    run = logs_json(db, "show", "1")
    assert run["turns"][0]["tool_calls"][0]["result"] == "***"
    for path in tmp_path.glob("logs.db*"):  # the database, its WAL and shared memory
        assert SECRET.encode() not in path.read_bytes()


def test_no_log_and_a_missing_folder(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    env = clean_env(TOOLRUN_LOGS=str(db))
    assert toolrun_in_process("recipe", str(INVENTORY), "--no-log", env=env).returncode == 0
    assert not db.exists()
    completed = toolrun_in_process("recipe", str(INVENTORY), "--logs", str(tmp_path / "nope" / "logs.db"))
    assert completed.returncode == 2 and "--logs: the folder" in completed.stderr
    missing = invoke("logs", "--logs", str(db))
    assert missing.exit_code == 2 and "no run log here yet" in missing.stderr


def test_default_location_and_schema_version(tmp_path: Path) -> None:
    assert default_log_path({"TOOLRUN_LOGS": "/x/l.db", "XDG_DATA_HOME": "/d"}) == Path("/x/l.db")
    assert default_log_path({"XDG_DATA_HOME": "/d"}) == Path("/d/toolrun/logs.db")
    assert default_log_path({}) == Path.home() / ".local" / "share" / "toolrun" / "logs.db"
    log = RunLog.open(tmp_path / "a" / "logs.db")
    assert log.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert log.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    log.close()
    RunLog.open(tmp_path / "a" / "logs.db").close()  # opening again migrates nothing and loses nothing
    with sqlite3.connect(tmp_path / "newer.db") as connection:
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="schema version"):
        RunLog.open(tmp_path / "newer.db")


def test_cjk_is_indexed_a_character_a_token() -> None:
    assert search_text("北京的玫瑰: 100").split() == ["北", "京", "的", "玫", "瑰", ":", "100"]
    assert match_query('玫瑰 "rose"') == '"玫 瑰" AND """rose"""'


def test_every_character_of_the_cjk_ranges_is_spaced_apart_and_no_other() -> None:
    """search_text matches UTF-8 bytes: checked against CJK_RANGES for every code point, lone surrogates too."""
    cjk_codes = frozenset(code for low, high in CJK_RANGES for code in range(low, high + 1))  # a set: 1.1M lookups

    every = "".join(chr(code) for code in range(0x110000))
    expected = "".join(f" {chr(code)} " if code in cjk_codes else chr(code) for code in range(0x110000))
    assert search_text(every) == expected
    assert search_text("x\ud800北") == "x\ud800 北 "  # a lone surrogate (as JSON may carry) stays as it was
    assert search_text("plain ascii") == "plain ascii"


def test_an_older_database_is_migrated_when_opened_and_keeps_its_runs(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The mechanism a future schema change uses: a database at the current version, then one migration more."""
    from toolrun.runlog import schema

    db = tmp_path / "logs.db"
    assert toolrun_in_process("recipe", str(INVENTORY), "--logs", str(db)).returncode == 0
    later = [*schema.MIGRATIONS, ["ALTER TABLE runs ADD COLUMN label TEXT", "UPDATE runs SET label = 'migrated'"]]
    monkeypatch.setattr(schema, "MIGRATIONS", later)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(later))
    log = RunLog.open(db)
    try:
        assert log.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert [tuple(row) for row in log.connection.execute("SELECT id, recipe, label FROM runs")] == \
            [(1, "inventory", "migrated")]
        assert len(log.get_run(1)["turns"]) == 2  # type: ignore[index]
    finally:
        log.close()
    RunLog.open(db).close()  # at the new version: nothing runs twice


def test_a_full_log_never_stops_the_run_and_the_warning_says_why(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from toolrun.cli.recipe_play import play_recipe
    from toolrun.sessions.run_options import RunOptions

    log = RunLog.open(tmp_path / "logs.db")
    pages = log.connection.execute("PRAGMA page_count").fetchone()[0]
    log.connection.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    long_question = "北京、上海和深圳的鲜花库存是多少?" + "。" * 100_000  # needs pages the file may not grow
    assert play_recipe(INVENTORY, RunOptions(vars={"question": long_question}), run_log=log) == 0
    err = capsys.readouterr().err
    assert "stopped accepting writes (database or disk is full); this run is incomplete there" in err
    assert err.strip().splitlines()[-1].startswith("2 turns · 3 tool calls")


def test_opening_an_existing_log_writes_nothing(tmp_path: Path) -> None:
    # Setting auto_vacuum again on a log with tables changes nothing but wrote a transaction every
    # open, which the close then checkpointed with three fdatasyncs: even `toolrun logs list` paid.
    db = tmp_path / "logs.db"
    RunLog.open(db).close()
    log = RunLog.open(db)
    try:
        wal = Path(f"{db}-wal")
        assert not wal.exists() or wal.stat().st_size == 0
        assert log.connection.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # a new log's, kept
    finally:
        log.close()
