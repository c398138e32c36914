"""The shell backend: run a command with the call's arguments, never through a shell by default.

``argv: [cmd, arg, "{{ city }}"]``: each element is rendered in Jinja2's sandbox and passed
to ``exec`` as one argument, so a model-supplied ``x; touch /tmp/owned`` or ``$(id)`` stays
one literal string. Tool authors should put ``--`` before positional values so a value
starting with ``-`` is not read as an option (``[grep, -c, --, "{{ pattern }}", file]``).
An element that uses ``{% ... %}`` and renders to nothing is dropped (optional flags).

``shell: true`` (opt-in) runs ``command`` with ``/bin/sh -c``; arguments reach it only as
environment variables ``TOOLRUN_ARG_<NAME>`` (non-strings as JSON), never spliced into the
command text. The child gets an empty environment plus ``PATH`` plus the tool's ``env``.
It runs in its own session; on timeout or cancel the whole process group is killed.

An exit code outside ``ok_exit_codes`` (default ``[0]``; ``[0, 1]`` for grep) is an error
result with the code and the stderr tail. Otherwise the result is stdout, or the ``result``
template rendered over ``stdout``, ``stderr``, ``exit_code`` and the arguments.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Mapping
from typing import Any

from toolrun.backends.argument_text import lone_surrogate_problem
from toolrun.backends.base import Backend, BackendOutput, CallContext, ConfigProblem
from toolrun.backends.shell_config import (
    ShellConfig,
    parse_shell_config,
    runs_through_shell,
    shell_command,
    written_templates,
)
from toolrun.backends.shell_lint import shell_lint_warnings
from toolrun.backends.warning import BackendWarning
from toolrun.core.errors import Problem
from toolrun.core.templates import first_character_is_authored, placeholders, render
from toolrun.core.text import excerpt
from toolrun.core.tool import Tool

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
STDERR_TAIL_LINES = 20
NO_OUTPUT = "(the command succeeded and printed nothing)"  # an empty result confuses some providers
MAX_CAPTURE_BYTES = 16 * 1024 * 1024  # memory guard; the tool's max_output cuts far earlier
KILL_GRACE_SECONDS = 1.0
_ARG_REFERENCE = re.compile(r"TOOLRUN_ARG_([A-Za-z0-9_]+)")
RESULT_VARIABLES = frozenset({"stdout", "stderr", "exit_code"})  # what a result template sees besides the arguments
# Commands whose exit code 1 is an answer, not a failure: grep found nothing, diff found differences.
EXIT_ONE_IS_AN_ANSWER = {"grep": "finds nothing", "egrep": "finds nothing", "fgrep": "finds nothing",
                         "rg": "finds nothing", "diff": "finds differences", "cmp": "finds differences"}


def argument_env_name(name: str) -> str:
    """``city`` -> ``TOOLRUN_ARG_CITY``; characters a shell cannot name become ``_``."""
    return "TOOLRUN_ARG_" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class ShellBackend(Backend):
    kind = "shell"
    arguments_through_templates = True

    def placeholders(self, tool: Tool) -> set[str]:
        """Arguments used by argv/cwd/env/stdin templates, or by ``$TOOLRUN_ARG_X`` in a shell command."""
        names: set[str] = set()
        for key, template in written_templates(tool.backend.config):
            names |= placeholders(template) - (RESULT_VARIABLES if key == "result" else set())
        command = shell_command(tool.backend.config)
        if command is not None:
            by_env_name = {argument_env_name(p): p for p in (tool.parameters.get("properties") or {})}
            for suffix in _ARG_REFERENCE.findall(command):
                env_name = "TOOLRUN_ARG_" + suffix
                names.add(by_env_name.get(env_name, suffix.lower()))
        return names

    def parse(self, config: Mapping[str, Any]) -> ShellConfig | list[ConfigProblem]:
        """The typed config (``ShellConfig``), or every problem of ``config``."""
        return parse_shell_config(config)

    def check(self, tool: Tool) -> list[Problem]:
        """``parse``'s problems, and parameters whose ``TOOLRUN_ARG_`` names collide in a shell command."""
        problems = self.config_problems(tool)
        if not runs_through_shell(tool.backend.config):
            return problems
        by_env_name: dict[str, list[str]] = {}
        for name in tool.parameters.get("properties") or {}:
            by_env_name.setdefault(argument_env_name(name), []).append(name)
        line = tool.source.line_of("backend.shell.command")
        return problems + [
            Problem(tool.source.file, line, f"parameters {', '.join(map(repr, names))} all become {env_name}: "
                    "one would replace the other", "rename them so they differ in more than case and punctuation")
            for env_name, names in by_env_name.items() if len(names) > 1]

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """Model values read as options, secrets in argv, unannotated commands (shell_lint), and exit code 1."""
        config: ShellConfig = self.config_of(tool)
        return [*shell_lint_warnings(tool, config), *_exit_code_warnings(config)]

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        config: ShellConfig = self.config_of(tool)
        if problem := lone_surrogate_problem(arguments, "the command"):
            return BackendOutput(problem, is_error=True)
        try:
            argv = self._argv(config, arguments, context, tool.parameters.get("properties") or {})
        except OptionInjection as exc:
            return BackendOutput(str(exc), is_error=True)
        env = self._environment(tool, config, arguments, context)
        cwd = tool.base_dir
        if config.cwd:
            cwd = tool.base_dir / os.path.expanduser(render(config.cwd, arguments, context.environ))
        stdin_text = render(config.stdin, arguments, context.environ) if config.stdin is not None else None
        if not cwd.is_dir():
            return BackendOutput(f"working directory not found: {cwd}", is_error=True)
        starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin_text is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group, so a timeout kills children too
        ))
        try:
            process = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # Cancelled while the process was starting: asyncio would kill only the process it started,
            # and whatever that had started already (sh -c's command) would outlive the call.
            await _kill_once_started(starting)
            raise
        except FileNotFoundError:
            return BackendOutput(f"command not found: {argv[0]}", is_error=True)
        except (PermissionError, NotADirectoryError) as exc:
            return BackendOutput(f"cannot run {argv[0]}: {exc.strerror}", is_error=True)
        try:
            stdout, stderr = await asyncio.wait_for(_communicate(process, stdin_text), config.timeout)
        except TimeoutError:
            await _kill_group(process)
            return BackendOutput(f"the command timed out after {config.timeout:g}s and was killed", is_error=True)
        except BaseException:
            await _kill_group(process)
            raise
        if process.returncode not in config.success_codes:
            return BackendOutput(_failure_text(process.returncode, stdout, stderr), is_error=True)
        if config.result is not None:
            return _rendered_result(config.result, arguments, context, stdout, stderr, process.returncode)
        text = stdout.rstrip("\n")  # the final newline is noise to a model
        if text:
            return BackendOutput(text)
        return BackendOutput(NO_OUTPUT if process.returncode == 0 else f"(the command printed nothing; exit code {process.returncode})")

    def _argv(self, config: ShellConfig, arguments: dict[str, Any], context: CallContext,
              properties: Mapping[str, Any]) -> list[str]:
        if config.shell:
            return ["/bin/sh", "-c", config.command]
        argv: list[str] = []
        operands_only = False  # after "--" nothing is read as an option
        for element in config.argv:
            rendered = render(element, arguments, context.environ)
            if "{%" in element and not rendered.strip():
                continue  # an optional flag whose condition was false
            if not operands_only and argv and rendered.startswith("-"):
                _refuse_model_option(element, rendered, arguments, properties, context.environ)
            operands_only = operands_only or element == "--"
            argv.append(rendered)
        return argv

    def _environment(self, tool: Tool, config: ShellConfig, arguments: dict[str, Any],
                     context: CallContext) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH") or DEFAULT_PATH}
        for name, value in config.env:
            env[name] = render(value, arguments, context.environ)
        if config.shell:
            declared = tool.parameters.get("properties") or {}
            for name, value in arguments.items():
                if name in declared:  # an undeclared extra is unvalidated and could shadow a declared NAME
                    env[argument_env_name(name)] = _env_value(value)
        return env


