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

from toolrun.backends.base import Backend, BackendOutput, CallContext
from toolrun.backends.shell_lint import shell_lint_warnings
from toolrun.backends.warning import BackendWarning
from toolrun.core.durations import parse_duration
from toolrun.core.errors import Problem
from toolrun.core.templates import check_template, first_character_is_authored, placeholders, render, template_fix
from toolrun.core.text import excerpt
from toolrun.core.tool import Tool

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
STDERR_TAIL_LINES = 20
NO_OUTPUT = "(the command succeeded and printed nothing)"  # an empty result confuses some providers
MAX_CAPTURE_BYTES = 16 * 1024 * 1024  # memory guard; the tool's max_output cuts far earlier
KILL_GRACE_SECONDS = 1.0
_ARG_REFERENCE = re.compile(r"TOOLRUN_ARG_([A-Za-z0-9_]+)")
DEFAULT_OK_EXIT_CODES = (0,)
RESULT_VARIABLES = frozenset({"stdout", "stderr", "exit_code"})  # what a result template sees besides the arguments
# Commands whose exit code 1 is an answer, not a failure: grep found nothing, diff found differences.
EXIT_ONE_IS_AN_ANSWER = {"grep": "finds nothing", "egrep": "finds nothing", "fgrep": "finds nothing",
                         "rg": "finds nothing", "diff": "finds differences", "cmp": "finds differences"}


