"""``toolrun chat``: a conversation on a terminal — streamed answers, tool calls as they run,
approvals inline, Ctrl-C cancels the answer in progress, Ctrl-D (or /exit) leaves.

The conversation is ``toolrun.sessions.chat.ChatSession``; this module reads lines (with the
standard library's readline for editing and history on a terminal) and prints.
"""

from __future__ import annotations

import atexit
import os
import sys
import uuid
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import click

from toolrun.cli.approval_prompt import TerminalApprover
from toolrun.cli.display import TerminalDisplay
from toolrun.cli.recipe_options import (
    assume_yes_option,
    model_option,
    run_log_options,
    stream_option,
    system_option,
    tool_patterns_option,
    tools_dir_option,
)
from toolrun.cli.run_log_options import open_run_log
from toolrun.cli.tools_list import first_sentence
from toolrun.core.errors import ToolrunError
from toolrun.core.event_loop import run_until_done
from toolrun.core.private_files import create_private, make_private_folders
from toolrun.core.text import counted, text_as_sent
from toolrun.loop.runner import ObserverGroup
from toolrun.runlog import RunLog, RunLogWriter
from toolrun.sessions.ask import MODEL_ENV
from toolrun.sessions.chat import ChatSession

PROMPT = "› "
COMMANDS_HELP = "/tools  what the model can call · /save FILE  the chat as a recipe + recording · /exit  leave (or Ctrl-D)"


@click.command("chat")
@tool_patterns_option
@tools_dir_option("./tools.d")
@model_option("provider:model (default: $TOOLRUN_MODEL or the recipe's)")
@click.option("--recipe", "recipe_path", type=click.Path(path_type=Path, dir_okay=False),
              help="start from a recipe: its model, tools, system prompt and settings")
@system_option
@stream_option
@assume_yes_option()
@run_log_options
def chat_command(tool_patterns: tuple[str, ...], tools_dir: Path | None, model_spec: str | None,
                 recipe_path: Path | None, system: str | None, stream: bool | None, assume_yes: bool,
                 logs: Path | None, no_log: bool) -> None:
    """Chat with a model that can call your tools.

    \b
    /tools       what the model can call
    /save FILE   the conversation so far as a recipe, plus its recording (replays offline)
    /exit        leave (Ctrl-D too); Ctrl-C cancels the answer in progress
    """
    display = TerminalDisplay(info_out=sys.stderr, text_out=sys.stdout)
    session = ChatSession.open(model=model_spec or os.environ.get(MODEL_ENV) or None, tools=tool_patterns,
                               tools_dir=tools_dir, system=system, recipe=recipe_path, on_catalog=display.on_catalog)
    run_log = None
    try:
        run_log = open_run_log(logs, no_log)
        Chat(session, run_log, stream=stream, assume_yes=assume_yes).loop()
    finally:
        session.close()
        if run_log is not None:
            run_log.close()