def _exit_code_warnings(config: ShellConfig) -> list[BackendWarning]:
    """shell-exit-code: grep, diff and the like answer with exit code 1, which is an error result by default."""
    if config.shell or config.ok_exit_codes is not None or not config.argv:
        return []
    program = os.path.basename(config.argv[0])
    meaning = EXIT_ONE_IS_AN_ANSWER.get(program)
    if meaning is None:
        return []
    return [BackendWarning(
        "shell-exit-code", "backend.shell.argv",
        f"{program} exits with code 1 when it {meaning}, which is an error result unless ok_exit_codes "
        "allows it: add ok_exit_codes: [0, 1] (and a result template that says what an empty output means)",
    )]


def _rendered_result(template: str, arguments: dict[str, Any], context: CallContext, stdout: str, stderr: str,
                     exit_code: int | None) -> BackendOutput:
    """The ``result`` template over the output; an error result showing the output when the template fails."""
    variables = {**arguments, "stdout": stdout, "stderr": stderr, "exit_code": exit_code}
    try:
        text = render(template, variables, context.environ)
    except Exception as exc:  # e.g. a template that expects output the command did not print
        shown = _tail(stdout) or _tail(stderr) or "(nothing)"
        return BackendOutput(f"the tool's result template failed ({exc}); the command printed:\n{shown}", is_error=True)
    text = text.rstrip("\n")  # "{{ stdout }}" ends with the command's final newline: noise to a model
    return BackendOutput(text if text.strip() else "(the result template gave nothing)")


