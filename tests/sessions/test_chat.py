"""``toolrun chat`` as a person uses it: in a real terminal (tmux), typing, against a loopback
OpenAI-compatible server; then the saved chat replayed offline by ``toolrun recipe``."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import (
    ANSWER,
    ANSWER_RESPONSE,
    CALLS_RESPONSE,
    INVENTORY,
    ROOT,
    TOOLRUN,
    clean_env,
    completion,
    invoke,
    sse_chunks,
    toolrun_in_process,
)
from tests.loopback import Recorded, Reply
from toolrun.sessions.chat import ChatSession

QUESTION = "北京、上海和深圳的鲜花库存是多少?"
SLOW_WORDS = "这是一个很长很长的回答，" * 20
EXITED = "command exited with status"


def chat_server(request: Recorded) -> Reply:
    """Calls, then the answer; a question with 慢 gets a slow streamed answer to cancel."""
    body = request.json()
    last = body["messages"][-1]
    if last["role"] == "user" and "慢" in last["content"]:
        chunks = sse_chunks(completion({"role": "assistant", "content": SLOW_WORDS}, "stop", 10, 200))
        return Reply(headers={"Content-Type": "text/event-stream"}, chunks=chunks, chunk_delay=0.25)
    response = ANSWER_RESPONSE if last["role"] == "tool" else CALLS_RESPONSE
    if body.get("stream"):
        return Reply(headers={"Content-Type": "text/event-stream"}, chunks=sse_chunks(response))
    return Reply(body=response)


class Terminal:
    """A tmux session of its own (own socket, no user config) running one command."""

    def __init__(self, folder: Path, command: list[str], env: dict[str, str]):
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed (apt-get install tmux; .ci/run does it)")
        self.socket = folder / "tmux.sock"
        self.env = env
        # The shell in the pane prints the command's exit status: tmux 3.3 sometimes leaves an exited pane
        # process unreaped (a zombie, no #{pane_dead_status}), so the status is read from the screen.
        line = f"cd {shlex.quote(str(folder))} && env {' '.join(shlex.quote(f'{k}={v}') for k, v in env.items())} " \
               f"{shlex.join(command)}; echo \"{EXITED} $?\""
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "180", "-y", "60", line)
        self.tmux("set-option", "-t", "t", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], env=self.env, capture_output=True, text=True,
                              check=True, timeout=10).stdout

    def type(self, text: str) -> None:
        """Type a line as a person does, and press Enter."""
        self.tmux("send-keys", "-t", "t", "-l", text)
        self.tmux("send-keys", "-t", "t", "Enter")

    def press(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t", "-S", "-2000")

    def wait_for(self, text: str, timeout: float = 20, count: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} did not appear; the screen:\n{self.screen()}")

    def wait_for_prompt(self, timeout: float = 20) -> None:
        """The last line is the chat's prompt again (the capture trims its trailing space)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.screen().rstrip().splitlines()[-1] == "›":
                return
            time.sleep(0.05)
        raise AssertionError(f"no prompt; the screen:\n{self.screen()}")

    def exit_status(self, timeout: float = 10) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ended = re.search(rf"^{EXITED} (\d+)$", self.screen(), re.MULTILINE)
            if ended:
                return int(ended.group(1))
            time.sleep(0.05)
        raise AssertionError(f"the chat did not end; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True, timeout=10)


def test_a_chat_typed_in_a_terminal_saved_and_replayed_offline(tmp_path: Path, loopback) -> None:
    server = loopback(chat_server)
    db = tmp_path / "logs.db"
    env = clean_env(OPENAI_API_KEY="sk-test-chat-0123456789", OPENAI_BASE_URL=f"{server.url}/v1",
                    TOOLRUN_LOGS=str(db), XDG_DATA_HOME=str(tmp_path / "data"))
    terminal = Terminal(tmp_path, [str(TOOLRUN), "chat", "--model", "openai:gpt-4o-mini", "--tools", "get_flower_*",
                                   "--tools-dir", str(ROOT / "tools.d")], env)
    try:
        terminal.wait_for("›")
        terminal.type(QUESTION)
        screen = terminal.wait_for("chat so far: 1 answer")
        for city in ("北京", "上海", "深圳"):
            assert f'→ get_flower_inventory {{"city": "{city}"}}' in screen
        for line in ANSWER.splitlines():
            assert line in screen
        assert "2 turns · 3 tool calls · 330 in / 157 out tokens · live" in screen

        terminal.type("/tools")
        terminal.wait_for("  get_flower_inventory  Returns")
        terminal.press("Up")  # line editing: the history brings back the last line
        terminal.wait_for("› /tools", count=2)
        terminal.press("C-c")  # at the prompt: drop the line, stay in the chat
        terminal.wait_for("^C")

        terminal.type("/save saved.yaml")
        terminal.wait_for("saved saved.yaml, saved.cassette.json")

        terminal.type("慢慢说")
        terminal.wait_for("这是一个很长")
        terminal.press("C-c")  # cancels the answer in progress, not the chat
        screen = terminal.wait_for("cancelled: the answer was stopped")
        assert SLOW_WORDS not in screen.replace("\n", "")
        terminal.wait_for_prompt()
        terminal.press("C-d")
        assert terminal.exit_status() == 0
    finally:
        terminal.close()

    saved = (tmp_path / "saved.yaml").read_text(encoding="utf-8")
    assert "- user: 北京、上海和深圳的鲜花库存是多少?" in saved and "tools_called:\n  - get_flower_inventory" in saved
    assert "sk-test-chat" not in (tmp_path / "saved.cassette.json").read_text(encoding="utf-8")
    server.stop()
    replayed = toolrun_in_process("recipe", "saved.yaml", cwd=tmp_path)  # no key, no server: the recording beside it
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.strip() == ANSWER
    assert "replaying saved.cassette.json" in replayed.stderr and "divergence" not in replayed.stderr
    assert replayed.stderr.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"

    runs = json.loads(invoke("logs", "--json", "--logs", str(db)).stdout)
    chat_runs = [run for run in runs if run["command"] == "chat"]
    assert [(run["status"], run["prompt"]) for run in chat_runs] == [("interrupted", "慢慢说"), ("ok", QUESTION)]
    assert chat_runs[0]["session"] == chat_runs[1]["session"]


def test_each_answer_carries_the_conversation_so_far(tmp_path: Path, loopback) -> None:
    server = loopback(chat_server)
    env = {"OPENAI_API_KEY": "sk-test-chat-0123456789", "OPENAI_BASE_URL": f"{server.url}/v1"}
    session = ChatSession.open(model="openai:gpt-4o-mini", tools=["get_flower_*"], tools_dir=ROOT / "tools.d",
                               environ=env)
    try:
        first = asyncio.run(session.answer(QUESTION))
        second = asyncio.run(session.answer("谢谢 {{ 你 }}"))
    finally:
        session.close()
    assert first.final == ANSWER and second.final == ANSWER
    sent = [request.json()["messages"] for request in server.requests]
    assert len(sent) == 4
    assert [(m["role"], m.get("content")) for m in sent[2]] == [("user", QUESTION), ("assistant", ANSWER),
                                                                ("user", "谢谢 {{ 你 }}")]


def test_chat_reads_lines_from_a_pipe_and_saves_a_scripted_chat(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 深圳}}]\n- text: 深圳有向日葵。\n",
                      encoding="utf-8")
    completed = subprocess.run(
        [str(TOOLRUN), "chat", "--model", f"scripted:{script}", "--tools-dir", str(ROOT / "tools.d"),
         "--tools", "get_flower_*", "--no-log"],  # no MCP server to start (the ticket tools are not needed)
        input="深圳呢?\n/nope\n/save out\n", cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "深圳有向日葵。\n"
    assert "unknown command /nope" in completed.stderr and "saved out.yaml, out.script.yaml" in completed.stderr
    again = toolrun_in_process("recipe", "out.yaml", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["final"] == "深圳有向日葵。" and document["turns"][0]["tool_calls"][0]["result"] == "向日葵: 200, 玉兰: 90"



def test_a_chat_from_a_recipe_logs_its_vars_and_a_scripted_save_names_its_script(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- text: 北京有玫瑰。\n", encoding="utf-8")
    db = tmp_path / "logs.db"
    completed = subprocess.run(
        [str(TOOLRUN), "chat", "--recipe", str(INVENTORY), "--model", f"scripted:{script}", "--logs", str(db)],
        input="北京呢?\n/save out\n", cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    run = json.loads(invoke("logs", "show", "1", "--json", "--logs", str(db)).stdout)
    assert (run["command"], run["prompt"], run["final"]) == ("chat", "北京呢?", "北京有玫瑰。")
    assert run["vars"] == {"question": QUESTION}  # the recipe's vars, which its system prompt may use
    header = (tmp_path / "out.yaml").read_text(encoding="utf-8").split("\nname:")[0]
    assert "the script beside this file" in header and "recording" not in header

CLOSING_TOOLS = """\
tools:
  - name: close_shop
    description: >-
      Closes one city's shop for good and returns what was done. Use it only when the person
      asks to close a shop. Do not use it to read stock.
    parameters:
      type: object
      properties:
        city: {type: string, description: City of the shop to close}
      required: [city]
    annotations: {destructive: true}
    backend: {python: "shops.py:close_shop"}
"""

CLOSING_SCRIPT = """\
- tool_calls: [{name: close_shop, arguments: {city: 北京}}, {name: close_shop, arguments: {city: 上海}}]
- text: 北京和上海的店关了。
- tool_calls: [{name: close_shop, arguments: {city: 深圳}}]
- tool_calls: [{name: close_shop, arguments: {city: 广州}}, {name: close_shop, arguments: {city: 杭州}}]
- text: 广州的店关了，杭州的没关。
"""


def test_approvals_inline_concurrent_and_cancelled_with_ctrl_c(tmp_path: Path) -> None:
    """Two calls that need approval in one answer, in two answers (each answer has an event loop of
    its own), and Ctrl-C while a prompt waits: the chat must still hear the next line typed."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "shops.yaml").write_text(CLOSING_TOOLS, encoding="utf-8")
    (tools / "shops.py").write_text("def close_shop(city):\n    return f'closed {city}'\n", encoding="utf-8")
    (tmp_path / "turns.yaml").write_text(CLOSING_SCRIPT, encoding="utf-8")
    env = clean_env(TOOLRUN_LOGS=str(tmp_path / "logs.db"), XDG_DATA_HOME=str(tmp_path / "data"))
    terminal = Terminal(tmp_path, [str(TOOLRUN), "chat", "--model", "scripted:turns.yaml"], env)
    try:
        terminal.wait_for("›")
        terminal.type("关掉北京和上海的店")
        for count in (1, 2):
            terminal.wait_for("Allow this call to close_shop? [y/N]:", count=count)
            terminal.type("y")
        screen = terminal.wait_for("北京和上海的店关了。")
        assert "← close_shop" in screen and "closed 上海" in screen

        terminal.type("关掉深圳的店")
        terminal.wait_for("Allow this call to close_shop? [y/N]:", count=3)
        terminal.press("C-c")  # cancels the answer while its prompt waits
        screen = terminal.wait_for("cancelled: the answer was stopped")
        assert re.search(r"^cancelled: the answer was stopped", screen, re.MULTILINE), "not on a line of its own"
        terminal.wait_for_prompt()

        terminal.type("关掉广州和杭州的店")  # heard by the chat, not by the cancelled prompt
        terminal.wait_for("Allow this call to close_shop? [y/N]:", count=4)
        terminal.type("y")
        terminal.wait_for("Allow this call to close_shop? [y/N]:", count=5)
        terminal.type("n")
        screen = terminal.wait_for("广州的店关了，杭州的没关。")
        assert "closed 广州" in screen and "the user denied this call" in screen
        assert "approval failed" not in screen and "closed 深圳" not in screen
        terminal.wait_for_prompt()
        terminal.press("C-d")
        assert terminal.exit_status() == 0
    finally:
        terminal.close()


def test_the_lines_typed_are_kept_beside_the_run_log_of_logs_and_nowhere_with_no_log(tmp_path: Path) -> None:
    """The line-editing history holds what was typed: it went beside the default run log whatever --logs named,
    and was written with --no-log too."""
    (tmp_path / "turns.yaml").write_text("- text: 好的\n- text: 好的\n", encoding="utf-8")
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "team").mkdir()
    default = tmp_path / "default"
    env = clean_env(TOOLRUN_LOGS=str(default / "logs.db"), XDG_DATA_HOME=str(tmp_path / "data"))
    chats = {"--logs": ["--logs", str(tmp_path / "team" / "logs.db")], "--no-log": ["--no-log"]}
    for typed, options in chats.items():
        pane = tmp_path / typed.strip("-")  # a tmux server (and socket) of its own for each chat
        pane.mkdir()
        terminal = Terminal(pane, [str(TOOLRUN), "chat", "--model", f"scripted:{tmp_path / 'turns.yaml'}",
                                   "--tools-dir", str(tmp_path / "tools.d"), *options], env)
        try:
            terminal.wait_for("›")
            terminal.type(f"typed with {typed}")
            terminal.wait_for("chat so far: 1 answer")
            terminal.wait_for_prompt()
            terminal.press("C-d")
            assert terminal.exit_status() == 0
        finally:
            terminal.close()
    assert (tmp_path / "team" / "chat_history").read_text(encoding="utf-8").splitlines()[-1] == "typed with --logs"
    assert not (default / "chat_history").exists() and not (tmp_path / "data").exists()
    assert "--no-log" not in "".join(path.read_text(encoding="utf-8", errors="replace")
                                     for path in tmp_path.rglob("*history*"))


def test_a_run_log_that_cannot_be_opened_stops_the_chat_before_it_starts_and_leaves_nothing(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    tools = tmp_path / "tools.d"  # the flower tools alone: the whole tools.d would start the ticket MCP server first
    tools.mkdir()
    for name in ("flowers.yaml", "flowers.py"):
        shutil.copy(ROOT / "tools.d" / name, tools / name)
    completed = subprocess.run(
        [str(TOOLRUN), "chat", "--model", "openai:gpt-4o-mini", "--tools-dir", str(tools),
         "--logs", str(tmp_path / "no" / "logs.db")],
        input="", cwd=tmp_path, env=clean_env(TMPDIR=str(temporary)), capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and "--logs: the folder" in completed.stderr
    assert list(temporary.iterdir()) == []  # no folder for recordings left behind


def test_a_chat_without_a_key_says_it_needs_credentials_not_that_record_does(tmp_path: Path) -> None:
    from toolrun.core.errors import UserError

    session = ChatSession.open(recipe=ROOT / "recipes" / "inventory.yaml", environ={})
    try:
        with pytest.raises(UserError) as info:
            asyncio.run(session.answer("北京?"))
    finally:
        session.close()
    message = info.value.problems[0].message
    assert "a live run needs credentials" in message and "--record" not in message


STRUCTURED_RECIPE = """\
model: scripted:script.yaml
tools: [get_flower_inventory, get_flower_price]
tools_dir: ../tools.d
messages: [{user: hi}]
settings: {tool_selection: {max_tools: 1}}
output:
  schema: {type: object, properties: {city: {type: string}, count: {type: integer}}, required: [city, count]}
  retries: 1
"""


def test_a_chat_from_a_recipe_with_output_checks_each_answer_and_saves_a_recipe_that_plays(tmp_path: Path) -> None:
    from tests.sessions.test_recipe import make_project, write
    from toolrun.sessions.play import arun

    project = make_project(tmp_path)
    (project / "recipes" / "script.yaml").write_text(
        "- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]\n"
        "- output: {city: 北京, count: 100}\n"
        "- text: about a hundred\n- text: still prose\n", encoding="utf-8")
    session = ChatSession.open(recipe=write(project, STRUCTURED_RECIPE))
    first = asyncio.run(session.answer("北京的玫瑰有多少?"))
    assert not first.failed and first.output == {"city": "北京", "count": 100}
    second = asyncio.run(session.answer("and in words?"))  # prose, and prose again after the repair turn
    assert second.failed and second.output is None and "not valid JSON" in (second.error or "")
    assert session.history == [("user", "北京的玫瑰有多少?"), ("assistant", '{"city": "北京", "count": 100}')]
    saved = session.save(project / "recipes" / "saved.yaml")
    replayed = asyncio.run(arun(saved[0]))  # the script beside it answers as the chat did
    assert not replayed.failed and replayed.output == {"city": "北京", "count": 100}
    assert replayed.to_json()["turns"][0]["tools_offered"] == ["get_flower_inventory"]
