"""The extension interface, for third-party backends and providers.

A backend subclasses ``Backend`` (one call of a tool: ``run``; its config checked by ``check``)
and declares itself in the entry point group ``toolrun.backends``; a provider subclasses
``Provider`` (its wire format: build the request, read the answer, a ``StreamAssembler`` for
streams) in ``toolrun.providers``. A ``Transport`` carries a provider's requests (recording,
replay and tests swap it). The built-in ones are registered the same way (``PluginRegistry``).
"""

from __future__ import annotations

from toolrun.backends.base import Backend, BackendOutput, CallContext, ConfigProblem
from toolrun.core.registry import PluginRegistry, UnknownPlugin
from toolrun.providers.base import Provider, StreamAssembler
from toolrun.providers.transport import Transport

__all__ = ["Backend", "BackendOutput", "CallContext", "ConfigProblem", "PluginRegistry", "Provider", "StreamAssembler", "Transport",
           "UnknownPlugin"]
