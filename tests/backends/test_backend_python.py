"""The python backend: module and file targets, sync/async, results, errors, static checks."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.backend_helpers import call, make_tool
from toolrun.backends.python import PythonBackend

TOOLS_D = Path(__file__).resolve().parents[2] / "tools.d"


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
    from toolrun.loop.execution import execute_call

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
        import asyncio, threading, time
        from toolrun.core.daemon_threads import in_daemon_thread

        loop_closed = threading.Event()

        async def main():
            try:
                await asyncio.wait_for(in_daemon_thread(lambda: loop_closed.wait(10), name="late"), 0.05)
            except asyncio.TimeoutError:
                print("timed out")
            return next(t for t in threading.enumerate() if t.name == "late")

        worker = asyncio.run(main())
        loop_closed.set()  # only now does the tool return: its loop is closed
        deadline = time.monotonic() + 10
        while worker.name == "late" and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # the pool's worker outlives the job: wait until it has handed the outcome over
        print("done" if worker.name != "late" else "still running")
    """), encoding="utf-8")
    import subprocess

    finished = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert finished.stdout.split() == ["timed", "out", "done"] and finished.stderr == ""


# --- the function's signature against the declared parameters, read at load time -------------

SIGNATURE_TOOL = """\
name: weather
description: Returns the weather of one city. Use it for weather questions; not for forecasts.
parameters:
  type: object
  properties:
    city: {type: string, description: City name}
    unit: {type: string, description: Unit of the temperature}
  required: [city]
  additionalProperties: false
backend: {python: "weather.py:weather"}
"""


def signature_catalog(folder: Path, function_source: str, tool: str = SIGNATURE_TOOL):
    from toolrun.catalog.loader import load_catalog

    write(folder, "weather.py", function_source)
    (folder / "weather.yaml").write_text(tool, encoding="utf-8")
    return load_catalog(folder)


@pytest.mark.parametrize(
    ("function_source", "line", "words", "fix"),
    [
        ("def weather(unit=None):\n    return 1\n", 6, "weather() cannot take the required parameter 'city'",
         "add 'city' to the function's parameters (or **kwargs)"),
        ("def weather(city):\n    return 1\n", 7, "weather() cannot take the optional parameter 'unit'",
         "add 'unit' to the function's parameters"),
        ("def weather(city, unit=None, country=None, *, day):\n    return 1\n", 3,
         "weather() needs 'day', which parameters.properties does not declare", "or give it a default"),
        ("def weather(city, /, unit=None):\n    return 1\n", 6, "cannot take the required parameter 'city' (it is positional-only)",
         "add 'city' to the function's parameters"),
    ],
)
def test_a_signature_no_call_can_fit_is_a_load_error_at_the_parameter_line(
        tmp_path: Path, function_source: str, line: int, words: str, fix: str) -> None:
    result = signature_catalog(tmp_path, function_source)
    assert "weather" not in result.catalog.tools
    [problem] = [p for p in result.problems if words in p.message]
    assert problem.file == tmp_path / "weather.yaml" and problem.line == line
    assert "weather.py line 1" in problem.message and fix in (problem.fix or "")


@pytest.mark.parametrize(
    "function_source",
    [
        "def weather(city, unit='C'):\n    return 1\n",
        "def weather(*, city, unit=None):\n    return 1\n",
        "def weather(**arguments):\n    return 1\n",
        "import functools\n@functools.lru_cache\ndef weather(x):\n    return 1\n",  # decorated: not read
        "def weather(x):\n    return 1\nweather = print\n",  # rebound: not read
    ],
)
def test_signatures_that_fit_the_schema_load_without_finding(tmp_path: Path, function_source: str) -> None:
    from toolrun.catalog.lint import lint_catalog

    result = signature_catalog(tmp_path, function_source)
    assert result.problems == []
    assert [f for f in lint_catalog(result.catalog) if f.rule == "python-signature"] == []


def test_calls_that_only_sometimes_fail_are_lint_warnings_that_say_how_to_fix(tmp_path: Path) -> None:
    from toolrun.catalog.lint import lint_catalog

    loose = SIGNATURE_TOOL.replace("  additionalProperties: false\n", "")
    result = signature_catalog(tmp_path, "def weather(city, unit):\n    return 1\n", loose)
    assert result.problems == []
    findings = [f for f in lint_catalog(result.catalog) if f.rule == "python-signature"]
    assert [(f.severity, f.line) for f in findings] == [("warning", 3), ("warning", 7)]
    extra, optional = findings
    assert "weather() takes no other arguments, but the schema lets the model send more" in extra.message
    assert "add additionalProperties: false under parameters, or **kwargs to the function" in extra.message
    assert "weather() needs 'unit', but the schema lets the model leave it out" in optional.message
    assert "add 'unit' to parameters.required, or give it a default in the function (unit=None)" in optional.message


