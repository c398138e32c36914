"""The python backend: module and file targets, sync/async, results, errors, static checks."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.backend_helpers import call, make_tool
from toolrun.backends.python import PythonBackend

TOOLS_D = Path(__file__).resolve().parent.parent / "tools.d"


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def python_tool(folder: Path, target: str, **kwargs):
    return make_tool("python", {"function": target}, folder=folder, **kwargs)


def test_file_function_gets_keyword_arguments_and_str_result_is_sent_as_is(tmp_path: Path) -> None:
    write(tmp_path, "shop.py", """
        def greet(name, punctuation="!"):
            return f"你好, {name}{punctuation}"
    """)
    tool = python_tool(tmp_path, "shop.py:greet", properties={"name": {"type": "string"}})
    outcome = call(tool, {"name": "北京"})
    assert (outcome.result, outcome.is_error) == ("你好, 北京!", False)


def test_non_string_results_are_json_with_unicode_kept(tmp_path: Path) -> None:
    write(tmp_path, "shop.py", """
        import datetime
        def stock():
            return {"城市": "上海", "count": 3, "when": datetime.date(2026, 1, 2)}
    """)
    outcome = call(python_tool(tmp_path, "shop.py:stock"), {})
    assert outcome.result == '{"城市": "上海", "count": 3, "when": "2026-01-02"}'


def test_file_can_import_its_siblings_and_folder_leaves_sys_path(tmp_path: Path) -> None:
    write(tmp_path, "helper_for_sibling_test.py", "VALUE = 41\n")
    write(tmp_path, "main_tool.py", """
        from helper_for_sibling_test import VALUE
        def answer():
            return VALUE + 1
    """)
    outcome = call(python_tool(tmp_path, "main_tool.py:answer"), {})
    assert outcome.result == "42"
    assert str(tmp_path) not in sys.path


def test_two_files_with_the_same_name_in_different_folders_stay_apart(tmp_path: Path) -> None:
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        write(tmp_path / label, "tool.py", f"def which():\n    return {label!r}\n")
    results = [call(python_tool(tmp_path / label, "tool.py:which"), {}).result for label in ("a", "b")]
    assert results == ["a", "b"]


def test_importable_module_target(tmp_path: Path) -> None:
    tool = python_tool(tmp_path, "json:dumps", properties={"obj": {}})
    assert call(tool, {"obj": [1, 2]}).result == "[1, 2]"


def test_async_functions_are_awaited(tmp_path: Path) -> None:
    write(tmp_path, "slow.py", """
        import asyncio
        async def wait(seconds):
            await asyncio.sleep(seconds)
            return "done"
    """)
    outcome = call(python_tool(tmp_path, "slow.py:wait"), {"seconds": 0.01})
    assert outcome.result == "done"


def test_sync_functions_run_in_a_worker_thread(tmp_path: Path) -> None:
    write(tmp_path, "where.py", """
        import threading
        def thread_name():
            return threading.current_thread() is threading.main_thread()
    """)
    assert call(python_tool(tmp_path, "where.py:thread_name"), {}).result == "false"


def test_exceptions_become_type_and_message_without_traceback(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", """
        def divide(a, b):
            return a / b
    """)
    outcome = call(python_tool(tmp_path, "broken.py:divide"), {"a": 1, "b": 0})
    assert outcome.is_error
    assert outcome.result == "ZeroDivisionError: division by zero"
    assert "Traceback" not in outcome.result


def test_tool_error_is_a_deliberate_error_result_with_its_message_only(tmp_path: Path) -> None:
    write(tmp_path, "picky.py", """
        from toolrun import ToolError
        def pick(city):
            raise ToolError(f"no shop in {city}; try 北京")
    """)
    outcome = call(python_tool(tmp_path, "picky.py:pick"), {"city": "广州"})
    assert (outcome.result, outcome.is_error) == ("no shop in 广州; try 北京", True)


def test_missing_function_at_run_time_is_an_error_result(tmp_path: Path) -> None:
    write(tmp_path, "empty.py", "X = 1\n")
    outcome = call(python_tool(tmp_path, "empty.py:nothing"), {})
    assert outcome.is_error and "nothing" in outcome.result


def test_slow_sync_calls_run_concurrently(tmp_path: Path) -> None:
    import asyncio

    from toolrun.backends.base import CallContext
    from toolrun.execution import execute_call

    write(tmp_path, "meeting.py", """
        import threading
        MEETING = threading.Barrier(4, timeout=10)  # passed only by four calls running at once
        def meet():
            MEETING.wait()
            return "ok"
    """)
    tool = python_tool(tmp_path, "meeting.py:meet")

    async def four() -> list:
        return await asyncio.gather(*(execute_call(tool, {}, CallContext()) for _ in range(4)))

    outcomes = asyncio.run(four())
    assert [(o.result, o.is_error) for o in outcomes] == [("ok", False)] * 4


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("no_colon_here", "module:function"),
        ("missing.py:f", "python file not found"),
        ("shop.py:absent", "defines no function 'absent'"),
        ("no_such_module_xyz.sub:f", "python module not found"),
        ("shop.py:not-an-identifier", "module:function"),
    ],
)
def test_check_reports_static_problems_with_file_and_line(tmp_path: Path, target: str, expected: str) -> None:
    write(tmp_path, "shop.py", "def present():\n    return 1\n")
    problems = PythonBackend().check(python_tool(tmp_path, target))
    assert len(problems) == 1
    assert expected in problems[0].message
    assert problems[0].file == tmp_path / "tools.yaml" and problems[0].line == 1


def test_check_accepts_good_targets_without_running_the_file(tmp_path: Path) -> None:
    write(tmp_path, "shop.py", """
        raise SystemExit("importing this file at load time would be a bug")
        def present():
            return 1
    """)
    assert PythonBackend().check(python_tool(tmp_path, "shop.py:present")) == []
    assert PythonBackend().check(python_tool(tmp_path, "json:dumps")) == []


def test_flower_example_results(tmp_path: Path) -> None:
    tool = make_tool("python", {"function": "flowers.py:get_flower_inventory"}, folder=TOOLS_D,
                     properties={"city": {"type": "string"}})
    assert call(tool, {"city": "北京"}).result == "玫瑰: 100, 郁金香: 150"
    assert call(tool, {"city": "上海"}).result == "百合: 80, 康乃馨: 120"
    assert call(tool, {"city": "深圳"}).result == "向日葵: 200, 玉兰: 90"
    unknown = call(tool, {"city": "广州"})
    assert unknown.is_error
    assert all(city in unknown.result for city in ("北京", "上海", "深圳"))


def test_check_sees_conditional_and_imported_definitions(tmp_path: Path) -> None:
    write(tmp_path, "cond.py", """
        import sys
        from json import dumps as render_json
        if sys.version_info >= (3, 11):
            def modern():
                return 1
        try:
            import fast_thing
        except ImportError:
            def fallback():
                return 2
    """)
    backend = PythonBackend()
    for name in ("modern", "fallback", "render_json"):
        assert backend.check(python_tool(tmp_path, f"cond.py:{name}")) == []
    assert len(backend.check(python_tool(tmp_path, "cond.py:absent"))) == 1


def test_a_sync_tool_that_calls_sys_exit_is_an_error_result(tmp_path: Path) -> None:
    (tmp_path / "quits.py").write_text("import sys\n\ndef quit_now():\n    sys.exit(3)\n", encoding="utf-8")
    tool = make_tool("python", {"function": "quits.py:quit_now"}, folder=tmp_path)
    outcome = call(tool, {})
    assert outcome.is_error and "SystemExit" in outcome.result


def test_a_tool_thread_finishing_after_its_loop_closed_prints_nothing(tmp_path: Path) -> None:
    # The stuck call timed out and the run ended; when the thread finally returns, no traceback.
    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent("""
        import asyncio, threading
        from toolrun.daemon_threads import in_daemon_thread

        loop_closed = threading.Event()

        async def main():
            try:
                await asyncio.wait_for(in_daemon_thread(lambda: loop_closed.wait(10), name="late"), 0.05)
            except asyncio.TimeoutError:
                print("timed out")

        asyncio.run(main())
        loop_closed.set()  # only now does the tool return: its loop is closed
        next(t for t in threading.enumerate() if t.name == "late").join(10)
        print("done")
    """), encoding="utf-8")
    import subprocess

    finished = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert finished.stdout.split() == ["timed", "out", "done"] and finished.stderr == ""
