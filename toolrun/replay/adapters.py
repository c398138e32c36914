"""The provider adapters a recording is read with: they know their own wire format.

Recording asks every adapter which headers carry credentials; divergence asks the adapter
that made a recording what the items of its request bodies are.
"""

from __future__ import annotations

from functools import cache

from toolrun.core.errors import UserError
from toolrun.providers import get_provider_class, provider_targets
from toolrun.providers.base import Provider


@cache
def every_provider() -> tuple[type[Provider], ...]:
    """Every registered adapter class, built-ins first; one that cannot even be imported sent nothing to read."""
    found = []
    for name in provider_targets():
        try:
            found.append(get_provider_class(name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def providers_for(model: str | None) -> tuple[type[Provider], ...]:
    """The adapter of a recorded ``provider:model``; every adapter when the recording does not say."""
    name = (model or "").partition(":")[0]
    if name:
        try:
            return (get_provider_class(name),)
        except (UserError, ImportError, AttributeError):
            pass
    return every_provider()