def test_functions_of_the_standard_library_are_not_held_to_the_schema(tmp_path: Path) -> None:
    # json:dumps needs `obj`; it was not written as a tool, and catalogs use it as a stand-in.
    assert PythonBackend().check(python_tool(tmp_path, "json:dumps")) == []
    assert PythonBackend().warnings(python_tool(tmp_path, "json:dumps")) == []


# --- a package beside the YAML file ------------------------------------------------------------


def test_a_package_beside_the_yaml_file_is_found_at_load_and_at_call(tmp_path: Path) -> None:
    import toolrun

    package = tmp_path / "besidepkg_for_test"
    package.mkdir()
    write(package, "__init__.py", "")
    write(package, "tools.py", """
        from besidepkg_for_test.helpers import PREFIX
        def shout(text):
            return PREFIX + text.upper()
    """)
    write(package, "helpers.py", "PREFIX = '>> '\n")
    (tmp_path / "shout.yaml").write_text(
        "name: shout\n"
        "description: Returns the text in capitals. Use it to shout a text; not for translations.\n"
        "parameters:\n  type: object\n  properties: {text: {type: string, description: What to shout}}\n"
        "  required: [text]\n  additionalProperties: false\n"
        "backend: {python: 'besidepkg_for_test.tools:shout'}\n", encoding="utf-8")
    catalog = toolrun.load_catalog(tmp_path)
    assert toolrun.call(catalog, "shout", {"text": "hi"}).result == ">> HI"
    assert str(tmp_path) not in sys.path


def test_a_module_that_is_nowhere_says_where_it_was_looked_for_and_how_to_fix(tmp_path: Path) -> None:
    [problem] = PythonBackend().check(python_tool(tmp_path, "absentpkg_xyz.tools:f"))
    assert "python module not found: absentpkg_xyz.tools" in problem.message
    assert f"looked in the installed packages and in {tmp_path}" in problem.message
    assert problem.fix is not None and "put absentpkg_xyz/ (with its __init__.py)" in problem.fix
    assert "beside this YAML file" in problem.fix


def test_a_package_whose_init_fails_is_a_load_problem_not_a_crash(tmp_path: Path) -> None:
    package = tmp_path / "brokeninitpkg_for_test"
    package.mkdir()
    write(package, "__init__.py", "raise RuntimeError('no config')\n")
    write(package, "tools.py", "def f():\n    return 1\n")
    [problem] = PythonBackend().check(python_tool(tmp_path, "brokeninitpkg_for_test.tools:f"))
    assert "importing brokeninitpkg_for_test failed: RuntimeError: no config" in problem.message


