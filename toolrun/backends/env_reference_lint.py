"""Environment variables written the shell's way in a tool's config, which toolrun sends as written.

toolrun reads the environment only through ``${env:NAME}``: a ``${NAME}`` anywhere in a
templated value is always a mistake (an error), and a bare ``$NAME`` in a header or an
``env`` value most likely one (a warning; ``$top`` or ``$gt`` in a query or body are API
syntax and stay legal).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any

from toolrun.backends.warning import BackendWarning


@functools.cache
def _braced_name() -> re.Pattern[str]:
    return re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${NAME}; ${env:NAME} has a colon, ${{ x }} a brace


@functools.cache
def _bare_name() -> re.Pattern[str]:
    # $NAME as environment variables are spelt (upper case); not $$NAME, \$NAME or part of a word.
    return re.compile(r"(?<![\w$\\])\$([A-Z][A-Z0-9_]*)\b")


def config_strings(value: Any, key_path: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """(dotted key path, text) for every string in a config, nested mappings and lists included."""
    if isinstance(value, str):
        yield key_path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{key_path}.{key}"
            if path not in skip:
                yield from config_strings(item, path, skip)
    elif isinstance(value, list):
        for item in value:
            yield from config_strings(item, key_path, skip)


def env_reference_warnings(strings: Iterable[tuple[str, str]], bare_checked: tuple[str, ...]) -> list[BackendWarning]:
    """env-reference-without-env for ``${NAME}``; dollar-variable for ``$NAME`` under the ``bare_checked`` key paths."""
    found: list[BackendWarning] = []
    for key_path, text in strings:
        if "$" not in text:
            continue
        for name in dict.fromkeys(_braced_name().findall(text)):
            found.append(BackendWarning(
                "env-reference-without-env", key_path,
                f"${{{name}}} is sent as written: toolrun reads the environment only as ${{env:NAME}}; "
                f'write "${{env:{name}}}"', severity="error"))
        if not key_path.startswith(bare_checked):
            continue
        for name in dict.fromkeys(_bare_name().findall(text)):
            found.append(BackendWarning(
                "dollar-variable", key_path,
                f"${name} is sent as written (no shell expands it here): to read the environment variable, "
                f'write "${{env:{name}}}"'))
    return found
