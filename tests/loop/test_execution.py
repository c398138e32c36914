"""execute_call and validate_arguments: precise messages, approval, timeouts, caps, redaction."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from tests.backend_helpers import call, make_tool
from toolrun.backends.base import CallContext
from toolrun.cli.approval_prompt import TerminalApprover
from toolrun.core.secrets import register_secret
from toolrun.core.tool import Annotations
from toolrun.loop.execution import DENIED_MESSAGE, cap_output, execute_call, validate_arguments

CITY = {"type": "string", "enum": ["北京", "上海", "深圳"], "description": "City"}


def py_tool(tmp_path: Path, source: str, function: str = "f", **kwargs):
    (tmp_path / "impl.py").write_text(source, encoding="utf-8")
    return make_tool("python", {"function": f"impl.py:{function}"}, folder=tmp_path, **kwargs)


def schema_tool(tmp_path: Path, properties: dict, required: list[str] | None = None, **extra):
    tool = make_tool("python", {"function": "json:dumps"}, folder=tmp_path, properties=properties, required=required)
    tool.parameters.update(extra)
    return tool


class TestValidateArguments:
    def test_enum_message_names_path_expected_and_given(self, tmp_path: Path) -> None:
        tool = schema_tool(tmp_path, {"city": CITY}, ["city"])
        assert validate_arguments(tool, {"city": "广州"}) == [
            'at $.city: expected one of ["北京", "上海", "深圳"], got "广州"']

    def test_values_in_messages_are_json_as_the_model_wrote_them(self, tmp_path: Path) -> None:
        # The model speaks JSON: null and true, not Python's None and True.
        tool = schema_tool(tmp_path, {"mode": {"enum": ["a", True]}, "flag": {"const": False}})
        assert validate_arguments(tool, {"mode": None, "flag": True}) == [
            "at $.flag: expected false, got true", 'at $.mode: expected one of ["a", true], got null']

    def test_missing_required_property(self, tmp_path: Path) -> None:
        tool = schema_tool(tmp_path, {"city": CITY, "day": {"type": "string"}}, ["city", "day"])
        assert validate_arguments(tool, {"day": "mon"}) == ["at $: missing required property 'city'"]
        assert validate_arguments(tool, {}) == ["at $: missing required property 'city'",
                                                "at $: missing required property 'day'"]

    def test_wrong_type_shows_the_given_json_and_hides_enum_noise(self, tmp_path: Path) -> None:
        tool = schema_tool(tmp_path, {"count": {"type": "integer", "enum": [1, 2, 3]}})
        assert validate_arguments(tool, {"count": "3"}) == ['at $.count: expected integer, got "3"']

    def test_nested_paths(self, tmp_path: Path) -> None:
        items = {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}}}
        tool = schema_tool(tmp_path, {"items": items})
        assert validate_arguments(tool, {"items": [{"qty": 2}, {"qty": 0}]}) == [
            "at $.items[1].qty: expected a number >= 1, got 0"]

    def test_unexpected_property(self, tmp_path: Path) -> None:
        tool = schema_tool(tmp_path, {"city": CITY}, additionalProperties=False)
        assert validate_arguments(tool, {"city": "北京", "cty": "x"}) == [
            "at $: unexpected property 'cty' (allowed: city)"]

    @pytest.mark.parametrize(("arguments", "shown"), [(None, "null null"), ([1], "array [1]"), ("北京", 'string "北京"')])
    def test_arguments_must_be_an_object(self, tmp_path: Path, arguments, shown: str) -> None:
        tool = schema_tool(tmp_path, {})
        assert validate_arguments(tool, arguments) == [f"at $: expected an object with the arguments, got {shown}"]

    def test_valid_arguments_give_no_messages(self, tmp_path: Path) -> None:
        assert validate_arguments(schema_tool(tmp_path, {"city": CITY}, ["city"]), {"city": "深圳"}) == []


def test_invalid_arguments_never_reach_the_backend(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = py_tool(tmp_path, f"def f(city):\n    open({str(marker)!r}, 'w').close()\n    return 'ran'\n",
                   properties={"city": CITY}, required=["city"])
    outcome = call(tool, {"city": "广州"})
    assert outcome.is_error and outcome.result.startswith("invalid arguments for t: at $.city")
    assert not marker.exists()


def test_output_is_capped_with_a_note(tmp_path: Path) -> None:
    tool = py_tool(tmp_path, "def f():\n    return '北' * 50\n", max_output=10)
    outcome = call(tool, {})
    assert outcome.result == "北" * 10 + "\n[output truncated: kept 10 of 50 characters]"
    assert cap_output("short", 10) == "short"


def test_registered_secrets_are_redacted_from_results(tmp_path: Path) -> None:
    register_secret("sk-live-abcdef123456")
    tool = py_tool(tmp_path, "def f():\n    return 'key is sk-live-abcdef123456'\n")
    assert call(tool, {}).result == "key is ***"


def test_a_secret_quoted_back_in_an_invalid_arguments_message_is_redacted(tmp_path: Path) -> None:
    register_secret("sk-live-abcdef123456")
    tool = schema_tool(tmp_path, {"n": {"type": "integer"}})
    outcome = call(tool, {"n": "sk-live-abcdef123456"})
    assert outcome.is_error and "expected integer" in outcome.result
    assert "sk-live" not in outcome.result and "***" in outcome.result


def test_a_secret_straddling_the_cut_of_a_quoted_argument_is_not_shown_in_part(tmp_path: Path) -> None:
    register_secret("sk-live-abcdef123456")
    tool = schema_tool(tmp_path, {"n": {"type": "integer"}})
    outcome = call(tool, {"n": "x" * 185 + "sk-live-abcdef123456"})  # the quoted value is cut at 200 characters
    assert outcome.is_error and "expected integer" in outcome.result
    assert "sk-live" not in outcome.result and "***" in outcome.result


def test_timeout_becomes_an_error_result(tmp_path: Path) -> None:
    tool = py_tool(tmp_path, "import asyncio\nasync def f():\n    await asyncio.sleep(10)\n", timeout=0.2)
    outcome = call(tool, {})
    assert (outcome.result, outcome.is_error) == ("the tool timed out after 0.2s", True)
    assert 150 <= outcome.duration_ms < 2000


def test_unknown_backend_is_an_error_result(tmp_path: Path) -> None:
    tool = make_tool("carrier-pigeon", {}, folder=tmp_path)
    outcome = call(tool, {})
    assert outcome.is_error and "carrier-pigeon" in outcome.result


def test_duration_is_measured(tmp_path: Path) -> None:
    tool = py_tool(tmp_path, "import time\ndef f():\n    time.sleep(0.05)\n    return 'ok'\n")
    assert call(tool, {}).duration_ms >= 45


def test_cancelling_a_call_kills_its_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    tool = make_tool("shell", {"argv": ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"]}, folder=tmp_path)

    async def cancel_soon() -> None:
        task = asyncio.create_task(execute_call(tool, {}, CallContext()))
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"


class TestApproval:
    def _tool(self, tmp_path: Path, **kwargs):
        marker = tmp_path / "ran"
        source = f"def f():\n    open({str(marker)!r}, 'w').close()\n    return 'done'\n"
        return py_tool(tmp_path, source, **kwargs), marker

    def test_confirm_without_an_approver_is_denied(self, tmp_path: Path) -> None:
        tool, marker = self._tool(tmp_path, confirm=True)
        outcome = call(tool, {})
        assert outcome.is_error and "approval" in outcome.result
        assert not marker.exists()

    def test_denial_is_an_error_result_the_model_sees(self, tmp_path: Path) -> None:
        seen = []

        async def deny(tool, arguments) -> bool:
            seen.append((tool.name, arguments))
            return False

        tool, marker = self._tool(tmp_path, annotations=Annotations(destructive=True))
        outcome = call(tool, {}, approver=deny)
        assert (outcome.result, outcome.is_error) == (DENIED_MESSAGE, True)
        assert seen == [("t", {})] and not marker.exists()

    def test_approved_call_runs(self, tmp_path: Path) -> None:
        async def allow(tool, arguments) -> bool:
            return True

        tool, marker = self._tool(tmp_path, confirm=True)
        assert call(tool, {}, approver=allow).result == "done"
        assert marker.exists()

    def test_tools_without_confirm_are_not_asked_about(self, tmp_path: Path) -> None:
        async def explode(tool, arguments) -> bool:
            raise AssertionError("must not be asked")

        tool, _ = self._tool(tmp_path)
        assert call(tool, {}, approver=explode).result == "done"

    def test_terminal_approver_yes_approves_and_no_tty_denies(self, tmp_path: Path, capsys) -> None:
        tool, marker = self._tool(tmp_path, confirm=True)
        denied = call(tool, {}, approver=TerminalApprover(False, stdin=io.StringIO("y\n")))
        assert denied.result == DENIED_MESSAGE and not marker.exists()
        assert "stdin is not a terminal" in capsys.readouterr().err
        assert call(tool, {}, approver=TerminalApprover(True)).result == "done"


def test_shell_and_http_calls_run_concurrently(tmp_path: Path, loopback) -> None:
    # Four calls each wait for all four to arrive (10 s at most): run one after another, the first waits alone.
    import threading

    from tests.loopback import Reply

    arrivals = tmp_path / "arrivals"
    arrivals.mkdir()
    wait_for_four = (f'touch "{arrivals}/$$"; n=0; until [ "$(ls "{arrivals}" | wc -l)" -ge 4 ]; do '
                     'n=$((n+1)); [ "$n" -gt 1000 ] && { echo alone; exit 1; }; sleep 0.01; done; echo met')
    meeting = threading.Barrier(4, timeout=10)

    def meet(request) -> Reply:
        try:
            meeting.wait()
        except threading.BrokenBarrierError:
            return Reply(503, "alone")
        return Reply(200, "met")

    server = loopback(meet)
    waiter = make_tool("shell", {"argv": ["sh", "-c", wait_for_four]}, folder=tmp_path)
    fetcher = make_tool("http", {"url": server.url}, folder=tmp_path)

    async def four_of(tool) -> list:
        return await asyncio.gather(*(execute_call(tool, {}, CallContext()) for _ in range(4)))

    for tool in (waiter, fetcher):
        outcomes = asyncio.run(four_of(tool))
        assert [(o.result.strip(), o.is_error) for o in outcomes] == [("met", False)] * 4, outcomes


def test_the_subset_check_never_accepts_what_jsonschema_refuses() -> None:
    import itertools

    from jsonschema import Draft202012Validator

    from toolrun.core.schema_subset import compile_subset_check as acceptor

    schemas = [
        {"type": "object", "properties": {"city": {"type": "string", "enum": ["北京", "上海"], "description": "City"},
                                          "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                                          "ratio": {"type": ["number", "null"], "exclusiveMinimum": 0},
                                          "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
                                          "code": {"type": "string", "pattern": "^[A-Z]{2}$", "minLength": 2}},
         "required": ["city"], "additionalProperties": False},
        {"type": "object", "properties": {"flag": {"type": "boolean"}, "nested": {"type": "object",
                                          "properties": {"n": {"type": "number"}}, "required": ["n"]}}},
        {"type": "object"},
    ]
    values = ["北京", "广州", 0, 1, 3.0, 100, 101, -1.5, True, False, None, [], ["ab"], ["abcd"], [1], {}, {"n": 1},
              {"n": "1"}, "AB", "ABC", "a"]
    keys = ["city", "limit", "ratio", "tags", "code", "flag", "nested", "other"]
    checked = 0
    for schema in schemas:
        accepts, validator = acceptor(schema), Draft202012Validator(schema)
        assert accepts is not None
        for key_a, key_b in itertools.combinations(keys, 2):
            for value_a, value_b in itertools.product(values, repeat=2):
                arguments = {key_a: value_a, key_b: value_b}
                if accepts(arguments):
                    assert validator.is_valid(arguments), (schema, arguments)
                    checked += 1
        assert accepts({"city": "北京"}) == validator.is_valid({"city": "北京"})
    assert checked > 100  # it does say yes, often
    assert acceptor({"type": "object", "properties": {"a": {"$ref": "#/$defs/b"}}, "$defs": {"b": {}}}) is None
    assert acceptor({"type": "object", "patternProperties": {"^a": {"type": "string"}}}) is None
    one_not_true = acceptor({"type": "object", "properties": {"a": {"enum": [1, True]}}})
    assert one_not_true is not None
    assert [one_not_true({"a": value}) for value in (1, True, 1.0, False, 0)] == [True, True, True, False, False]
