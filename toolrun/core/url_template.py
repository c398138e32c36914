"""URL templates of http tools: ``/items/{city}`` names a path parameter ``city``.

Light on purpose (no HTTP client, no Jinja2): the lint and the tool builder read path
parameters without loading the HTTP backend.
"""

from __future__ import annotations

import re

# {name} alone is a path parameter; {{ name }} is Jinja2 and ${env:NAME} is a secret.
PATH_PARAMETER = re.compile(r"(?<![{$])\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def path_parameters(url: str) -> list[str]:
    """Names of the ``{name}`` path parameters of a URL template, in order."""
    return PATH_PARAMETER.findall(url)
