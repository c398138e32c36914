"""The shell backend's config, parsed once from ``backend.shell`` into a frozen ``ShellConfig``.

``parse_shell_config`` returns the typed config or every ``ConfigProblem`` it found: keys that
exclude each other (``command`` without ``shell: true``, ``argv`` with it), an empty or
non-string argv, a templated shell command, bad env values, template syntax errors, a bad
timeout or ok_exit_codes. This module is the one reader of the raw mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolrun.backends.base import ConfigProblem
from toolrun.core.durations import parse_duration
from toolrun.core.templates import check_template, template_fix

DEFAULT_OK_EXIT_CODES = (0,)


@dataclass(frozen=True)
class ShellConfig:
    """One shell tool's command: argv (or a /bin/sh command line), its surroundings, what counts as success."""

    argv: tuple[str, ...] = ()  # each element a template; empty with shell: true
    shell: bool = False
    command: str = ""  # the /bin/sh command line (shell: true)
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # (name, template)
    stdin: str | None = None
    result: str | None = None
    timeout: float | None = None  # None: the tool's timeout
    ok_exit_codes: tuple[int, ...] | None = None  # None: not written (DEFAULT_OK_EXIT_CODES)

    @property
    def success_codes(self) -> tuple[int, ...]:
        return self.ok_exit_codes or DEFAULT_OK_EXIT_CODES


def parse_shell_config(config: Mapping[str, Any]) -> ShellConfig | list[ConfigProblem]:
    """The typed config, or every problem of ``config``."""
    problems = [*_key_problems(config), *_command_problems(config), *_env_problems(config),
                *(ConfigProblem(key, error, template_fix(error))
                  for key, template in written_templates(config) if (error := check_template(template))),
                *_option_problems(config)]
    return problems or _shell_config(config)


def _shell_config(config: Mapping[str, Any]) -> ShellConfig:
    codes = config.get("ok_exit_codes")
    return ShellConfig(
        argv=tuple(config.get("argv") or ()) if not config.get("shell") else (),
        shell=config.get("shell") is True,
        command=str(config.get("command") or ""),
        cwd=str(config["cwd"]) if config.get("cwd") else None,
        env=tuple((str(name), str(value)) for name, value in (config.get("env") or {}).items()),
        stdin=str(config["stdin"]) if config.get("stdin") is not None else None,
        result=str(config["result"]) if config.get("result") is not None else None,
        timeout=parse_duration(config["timeout"]) if config.get("timeout") is not None else None,
        ok_exit_codes=tuple(codes) if codes else None,
    )


def written_templates(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, template) for every templated string of a shell config, parsed or not (the loader's checks)."""
    found: list[tuple[str, str]] = []
    argv = config.get("argv")
    for index, element in enumerate(argv if isinstance(argv, list) else []):
        if isinstance(element, str):
            found.append((f"argv.{index}", element))
    for key in ("cwd", "stdin", "result"):
        if isinstance(config.get(key), str):
            found.append((key, config[key]))
    env = config.get("env")
    for name, value in (env.items() if isinstance(env, Mapping) else ()):
        if isinstance(value, str):
            found.append((f"env.{name}", value))
    return found


def runs_through_shell(config: Mapping[str, Any]) -> bool:
    """``shell: true`` (or any true value) in a config, parsed or not."""
    return bool(config.get("shell"))


def shell_command(config: Mapping[str, Any]) -> str | None:
    """The /bin/sh command line of a ``shell: true`` config, parsed or not; None for an argv config."""
    command = config.get("command")
    return command if config.get("shell") and isinstance(command, str) else None


def _key_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """Keys that exclude or need each other (the schema cannot say so)."""
    uses_shell = config.get("shell") is True
    problems = []
    if "command" in config and not uses_shell:
        problems.append(ConfigProblem("command", "'command' runs through /bin/sh",
                                      "add shell: true, or write argv as a list"))
    if uses_shell and "command" not in config:
        problems.append(ConfigProblem("shell", "shell: true needs a 'command'",
                                      'add command: "..." (arguments as "$TOOLRUN_ARG_<NAME>"), '
                                      "or drop shell: true and use argv"))
    if uses_shell and "argv" in config:
        problems.append(ConfigProblem("argv", "'argv' and shell: true exclude each other",
                                      "use argv without shell, or shell: true with command"))
    if not uses_shell and "command" not in config and "argv" not in config:
        problems.append(ConfigProblem("", "the shell backend needs 'argv'", 'add argv: [cmd, arg, "{{ name }}"]'))
    return problems


def _command_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """A shell command that is empty or templated; an argv that is empty or not all strings."""
    if config.get("shell"):
        command = config.get("command")
        if "command" in config and (not isinstance(command, str) or not command.strip()):
            return [ConfigProblem("command", "shell: true needs a non-empty command string", "add command: \"...\"")]
        if isinstance(command, str) and ("{{" in command or "{%" in command):
            return [ConfigProblem("command", "a shell: true command must not contain {{ }} or {% %} templates "
                                  "(model values would become shell syntax)",
                                  "read arguments from environment variables, e.g. \"$TOOLRUN_ARG_CITY\"")]
        return []
    if "argv" not in config:
        return []
    argv = config.get("argv")
    if not isinstance(argv, list) or not argv:
        return [ConfigProblem("argv", "argv must be a non-empty list: [command, arg, ...]",
                              "e.g. argv: [df, -h, --, \"{{ path }}\"]")]
    if not all(isinstance(element, str) for element in argv):
        return [ConfigProblem("argv", "every argv element must be a string", "quote numbers, e.g. \"10\"")]
    if not argv[0].strip():
        return [ConfigProblem("argv", "argv[0] (the command) is empty", "name the program first, e.g. argv: [df, -h]")]
    return []


def _env_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    env = config.get("env")
    if env is not None and (not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values())):
        return [ConfigProblem("env", "env must map variable names to strings",
                              'e.g. env: {LANG: C.UTF-8, TOKEN: "${env:TOKEN}"}')]
    return []


def _option_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """timeout and ok_exit_codes."""
    problems = []
    if config.get("timeout") is not None:
        try:
            parse_duration(config["timeout"])
        except ValueError as exc:
            problems.append(ConfigProblem("timeout", str(exc), "write it like 30s, 500ms or 2m"))
    codes = config.get("ok_exit_codes")
    if codes is not None and (not isinstance(codes, list) or not codes or not all(_is_exit_code(c) for c in codes)):
        problems.append(ConfigProblem("ok_exit_codes",
                                      f"ok_exit_codes must be a non-empty list of exit codes 0-255, got {codes!r}",
                                      "e.g. ok_exit_codes: [0, 1] (grep: 1 means nothing found)"))
    return problems


def _is_exit_code(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255
