"""``toolrun batch`` end to end: real tools, scripted models, a loopback provider that answers 429,
and a real subprocess killed with SIGKILL then resumed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.batch_world import CITIES, SCRIPT_YAML, make_world, read_lines, write_rows
from tests.loopback import Recorded, Reply
from toolrun.batch.rate_limit import MAX_PAUSE_S, RateLimiter, provider_pause
from toolrun.batch.results_file import ResultsFile, read_results
from toolrun.batch.run import ProviderTransports
from toolrun.batch.summary import wilson_interval
from toolrun.cli import main
from toolrun.core.errors import PROBLEMS_LISTED
from toolrun.providers.transport import HttpxTransport
from toolrun.runlog import RunLog
from toolrun.sessions.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
FAKE_KEY = "sk-test-NEVER-IN-A-FILE-0123456789"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL")) and k != "OLLAMA_HOST"}
    env.update(extra)
    return env


def invoke(*args: str, env: dict[str, str] | None = None):
    wanted = env or clean_env()
    environment: dict[str, str | None] = {name: None for name in os.environ if name not in wanted}
    return CliRunner().invoke(main, list(args), env={**environment, **wanted}, catch_exceptions=False)


def batch(folder: Path, *args: str, env: dict[str, str] | None = None):
    """``toolrun batch shop.yaml --inputs rows.jsonl --out out.jsonl --no-log ARGS`` in ``folder``."""
    return invoke("batch", str(folder / "shop.yaml"), "--inputs", str(folder / "rows.jsonl"),
                  "--out", str(folder / "out.jsonl"), *args, env=env)


# ----------------------------------------------------------------- a whole batch, offline


def test_thirty_rows_give_thirty_lines_and_a_summary_that_counts_them(tmp_path: Path):
    make_world(tmp_path)
    rows = write_rows(tmp_path / "rows.jsonl", 30)
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--json", "--no-log")
    assert result.exit_code == 0, result.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert len(lines) == 30
    assert sorted(line["row"] for line in lines) == list(range(30))
    for line in lines:
        assert line["vars"] == rows[line["row"]]
        assert line["status"] == "ok" and line["final"] == "北京有玫瑰" and line["stop_reason"] == "stop"
        assert [call["name"] for call in line["tool_calls"]] == ["get_flower_inventory"]
        assert line["tool_calls"][0]["result"] == "玫瑰: 100"
        assert line["expect"] == {"passed": True, "failures": []}
        assert line["usage"]["requests"] == 2 and line["error"] is None
    summary = json.loads(result.stdout)
    assert summary["runs"] == summary["total"] == 30 and summary["failed"] == 0
    (model,) = summary["models"]
    assert model["runs"] == 30 and model["passed"] == 30 and model["tool_calls"] == 30 and model["tool_errors"] == 0
    assert model["pass_rate"] == 1.0 and model["pass_rate_ci"][0] < 1.0 == model["pass_rate_ci"][1]
    assert "30/30 passed" in result.stderr


def test_runs_that_replay_a_recording_say_so_and_where_their_row_departed_from_it(tmp_path: Path):
    # No key: every run of the inventory recipe replays the recording beside it, whatever its row asks.
    inventory = Path(__file__).resolve().parents[2] / "recipes" / "inventory.yaml"
    rows = tmp_path / "rows.csv"
    rows.write_text("question\n北京、上海和深圳的鲜花库存是多少?\nWhat is the weather in Paris?\n", encoding="utf-8")
    result = invoke("batch", str(inventory), "--inputs", str(rows), "--out", str(tmp_path / "out.jsonl"), "--json",
                    "--no-log")
    assert result.exit_code == 0, result.stderr
    lines = sorted(read_lines(tmp_path / "out.jsonl"), key=lambda line: line["row"])
    assert [(line["mode"], len(line["divergences"])) for line in lines] == [("replay", 0), ("replay", 1)]
    assert "now 'What is the weather in Paris?'" in lines[1]["divergences"][0]
    (model,) = json.loads(result.stdout)["models"]
    assert (model["replayed"], model["diverged"]) == (2, 1)
    assert "2 of 2 runs replayed a recording (no live model), 1 departed from it" in result.stderr


def test_the_shipped_offline_batch_example_runs(tmp_path: Path):
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    result = invoke("batch", str(recipes / "inventory.yaml"), "--inputs", str(recipes / "questions.jsonl"),
                    "--model", f"scripted:{recipes / 'inventory.script.yaml'}", "--out", str(tmp_path / "out.jsonl"),
                    "--no-log")
    assert result.exit_code == 0, result.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert len(lines) == 3 and all(line["status"] == "ok" and len(line["tool_calls"]) == 3 for line in lines)


def test_each_model_and_repeat_is_a_run_and_the_pass_rate_is_per_model(tmp_path: Path):
    make_world(tmp_path, must_contain="百合")  # the scripted answer names 玫瑰 only: expect fails
    write_rows(tmp_path / "rows.jsonl", 3)
    other = tmp_path / "other.yaml"
    other.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 上海}}]\n- text: 上海有百合\n",
                     encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--model", f"scripted:{other}",
                   "--repeat", "2", "--json", "--no-log", "--min-pass-rate", "0.4")
    assert result.exit_code == 0, result.stderr  # 6 of 12 pass: above 0.4
    summary = json.loads(result.stdout)
    assert summary["runs"] == 12
    by_model = {model["model"].rsplit("/", 1)[-1]: model for model in summary["models"]}
    assert by_model["script.yaml"]["passed"] == 0 and by_model["script.yaml"]["runs"] == 6
    assert by_model["other.yaml"]["passed"] == 6
    lines = read_lines(tmp_path / "out.jsonl")
    assert sorted({(line["row"], line["model"], line["repeat"]) for line in lines}) == sorted(
        (row, model, repeat) for row in range(3) for model in (f"scripted:{tmp_path / 'script.yaml'}", f"scripted:{other}")
        for repeat in range(2))
    failing = next(line for line in lines if line["model"].endswith("script.yaml"))
    assert failing["status"] == "expect_failed" and failing["expect"]["failures"]
    again = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--model", f"scripted:{other}",
                  "--repeat", "2", "--no-log", "--min-pass-rate", "0.9", "--resume")
    assert again.exit_code == 3, again.stderr  # nothing left to run; the rate is what it was


def test_rows_come_from_csv_and_yaml_too(tmp_path: Path):
    make_world(tmp_path)
    (tmp_path / "rows.csv").write_text("city,tag\n北京,a\n上海,b\n", encoding="utf-8")
    (tmp_path / "rows.yaml").write_text("- {city: 深圳, tag: c}\n", encoding="utf-8")
    script = f"scripted:{tmp_path / 'script.yaml'}"
    for name, count in (("rows.csv", 2), ("rows.yaml", 1)):
        out = tmp_path / f"{name}.out.jsonl"
        result = invoke("batch", str(tmp_path / "shop.yaml"), "--inputs", str(tmp_path / name), "--out", str(out),
                        "--model", script, "--no-log")
        assert result.exit_code == 0, result.stderr
        assert len(read_lines(out)) == count
    assert {line["vars"]["city"] for line in read_lines(tmp_path / "rows.csv.out.jsonl")} == {"北京", "上海"}


def test_an_unknown_field_names_the_row_and_the_field_with_a_guess(tmp_path: Path):
    make_world(tmp_path)
    (tmp_path / "rows.jsonl").write_text('{"city": "北京", "tag": "a"}\n{"citty": "上海"}\n', encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2
    assert "rows.jsonl:2" in result.stderr and "row 2: field 'citty'" in result.stderr
    assert "did you mean 'city'?" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()  # nothing ran


def test_every_problem_of_the_inputs_is_reported_at_once_in_line_order(tmp_path: Path):
    # a line that is not JSON used to hide the unknown fields of the rows after it until the next try
    make_world(tmp_path)
    (tmp_path / "rows.jsonl").write_text('{"city": "北京", "tag": "a"}\n{"citty": "上海"\n[1]\n{"citty": "上海"}\n',
                                         encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2 and not (tmp_path / "out.jsonl").exists()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert [Path(error.split()[1]).name for error in errors] == ["rows.jsonl:2:", "rows.jsonl:3:", "rows.jsonl:4:"]
    assert "not JSON" in errors[0] and "a row is a JSON object" in errors[1]
    assert "row 4: field 'citty'" in errors[2] and "did you mean 'city'?" in errors[2]  # row 4: rows counted as written
    assert "3 problems." in result.stderr


def test_a_file_with_many_problems_lists_the_first_and_counts_the_rest(tmp_path: Path):
    make_world(tmp_path)
    rows = "".join('{"citty": "上海"}\n' if n % 2 else "{not json\n" for n in range(50))
    (tmp_path / "rows.jsonl").write_text(rows, encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == PROBLEMS_LISTED + 1
    assert "rows.jsonl:1: not JSON" in errors[0] and "rows.jsonl:2: row 2: field 'citty'" in errors[1]
    assert errors[-1] == f"error: and {50 - PROBLEMS_LISTED} more problems like these, not listed"
    assert "50 problems." in result.stderr


def test_a_csv_cell_too_long_to_read_is_bad_input_beside_the_other_problems(tmp_path: Path):
    # csv refuses a cell past its field limit: that ended in "internal error ... this is a bug in toolrun", exit 1
    make_world(tmp_path)
    (tmp_path / "rows.csv").write_text('citty\n上海\n"' + "x" * 200_000 + '"\n', encoding="utf-8")
    result = batch(tmp_path, "--inputs", str(tmp_path / "rows.csv"), "--model", f"scripted:{tmp_path / 'script.yaml'}",
                   "--no-log")
    assert result.exit_code == 2 and "internal error" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "rows.csv:2: row 1: field 'citty'" in errors[0]
    assert "rows.csv:3: this row cannot be read as CSV (field larger than field limit" in errors[1], errors
    assert not (tmp_path / "out.jsonl").exists()


def test_a_row_holding_nan_or_infinity_is_named_before_anything_runs(tmp_path: Path):
    # json.loads and YAML take them, but the results file then held NaN, which no strict JSON reader takes
    make_world(tmp_path)
    (tmp_path / "rows.jsonl").write_text('{"city": "北京", "tag": NaN}\n{"city": "上海", "tag": {"n": [1, -Infinity]}}\n',
                                         encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2 and not (tmp_path / "out.jsonl").exists()
    for line in (1, 2):
        assert f"rows.jsonl:{line}: row {line}: field 'tag' holds NaN or Infinity" in result.stderr, result.stderr


def test_a_row_without_a_var_the_recipe_has_no_default_for_is_named_before_anything_runs(tmp_path: Path):
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("vars: {city: 北京, tag: none}", "vars: {tag: none}"),
                      encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"city": "北京"}\n{"tag": "a"}\n{"city": "上海"}\n', encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2
    assert "rows.jsonl:2: row 2: no field 'city'" in result.stderr and "give the row a 'city' field" in result.stderr
    assert "--var" not in result.stderr  # not the advice of a single run
    assert not (tmp_path / "out.jsonl").exists()  # nothing ran


def test_a_byte_order_mark_is_not_part_of_the_first_field_and_other_encodings_are_named(tmp_path: Path):
    make_world(tmp_path)
    script = f"scripted:{tmp_path / 'script.yaml'}"
    bom = "\ufeff".encode()  # what a spreadsheet's "CSV UTF-8" export starts with
    (tmp_path / "bom.csv").write_bytes(bom + "city,tag\n上海,a\n".encode())
    (tmp_path / "bom.jsonl").write_bytes(bom + '{"city": "深圳", "tag": "b"}\n'.encode())
    for name in ("bom.csv", "bom.jsonl"):
        out = tmp_path / f"{name}.out.jsonl"
        result = invoke("batch", str(tmp_path / "shop.yaml"), "--inputs", str(tmp_path / name), "--out", str(out),
                        "--model", script, "--no-log")
        assert result.exit_code == 0, result.stderr
        assert [line["status"] for line in read_lines(out)] == ["ok"]
    (tmp_path / "utf16.jsonl").write_bytes('{"city": "北京"}\n'.encode("utf-16"))
    (tmp_path / "latin1.csv").write_bytes("city,tag\nZürich,a\n".encode("latin-1"))
    for name in ("utf16.jsonl", "latin1.csv"):
        result = invoke("batch", str(tmp_path / "shop.yaml"), "--inputs", str(tmp_path / name), "--out",
                        str(tmp_path / "never.jsonl"), "--model", script, "--no-log")
        assert result.exit_code == 2
        assert f"{name}: not UTF-8 text" in result.stderr and "save the file as UTF-8" in result.stderr
    assert not (tmp_path / "never.jsonl").exists()


def test_a_json_array_of_rows_is_told_to_be_a_yaml_list(tmp_path: Path):
    make_world(tmp_path)
    array = '\n[\n  {"city": "北京", "tag": "a"},\n  {"city": "上海", "tag": "b"}\n]\n'
    (tmp_path / "rows.json").write_text(array, encoding="utf-8")
    script = f"scripted:{tmp_path / 'script.yaml'}"
    result = invoke("batch", str(tmp_path / "shop.yaml"), "--inputs", str(tmp_path / "rows.json"), "--out",
                    str(tmp_path / "out.jsonl"), "--model", script, "--no-log")
    assert result.exit_code == 2
    assert "rows.json:2: the inputs hold one JSON array" in result.stderr and "rename the file to rows.yaml" in result.stderr
    assert result.stderr.count("error:") == 1  # one sentence, not one per line of the array
    (tmp_path / "rows.yaml").write_text(array, encoding="utf-8")  # the advice works
    result = invoke("batch", str(tmp_path / "shop.yaml"), "--inputs", str(tmp_path / "rows.yaml"), "--out",
                    str(tmp_path / "out.jsonl"), "--model", script, "--no-log")
    assert result.exit_code == 0, result.stderr
    assert sorted(line["vars"]["tag"] for line in read_lines(tmp_path / "out.jsonl")) == ["a", "b"]


def test_a_missing_script_is_named_before_the_batch_starts(tmp_path: Path):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 3)
    missing = tmp_path / "no-such-script.yaml"
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--model", f"scripted:{missing}",
                   "--no-log")
    assert result.exit_code == 2
    assert f"{missing}: script file not found" in result.stderr
    assert "1 run" not in result.stderr and "runs," not in result.stderr  # no batch started: no progress line
    assert not (tmp_path / "out.jsonl").exists()  # nothing ran


def test_the_recipes_own_script_is_relative_to_the_recipe_as_for_one_run(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("model: openai:gpt-4o-mini", "model: scripted:script.yaml"),
                      encoding="utf-8")
    write_rows(tmp_path / "rows.jsonl", 2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = batch(tmp_path, "--no-log", "--json")
    assert result.exit_code == 0, result.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert [line["status"] for line in lines] == ["ok", "ok"] and {line["model"] for line in lines} == {"scripted:script.yaml"}
    (tmp_path / "script.yaml").unlink()
    (tmp_path / "out.jsonl").unlink()
    gone = batch(tmp_path, "--no-log")
    assert gone.exit_code == 2 and f"{tmp_path / 'script.yaml'}: script file not found" in gone.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_ray_missing_is_said_before_the_results_file_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 2)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log", "--ray")
    assert result.exit_code == 2
    assert "--ray needs Ray, which is not installed" in result.stderr and "toolrun[ray]" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_an_existing_results_file_is_not_overwritten_without_resume(tmp_path: Path):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 2)
    (tmp_path / "out.jsonl").write_text('{"key": "x"}\n', encoding="utf-8")
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--no-log")
    assert result.exit_code == 2 and "--resume" in result.stderr
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == '{"key": "x"}\n'


PEAK_STOCK_PY = """\
import threading
import time

