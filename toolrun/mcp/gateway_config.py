"""``toolrun mcp --config FILE``: a whole server in one YAML file, checked like a tool file.

```yaml
listen: 0.0.0.0:8080
tools_dir: tools.d
resource_url: https://tools.internal.example.com/mcp
auth: {oidc: {issuer: https://sso.internal.example.com/realms/ops, rules: [...]}}   # or a path
audit: /var/log/toolrun/audit.jsonl
```

The keys are those of ``toolrun schema gateway``; each is the command-line option of the
same name (``listen`` is ``--http``), and an option given on the command line wins. Paths
are relative to the file. The ``auth`` mapping is checked by the auth file's own rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.core.durations import parse_duration
from toolrun.core.errors import LoadError, Problem, UserError
from toolrun.core.packaged_schemas import packaged_schema
from toolrun.core.yamlsource import LineDict, YamlSyntaxError, load_yaml_file
from toolrun.mcp.access import InlineAuth, access_list_from
from toolrun.mcp.addresses import check_origin, parse_address
from toolrun.mcp.service import parse_metrics_address

# Keys this version reads but cannot act on yet: named in a problem when used, never silently ignored.
NOT_SUPPORTED_YET: dict[str, str] = {}
_PATH_KEYS = ("tools_dir", "recipes", "audit")
_PLAIN_KEYS = {"listen": "http", "tools": "tools", "resource_url": "resource_url", "allow_origins": "allow_origins",
               "assume_yes": "assume_yes", "max_sessions": "max_sessions", "max_client_sessions": "max_client_sessions",
               "max_connections": "max_connections", "metrics_listen": "metrics_listen", "stateless": "stateless"}


@dataclass(frozen=True)
class GatewayConfig:
    """The file's settings as the keyword arguments of ``toolrun.mcp.serve`` (only the keys it sets)."""

    file: Path
    options: dict[str, Any] = field(default_factory=dict)


def _line(document: Any, key: str) -> int | None:
    return document.key_lines.get(key, document.line) if isinstance(document, LineDict) else None


def load_gateway_config(path: Path) -> GatewayConfig:
    """Read and check a gateway file; ``LoadError`` listing every problem (file, line, fix)."""
    if not path.is_file():
        raise LoadError(Problem(path, None, "cannot read the config file: it does not exist",
                                "pass --config with a YAML file; `toolrun schema gateway` prints its schema"))
    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise LoadError([exc.problem]) from None
    if not isinstance(document, dict):
        raise LoadError(Problem(path, getattr(document, "line", None), "a config file is a mapping of settings",
                                "write it like listen: 0.0.0.0:8080 and tools_dir: tools.d, one per line"))
    problems = _schema_problems(document, path)
    for key, fix in NOT_SUPPORTED_YET.items():
        if key in document:
            problems.append(Problem(path, _line(document, key), f"{key} is not supported by this version", fix))
    options, option_problems = _options(document, path)
    # A value the schema refused (listen: nonsense) is not told a second time by the check its option gets.
    refused = {problem.line for problem in problems}
    option_problems = [problem for problem in option_problems if problem.line not in refused]
    if isinstance(options.get("auth"), InlineAuth):  # its problems with the others, not at the server's start
        try:
            access_list_from(document["auth"], path, options.get("resource_url"))
        except LoadError as exc:
            option_problems += exc.problems
    if problems or option_problems:
        raise LoadError(problems + option_problems)
    return GatewayConfig(path, options)


def _schema_problems(document: dict[str, Any], path: Path) -> list[Problem]:
    from toolrun.core.schema_errors import schema_problems  # jsonschema: only when a server starts from a file

    schema = packaged_schema("gateway")
    # The auth mapping is checked by the auth file's rules (the same words as in an --auth file): here only its type.
    auth = schema["properties"]["auth"]
    outer = {**schema, "properties": {**schema["properties"],
                                      "auth": {"type": auth["type"], "x-expected": auth["x-expected"]}}}
    return schema_problems(document, outer, path)


def _options(document: dict[str, Any], path: Path) -> tuple[dict[str, Any], list[Problem]]:
    folder = path.parent
    options: dict[str, Any] = {name: document[key] for key, name in _PLAIN_KEYS.items() if key in document}
    if isinstance(options.get("metrics_listen"), int):  # a bare port, as --metrics-listen 9464
        options["metrics_listen"] = str(options["metrics_listen"])
    for key in _PATH_KEYS:
        if isinstance(document.get(key), str):
            options[key] = folder / document[key]
    auth = document.get("auth")
    if isinstance(auth, str):
        options["auth"] = folder / auth
    elif isinstance(auth, dict):
        options["auth"] = InlineAuth(auth, path)
    problems = _address_problems(document, path)
    for key in ("header_timeout", "body_timeout", "drain_delay"):
        if key in document:
            try:
                options[key] = parse_duration(document[key], zero=key == "drain_delay")
            except ValueError as exc:
                problems.append(Problem(path, _line(document, key), f"{key}: {exc}", f"write it like {key}: 30s"))
    return options, problems


def _address_problems(document: dict[str, Any], path: Path) -> list[Problem]:
    """``listen``, ``metrics_listen`` and ``allow_origins`` checked as the server checks their options, each
    mistake at its line with the file's others (not the first one alone when the server starts)."""
    problems: list[Problem] = []

    def check(key: str, value: Any, reading: Callable[[str], Any]) -> Any:
        try:
            return reading(value)
        except UserError as exc:
            problems.extend(Problem(path, _line(document, key), _in_file_words(problem.message),
                                    _in_file_words(problem.fix) if problem.fix else problem.fix)
                            for problem in exc.problems)
            return None

    listen = check("listen", document["listen"], parse_address) if isinstance(document.get("listen"), str) else None
    metrics = document.get("metrics_listen")
    if isinstance(metrics, str | int) and not isinstance(metrics, bool):
        # Without listen here (--http may give it) the metrics are checked but against no public address: port 0 is none.
        check("metrics_listen", str(metrics), lambda text: parse_metrics_address(text, listen or ("", 0)))
    origins = document.get("allow_origins")
    for origin in origins if isinstance(origins, list) else []:
        if isinstance(origin, str):
            check("allow_origins", origin, check_origin)
    return problems


# The options' checks word their problems as options; in the file the same values are keys.
_OPTION_WORDS = (("--metrics-listen ", "metrics_listen: "), ("--metrics-listen", "metrics_listen"),
                 ("e.g. --allow-origin http://localhost:6274", "e.g. allow_origins: [http://localhost:6274]"),
                 ("--allow-origin ", "allow_origins: "), (" (one option per origin; '*' is not accepted)",
                                                          " ('*' is not accepted)"),
                 ("--http ", "listen: "), ("--http", "listen"))


def _in_file_words(text: str) -> str:
    for option, key in _OPTION_WORDS:
        text = text.replace(option, key)
    return text