class OptionInjection(ValueError):
    """A model-supplied value would be read as an option ("--output=/etc/x") by the command."""


def _refuse_model_option(element: str, rendered: str, arguments: Mapping[str, Any], properties: Mapping[str, Any],
                         environ: Mapping[str, str]) -> None:
    """Raise OptionInjection when an argv element renders to a leading "-" that its author did not write.

    Decided from the template's literal text: the first character must be literal text the
    author wrote (``{% if verbose %}-v{% endif %}``), or come from an expression over values
    the tool's schema enumerates (``enum: [-l, -a]``: the author's own options). A dash that a
    filter, slice, ``~`` or ``trim`` makes of a model value (``{{ ref | replace('refs/heads/', '') }}``
    with ``refs/heads/--output=x``), the integer ``-1``, a value after a ``{# comment #}``: refused.
    """
    names = sorted(placeholders(element))
    model_values = [name for name in names if name in arguments and not _enumerated(properties.get(name))]
    if not model_values:
        return
    enumerated = [name for name in arguments if _enumerated(properties.get(name))]
    try:
        if first_character_is_authored(element, arguments, enumerated, rendered, environ):
            return
    except Exception:  # noqa: BLE001 - a template that renders differently when traced: refuse, to be safe
        pass
    shown = " or ".join(f"'{name}'" for name in model_values)
    values = ", ".join(repr(excerpt(str(arguments[name]), 60)) for name in model_values)  # redacted before the cut
    raise OptionInjection(
        f"refused: argument {shown} starts with '-' once rendered ({values}) and the command would read it "
        "as an option. Pass a value that does not start with '-' (e.g. ./-name for a file); "
        "tool authors: put \"--\" before positional values in argv"
    )


def _enumerated(schema: Any) -> bool:
    return isinstance(schema, dict) and ("enum" in schema or "const" in schema)


async def _read_capped(stream: asyncio.StreamReader | None) -> bytes:
    """Read a stream to its end, keeping at most MAX_CAPTURE_BYTES (the rest is drained)."""
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        if len(kept) < MAX_CAPTURE_BYTES:
            kept += chunk[: MAX_CAPTURE_BYTES - len(kept)]
    return bytes(kept)


async def _communicate(process: asyncio.subprocess.Process, stdin_text: str | None) -> tuple[str, str]:
    async def feed() -> None:
        if process.stdin is None:
            return
        try:
            if stdin_text:
                process.stdin.write(stdin_text.encode("utf-8"))
                await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command did not read its input; its exit code tells the story
        finally:
            process.stdin.close()

    _, out, err = await asyncio.gather(feed(), _read_capped(process.stdout), _read_capped(process.stderr))
    await process.wait()
    return out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace")


def _signal_group(pid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _kill_once_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """The process group of a call cancelled while its process was starting, killed once it has started.

    A cancellation while it waits (a second Ctrl-C, a client's cancel and then the end of its stdin)
    does not reach the start: cancelled, asyncio would kill only the process it started, and sh -c's
    command would outlive the call, as the first cancellation would have without the shield.
    """
    while True:
        try:
            process = await asyncio.shield(starting)
            break
        except asyncio.CancelledError:
            if starting.cancelled():  # the start itself was cancelled (the loop closing): asyncio killed it
                return
        except Exception:  # it did not start (no such command): nothing runs
            return
    await _kill_group(process)


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, give it a moment, then SIGKILL whatever is left."""
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), KILL_GRACE_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            pass
    _signal_group(process.pid, signal.SIGKILL)
    if process.returncode is None:
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), KILL_GRACE_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            pass


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _failure_text(returncode: int | None, stdout: str, stderr: str) -> str:
    if returncode is not None and returncode < 0:
        try:
            what = f"the command was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            what = f"the command was killed by signal {-returncode}"
    else:
        what = f"the command exited with code {returncode}"
    if stderr.strip():
        return f"{what}; stderr (last lines):\n{_tail(stderr)}"
    if stdout.strip():
        return f"{what}; stdout (last lines):\n{_tail(stdout)}"
    return what