STOCK = {"北京": "玫瑰: 100", "上海": "百合: 80", "深圳": "向日葵: 200"}
LOCK = threading.Lock()
RUNNING = [0]
PEAK = [0]


def get_flower_inventory(city):
    with LOCK:
        RUNNING[0] += 1
        PEAK[0] = max(PEAK[0], RUNNING[0])
    time.sleep(0.03)
    with LOCK:
        RUNNING[0] -= 1
    return STOCK[city] + f" (peak {PEAK[0]})"
"""


def test_concurrency_bounds_how_many_runs_are_in_their_tool_at_once(tmp_path: Path):
    """Observed, not timed: the tool counts how many of its calls are running at once."""
    peaks = {}
    for concurrency in (1, 3):
        world = tmp_path / f"concurrency-{concurrency}"  # a module of its own: its peak starts at 0
        make_world(world)
        (world / "tools.d" / "stock.py").write_text(PEAK_STOCK_PY, encoding="utf-8")
        write_rows(world / "rows.jsonl", 8)
        result = batch(world, "--model", f"scripted:{world / 'script.yaml'}", "--concurrency", str(concurrency),
                       "--no-log")
        assert result.exit_code == 0, result.stderr
        lines = read_lines(world / "out.jsonl")
        assert len(lines) == 8
        peaks[concurrency] = max(int(line["tool_calls"][0]["result"].split("peak ")[1].rstrip(")")) for line in lines)
    assert peaks[1] == 1
    assert 2 <= peaks[3] <= 3, peaks


# ----------------------------------------------------------------- failures and resume


def test_failed_runs_are_run_again_on_resume_unless_told_not_to(tmp_path: Path):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 4)
    script = tmp_path / "script.yaml"
    good = script.read_text(encoding="utf-8")
    script.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]\n", encoding="utf-8")
    first = batch(tmp_path, "--model", f"scripted:{script}", "--no-log")
    assert first.exit_code == 1, first.stderr  # the script runs out: every run fails
    lines = read_lines(tmp_path / "out.jsonl")
    assert [line["status"] for line in lines] == ["failed"] * 4 and all(line["error"] for line in lines)

    script.write_text(good, encoding="utf-8")
    kept = batch(tmp_path, "--model", f"scripted:{script}", "--no-log", "--resume", "--no-retry-failed")
    assert kept.exit_code == 1
    assert [line["status"] for line in read_lines(tmp_path / "out.jsonl")] == ["failed"] * 4

    retried = batch(tmp_path, "--model", f"scripted:{script}", "--no-log", "--resume", "--json")
    assert retried.exit_code == 0, retried.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert sorted(line["row"] for line in lines) == [0, 1, 2, 3]  # each exactly once: the failed lines are gone
    assert {line["status"] for line in lines} == {"ok"}
    assert json.loads(retried.stdout)["runs"] == 4


def started_batch(tmp_path: Path, log: Path, results: int,
                  *options: str) -> tuple[list[str], dict[str, str], subprocess.Popen[bytes]]:
    """The shop batch of ``make_world`` over rows.jsonl as a real process (2 at a time, logged to ``log``, with
    ``options``), once ``results`` lines are in out.jsonl: its command, environment and process."""
    command = [sys.executable, "-m", "toolrun", "batch", str(tmp_path / "shop.yaml"), "--inputs",
               str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "out.jsonl"), "--model",
               f"scripted:{tmp_path / 'script.yaml'}", "--concurrency", "2", "--logs", str(log), *options]
    env = clean_env(PYTHONPATH=str(ROOT))
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = tmp_path / "out.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < results):
        time.sleep(0.02)
    return command, env, process


def test_sigkill_half_way_then_resume_runs_every_row_exactly_once(tmp_path: Path):
    make_world(tmp_path, delay=0.1)
    rows = write_rows(tmp_path / "rows.jsonl", 16)
    log, out = tmp_path / "logs.db", tmp_path / "out.jsonl"
    command, env, process = started_batch(tmp_path, log, 5)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    before = read_results(out)
    assert 5 <= len(before) < 16, "the batch was not killed half-way"
    done_before = {line["row"] for line in before}
    last_run_before = max(run["id"] for run in RunLog.open(log).list_runs(limit=100))

    # The resume is an ordinary batch run: in process (the kill is what needed a process of its own).
    resumed = invoke(*command[3:], "--resume", "--json", env=env)
    assert resumed.exit_code == 0, resumed.stderr
    lines = read_lines(out)
    assert sorted(line["row"] for line in lines) == list(range(16))  # every row exactly once
    assert len({line["key"] for line in lines}) == 16
    assert {line["batch"] for line in lines} == {before[0]["batch"]}  # the resumed batch keeps its id
    run_log = RunLog.open(log)
    rerun = [run for run in run_log.list_runs(limit=100, session=before[0]["batch"]) if run["id"] > last_run_before]
    rerun_rows = {rows.index(run["vars"]) for run in rerun}  # a row's vars are all the recipe's vars
    assert rerun_rows.isdisjoint(done_before)  # rows already done are not run again
    assert len(rerun) == 16 - len(done_before)
    assert json.loads(resumed.stdout)["runs"] == 16


def test_an_interrupted_then_resumed_batch_is_one_batch_of_its_runs_with_its_attempts_counted(tmp_path: Path):
    make_world(tmp_path, delay=0.2)
    write_rows(tmp_path / "rows.jsonl", 8)
    log, out = tmp_path / "logs.db", tmp_path / "out.jsonl"
    command, env, process = started_batch(tmp_path, log, 2, "--json")
    time.sleep(0.05)  # the next two runs are in their tool
    process.send_signal(signal.SIGINT)
    stdout, _ = process.communicate(timeout=20)
    assert process.returncode == 130
    done = len(read_results(out))
    so_far = json.loads(stdout)  # --json: the summary of the runs finished, saying the batch was interrupted
    assert (so_far["interrupted"], so_far["runs"], so_far["total"], so_far["out"]) == (True, done, 8, str(out))
    (stopped,) = json.loads(invoke("logs", "batches", "--logs", str(log), "--json").stdout)
    interrupted = stopped["attempts"] - done
    assert interrupted >= 1 and stopped["runs"] == stopped["attempts"] == done + interrupted
    assert (stopped["ok"], stopped["failed_or_unfinished"], stopped["running"]) == (done, interrupted, 0)

    resumed = invoke(*command[3:], "--resume", env=env)
    assert resumed.exit_code == 0, resumed.stderr
    (entry,) = json.loads(invoke("logs", "batches", "--logs", str(log), "--json").stdout)
    assert entry["batch"] == stopped["batch"]
    assert (entry["runs"], entry["ok"], entry["failed_or_unfinished"], entry["running"]) == (8, 8, 0, 0)
    assert entry["attempts"] == 8 + interrupted  # each interrupted run was tried again: one run, two attempts
    table = invoke("logs", "batches", "--logs", str(log)).stdout.splitlines()
    assert table[0].split()[3:10] == ["RUNS", "OK", "EXPECT", "FAILED", "FAILED/UNFINISHED", "RUNNING", "ATTEMPTS"]
    assert table[1].split()[4:10] == ["8", "8", "0", "0", "0", str(8 + interrupted)]
    page = tmp_path / "batch.html"
    assert invoke("view", entry["batch"], "--logs", str(log), "-o", str(page)).exit_code == 0
    html = page.read_text(encoding="utf-8")
    assert "<span>8 runs</span>" in html and f"<span>{8 + interrupted} attempts</span>" in html
    assert '<span class="status-ok">8 ok</span>' in html and "status-interrupted\">" not in html.split("<table")[0]
    assert html.count('<tr class="run superseded" data-status="interrupted">') == interrupted
    assert "tried again as run" in html


def test_identical_rows_are_runs_of_their_own_through_a_resume(tmp_path: Path):
    make_world(tmp_path)
    row = '{"city": "北京", "tag": "same"}\n'
    (tmp_path / "rows.jsonl").write_text(row + '{"city": "上海", "tag": "other"}\n' + row, encoding="utf-8")
    script = f"scripted:{tmp_path / 'script.yaml'}"
    first = batch(tmp_path, "--model", script, "--no-log")
    assert first.exit_code == 0, first.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert sorted(line["row"] for line in lines) == [0, 1, 2] and len({line["key"] for line in lines}) == 3

    out = tmp_path / "out.jsonl"
    by_row = {line["row"]: line for line in lines}
    out.write_text(json.dumps(by_row[2], ensure_ascii=False) + "\n", encoding="utf-8")  # only the second twin finished
    resumed = batch(tmp_path, "--model", script, "--no-log", "--resume", "--json")
    assert resumed.exit_code == 0, resumed.stderr
    assert "3 runs, 1 already done" in resumed.stderr
    lines = read_lines(out)
    assert sorted(line["row"] for line in lines) == [0, 1, 2]  # each twin exactly once
    assert sorted(line["key"] for line in lines) == sorted(by_row[row]["key"] for row in range(3))
    assert json.loads(resumed.stdout)["runs"] == 3


def test_a_lone_surrogate_in_a_row_and_in_an_answer_is_written_resumed_and_logged(tmp_path: Path):
    # JSON may escape half of a surrogate pair ("\\udce9"): in a row, and in a model's answer. UTF-8 cannot hold
    # one, so writing the results line ended the batch with an internal error, and so did a row's key.
    make_world(tmp_path)
    (tmp_path / "script.yaml").write_text(SCRIPT_YAML.replace("- text: 北京有玫瑰", '- text: "北京有玫瑰 \\udce9"'),
                                          encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"city": "北京", "tag": "caf\\udce9"}\n', encoding="utf-8")
    script = f"scripted:{tmp_path / 'script.yaml'}"
    logs = tmp_path / "logs.db"
    first = batch(tmp_path, "--model", script, env=clean_env(TOOLRUN_LOGS=str(logs)))
    assert first.exit_code == 0, first.stderr
    [line] = read_lines(tmp_path / "out.jsonl")  # UTF-8, and each string the same read back
    assert (line["vars"]["tag"], line["final"], line["status"]) == ("caf\udce9", "北京有玫瑰 \udce9", "ok")
    resumed = batch(tmp_path, "--model", script, "--resume", "--no-log")
    assert resumed.exit_code == 0 and "1 run, 1 already done" in resumed.stderr, resumed.stderr
    run_log = RunLog.open(logs)
    [run] = run_log.list_runs(limit=5)
    assert run_log.get_run(run["id"])["final"] == "北京有玫瑰 \\udce9"  # the log keeps a readable stand-in


def test_a_resume_after_the_rows_moved_gives_every_line_its_row_in_todays_inputs(tmp_path: Path):
    make_world(tmp_path)
    rows = write_rows(tmp_path / "rows.jsonl", 4)
    script = f"scripted:{tmp_path / 'script.yaml'}"
    assert batch(tmp_path, "--model", script, "--no-log").exit_code == 0
    moved = [{"city": "深圳", "tag": "new"}, *reversed(rows)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in moved),
                                         encoding="utf-8")
    resumed = batch(tmp_path, "--model", script, "--no-log", "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "5 runs, 4 already done" in resumed.stderr  # matched by content: nothing but the new row ran
    lines = read_lines(tmp_path / "out.jsonl")
    assert sorted(line["row"] for line in lines) == [0, 1, 2, 3, 4]
    assert all(moved[line["row"]] == line["vars"] for line in lines)


def test_the_results_file_drops_a_half_line_and_rewrites_whole_ones(tmp_path: Path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"key": "a", "row": 0}\n{"key": "b", "ro')
    assert [line["key"] for line in read_results(path)] == ["a"]
    results = ResultsFile(path, keep=read_results(path))
    results.append({"key": "c", "row": 2, "text": "玫瑰"})
    results.close()
    assert [line["key"] for line in read_lines(path)] == ["a", "c"]
    assert path.read_text(encoding="utf-8").endswith('"玫瑰"}\n')


# ----------------------------------------------------------------- a provider's rate limit


def openai_answer(body: dict) -> dict:
    has_result = any(message.get("role") == "tool" for message in body["messages"])
    if has_result:
        message = {"role": "assistant", "content": "北京有玫瑰"}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_flower_inventory", "arguments": json.dumps({"city": "北京"}, ensure_ascii=False)}}]}
        finish = "tool_calls"
    return {"id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def test_a_provider_that_answers_429_to_every_fifth_request_slows_the_batch_and_fails_no_row(tmp_path, loopback):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 12)
    lock = threading.Lock()
    counter = {"requests": 0, "refused": 0}

    def provider(request: Recorded) -> Reply:
        with lock:
            counter["requests"] += 1
            refuse = counter["requests"] % 5 == 0
            counter["refused"] += refuse
        if refuse:
            return Reply(status=429, headers={"retry-after": "0.05"},
                         body={"error": {"message": "Rate limit reached", "type": "requests"}})
        return Reply(body=openai_answer(request.json()))

    server = loopback(provider)
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    result = batch(tmp_path, "--concurrency", "4", "--live", "--json", "--no-log", env=env)
    assert result.exit_code == 0, result.stderr
    lines = read_lines(tmp_path / "out.jsonl")
    assert len(lines) == 12 and {line["status"] for line in lines} == {"ok"}
    assert counter["refused"] >= 4 and counter["requests"] == 24 + counter["refused"]
    assert json.loads(result.stdout)["models"][0]["input_tokens"] == 12 * 2 * 10


def test_the_runs_share_one_connection_pool(tmp_path: Path, loopback):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 6)
    server = loopback(lambda request: Reply(body=openai_answer(request.json())))
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    result = batch(tmp_path, "--concurrency", "2", "--live", "--no-log", env=env)
    assert result.exit_code == 0, result.stderr
    assert len(server.requests) == 12
    assert len({request.client_port for request in server.requests}) <= 2  # a client per run would open 6


def test_an_exhausted_ratelimit_header_holds_the_next_request_until_its_reset(tmp_path: Path, loopback):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 1)
    arrivals: list[float] = []

    def provider(request: Recorded) -> Reply:
        arrivals.append(time.monotonic())
        headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "250ms"} if len(arrivals) == 1 else {}
        return Reply(body=openai_answer(request.json()), headers=headers)

    server = loopback(provider)
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    result = batch(tmp_path, "--live", "--no-log", env=env)
    assert result.exit_code == 0, result.stderr
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 0.25  # unpaced, the tool call takes milliseconds


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_retried_with_backoff(tmp_path: Path, loopback):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 2)
    served = {"requests": 0}

    def provider(request: Recorded) -> Reply:
        served["requests"] += 1
        if served["requests"] == 1:
            return Reply(status=429, headers={"retry-after": "soon"}, body={"error": {"message": "Rate limit reached"}})
        return Reply(body=openai_answer(request.json()))

    server = loopback(provider)
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    result = batch(tmp_path, "--concurrency", "1", "--live", "--no-log", env=env)
    assert result.exit_code == 0, result.stderr
    assert {line["status"] for line in read_lines(tmp_path / "out.jsonl")} == {"ok"} and served["requests"] == 5


def test_a_refused_request_waits_as_long_as_the_batch_pauses(tmp_path: Path):
    """A provider's retry-after up to the rate limiter's longest pause is waited out, not reported as a failure."""
    recipe = load_recipe(make_world(tmp_path))

    async def retry_wait() -> float:
        transports = ProviderTransports(recipe, 2)
        try:
            transport = transports.for_model("openai:gpt-4o-mini")
            assert isinstance(transport, HttpxTransport)
            return transport.max_retry_wait
        finally:
            await transports.aclose()

    assert asyncio.run(retry_wait()) >= MAX_PAUSE_S


class BrokenGate:
    """A rate limiter that fails on the first response it sees."""

    def __init__(self) -> None:
        self.seen = 0

    async def wait(self) -> None:
        pass

    def observe(self, status: int, headers: object) -> None:
        self.seen += 1
        if self.seen == 1:
            raise ValueError("the gate broke")


@pytest.mark.parametrize("streamed", [False, True])
def test_a_gate_that_fails_gives_the_connection_back_to_the_pool(loopback, streamed: bool):
    """With one connection in the pool, a connection kept after the gate failed would block the next request."""
    import httpx

    from toolrun.providers.transport import WireRequest

    server = loopback(lambda request: Reply(body={"ok": True}) if not streamed else Reply(chunks=["data: 1\n\n"]))

    async def two_requests() -> None:
        client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, pool=2.0), limits=httpx.Limits(max_connections=1))
        transport = HttpxTransport(client=client, gate=BrokenGate())
        request = WireRequest("POST", f"{server.url}/v1/chat", {}, {})
        try:
            for attempt in range(2):
                if attempt == 0:
                    with pytest.raises(ValueError):
                        await (transport.send(request) if not streamed else anext(transport.stream(request)))
                elif streamed:
                    assert [line async for line in transport.stream(request)][0] == "data: 1"
                else:
                    assert (await transport.send(request)).body == {"ok": True}
        finally:
            await transport.aclose()

    asyncio.run(two_requests())


def test_the_rate_limiter_spaces_requests_and_pauses_everyone_when_the_provider_says_so():
    now = [100.0]
    limiter = RateLimiter(120, clock=lambda: now[0])  # 2 requests a second
    assert [limiter.reserve() for _ in range(3)] == [0.0, 0.5, 1.0]
    now[0] = 110.0
    limiter.observe(429, {"Retry-After": "3"})
    assert limiter.reserve() == pytest.approx(3.0) and limiter.pauses == 1
    assert limiter.reserve() == pytest.approx(3.5)
    assert provider_pause(200, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s"}) == 90
    assert provider_pause(200, {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "250ms"}) == 0.25
    assert provider_pause(200, {"x-ratelimit-remaining-requests": "7", "x-ratelimit-reset-requests": "1s"}) == 0
    unlimited = RateLimiter(None, clock=lambda: now[0])
    assert [unlimited.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]


def test_the_recipe_rate_limit_spaces_a_batch(tmp_path: Path, loopback):
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("stream: false}", "stream: false, rate_limit: 1200}"),
                      encoding="utf-8")
    write_rows(tmp_path / "rows.jsonl", 4)
    arrivals: list[float] = []
    server = loopback(lambda request: (arrivals.append(time.monotonic()), Reply(body=openai_answer(request.json())))[1])
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")
    started = time.monotonic()
    result = batch(tmp_path, "--concurrency", "4", "--live", "--no-log", env=env)
    assert result.exit_code == 0, result.stderr
    # 1200 a minute: one slot every 0.05 s, the 1st after the batch started, so the 8th request cannot arrive
    # before 0.35 s (unpaced: ~0.1 s). Measured from the start, not from the 1st arrival: a busy machine
    # may deliver the 1st request late and the 8th on time, which made the gap between them flaky.
    assert len(arrivals) == 8 and max(arrivals) - started >= 0.35


def test_the_wilson_interval_is_narrow_for_many_runs_and_wide_for_few():
    low, high = wilson_interval(3, 3)
    assert high == 1.0 and low < 0.5
    low, high = wilson_interval(900, 1000)
    assert 0.87 < low < 0.9 < high < 0.93


# ----------------------------------------------------------------- the run log and view


def test_batch_runs_are_grouped_in_the_run_log_and_view_draws_the_batch(tmp_path: Path):
    make_world(tmp_path)
    write_rows(tmp_path / "rows.jsonl", 3)
    log = tmp_path / "logs.db"
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--logs", str(log), "--json")
    assert result.exit_code == 0, result.stderr
    batch_id = json.loads(result.stdout)["batch"]
    listed = invoke("logs", "batches", "--logs", str(log), "--json")
    (entry,) = json.loads(listed.stdout)
    assert entry["batch"] == batch_id and entry["runs"] == 3 and entry["ok"] == 3
    runs = json.loads(invoke("logs", "list", "--batch", batch_id, "--logs", str(log), "--json").stdout)
    assert len(runs) == 3 and {run["command"] for run in runs} == {"batch"}
    assert sorted(run["vars"]["tag"] for run in runs) == ["row0", "row1", "row2"]
    page = tmp_path / "batch.html"
    viewed = invoke("view", batch_id, "--logs", str(log), "-o", str(page))
    assert viewed.exit_code == 0, viewed.stderr
    html = page.read_text(encoding="utf-8")
    assert html.count('<tr class="run" data-status="ok">') == 3 and "row1" in html and "北京有玫瑰" in html
    assert all(city in CITIES for city in (run["vars"]["city"] for run in runs))


SECRET_TOOL_YAML = """\
name: get_token_status
description: Tells whether the shop's API token works; use it when asked about the token. Takes no arguments.
parameters: {type: object, properties: {}}
annotations: {read_only: true}
backend:
  shell:
    shell: true
    command: 'echo "token=$TOKEN"'
    env: {TOKEN: "${env:SHOP_TOKEN}"}