class Chat:
    """The terminal side of one chat: read a line, run a command or ask, print."""

    def __init__(self, session: ChatSession, run_log: RunLog | None, *, stream: bool | None, assume_yes: bool):
        self.session = session
        self.run_log = run_log
        self.stream = stream
        self.display: TerminalDisplay | None = None  # the current answer's: its live line keeps still while a question is up
        self.approver = TerminalApprover(assume_yes, quiet=self._quiet)
        self.id = uuid.uuid4().hex[:12]  # the run log groups this chat's answers by it
        self.interactive = sys.stdin is not None and sys.stdin.isatty()
        if self.interactive:  # what was typed is kept beside the run log, and not at all with --no-log
            _line_editing(run_log.path.with_name("chat_history") if run_log is not None else None)

    def loop(self) -> None:
        count = counted(len(self.session.tools), "tool")
        _info(f"toolrun chat · {self.session.model} · {count} · {COMMANDS_HELP}")
        while sys.stdin is not None:  # a closed stdin (<&-) has nothing to say: as at its end
            try:
                line = input(PROMPT if self.interactive else "")
            except OSError as exc:  # a stdin that cannot be read (0>file): as at its end
                _info(f"toolrun: stdin cannot be read ({exc.strerror or exc}); the chat ends")
                return
            except EOFError:  # Ctrl-D
                if self.interactive:
                    click.echo()
                return
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh line, as a shell does
                click.echo("^C" if self.interactive else "")
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if self.command(line):
                    return
                continue
            self.ask(line)

    def command(self, line: str) -> bool:
        """Run a slash command; True to leave."""
        name, _, argument = line.partition(" ")
        if name in ("/exit", "/quit"):
            return True
        if name == "/tools":
            for tool in self.session.tools:
                _info(f"  {tool.name}  {first_sentence(tool.description)}")
        elif name == "/save":
            if not argument.strip():
                _info("usage: /save FILE   (e.g. /save recipes/flowers.yaml)")
                return False
            try:
                written = self.session.save(_typed_path(argument.strip()))
            except (ToolrunError, OSError) as exc:
                _info(f"error: {exc}")
                return False
            shown = [text_as_sent(str(path)) for path in written]
            _info(f"saved {', '.join(shown)} — play it again with: toolrun recipe {shown[0]}")
        elif name == "/help":
            _info(COMMANDS_HELP)
        else:
            _info(f"unknown command {name}; {COMMANDS_HELP}")
        return False

    def _quiet(self) -> AbstractContextManager[None]:
        return self.display.paused() if self.display is not None else nullcontext()

    def ask(self, question: str) -> None:
        display = self.display = TerminalDisplay(info_out=sys.stderr, text_out=sys.stdout)
        writer = None if self.run_log is None else RunLogWriter(self.run_log, command="chat", prompt=question,
                                                                vars=self.session.base.vars, session=self.id)
        try:
            result = run_until_done(self.session.answer(question, observer=ObserverGroup(display, writer),
                                                     approver=self.approver, stream=self.stream))
        except KeyboardInterrupt:
            display.calls_stopped()
            display.notice("cancelled: the answer was stopped; the conversation goes on without it")
            if writer is not None:
                writer.interrupted()
            return
        except ToolrunError as exc:
            display.calls_stopped()
            display.notice(f"error: {exc}")
            return
        finally:
            display.write_held()  # an answer that broke off (a crash inside toolrun): every call line it had
            if writer is not None:
                writer.flush()  # what an answer that broke off had done so far
        display.summary(result, result.mode or "live")
        if result.failed:
            display.notice(f"error: the answer failed: {result.error or result.stop_reason}")
        elif result.error:
            display.notice(f"warning: {result.error}")
        usage = self.session.usage
        _info(f"chat so far: {counted(self.session.answers, 'answer')} · {usage.input_tokens} in / "
              f"{usage.output_tokens} out tokens")
        if writer is not None and writer.problem:
            display.notice(f"warning: {writer.problem}")


def _info(line: str) -> None:
    click.echo(line, err=True)


def _typed_path(typed: str) -> Path:
    """A file name typed at the prompt, as the file system names it. An ASCII stdin is read as UTF-8
    (``fit_narrow_streams``), but a C locale's file system encoding is ASCII: the name's bytes go
    back to it, as they were typed, and a non-ASCII name neither fails to encode nor changes."""
    try:
        typed_bytes = typed.encode(getattr(sys.stdin, "encoding", None) or "utf-8", "surrogateescape")
    except (LookupError, UnicodeEncodeError):  # not what that stdin could have read: keep the text
        return Path(typed).expanduser()
    return Path(os.fsdecode(typed_bytes)).expanduser()


def _line_editing(history: Path | None) -> None:
    """Arrow keys, Ctrl-R, and a history kept across chats in ``history`` (None: this chat's only)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - a Python built without it still chats, without editing
        return
    readline.set_history_length(1000)
    if history is None:
        return
    try:
        make_private_folders(history.parent)
        create_private(history)  # what was typed: 0600, like the run log beside it
        readline.read_history_file(history)
    except OSError:
        pass
    atexit.register(_save_history, readline, history)


def _save_history(readline: object, history: Path) -> None:
    try:
        readline.write_history_file(history)  # type: ignore[attr-defined]
    except OSError:
        pass