def test_a_tool_file_rewritten_within_its_mtime_runs_the_new_code(tmp_path: Path, monkeypatch) -> None:
    # Python's own .pyc check is the mtime in whole seconds and the size: an edit of the same size
    # within the same second (or with the mtime kept, as cp -p does) would run the old code.
    from toolrun.backends import python as python_backend
    from toolrun.core import cache_folder

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(cache_folder, "users_modules_write_bytecode", True)
    source = write(tmp_path, "weather.py", 'def today():\n    return "sunny"\n')
    first = python_backend._import_file(source)
    assert first.today() == "sunny"
    assert list((tmp_path / "__pycache__").glob("weather.*.pyc"))  # the bytecode was kept
    kept = source.stat()
    del sys.modules[first.__name__]
    source.write_text('def today():\n    return "rainy"\n', encoding="utf-8")  # the same size
    os.utime(source, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    second = python_backend._import_file(source)
    del sys.modules[second.__name__]
    assert second.today() == "rainy"


def test_a_sibling_module_rewritten_within_its_mtime_runs_the_new_code_once_forgotten(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    # toolrun mcp drops the modules of edited files; their .pyc beside them (Python's whole-second
    # check) would still hold the old code of a same-size edit, so it goes too.
    from toolrun.backends import python as python_backend
    from toolrun.core import cache_folder

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(cache_folder, "users_modules_write_bytecode", True)
    helper = write(tmp_path, "forecast_tool_helper.py", 'TODAY = "sunny"\n')
    source = write(tmp_path, "forecast.py", "from forecast_tool_helper import TODAY\ndef today():\n    return TODAY\n")
    try:
        assert python_backend._import_file(source).today() == "sunny"
        assert list((tmp_path / "__pycache__").glob("forecast_tool_helper.*.pyc"))  # its bytecode was kept
        kept = helper.stat()
        helper.write_text('TODAY = "rainy"\n', encoding="utf-8")  # the same size, and the mtime put back
        os.utime(helper, ns=(kept.st_atime_ns, kept.st_mtime_ns))
        python_backend.forget_imported_code([helper])
        assert python_backend._import_file(source).today() == "rainy"
    finally:
        python_backend.forget_imported_code([helper, source])


def test_the_outline_of_a_file_rewritten_within_its_mtime_is_read_again(tmp_path: Path) -> None:
    # A long-running toolrun (mcp, chat) checks a tool again after an edit: not against the old def line.
    from toolrun.backends.python_signature import module_outline

    source = write(tmp_path, "weather.py", "def today(city): pass\n")
    assert module_outline(source).functions["today"].by_name == ("city",)
    kept = source.stat()
    source.write_text("def today(town): pass\n", encoding="utf-8")  # the same size
    os.utime(source, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert module_outline(source).functions["today"].by_name == ("town",)


def test_a_module_missing_from_a_package_beside_the_yaml_names_the_package_folder(tmp_path: Path) -> None:
    # mypkg/ is there: "put mypkg/ beside this YAML file" would send the author looking in the wrong place.
    package = tmp_path / "typopkg_for_test"
    package.mkdir()
    write(package, "__init__.py", "")
    write(package, "tools.py", "def f():\n    return 1\n")
    [problem] = PythonBackend().check(python_tool(tmp_path, "typopkg_for_test.tool:f"))
    assert "python module not found: typopkg_for_test.tool" in problem.message
    assert f"{package} has no tool.py or tool/" in problem.message
    assert problem.fix is not None and "add tool.py" in problem.fix and "put typopkg_for_test/" not in problem.fix


def test_a_tools_module_is_imported_on_the_main_thread_as_python_code_expects(tmp_path: Path) -> None:
    # A module may set a signal handler, ask for the current event loop, or open a sqlite connection
    # that its async functions then use: each works only on the thread that runs the event loop.
    import toolrun

    tools = tmp_path / "tools.d"
    tools.mkdir()
    write(tools, "mainly.py", """
        import asyncio, signal, sqlite3, threading
        ON_MAIN = threading.current_thread() is threading.main_thread()
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        DB = sqlite3.connect(":memory:")

        async def where():
            return f"{ON_MAIN} {DB.execute('select 1').fetchone()[0]} {asyncio.get_running_loop() is not None}"
    """)
    write(tools, "tools.yaml", """
        name: where
        description: Says where its module was imported and that its database answers. Use it in tests only.
        parameters: {type: object, properties: {}, additionalProperties: false}
        backend: {python: "mainly.py:where"}
    """)
    outcome = toolrun.call(toolrun.load_catalog(tools), "where", {})
    assert (outcome.result, outcome.is_error) == ("True 1 True", False)


def test_two_threads_calling_tools_of_one_file_first_both_get_the_whole_module(tmp_path: Path) -> None:
    # Two runs in two threads (a library use): both import pair.py at once; the second must wait for
    # the first import to finish, not take the half-made module sys.modules holds meanwhile.
    import threading

    import toolrun

    write(tmp_path, "pair.py", """
        import time

        def first():
            return "first"

        time.sleep(0.3)  # the import is still running when the other thread looks for its function

        def second():
            return "second"
    """)
    empty = "parameters: {type: object, properties: {}, additionalProperties: false}"
    write(tmp_path, "tools.yaml", f"""
        tools:
          - name: first
            description: Returns the word first and nothing else. Use it in tests only; it changes nothing.
            {empty}
            backend: {{python: "pair.py:first"}}
          - name: second
            description: Returns the word second and nothing else. Use it in tests only; it changes nothing.
            {empty}
            backend: {{python: "pair.py:second"}}
    """)
    catalog = toolrun.load_catalog(tmp_path)
    results: dict[str, tuple[str, bool]] = {}

    def call(name: str) -> None:
        outcome = toolrun.call(catalog, name, {})
        results[name] = (outcome.result, outcome.is_error)

    threads = [threading.Thread(target=call, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {"first": ("first", False), "second": ("second", False)}