"""


def test_a_secret_a_tool_reads_during_the_run_is_kept_from_the_logged_vars(tmp_path: Path):
    """The tool reads the secret after the run was logged as started: the logged vars are redacted at its end."""
    make_world(tmp_path)
    (tmp_path / "tools.d" / "token.yaml").write_text(SECRET_TOOL_YAML, encoding="utf-8")
    recipe = tmp_path / "shop.yaml"
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("tools: [get_flower_inventory]", "tools: [get_token_status]")
                      .replace("tools_called: [get_flower_inventory]", "tools_called: [get_token_status]"), encoding="utf-8")
    (tmp_path / "script.yaml").write_text("- tool_calls: [{name: get_token_status, arguments: {}}]\n- text: 玫瑰 ok\n",
                                          encoding="utf-8")
    secret = "tok-4f9a1c77e2"
    (tmp_path / "rows.jsonl").write_text(json.dumps({"city": "北京", "tag": secret}) + "\n", encoding="utf-8")
    log = tmp_path / "logs.db"
    env = clean_env(SHOP_TOKEN=secret)
    result = batch(tmp_path, "--model", f"scripted:{tmp_path / 'script.yaml'}", "--logs", str(log), "--json", env=env)
    assert result.exit_code == 0, result.stderr
    assert secret not in (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    (run,) = json.loads(invoke("logs", "list", "--logs", str(log), "--json", env=env).stdout)
    assert run["vars"] == {"city": "北京", "tag": "***"}
    assert json.loads(invoke("logs", "search", secret, "--logs", str(log), "--json", env=env).stdout) == []
    assert json.loads(invoke("logs", "search", "北京", "--logs", str(log), "--json", env=env).stdout)  # vars still found


# ----------------------------------------------------------------- approval and progress


def test_a_tool_that_asks_for_approval_is_refused_in_a_batch_unless_yes(tmp_path: Path):
    make_world(tmp_path)
    tool = tmp_path / "tools.d" / "flowers.yaml"
    tool.write_text(tool.read_text(encoding="utf-8") + "confirm: true\n", encoding="utf-8")
    write_rows(tmp_path / "rows.jsonl", 2)
    script = f"scripted:{tmp_path / 'script.yaml'}"
    refused = batch(tmp_path, "--model", script, "--no-log")
    assert refused.exit_code == 0, refused.stderr  # every run ran: the refusal is the tool's result
    assert {call["is_error"] for line in read_lines(tmp_path / "out.jsonl") for call in line["tool_calls"]} == {True}
    (tmp_path / "out.jsonl").unlink()
    approved = batch(tmp_path, "--model", script, "--no-log", "--yes")
    assert approved.exit_code == 0, approved.stderr
    assert {call["result"] for line in read_lines(tmp_path / "out.jsonl") for call in line["tool_calls"]} == {"玫瑰: 100"}


class FakeStream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_progress_is_a_bar_on_a_terminal_and_a_line_every_few_seconds_elsewhere():
    from toolrun.batch.plan import BatchPlan
    from toolrun.cli.batch import Progress

    plan = BatchPlan.__new__(BatchPlan)
    plan.batch_id, plan.jobs, plan.todo, plan.kept, plan.concurrency = "batch-x", [None] * 4, [None] * 3, [{}], 2
    line = {"status": "failed", "usage": {"input_tokens": 10, "output_tokens": 5}}
    for tty in (True, False):
        now = [0.0]
        stream = FakeStream(tty)
        progress = Progress(stream, clock=lambda now=now: now[0])  # type: ignore[arg-type]
        progress.on_batch_start(plan)
        assert "4 runs, 1 already done, 2 at a time" in stream.text
        now[0] = 2.0
        progress.on_result(line)
        now[0] = 6.0
        progress.on_result({**line, "status": "ok"})
        progress.finish()
        if tty:
            assert stream.text.count("\r") == 2 and "2/4  failures 1  tokens 15  ETA 4s" in stream.text
            assert stream.text.rstrip().endswith("3/4  failures 1  tokens 30  ETA 3s\x1b[K")
        else:
            assert "\r" not in stream.text
            assert stream.text.splitlines()[1:] == ["[##################......] 3/4  failures 1  tokens 30  ETA 3s"]


def test_the_default_results_file_is_named_after_the_recipe_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    recipe = make_world(tmp_path)  # its name: is shop
    renamed = recipe.rename(tmp_path / "shop-v2.yaml")
    write_rows(tmp_path / "rows.jsonl", 1)
    monkeypatch.chdir(tmp_path)
    result = invoke("batch", str(renamed), "--inputs", "rows.jsonl", "--model", f"scripted:{tmp_path / 'script.yaml'}",
                    "--no-log")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "shop-v2.results.jsonl").is_file() and not (tmp_path / "shop.results.jsonl").exists()