def argument_env_name(name: str) -> str:
    """``city`` -> ``TOOLRUN_ARG_CITY``; characters a shell cannot name become ``_``."""
    return "TOOLRUN_ARG_" + re.sub(r"[^A-Za-z0-9_]", "_", name).upper()


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _templates_of(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, template) for every templated string of a shell config."""
    found: list[tuple[str, str]] = []
    for index, element in enumerate(config.get("argv") or []):
        if isinstance(element, str):
            found.append((f"argv.{index}", element))
    for key in ("cwd", "stdin", "result"):
        if isinstance(config.get(key), str):
            found.append((key, config[key]))
    for name, value in (config.get("env") or {}).items():
        if isinstance(value, str):
            found.append((f"env.{name}", value))
    return found


class ShellBackend(Backend):
    kind = "shell"
    arguments_through_templates = True

    def placeholders(self, tool: Tool) -> set[str]:
        """Arguments used by argv/cwd/env/stdin templates, or by ``$TOOLRUN_ARG_X`` in a shell command."""
        config = tool.backend.config
        names: set[str] = set()
        for key, template in _templates_of(config):
            names |= placeholders(template) - (RESULT_VARIABLES if key == "result" else set())
        command = config.get("command")
        if config.get("shell") and isinstance(command, str):
            by_env_name = {argument_env_name(p): p for p in (tool.parameters.get("properties") or {})}
            for suffix in _ARG_REFERENCE.findall(command):
                env_name = "TOOLRUN_ARG_" + suffix
                names.add(by_env_name.get(env_name, suffix.lower()))
        return names

    def check(self, tool: Tool) -> list[Problem]:
        """argv empty or not strings, ``command`` misuse, template syntax errors, a bad timeout."""
        config = tool.backend.config
        where = tool.source.file
        problems: list[Problem] = []

        def add(key: str, message: str, fix: str | None = None) -> None:
            problems.append(Problem(where, tool.source.line_of(f"backend.shell.{key}"), message, fix))

        # Key combinations (command without shell: true, argv with it) are the loader's checks.
        if config.get("shell"):
            command = config.get("command")
            if "command" in config and (not isinstance(command, str) or not command.strip()):
                add("command", "shell: true needs a non-empty command string", "add command: \"...\"")
            elif isinstance(command, str) and ("{{" in command or "{%" in command):
                add("command", "a shell: true command must not contain {{ }} or {% %} templates "
                    "(model values would become shell syntax)",
                    "read arguments from environment variables, e.g. \"$TOOLRUN_ARG_CITY\"")
            by_env_name: dict[str, list[str]] = {}
            for name in tool.parameters.get("properties") or {}:
                by_env_name.setdefault(argument_env_name(name), []).append(name)
            for env_name, names in by_env_name.items():
                if len(names) > 1:
                    add("command", f"parameters {', '.join(map(repr, names))} all become {env_name}: "
                        "one would replace the other", "rename them so they differ in more than case and punctuation")
        elif "argv" in config:
            argv = config.get("argv")
            if not isinstance(argv, list) or not argv:
                add("argv", "argv must be a non-empty list: [command, arg, ...]",
                    "e.g. argv: [df, -h, --, \"{{ path }}\"]")
            elif not all(isinstance(element, str) for element in argv):
                add("argv", "every argv element must be a string", "quote numbers, e.g. \"10\"")
            elif not argv[0].strip():
                add("argv", "argv[0] (the command) is empty", "name the program first, e.g. argv: [df, -h]")
        env = config.get("env")
        if env is not None and (not isinstance(env, dict)
                                or not all(isinstance(v, (str, int, float)) for v in env.values())):
            add("env", "env must map variable names to strings", 'e.g. env: {LANG: C.UTF-8, TOKEN: "${env:TOKEN}"}')
        for key, template in _templates_of(config):
            error = check_template(template)
            if error:
                add(key, error, template_fix(error))
        if config.get("timeout") is not None:
            try:
                parse_duration(config["timeout"])
            except ValueError as exc:
                add("timeout", str(exc), "write it like 30s, 500ms or 2m")
        codes = config.get("ok_exit_codes")
        if codes is not None and (not isinstance(codes, list) or not codes or not all(_is_exit_code(c) for c in codes)):
            add("ok_exit_codes", f"ok_exit_codes must be a non-empty list of exit codes 0-255, got {codes!r}",
                "e.g. ok_exit_codes: [0, 1] (grep: 1 means nothing found)")
        return problems

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """Model values read as options, secrets in argv, unannotated commands (shell_lint), and exit code 1."""
        return [*shell_lint_warnings(tool), *_exit_code_warnings(tool.backend.config)]

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        config = tool.backend.config
        try:
            argv = self._argv(config, arguments, context, tool.parameters.get("properties") or {})
        except OptionInjection as exc:
            return BackendOutput(str(exc), is_error=True)
        env = self._environment(tool, config, arguments, context)
        cwd = tool.base_dir
        if config.get("cwd"):
            cwd = tool.base_dir / os.path.expanduser(render(str(config["cwd"]), arguments, context.environ))
        stdin_text = render(config["stdin"], arguments, context.environ) if config.get("stdin") is not None else None
        timeout = parse_duration(config["timeout"]) if config.get("timeout") is not None else None
        if not cwd.is_dir():
            return BackendOutput(f"working directory not found: {cwd}", is_error=True)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin_text is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own process group, so a timeout kills children too
            )
        except FileNotFoundError:
            return BackendOutput(f"command not found: {argv[0]}", is_error=True)
        except (PermissionError, NotADirectoryError) as exc:
            return BackendOutput(f"cannot run {argv[0]}: {exc.strerror}", is_error=True)
        try:
            stdout, stderr = await asyncio.wait_for(_communicate(process, stdin_text), timeout)
        except TimeoutError:
            await _kill_group(process)
            return BackendOutput(f"the command timed out after {timeout:g}s and was killed", is_error=True)
        except BaseException:
            await _kill_group(process)
            raise
        ok_codes = config.get("ok_exit_codes") or DEFAULT_OK_EXIT_CODES
        if process.returncode not in ok_codes:
            return BackendOutput(_failure_text(process.returncode, stdout, stderr), is_error=True)
        if config.get("result") is not None:
            return _rendered_result(str(config["result"]), arguments, context, stdout, stderr, process.returncode)
        text = stdout.rstrip("\n")  # the final newline is noise to a model
        if text:
            return BackendOutput(text)
        return BackendOutput(NO_OUTPUT if process.returncode == 0 else f"(the command printed nothing; exit code {process.returncode})")

    def _argv(self, config: Mapping[str, Any], arguments: dict[str, Any], context: CallContext,
              properties: Mapping[str, Any]) -> list[str]:
        if config.get("shell"):
            return ["/bin/sh", "-c", str(config["command"])]
        argv: list[str] = []
        operands_only = False  # after "--" nothing is read as an option
        for element in config["argv"]:
            rendered = render(str(element), arguments, context.environ)
            if "{%" in element and not rendered.strip():
                continue  # an optional flag whose condition was false
            if not operands_only and argv and rendered.startswith("-"):
                _refuse_model_option(str(element), rendered, arguments, properties, context.environ)
            operands_only = operands_only or element == "--"
            argv.append(rendered)
        return argv

    def _environment(self, tool: Tool, config: Mapping[str, Any], arguments: dict[str, Any],
                     context: CallContext) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH") or DEFAULT_PATH}
        for name, value in (config.get("env") or {}).items():
            env[str(name)] = render(str(value), arguments, context.environ)
        if config.get("shell"):
            declared = tool.parameters.get("properties") or {}
            for name, value in arguments.items():
                if name in declared:  # an undeclared extra is unvalidated and could shadow a declared NAME
                    env[argument_env_name(name)] = _env_value(value)
        return env


def _exit_code_warnings(config: Mapping[str, Any]) -> list[BackendWarning]:
    """shell-exit-code: grep, diff and the like answer with exit code 1, which is an error result by default."""
    argv = config.get("argv")
    if config.get("shell") or "ok_exit_codes" in config or not isinstance(argv, list) or not argv:
        return []
    program = os.path.basename(str(argv[0]))
    meaning = EXIT_ONE_IS_AN_ANSWER.get(program)
    if meaning is None:
        return []
    return [BackendWarning(
        "shell-exit-code", "backend.shell.argv",
        f"{program} exits with code 1 when it {meaning}, which is an error result unless ok_exit_codes "
        "allows it: add ok_exit_codes: [0, 1] (and a result template that says what an empty output means)",
    )]


def _is_exit_code(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255


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
